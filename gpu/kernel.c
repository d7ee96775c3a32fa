/*
** gpu/kernel.c: compute pipelines from shaders + defines + named spec constants, cached per
** device (see kernel.h). The pipeline layout holds one push-constant range and nothing else:
** tensors are addresses inside the push block.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/clock.h"
#include "gpu/device_impl.h"
#include "gpu/kernel.h"
#include "gpu/kernel_stats.h"
#include "gpu/pipeline_cache.h"
#include "gpu/shader.h"
#include "gpu/vkcheck.h"

struct dp_kernel {
    char             name[64];
    XXH128_hash_t    key;
    dp_reflection    refl;
    uint32_t         local[3];
    VkShaderModule   module;
    VkPipelineLayout layout;
    VkPipeline       pipeline;
};

static void kernel_free(dp_device *dev, dp_kernel *k)
{
    if (!k) return;
    if (k->pipeline) vkDestroyPipeline(dev->device, k->pipeline, NULL);
    if (k->layout) vkDestroyPipelineLayout(dev->device, k->layout, NULL);
    if (k->module) vkDestroyShaderModule(dev->device, k->module, NULL);
    free(k);
}

void dp_kernel_cache_destroy(dp_device *dev)
{
    for (uint32_t i = 0; i < dev->n_kernels; i++) kernel_free(dev, dev->kernels[i]);
    free(dev->kernels);
    dev->kernels = NULL;
    dev->n_kernels = dev->cap_kernels = 0;
}

static void kernel_name(const dp_kernel_desc *d, char *out, size_t cap)
{
    if (d->name) { snprintf(out, cap, "%s", d->name); return; }
    if (!d->file) { snprintf(out, cap, "source"); return; }
    const char *base = strrchr(d->file, '/');
    base = base ? base + 1 : d->file;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".comp") == 0) n -= 5;
    snprintf(out, cap, "%.*s", (int)n, base);
}

static XXH128_hash_t desc_key(const dp_kernel_desc *d)
{
    XXH3_state_t *h = XXH3_createState();
    XXH128_hash_t k = {0, 0};
    if (!h) return k;
    XXH3_128bits_reset(h);
    const char *what = d->source ? d->source : d->file ? d->file : "";
    XXH3_128bits_update(h, d->source ? "S" : "F", 1);
    XXH3_128bits_update(h, what, strlen(what) + 1);
    if (d->source && d->file) XXH3_128bits_update(h, d->file, strlen(d->file) + 1);
    if (d->name) XXH3_128bits_update(h, d->name, strlen(d->name) + 1);
    for (uint32_t i = 0; i < d->n_defines; i++) XXH3_128bits_update(h, d->defines[i], strlen(d->defines[i]) + 1);
    XXH3_128bits_update(h, "\1", 1);
    for (uint32_t i = 0; i < d->n_constants; i++) {
        XXH3_128bits_update(h, d->constants[i].name, strlen(d->constants[i].name) + 1);
        XXH3_128bits_update(h, &d->constants[i].value, sizeof(double));
    }
    XXH3_128bits_update(h, &d->subgroup_size, sizeof d->subgroup_size);
    uint8_t full = d->full_subgroups;
    XXH3_128bits_update(h, &full, 1);
    k = XXH3_128bits_digest(h);
    XXH3_freeState(h);
    return k;
}

/* The constant's bits for `v`, checked against its type. */
static dp_status spec_bits(const char *kname, const dp_refl_spec *s, double v, uint32_t *bits, dp_err *err)
{
    switch (s->kind) {
    case DP_REFL_BOOL: *bits = v != 0.0; return DP_OK;
    case DP_REFL_U32:
        if (v < 0 || v > 4294967295.0 || v != floor(v)) break;
        *bits = (uint32_t)v;
        return DP_OK;
    case DP_REFL_I32:
        if (v < -2147483648.0 || v > 2147483647.0 || v != floor(v)) break;
        *bits = (uint32_t)(int32_t)v;
        return DP_OK;
    case DP_REFL_F32: {
        float f = (float)v;
        memcpy(bits, &f, 4);
        return DP_OK;
    }
    default:
        return DP_FAIL(err, DP_EINVAL, "kernel %s: spec constant %s has an unsupported type (%s)", kname, s->name,
                       dp_refl_kind_name(s->kind));
    }
    return DP_FAIL(err, DP_EINVAL, "kernel %s: spec constant %s = %g does not fit its type %s", kname, s->name, v,
                   dp_refl_kind_name(s->kind));
}

