/*
** tests/unit/test_gpu_runtime.c: the runtime around the kernels: pool reuse and statistics, the
** SPIR-V disk cache across device contexts, the pipeline cache file (written, read back, a foreign or
** broken one ignored), a CPU device's define (DP_DEVICE_CPU, part of the cache key),
** compile errors with file:line, reflection, recorder
** barriers (none for independent work, one per hazard), replay, indirect dispatch, the profiler,
** out-of-memory without leaks, and "no device" with an install hint.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/pipeline_cache.h"
#include "gpu/pool.h"
#include "gpu/prefetch.h"
#include "gpu/profiler.h"
#include "gpu/shader.h"
#include "helpers/gpu_fixture.h"

static void bind_add(dp_dispatch *d, dp_kernel *k, const dp_gtensor *a, const dp_gtensor *b, const dp_gtensor *y)
{
    dp_dispatch_init(d, k);
    dp_dispatch_tensor(d, "a", a);
    dp_dispatch_tensor(d, "b", b);
    dp_dispatch_tensor(d, "y", y);
    dp_dispatch_u32(d, "n", (uint32_t)y->numel);
}

static void test_pool_reuse_and_stats(void **state)
{
    (void)state;
    dp_device_opts o;
    dp_device_opts_default(&o);
    o.validation = true;
    o.block_bytes = 4 << 20;
    dp_device *dev = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_device_open(&o, &dev, &err), &err);
    dp_pool *pool = dp_device_pool(dev);
    dp_pool_stats s0, s;
    dp_pool_get_stats(pool, &s0);

    dp_buffer a, b, c;
    DP_TEST_OK(dp_pool_acquire(pool, DP_MEM_DEVICE, 1000000, "a", &a, &err), &err);
    DP_TEST_OK(dp_pool_acquire(pool, DP_MEM_DEVICE, 1000, "b", &b, &err), &err);
    assert_int_equal(a.offset % DP_POOL_ALIGN, 0);
    assert_int_equal(b.offset % DP_POOL_ALIGN, 0);
    assert_int_equal(a.addr % DP_POOL_ALIGN, 0);
    dp_pool_get_stats(pool, &s);
    assert_int_equal(s.vk_allocations, s0.vk_allocations + 1);   /* both slices from one block */
    assert_int_equal(s.live_bytes, dp_pool_size_class(1000000) + dp_pool_size_class(1000));
    assert_int_equal(s.live_slices, 2);
    VkDeviceSize a_off = a.offset;
    dp_pool_release(pool, &a);
    assert_null(a.buffer);
    DP_TEST_OK(dp_pool_acquire(pool, DP_MEM_DEVICE, 1000000, "a again", &c, &err), &err);
    dp_pool_get_stats(pool, &s);
    assert_int_equal(c.offset, a_off);            /* the released range came back */
    assert_int_equal(s.reuses, 1);
    assert_int_equal(s.vk_allocations, s0.vk_allocations + 1);
    assert_int_equal(s.peak_bytes, dp_pool_size_class(1000000) + dp_pool_size_class(1000));

    /* Larger than a block: a dedicated block, returned to the driver on release. */
    dp_buffer big;
    DP_TEST_OK(dp_pool_acquire(pool, DP_MEM_DEVICE, 9 << 20, "big", &big, &err), &err);
    dp_pool_get_stats(pool, &s);
    assert_int_equal(s.blocks, 2);
    assert_int_equal(s.device_block_bytes, (4 << 20) + (9 << 20));
    dp_pool_release(pool, &big);
    dp_pool_release(pool, &b);
    dp_pool_release(pool, &c);
    dp_pool_get_stats(pool, &s);
    assert_int_equal(s.blocks, 1);
    assert_int_equal(s.live_bytes, 0);
    assert_int_equal(s.live_slices, 0);
    assert_int_equal(s.acquires, 4);
    assert_int_equal(s.releases, 4);
    dp_pool_trim(pool);
    dp_pool_get_stats(pool, &s);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(s.block_bytes, 0);

    /* Host-visible slices are mapped. */
    dp_buffer h;
    DP_TEST_OK(dp_pool_acquire(pool, DP_MEM_HOST, 4096, "host", &h, &err), &err);
    assert_non_null(h.map);
    memset(h.map, 0xab, 4096);
    dp_pool_release(pool, &h);
    dp_test_device_close(dev);
}

