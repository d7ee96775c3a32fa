/*
** tests/unit/test_k_embed.c: shaders/embed/gather.comp against dp_ref_embed on lavapipe: every table
** dtype (f32, f16, bf16) x output dtype (f32, f16), ids that include row 0 and the last row, a repeated id,
** an out-of-range id (zero row), fewer y workgroups than tokens (the token loop), and a table larger than
** lavapipe's 128 MiB binding limit (262144 x 160 f32 = 168 MB) read near its end, which only works with
** 64-bit address math.
** The kernel computes table * scale in f32 exactly as the reference does (one correctly rounded multiply),
** so f32 outputs must match bit for bit; f16 outputs may differ by the f32 -> f16 conversion, which Vulkan
** lets round to nearest or toward zero: at most one f16 ulp (2^-10 relative, or 2^-24 below the normals).
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "core/ref/ref.h"
#include "gpu/device.h"
#include "gpu/kernel.h"
#include "gpu/recorder.h"
#include "gpu/tensor.h"

#include "k_gpu.h"

typedef kg_ctx ctx;

/* A cheap deterministic value in [-2, 2) for table[r, c], so a big table needs no stored random state. */
static float cell(uint32_t r, uint32_t c)
{
    uint32_t h = r * 2654435761u ^ (c + 0x9e3779b9u) * 2246822519u;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    return (float)(h >> 8) * (4.0f / 16777216.0f) - 2.0f;
}

static dp_gtensor *make_tensor(ctx *c, dp_dtype dt, uint64_t n, const void *data, uint64_t bytes)
{
    dp_gtensor *t = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {n};
    if (dp_gtensor_create(c->dev, dt, 1, shape, &t, &e) != DP_OK) fail_msg("create: %s", e.msg);
    if (data && dp_gtensor_upload(t, 0, data, bytes, &e) != DP_OK) fail_msg("upload: %s", e.msg);
    return t;
}

typedef struct embed_case {
    uint32_t rows, C;
    const uint32_t *ids;
    uint32_t T;
    float scale;
    uint32_t gy;        /* y workgroups (0: min(T, 65535)) */
    bool has_bad_id;    /* an id >= rows: the reference then also returns DP_EINVAL */
} embed_case;