static void spec_names(const dp_reflection *r, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < r->n_spec && n + 2 < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? ", " : "", r->spec[i].name[0] ? r->spec[i].name : "?");
    if (!r->n_spec) snprintf(out, cap, "none");
}

static dp_status build(dp_device *dev, const dp_kernel_desc *d, dp_kernel *k, dp_err *err)
{
    dp_status st;
    dp_spirv spv = {0};
    VkSpecializationMapEntry map[DP_REFL_MAX_SPEC];
    uint32_t data[DP_REFL_MAX_SPEC];
    bool given[DP_REFL_MAX_SPEC] = {0};
    uint32_t n_map = 0;
    const dp_device_caps *c = &dev->caps;

    dp_kernel_times *kt = &dev->kernel_times;
    dp_shader_src src = {.file = d->file, .source = d->source, .defines = d->defines, .n_defines = d->n_defines};
    double t = dp_clock_seconds();
    st = dp_shader_compile(dev->shaders, &src, &spv, err);
    kt->shader_s += dp_clock_seconds() - t;
    if (st != DP_OK) return st;
    t = dp_clock_seconds();
    st = dp_reflect(spv.words, spv.n_words, k->name, &k->refl, err);
    kt->reflect_s += dp_clock_seconds() - t;
    if (st != DP_OK) goto done;
    if (k->refl.push_size > c->max_push_constants) {
        st = DP_FAIL(err, DP_EINVAL, "kernel %s: push block of %u bytes exceeds the device's %u (maxPushConstantsSize)",
                     k->name, k->refl.push_size, c->max_push_constants);
        goto done;
    }
    for (int i = 0; i < 3; i++) k->local[i] = k->refl.local_size[i];
    for (uint32_t i = 0; i < d->n_constants; i++) {
        const dp_refl_spec *s = dp_reflect_find_spec(&k->refl, d->constants[i].name);
        if (!s) {
            char names[512];
            spec_names(&k->refl, names, sizeof names);
            st = DP_FAIL(err, DP_EINVAL, "kernel %s: no spec constant named %s (it has: %s)", k->name,
                         d->constants[i].name, names);
            goto done;
        }
        uint32_t bits = 0;
        if ((st = spec_bits(k->name, s, d->constants[i].value, &bits, err)) != DP_OK) goto done;
        data[s - k->refl.spec] = bits;
        given[s - k->refl.spec] = true;
    }
    /* Every constant is specialised, defaults included: glslang gives local_size_x_id its own
    ** constant (default 1) next to the named WG (default 256) under the same SpecId, and without
    ** an entry each would keep its own default. */
    for (uint32_t i = 0; i < k->refl.n_spec; i++) {
        const dp_refl_spec *s = &k->refl.spec[i];
        if (!given[i]) data[i] = s->default_bits;
        map[n_map++] = (VkSpecializationMapEntry){.constantID = s->id, .offset = i * 4, .size = 4};
        for (int j = 0; j < 3; j++)
            if (k->refl.local_size_id[j] == (int32_t)s->id) k->local[j] = data[i];
    }
    if ((uint64_t)k->local[0] * k->local[1] * k->local[2] > c->max_wg_invocations || k->local[0] == 0 ||
        k->local[0] > c->max_wg_size[0] || k->local[1] > c->max_wg_size[1] || k->local[2] > c->max_wg_size[2]) {
        st = DP_FAIL(err, DP_EINVAL, "kernel %s: workgroup %ux%ux%u exceeds the device limits (%u invocations)", k->name,
                     k->local[0], k->local[1], k->local[2], c->max_wg_invocations);
        goto done;
    }

    t = dp_clock_seconds();
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = spv.n_words * 4,
        .pCode = spv.words,
    };
    if ((st = DP_VK(err, vkCreateShaderModule(dev->device, &mi, NULL, &k->module))) != DP_OK) goto done;
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = k->refl.push_size};
    VkPipelineLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .pushConstantRangeCount = k->refl.push_size ? 1 : 0,
        .pPushConstantRanges = k->refl.push_size ? &pr : NULL,
    };
    st = DP_VK(err, vkCreatePipelineLayout(dev->device, &li, NULL, &k->layout));
    kt->layout_s += dp_clock_seconds() - t;
    if (st != DP_OK) goto done;

    VkSpecializationInfo si = {.mapEntryCount = n_map, .pMapEntries = map, .dataSize = n_map * 4, .pData = data};
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rs = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = d->subgroup_size,
    };
    VkPipelineShaderStageCreateInfo stage = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
        .stage = VK_SHADER_STAGE_COMPUTE_BIT,
        .module = k->module,
        .pName = "main",
        .pSpecializationInfo = n_map ? &si : NULL,
    };
    if (d->subgroup_size) {
        if (!c->subgroup_size_control || d->subgroup_size < c->subgroup_min || d->subgroup_size > c->subgroup_max ||
            (d->subgroup_size & (d->subgroup_size - 1))) {
            st = DP_FAIL(err, DP_EINVAL, "kernel %s: subgroup size %u not available on %s (%u..%u%s)", k->name,
                         d->subgroup_size, c->name, c->subgroup_min, c->subgroup_max,
                         c->subgroup_size_control ? "" : ", no subgroup size control");
            goto done;
        }
        stage.pNext = &rs;
    }
    if (d->full_subgroups) {
        uint32_t sg = d->subgroup_size ? d->subgroup_size : c->subgroup_max;
        if (!c->compute_full_subgroups || k->local[0] % sg != 0) {
            st = DP_FAIL(err, DP_EINVAL, "kernel %s: full subgroups need computeFullSubgroups and a workgroup x "
                         "size (%u) that is a multiple of %u", k->name, k->local[0], sg);
            goto done;
        }
        stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
    }
    VkComputePipelineCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = dev->kernel_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
        .stage = stage,
        .layout = k->layout,
    };
    t = dp_clock_seconds();
    st = DP_VK(err, vkCreateComputePipelines(dev->device, dev->pipeline_cache, 1, &pi, NULL, &k->pipeline));
    kt->pipeline_s += dp_clock_seconds() - t;
    if (st == DP_OK) {
        kt->built++;
        dp_pipeline_cache_note_new(dev);
        dp_kernel_stats_print(dev, k->pipeline, k->name, d, k->local, stderr);
    }