/* With the default block size the first blocks of a kind whose memory the host can see are 32, 64 and 128 MiB,
** then 256 (pool.c, next_block_bytes); a slice larger than the next size makes its block that large. On lavapipe
** both kinds are host-visible memory. */
static void test_pool_blocks_grow(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_err err = {0};
    dp_pool *pool = dp_device_pool(dev);
    dp_pool_stats s;
    dp_pool_get_stats(pool, &s);
    assert_int_equal(s.blocks, 0);   /* opening a device allocates nothing */
    const uint64_t MiB = 1ull << 20;
    /* each size misses every block before it (their leftovers: 32, 24, 28 MiB) */
    static const uint64_t ask[4] = {4096, 40u << 20, 100u << 20, 33u << 20};
    static const uint64_t made[4] = {32, 64, 128, 256};
    dp_buffer b[4], h;
    uint64_t held = 0;
    for (int i = 0; i < 4; i++) {
        DP_TEST_OK(dp_pool_acquire(pool, DP_MEM_DEVICE, ask[i], "grow", &b[i], &err), &err);
        dp_pool_get_stats(pool, &s);
        assert_int_equal(s.blocks, i + 1);
        held += made[i] * MiB;
        assert_int_equal(s.device_block_bytes, held);
    }
    /* the host kind counts its own blocks: its first holds a 50 MiB slice whole */
    DP_TEST_OK(dp_pool_acquire(pool, DP_MEM_HOST, 50u << 20, "grow host", &h, &err), &err);
    dp_pool_get_stats(pool, &s);
    assert_int_equal(s.host_block_bytes, dp_pool_size_class(50u << 20));
    dp_pool_release(pool, &h);
    for (int i = 0; i < 4; i++) dp_pool_release(pool, &b[i]);
    dp_test_device_close(dev);
}

static void test_oom_no_leak(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_err err = {0};
    const dp_device_caps *c = dp_device_get_caps(dev);
    uint64_t biggest = 0;
    for (uint32_t i = 0; i < c->heap_count; i++)
        if (c->heaps[i].size > biggest) biggest = c->heaps[i].size;
    dp_pool_stats before, after;
    dp_gtensor *keep = dp_test_tensor(dev, DP_F32, 1000, NULL);
    dp_pool_get_stats(dp_device_pool(dev), &before);
    uint64_t shape[1] = {biggest / 4 + (256ull << 20)};
    dp_gtensor *t = (dp_gtensor *)1;
    dp_status st = dp_gtensor_create(dev, DP_F32, 1, shape, &t, &err);
    assert_int_equal(st, DP_EGPU_OOM);
    assert_null(t);
    assert_non_null(strstr(err.msg, "MiB"));
    dp_pool_get_stats(dp_device_pool(dev), &after);
    assert_int_equal(after.blocks, before.blocks);
    assert_int_equal(after.block_bytes, before.block_bytes);
    assert_int_equal(after.live_bytes, before.live_bytes);
    /* The pool still works. */
    dp_gtensor *t2 = dp_test_tensor(dev, DP_F32, 1 << 20, NULL);
    dp_gtensor_release(t2);
    dp_gtensor_release(keep);
    dp_test_device_close(dev);
}

/* Device options with validation and a new, empty cache directory made from the template `dir`. */
static dp_device_opts temp_cache_opts(char *dir)
{
    assert_non_null(mkdtemp(dir));
    dp_device_opts o;
    dp_device_opts_default(&o);
    o.validation = true;
    o.cache_dir = dir;
    return o;
}

