/*
** gpu/caps.c: printing dp_device_caps for people (`doppler devices`) and for tools (--json).
*/
#include <inttypes.h>
#include <string.h>

#include "gpu/device.h"

static void subgroup_ops(FILE *f, VkSubgroupFeatureFlags ops, const char *sep, const char *quote)
{
    bool first = true;
    for (uint32_t bit = 1; bit; bit <<= 1) {
        if (!(ops & bit)) continue;
        const char *n = dp_subgroup_op_name((VkSubgroupFeatureFlagBits)bit);
        if (!n) continue;
        fprintf(f, "%s%s%s%s", first ? "" : sep, quote, n, quote);
        first = false;
    }
}

static void version(char *out, size_t cap, uint32_t v)
{
    snprintf(out, cap, "%u.%u.%u", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

void dp_device_print_caps(FILE *f, const dp_device_caps *c)
{
    char api[32];
    version(api, sizeof api, c->api_version);
    fprintf(f, "device %u: %s (%s)\n", c->index, c->name, c->type_name);
    fprintf(f, "  vendor 0x%04x  device 0x%04x  driver %s %s (0x%08x)  Vulkan %s\n", c->vendor_id, c->device_id,
            c->driver_name, c->driver_info, c->driver_version, api);
    fprintf(f, "  subgroup size %u (min %u, max %u%s%s)  ops: ", c->subgroup_size, c->subgroup_min, c->subgroup_max,
            c->subgroup_size_control ? ", size control" : "", c->compute_full_subgroups ? ", full subgroups" : "");
    subgroup_ops(f, c->subgroup_ops, " ", "");
    fprintf(f, "\n  arithmetic: fp16 %s  bf16 %s  int8 %s  int16 %s  int64 %s  int dot %s  coopmat %s\n",
            c->fp16 ? "yes" : "no", c->bf16 ? "yes" : "no", c->int8 ? "yes" : "no", c->int16 ? "yes" : "no",
            c->int64 ? "yes" : "no", c->integer_dot_fast ? "yes (accelerated)" : c->integer_dot ? "yes" : "no",
            c->coopmat ? "yes" : "no");
    if (c->coopmat_nv)
        fprintf(f, "  cooperative matrix (NV, used by gemm_cm): f16 x f16 -> f32, %ux%ux%u per subgroup\n",
                c->coopmat_m, c->coopmat_n, c->coopmat_k);
    fprintf(f, "  storage: 8-bit %s  16-bit %s  buffer device address %s\n", c->storage8 ? "yes" : "no",
            c->storage16 ? "yes" : "no", c->buffer_device_address ? "yes" : "no");
    fprintf(f, "  side queue (a second compute family, for the side prefetch): %s\n", c->side_queue ? "yes" : "no");
    fprintf(f, "  conditional rendering (the GPU decode loop's skip after a stop): %s\n",
            c->conditional_rendering ? "yes" : "no");
    fprintf(f, "  limits: shared %u B  workgroup %ux%ux%u (%u invocations)  push constants %u B\n",
            c->max_shared_memory, c->max_wg_size[0], c->max_wg_size[1], c->max_wg_size[2], c->max_wg_invocations,
            c->max_push_constants);
    fprintf(f, "          storage buffer range %u B  buffer %" PRIu64 " B  allocation %" PRIu64 " B\n",
            c->max_storage_buffer_range, c->max_buffer_size, c->max_allocation_size);
    fprintf(f, "  timestamps: %s (%u bits, %.3f ns/tick)\n", c->timestamps ? "yes" : "no", c->timestamp_valid_bits,
            (double)c->timestamp_period_ns);
    for (uint32_t i = 0; i < c->heap_count; i++)
        fprintf(f, "  heap %u: %.1f MiB%s\n", i, (double)c->heaps[i].size / (1024.0 * 1024.0),
                c->heaps[i].device_local ? " device-local" : "");
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

void dp_device_print_caps_json(FILE *f, const dp_device_caps *c)
{
    char api[32];
    version(api, sizeof api, c->api_version);
    fprintf(f, "{\"index\": %u, \"name\": ", c->index);
    json_str(f, c->name);
    fprintf(f, ", \"type\": \"%s\", \"vendor_id\": %u, \"device_id\": %u, \"driver_version\": %u, \"driver_name\": ",
            c->type_name, c->vendor_id, c->device_id, c->driver_version);
    json_str(f, c->driver_name);
    fprintf(f, ", \"driver_info\": ");
    json_str(f, c->driver_info);
    fprintf(f, ", \"api_version\": \"%s\", \"subgroup_size\": %u, \"subgroup_min\": %u, \"subgroup_max\": %u, "
            "\"subgroup_size_control\": %s, \"compute_full_subgroups\": %s, \"subgroup_ops\": [",
            api, c->subgroup_size, c->subgroup_min, c->subgroup_max, c->subgroup_size_control ? "true" : "false",
            c->compute_full_subgroups ? "true" : "false");
    subgroup_ops(f, c->subgroup_ops, ", ", "\"");
    fprintf(f, "], \"fp16\": %s, \"bf16\": %s, \"int8\": %s, \"int16\": %s, \"int64\": %s, \"storage8\": %s, "
            "\"storage16\": %s, \"integer_dot\": %s, \"integer_dot_fast\": %s, \"coopmat\": %s, \"buffer_device_address\": %s, ",
            c->fp16 ? "true" : "false", c->bf16 ? "true" : "false", c->int8 ? "true" : "false",
            c->int16 ? "true" : "false", c->int64 ? "true" : "false", c->storage8 ? "true" : "false",
            c->storage16 ? "true" : "false", c->integer_dot ? "true" : "false",
            c->integer_dot_fast ? "true" : "false", c->coopmat ? "true" : "false",
            c->buffer_device_address ? "true" : "false");
    fprintf(f, "\"coopmat_nv\": %s, \"coopmat_shape\": [%u, %u, %u], \"side_queue\": %s, \"conditional_rendering\": %s, ",
            c->coopmat_nv ? "true" : "false", c->coopmat_m, c->coopmat_n, c->coopmat_k, c->side_queue ? "true" : "false",
            c->conditional_rendering ? "true" : "false");
    fprintf(f, "\"max_shared_memory\": %u, \"max_wg_size\": [%u, %u, %u], \"max_wg_invocations\": %u, "
            "\"max_storage_buffer_range\": %u, \"max_buffer_size\": %" PRIu64 ", \"max_allocation_size\": %" PRIu64
            ", \"max_push_constants\": %u, \"timestamps\": %s, \"timestamp_period_ns\": %g, \"heaps\": [",
            c->max_shared_memory, c->max_wg_size[0], c->max_wg_size[1], c->max_wg_size[2], c->max_wg_invocations,
            c->max_storage_buffer_range, c->max_buffer_size, c->max_allocation_size, c->max_push_constants,
            c->timestamps ? "true" : "false", (double)c->timestamp_period_ns);
    for (uint32_t i = 0; i < c->heap_count; i++)
        fprintf(f, "%s{\"size\": %" PRIu64 ", \"device_local\": %s}", i ? ", " : "", c->heaps[i].size,
                c->heaps[i].device_local ? "true" : "false");
    fprintf(f, "]}");
}