done:
    dp_spirv_free(&spv);
    return st;
}

dp_status dp_kernel_get(dp_device *dev, const dp_kernel_desc *desc, dp_kernel **out, dp_err *err)
{
    *out = NULL;
    if (!desc->file && !desc->source) return DP_FAIL(err, DP_EINVAL, "kernel: neither file nor source given");
    double t = dp_clock_seconds();
    XXH128_hash_t key = desc_key(desc);
    dev->kernel_times.lookups++;
    for (uint32_t i = 0; i < dev->n_kernels; i++)
        if (XXH128_isEqual(dev->kernels[i]->key, key)) {
            *out = dev->kernels[i];
            dev->kernel_times.lookup_s += dp_clock_seconds() - t;
            return DP_OK;
        }
    dev->kernel_times.lookup_s += dp_clock_seconds() - t;
    if (dev->n_kernels == dev->cap_kernels) {
        uint32_t cap = dev->cap_kernels ? 2 * dev->cap_kernels : 32;
        dp_kernel **nk = realloc(dev->kernels, cap * sizeof *nk);
        if (!nk) return DP_FAIL(err, DP_ENOMEM, "out of host memory caching kernels");
        dev->kernels = nk;
        dev->cap_kernels = cap;
    }
    dp_kernel *k = calloc(1, sizeof *k);
    if (!k) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating a kernel");
    k->key = key;
    kernel_name(desc, k->name, sizeof k->name);
    dp_status st = build(dev, desc, k, err);
    if (st != DP_OK) {
        kernel_free(dev, k);
        return st;
    }
    dev->kernels[dev->n_kernels++] = k;
    *out = k;
    return DP_OK;
}

const char *dp_kernel_name(const dp_kernel *k) { return k->name; }
const dp_reflection *dp_kernel_reflection(const dp_kernel *k) { return &k->refl; }
void dp_kernel_local_size(const dp_kernel *k, uint32_t out[3]) { memcpy(out, k->local, sizeof k->local); }
uint32_t dp_kernel_wg(const dp_kernel *k) { return k->local[0]; }
VkPipeline dp_kernel_vk_pipeline(const dp_kernel *k) { return k->pipeline; }
VkPipelineLayout dp_kernel_vk_layout(const dp_kernel *k) { return k->layout; }
uint32_t dp_kernel_count(const dp_device *dev) { return dev->n_kernels; }
void dp_kernel_get_times(const dp_device *dev, dp_kernel_times *out) { *out = dev->kernel_times; }