static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_spirv_cache_across_contexts(void **state)
{
    (void)state;
    char dir[] = "/tmp/doppler-cache-test-XXXXXX";
    dp_device_opts o = temp_cache_opts(dir);
    dp_err err = {0};
    dp_shader_stats s;
    for (int round = 0; round < 2; round++) {
        dp_device *dev = NULL;
        DP_TEST_OK(dp_device_open(&o, &dev, &err), &err);
        dp_kernel *k1 = dp_test_kernel(dev, "elementwise/add.comp", NULL, 0, 128);
        const char *defs[] = {"DP_SRC_BF16", "DP_DST_F32"};
        dp_test_kernel(dev, "elementwise/cast.comp", defs, 2, 0);
        /* Same description: the same kernel object, no new pipeline. */
        assert_ptr_equal(dp_test_kernel(dev, "elementwise/add.comp", NULL, 0, 128), k1);
        /* Another WG: another pipeline from the same SPIR-V. */
        assert_ptr_not_equal(dp_test_kernel(dev, "elementwise/add.comp", NULL, 0, 32), k1);
        assert_int_equal(dp_kernel_count(dev), 3);
        dp_shader_get_stats(dp_device_shaders(dev), &s);
        if (round == 0) {
            assert_int_equal(s.compiles, 2);     /* add's second variant reuses its SPIR-V */
            assert_int_equal(s.disk_writes, 2);
            assert_int_equal(s.disk_hits, 1);
        } else {
            assert_int_equal(s.compiles, 0);     /* second start compiles nothing */
            assert_int_equal(s.disk_hits, 3);
        }
        dp_test_device_close(dev);
    }
    remove_dir(dir);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    return n;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* The pipeline cache: a device that created kernels leaves its file in the cache directory, the next device
** reads it back whole; a file that is not what doppler wrote for this driver (garbage, shorter than a header,
** a byte added since) is ignored, kernels are still made, and the close replaces it
** with a valid one. Then the check of the driver's header (vendor, device, pipelineCacheUUID) case by case. */
static void test_pipeline_cache_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/doppler-pcache-test-XXXXXX";
    dp_device_opts o = temp_cache_opts(dir);
    dp_err err = {0};
    char path[4200];
    for (int round = 0; round < 5; round++) {
        if (round == 2) write_bytes(path, "not a pipeline cache, not even close", 36);
        if (round == 3) write_bytes(path, "\x20\0\0\0\1\0\0", 7);   /* shorter than a header */
        if (round == 4) {   /* the file as written and one byte more: the driver's header still fits, the hash not */
            long n = file_size(path);
            unsigned char *b = calloc(1, (size_t)n + 1);
            FILE *f = fopen(path, "rb");
            assert_true(f && b);
            assert_int_equal(fread(b, 1, (size_t)n, f), n);
            fclose(f);
            write_bytes(path, b, (size_t)n + 1);
            free(b);
        }
        dp_device *dev = NULL;
        DP_TEST_OK(dp_device_open(&o, &dev, &err), &err);
        snprintf(path, sizeof path, "%s", dp_pipeline_cache_file(dev));
        assert_non_null(strstr(path, dir));
        if (round == 1) assert_int_equal(dp_pipeline_cache_loaded(dev) + 16, file_size(path));   /* read back whole */
        else assert_int_equal(dp_pipeline_cache_loaded(dev), 0);   /* none yet, or ignored */
        dp_test_kernel(dev, "elementwise/add.comp", NULL, 0, 128);
        dp_test_device_close(dev);
        assert_true(file_size(path) >= 16 + 32);   /* written at close (and rewritten over a bad one) */
    }
    unsigned char hdr[32] = {32, 0, 0, 0, 1, 0, 0, 0, 0x05, 0x10, 0, 0, 7, 0, 0, 0};
    uint8_t uuid[VK_UUID_SIZE] = {0};
    assert_true(dp_pipeline_cache_header_ok(hdr, 32, 0x1005, 7, uuid));
    assert_false(dp_pipeline_cache_header_ok(hdr, 31, 0x1005, 7, uuid));   /* shorter than the header */
    assert_false(dp_pipeline_cache_header_ok(hdr, 32, 0x1006, 7, uuid));   /* another vendor */
    assert_false(dp_pipeline_cache_header_ok(hdr, 32, 0x1005, 8, uuid));   /* another device */
    uuid[3] = 1;
    assert_false(dp_pipeline_cache_header_ok(hdr, 32, 0x1005, 7, uuid));   /* another driver build */
    uuid[3] = 0;
    hdr[4] = 2;
    assert_false(dp_pipeline_cache_header_ok(hdr, 32, 0x1005, 7, uuid));   /* another header version */
    hdr[4] = 1;
    hdr[0] = 64;
    assert_false(dp_pipeline_cache_header_ok(hdr, 32, 0x1005, 7, uuid));   /* its length past the data */
    assert_false(dp_pipeline_cache_header_ok(NULL, 0, 0x1005, 7, uuid));
    remove_dir(dir);
}

/* A CPU device's shaders get DP_DEVICE_CPU (dp_common.glsl's DP_UNROLL reads it), and the define is part of the
** SPIR-V cache key: the same source compiled by a cache without it must not be served the other's entry. */
static void test_device_define(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_err err = {0};
    const char *src =
        "#version 450\n"
        "layout(local_size_x = 1) in;\n"
        "#ifndef DP_DEVICE_CPU\n"
        "#error DP_DEVICE_CPU is not defined\n"
        "#endif\n"
        "void main() {}\n";
    dp_kernel_desc d = {.file = "needs_cpu_define.comp", .source = src};
    dp_kernel *k = NULL;
    assert_int_equal(dp_device_get_caps(dev)->type, VK_PHYSICAL_DEVICE_TYPE_CPU);   /* the tests run on lavapipe */
    DP_TEST_OK(dp_kernel_get(dev, &d, &k, &err), &err);

    char dir[] = "/tmp/doppler-define-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *shaders = dp_shader_dir(dp_device_shaders(dev));
    dp_shader_src ss = {.file = "needs_cpu_define.comp", .source = src};
    dp_spirv spv = {0};
    for (int with = 1; with >= 0; with--) {
        dp_shader_cache *sc = NULL;
        DP_TEST_OK(dp_shader_cache_create(dir, shaders, "key", with ? "DP_DEVICE_CPU" : NULL, &sc, &err), &err);
        dp_err_clear(&err);
        dp_status st = dp_shader_compile(sc, &ss, &spv, &err);
        if (with) {
            DP_TEST_OK(st, &err);
            dp_spirv_free(&spv);
        } else {
            assert_int_equal(st, DP_ESHADER);
            if (!strstr(err.msg, "DP_DEVICE_CPU is not defined")) fail_msg("expected the #error, got: %s", err.msg);
        }
        dp_shader_cache_destroy(sc);
    }
    remove_dir(dir);
    dp_test_device_close(dev);
}