static void run_case(ctx *c, const embed_case *ec, dp_dtype tdt, bool act_f16)
{
    const uint64_t n = (uint64_t)ec->rows * ec->C;
    const size_t es = tdt == DP_F32 ? 4 : 2;
    dp_err e = {0};

    /* The table in its stored form (f32 or uint16 bits): the reference reads the same bytes. */
    void *table = malloc(n * es);
    assert_non_null(table);
    for (uint32_t r = 0; r < ec->rows; r++)
        for (uint32_t col = 0; col < ec->C; col++) {
            const uint64_t i = (uint64_t)r * ec->C + col;
            const float v = cell(r, col);
            if (tdt == DP_F32) ((float *)table)[i] = v;
            else ((uint16_t *)table)[i] = tdt == DP_F16 ? dp_f32_to_f16(v) : dp_f32_to_bf16(v);
        }
    float *ref = malloc(sizeof(float) * ec->T * ec->C), *got = malloc(sizeof(float) * ec->T * ec->C);
    void *raw = malloc((size_t)ec->T * ec->C * 4);
    assert_true(ref && got && raw);
    dp_status rs = dp_ref_embed(table, tdt, ec->rows, ec->C, ec->ids, ec->T, ec->scale, ref, &e);
    assert_int_equal(rs, ec->has_bad_id ? DP_EINVAL : DP_OK);

    dp_gtensor *tt = make_tensor(c, tdt, n, table, n * es);
    free(table);
    /* core/dtype.h has no u32: ids travel as i32-sized elements, the kernel reads them as uint. */
    dp_gtensor *ti = make_tensor(c, DP_I32, ec->T, ec->ids, (uint64_t)ec->T * 4);
    dp_gtensor *ty = make_tensor(c, act_f16 ? DP_F16 : DP_F32, (uint64_t)ec->T * ec->C, NULL, 0);

    const char *defs[2];
    uint32_t nd = 0;
    defs[nd++] = tdt == DP_F32 ? "DP_W_F32" : tdt == DP_F16 ? "DP_W_F16" : "DP_W_BF16";
    if (act_f16) defs[nd++] = "DP_ACT_F16";
    const dp_kconst kc[] = {{"WG", 64}};
    dp_kernel_desc kd = {.file = "embed/gather.comp", .defines = defs, .n_defines = nd,
                         .constants = kc, .n_constants = 1};
    dp_kernel *k = NULL;
    if (dp_kernel_get(c->dev, &kd, &k, &e) != DP_OK) fail_msg("kernel: %s", e.msg);
    dp_dispatch d;
    dp_dispatch_init(&d, k);
    dp_dispatch_tensor(&d, "ids", ti);
    dp_dispatch_tensor(&d, "table", tt);
    dp_dispatch_tensor(&d, "y", ty);
    dp_dispatch_u32(&d, "T", ec->T);
    dp_dispatch_u32(&d, "C", ec->C);
    dp_dispatch_u32(&d, "rows", ec->rows);
    dp_dispatch_f32(&d, "scale", ec->scale);
    const uint32_t gx = (ec->C + 63) / 64, gy = ec->gy ? ec->gy : (ec->T < 65535 ? ec->T : 65535);
    if (dp_recorder_begin(c->rec, &e) != DP_OK || dp_recorder_dispatch(c->rec, &d, gx, gy, 1, &e) != DP_OK ||
        dp_recorder_submit(c->rec, &e) != DP_OK)
        fail_msg("gather rows=%u C=%u: %s", ec->rows, ec->C, e.msg);
    if (dp_gtensor_download(ty, 0, raw, ty->bytes, &e) != DP_OK) fail_msg("download: %s", e.msg);
    assert_int_equal(dp_ref_to_f32(raw, ty->dtype, got, (uint64_t)ec->T * ec->C, &e), DP_OK);

    for (uint32_t t = 0; t < ec->T; t++)
        for (uint32_t col = 0; col < ec->C; col++) {
            const uint64_t i = (uint64_t)t * ec->C + col;
            const double r = ref[i], tol = act_f16 ? ldexp(fabs(r), -10) + ldexp(1.0, -24) : 0.0;
            if (!(fabs((double)got[i] - r) <= tol))
                fail_msg("gather table=%s out=%s rows=%u C=%u: y[%u, %u] (id %u) = %.8g, ref %.8g",
                         dp_dtype_name(tdt), act_f16 ? "f16" : "f32", ec->rows, ec->C, t, col, ec->ids[t],
                         got[i], r);
        }
    dp_gtensor_release(tt);
    dp_gtensor_release(ti);
    dp_gtensor_release(ty);
    free(ref); free(got); free(raw);
}

static void test_gather_dtypes(void **state)
{
    ctx *c = *state;
    static const uint32_t ids[] = {5, 0, 1022, 1023, 5, 77, 1024, 300};   /* 1024: out of range */
    const embed_case cases[] = {
        {1024, 67, ids, 8, 33.941124f, 0, true},    /* C not a multiple of WG; sqrt(1152) as Gemma scales */
        {1024, 128, ids, 4, 1.0f, 0, false},
        {1024, 130, ids + 1, 5, 0.5f, 2, false},    /* 2 workgroups along y walk 5 tokens */
    };
    static const dp_dtype tdts[] = {DP_F32, DP_F16, DP_BF16};
    for (size_t i = 0; i < DP_ARRAY_LEN(cases); i++)
        for (size_t t = 0; t < 3; t++)
            for (int a = 0; a < 2; a++) run_case(c, &cases[i], tdts[t], a != 0);
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

/* 262144 x 160 f32 = 167.8 MB: rows past 209715 start beyond 128 MiB, the last one near 168 MB. */
static void test_gather_big_table(void **state)
{
    ctx *c = *state;
    static const uint32_t ids[] = {262143, 0, 262000, 209716, 131072, 262142};
    const embed_case ec = {262144, 160, ids, 6, 2.0f, 0, false};
    run_case(c, &ec, DP_F32, false);
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_dtypes),
        cmocka_unit_test(test_gather_big_table),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