static void test_compile_error_has_file_line(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_err err = {0};
    const char *src =
        "#version 450\n"
        "#include \"dp_common.glsl\"\n"
        "layout(local_size_x_id = 0) in;\n"
        "void main() {\n"
        "    uint x = 1 +;\n"
        "}\n";
    dp_kernel_desc d = {.file = "bad.comp", .source = src};
    dp_kernel *k = (dp_kernel *)1;
    assert_int_equal(dp_kernel_get(dev, &d, &k, &err), DP_ESHADER);
    assert_null(k);
    if (!strstr(err.msg, "bad.comp:5:")) fail_msg("no file:line in: %s", err.msg);

    dp_err_clear(&err);
    d.source = "#version 450\n#include \"nope.glsl\"\nvoid main() {}\n";
    assert_int_equal(dp_kernel_get(dev, &d, &k, &err), DP_ESHADER);
    if (!strstr(err.msg, "bad.comp:2:") || !strstr(err.msg, "nope.glsl")) fail_msg("include error: %s", err.msg);

    dp_err_clear(&err);
    dp_kernel_desc missing = {.file = "elementwise/does_not_exist.comp"};
    assert_int_equal(dp_kernel_get(dev, &missing, &k, &err), DP_EIO);
    assert_non_null(strstr(err.msg, "does_not_exist.comp"));

    dp_err_clear(&err);
    dp_kconst bad = {"NOPE", 1};
    dp_kernel_desc wrong = {.file = "elementwise/add.comp", .constants = &bad, .n_constants = 1};
    assert_int_equal(dp_kernel_get(dev, &wrong, &k, &err), DP_EINVAL);
    if (!strstr(err.msg, "NOPE") || !strstr(err.msg, "WG")) fail_msg("constant error: %s", err.msg);
    dp_test_device_close(dev);
}

static void test_reflection(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_kernel *k = dp_test_kernel(dev, "elementwise/add.comp", NULL, 0, 0);
    const dp_reflection *r = dp_kernel_reflection(k);
    static const struct { const char *name; uint32_t off; dp_refl_kind kind; dp_access acc; } want[] = {
        {"a", 0, DP_REFL_PTR, DP_ACCESS_READ}, {"b", 8, DP_REFL_PTR, DP_ACCESS_READ},
        {"y", 16, DP_REFL_PTR, DP_ACCESS_WRITE}, {"n", 24, DP_REFL_U32, DP_ACCESS_NONE}};
    assert_int_equal(r->n_push, 4);
    for (int i = 0; i < 4; i++) {
        const dp_refl_push *m = dp_reflect_find_push(r, want[i].name);
        assert_non_null(m);
        assert_int_equal(m->offset, want[i].off);
        assert_int_equal(m->kind, want[i].kind);
        assert_int_equal(m->access, want[i].acc);
    }
    assert_int_equal(dp_reflect_find_push(r, "a")->elem_bytes, 4);
    assert_int_equal(r->push_size, 28);
    const dp_refl_spec *wg = dp_reflect_find_spec(r, "WG");
    assert_non_null(wg);
    assert_int_equal(wg->id, 0);
    assert_int_equal(wg->default_bits, 256);
    assert_int_equal(r->local_size_id[0], 0);
    assert_int_equal(dp_kernel_wg(k), 256);

    const char *src =
        "#version 450\n"
        "#include \"dp_common.glsl\"\n"
        "layout(local_size_x_id = 0) in;\n"
        "layout(constant_id = 0) const uint WG = 32;\n"
        "layout(constant_id = 3) const float ALPHA = 0.5;\n"
        "layout(constant_id = 4) const int DELTA = -2;\n"
        "layout(constant_id = 5) const bool FLAG = true;\n"
        "layout(push_constant) uniform Push { F32Buf z; int64_t q; float s; int k; } p;\n"
        "void main() { if (FLAG) p.z.v[gl_GlobalInvocationID.x] += ALPHA * p.s + float(DELTA + p.k + int(p.q)); }\n";
    dp_kconst c[] = {{"ALPHA", 2.0}, {"DELTA", 3}, {"FLAG", 0}};
    dp_kernel_desc d = {.source = src, .name = "refl", .constants = c, .n_constants = 3};
    dp_err err = {0};
    DP_TEST_OK(dp_kernel_get(dev, &d, &k, &err), &err);
    r = dp_kernel_reflection(k);
    assert_string_equal(dp_kernel_name(k), "refl");
    assert_int_equal(dp_reflect_find_push(r, "z")->access, DP_ACCESS_RW);
    assert_string_equal(dp_reflect_find_push(r, "z")->pointee, "F32Buf");
    assert_int_equal(dp_reflect_find_push(r, "q")->kind, DP_REFL_I64);
    assert_int_equal(dp_reflect_find_push(r, "s")->kind, DP_REFL_F32);
    assert_int_equal(dp_reflect_find_push(r, "k")->kind, DP_REFL_I32);
    assert_int_equal(dp_reflect_find_spec(r, "ALPHA")->kind, DP_REFL_F32);
    assert_int_equal(dp_reflect_find_spec(r, "DELTA")->kind, DP_REFL_I32);
    assert_int_equal(dp_reflect_find_spec(r, "FLAG")->kind, DP_REFL_BOOL);
    assert_int_equal(dp_kernel_wg(k), 32);

    /* A value that does not fit the constant's type. */
    dp_kconst neg = {"WG", -1};
    dp_kernel_desc bad = {.file = "elementwise/add.comp", .constants = &neg, .n_constants = 1};
    assert_int_equal(dp_kernel_get(dev, &bad, &k, &err), DP_EINVAL);
    dp_test_device_close(dev);
}

/* The side prefetcher's leads (gpu/prefetch.h): a Gemma-shaped layer of stages q/k/v, attention (light: nothing
** to read ahead), o, the fused MLP. With light_lead the MLP's reads start at attention, two stages back, where the
** bytes from there fit max_bytes; not where they do not (an F16-sized MLP), not past light_lead, and never later
** than depth. Counting back from stage 0 goes into the replay before. */
static void test_prefetch_leads(void **state)
{
    (void)state;
    const uint64_t MB = 1u << 20;
    uint64_t q4[] = {4 * MB, 0, 2 * MB, 16 * MB}, f16[] = {4 * MB, 0, 2 * MB, 32 * MB};
    uint32_t lead[4];
    dp_prefetch_opts o;
    dp_prefetch_opts_default(&o);
    assert_int_equal(o.light_lead, 0);
    dp_prefetch_leads(q4, 4, &o, lead);   /* the default: every stage one ahead */
    for (int s = 0; s < 4; s++) assert_int_equal(lead[s], 1);

    o.light_lead = 2;
    dp_prefetch_leads(q4, 4, &o, lead);
    assert_int_equal(lead[2], 1);   /* o: attention is the stage before it anyway */
    assert_int_equal(lead[3], 2);   /* the MLP: from attention, 18 MiB <= 24 */
    assert_int_equal(lead[0], 1);   /* q/k/v: attention is 3 back (the replay before), past light_lead */
    dp_prefetch_leads(f16, 4, &o, lead);
    assert_int_equal(lead[3], 1);   /* 34 MiB from attention: over max_bytes */

    o.light_lead = 3;
    dp_prefetch_leads(q4, 4, &o, lead);
    assert_int_equal(lead[0], 3);   /* 22 MiB from the replay before's attention */
    assert_int_equal(lead[3], 2);   /* the last light stage, not an earlier one */
    o.max_bytes = 20 * MB;
    dp_prefetch_leads(q4, 4, &o, lead);
    assert_int_equal(lead[0], 1);   /* 22 MiB > 20 */
    assert_int_equal(lead[3], 2);   /* 18 MiB */

    o.depth = 3;   /* depth is a floor */
    dp_prefetch_leads(q4, 4, &o, lead);
    for (int s = 0; s < 4; s++) assert_int_equal(lead[s], 3);
}

static void test_barriers_follow_hazards(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_kernel *add = dp_test_kernel(dev, "elementwise/add.comp", NULL, 0, 64);
    dp_kernel *scale = dp_test_kernel(dev, "elementwise/scale.comp", NULL, 0, 64);
    dp_recorder *rec = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    const uint64_t n = 1000;
    float x[1000], y[1000];
    for (int i = 0; i < 1000; i++) x[i] = (float)i;
    dp_gtensor *a = dp_test_tensor(dev, DP_F32, n, x), *b = dp_test_tensor(dev, DP_F32, n, x);
    dp_gtensor *y1 = dp_test_tensor(dev, DP_F32, n, NULL), *y2 = dp_test_tensor(dev, DP_F32, n, NULL);
    dp_gtensor *y3 = dp_test_tensor(dev, DP_F32, n, NULL);
    dp_dispatch d;
    dp_recorder_stats st;

    bind_add(&d, add, a, b, y1);                     /* y1 = a + b */
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, 16, 1, 1, &err), &err);
    bind_add(&d, add, a, b, y2);                     /* y2 = a + b: independent (reads may share) */
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, 16, 1, 1, &err), &err);
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.dispatches, 2);
    assert_int_equal(st.barriers, 0);

    bind_add(&d, add, y1, y2, y3);                   /* reads y1, y2: RAW -> one barrier */
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, 16, 1, 1, &err), &err);
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.barriers, 1);

    dp_dispatch_init(&d, scale);                     /* writes a, which the third add did not read: */
    dp_dispatch_tensor(&d, "x", b);                  /* but the first two did, before the barrier */
    dp_dispatch_tensor(&d, "y", a);
    dp_dispatch_u32(&d, "n", (uint32_t)n);
    dp_dispatch_f32(&d, "s", 2.0f);
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, 16, 1, 1, &err), &err);
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.barriers, 1);

    dp_dispatch_init(&d, scale);                     /* reads y3 (written since the barrier): RAW */
    dp_dispatch_tensor(&d, "x", y3);
    dp_dispatch_tensor(&d, "y", y1);                 /* and writes y1, read before: WAR */
    dp_dispatch_u32(&d, "n", (uint32_t)n);
    dp_dispatch_f32(&d, "s", 0.5f);
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, 16, 1, 1, &err), &err);
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.barriers, 2);

    /* Views: disjoint halves of one tensor are independent; overlapping ones are not. */
    uint64_t half = n / 2;
    dp_gtensor *lo = NULL, *hi = NULL;
    DP_TEST_OK(dp_gtensor_view(y2, 0, DP_F32, 1, &half, &lo, &err), &err);
    DP_TEST_OK(dp_gtensor_view(y2, half * 4, DP_F32, 1, &half, &hi, &err), &err);
    DP_TEST_OK(dp_recorder_barrier(rec, &err), &err);
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.barriers, 3);
    DP_TEST_OK(dp_recorder_fill(rec, &lo->buf, 0, half * 4, 0, &err), &err);
    DP_TEST_OK(dp_recorder_fill(rec, &hi->buf, 0, half * 4, 0, &err), &err);
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.barriers, 3);
    DP_TEST_OK(dp_recorder_fill(rec, &y2->buf, 0, 8, 0, &err), &err);   /* WAW with lo */
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.barriers, 4);
    assert_int_equal(st.transfers, 3);

    DP_TEST_OK(dp_recorder_submit(rec, &err), &err);
    /* y1 = (a + b) * 2 * 0.5 where a, b were x when read: the values check the barriers' order. */
    DP_TEST_OK(dp_gtensor_download(y1, 0, y, sizeof y, &err), &err);
    for (int i = 0; i < 1000; i++) assert_true(y[i] == 2.0f * x[i] * 2.0f * 0.5f);
    DP_TEST_OK(dp_gtensor_download(a, 0, y, sizeof y, &err), &err);
    for (int i = 0; i < 1000; i++) assert_true(y[i] == 2.0f * x[i]);

    /* Missing push member and unknown names are reported at dispatch. */
    dp_dispatch_init(&d, add);
    dp_dispatch_tensor(&d, "a", a);
    assert_int_equal(dp_recorder_dispatch(rec, &d, 1, 1, 1, &err), DP_EINVAL);
    dp_err_clear(&err);
    dp_dispatch_init(&d, add);
    dp_dispatch_u32(&d, "nn", 3);
    assert_int_equal(dp_recorder_dispatch(rec, &d, 1, 1, 1, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "nn"));
    dp_err_clear(&err);
    dp_dispatch_init(&d, add);
    dp_dispatch_f32(&d, "n", 3);
    assert_int_equal(dp_recorder_dispatch(rec, &d, 1, 1, 1, &err), DP_EINVAL);

    dp_gtensor_release(lo);
    dp_gtensor_release(hi);
    dp_gtensor *all[] = {a, b, y1, y2, y3};
    for (int i = 0; i < 5; i++) dp_gtensor_release(all[i]);
    dp_recorder_destroy(rec);
    dp_test_device_close(dev);
}

static void test_replay_indirect_update(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_kernel *add = dp_test_kernel(dev, "elementwise/add.comp", NULL, 0, 64);
    dp_recorder *rec = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    const uint64_t n = 777;
    float x[777], y[777];
    for (int i = 0; i < 777; i++) x[i] = (float)(i % 13) - 6.0f;
    dp_gtensor *tx = dp_test_tensor(dev, DP_F32, n, x), *ty = dp_test_tensor(dev, DP_F32, n, NULL);
    dp_gtensor *groups = dp_test_tensor(dev, DP_I32, 4, NULL);
    uint32_t g[4] = {(uint32_t)((n + 63) / 64), 1, 1, 0};

    DP_TEST_OK(dp_recorder_fill(rec, &ty->buf, 0, n * 4, 0, &err), &err);        /* y = 0 */
    DP_TEST_OK(dp_recorder_update(rec, &groups->buf, 0, g, sizeof g, &err), &err);
    dp_dispatch d;
    bind_add(&d, add, ty, tx, ty);                                               /* y += x, in place */
    DP_TEST_OK(dp_recorder_dispatch_indirect(rec, &d, &groups->buf, 0, &err), &err);
    dp_recorder_stats st;
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.barriers, 1);   /* the dispatch reads y (filled) and the groups (updated) */
    uint64_t submits0 = dp_device_submit_count(dev);
    DP_TEST_OK(dp_recorder_submit(rec, &err), &err);
    DP_TEST_OK(dp_gtensor_download(ty, 0, y, sizeof y, &err), &err);
    for (int i = 0; i < 777; i++) assert_true(y[i] == x[i]);

    /* Replay without the fill: take the fill out by recording only the add, then replay it. */
    bind_add(&d, add, ty, tx, ty);
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, g[0], 1, 1, &err), &err);   /* starts a new recording */
    DP_TEST_OK(dp_recorder_submit(rec, &err), &err);                     /* y = 2x */
    DP_TEST_OK(dp_recorder_replay(rec, &err), &err);                     /* y = 3x */
    DP_TEST_OK(dp_recorder_replay(rec, &err), &err);                     /* y = 4x */
    DP_TEST_OK(dp_gtensor_download(ty, 0, y, sizeof y, &err), &err);
    for (int i = 0; i < 777; i++) assert_true(y[i] == 4.0f * x[i]);
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.submits, 4);
    assert_int_equal(dp_device_submit_count(dev) - submits0, 4 + 2);   /* + the two downloads */

    /* Bad regions are rejected, not recorded. */
    assert_int_equal(dp_recorder_update(rec, &groups->buf, 2, g, 4, &err), DP_EINVAL);
    dp_err_clear(&err);
    assert_int_equal(dp_recorder_copy(rec, &ty->buf, 0, &tx->buf, 4, n * 4, &err), DP_EINVAL);
    dp_gtensor_release(tx);
    dp_gtensor_release(ty);
    dp_gtensor_release(groups);
    dp_recorder_destroy(rec);
    dp_test_device_close(dev);
}

static void test_profiler_counts(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    if (!dp_device_get_caps(dev)->timestamps) fail_msg("lavapipe has timestamps; this device has none");
    dp_kernel *add = dp_test_kernel(dev, "elementwise/add.comp", NULL, 0, 64);
    dp_kernel *scale = dp_test_kernel(dev, "elementwise/scale.comp", NULL, 0, 64);
    dp_profiler *p = dp_device_profiler(dev);
    dp_profiler_enable(p, true);
    dp_recorder *rec = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    dp_gtensor *a = dp_test_tensor(dev, DP_F32, 4096, NULL);
    DP_TEST_OK(dp_recorder_fill(rec, &a->buf, 0, a->bytes, 0, &err), &err);
    dp_dispatch d;
    for (int i = 0; i < 300; i++) {   /* more than one query pool's worth */
        bind_add(&d, add, a, a, a);
        DP_TEST_OK(dp_recorder_dispatch(rec, &d, 64, 1, 1, &err), &err);
    }
    dp_dispatch_init(&d, scale);
    dp_dispatch_tensor(&d, "x", a);
    dp_dispatch_tensor(&d, "y", a);
    dp_dispatch_u32(&d, "n", 4096);
    dp_dispatch_number(&d, "s", 3.0);
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, 64, 1, 1, &err), &err);
    DP_TEST_OK(dp_recorder_submit(rec, &err), &err);
    DP_TEST_OK(dp_recorder_replay(rec, &err), &err);
    uint32_t n = 0;
    const dp_profile_entry *e = dp_profiler_entries(p, &n);
    assert_int_equal(n, 2);
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(e[i].name, "add") == 0) assert_int_equal(e[i].count, 600);
        else if (strcmp(e[i].name, "scale") == 0) assert_int_equal(e[i].count, 2);
        else fail_msg("unexpected profile entry %s", e[i].name);
        assert_true(e[i].total_us >= 0 && e[i].mean_us * (double)e[i].count <= e[i].total_us * 1.0001 + 1e-9);
    }
    dp_profiler_reset(p);
    dp_profiler_entries(p, &n);
    assert_int_equal(n, 0);
    dp_gtensor_release(a);
    dp_recorder_destroy(rec);
    dp_test_device_close(dev);
}

/* The messenger counts what the layer reports (otherwise "count stays 0" would prove nothing). */
static void test_validation_messages_are_counted(void **state)
{
    (void)state;
    dp_device_opts o;
    dp_device_opts_default(&o);
    o.validation = true;   /* whatever DOPPLER_VALIDATION says */
    dp_device *dev = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_device_open(&o, &dev, &err), &err);
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, .flags = 0x80};   /* invalid flag bit */
    VkFence f = VK_NULL_HANDLE;
    fprintf(stderr, "(the next validation error is expected)\n");
    if (vkCreateFence(dp_device_vk(dev), &fi, NULL, &f) == VK_SUCCESS) vkDestroyFence(dp_device_vk(dev), f, NULL);
    assert_true(dp_device_validation_count(dev) >= 1);
    dp_device_close(dev);
}

/* DOPPLER_SIDE_QUEUE=F[.I] names the side queue; a value that names no queue, a queue of the main family, or is
** not of that form is refused with a message that says which. (Every device runs the refusals; a queue of
** another family is taken on GPUs only: lavapipe has one family of one queue.) */
static void open_side_queue(const char *value, dp_status want, const char *msg)
{
    setenv("DOPPLER_SIDE_QUEUE", value, 1);
    dp_device *dev = NULL;
    dp_err err = {0};
    dp_status st = dp_device_open(NULL, &dev, &err);
    unsetenv("DOPPLER_SIDE_QUEUE");
    if (st != want) fail_msg("DOPPLER_SIDE_QUEUE=%s: status %d, expected %d (%s)", value, (int)st, (int)want, err.msg);
    if (msg && !strstr(err.msg, msg)) fail_msg("DOPPLER_SIDE_QUEUE=%s: '%s' lacks '%s'", value, err.msg, msg);
    dp_device_close(dev);
}

static void test_side_queue_env(void **state)
{
    (void)state;
    dp_device *dev = NULL;
    dp_err err = {0};
    unsetenv("DOPPLER_SIDE_QUEUE");
    DP_TEST_OK(dp_device_open(NULL, &dev, &err), &err);
    uint32_t main_family = dp_device_vk_queue_family(dev);
    dp_device_close(dev);
    char v[32];
    open_side_queue("main", DP_OK, NULL);
    open_side_queue("x", DP_EINVAL, "expected main, FAMILY or FAMILY.INDEX");
    open_side_queue("0.", DP_EINVAL, "expected main, FAMILY or FAMILY.INDEX");
    open_side_queue("1.2.3", DP_EINVAL, "expected main, FAMILY or FAMILY.INDEX");
    open_side_queue("200", DP_EINVAL, "queue families");
    snprintf(v, sizeof v, "%u", main_family);
    open_side_queue(v, DP_EINVAL, "is the main queue's");
    snprintf(v, sizeof v, "%u.1", main_family);
    open_side_queue(v, DP_EINVAL, "is the main queue's");
    snprintf(v, sizeof v, "%u.99", main_family);
    open_side_queue(v, DP_EINVAL, "is the main queue's");
}

/* In a child process: the loader is pointed at no driver. */
static void test_no_device_message(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1);
        setenv("VK_DRIVER_FILES", "/nonexistent/icd.json", 1);
        unsetenv("DOPPLER_VALIDATION");
        dp_device *dev = NULL;
        dp_err err = {0};
        dp_status st = dp_device_open(NULL, &dev, &err);
        if (st != DP_ENODEV) _exit(1);
        if (!strstr(err.msg, "mesa-vulkan-drivers")) _exit(2);
        dp_device_caps *caps = NULL;
        uint32_t count = 0;
        if (dp_device_list(&caps, &count, &err) != DP_ENODEV || caps || count) _exit(3);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefetch_leads),
        cmocka_unit_test(test_pool_reuse_and_stats),
        cmocka_unit_test(test_pool_blocks_grow),
        cmocka_unit_test(test_oom_no_leak),
        cmocka_unit_test(test_spirv_cache_across_contexts),
        cmocka_unit_test(test_pipeline_cache_file),
        cmocka_unit_test(test_device_define),
        cmocka_unit_test(test_compile_error_has_file_line),
        cmocka_unit_test(test_reflection),
        cmocka_unit_test(test_barriers_follow_hazards),
        cmocka_unit_test(test_replay_indirect_update),
        cmocka_unit_test(test_profiler_counts),
        cmocka_unit_test(test_validation_messages_are_counted),
        cmocka_unit_test(test_side_queue_env),
        cmocka_unit_test(test_no_device_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
