/*
** tests/unit/test_k_argmax.c: shaders/argmax/argmax_partial.comp + argmax_final.comp against
** core/ref/argmax.c on lavapipe: rows of 262144 (Gemma's vocabulary), odd lengths, chunk sizes that are and
** are not multiples of WG, f32 and f16 logits, ties (inside one invocation's stride, across invocations,
** across workgroups: the lowest index must win, as torch.argmax) and NaN (the first NaN wins).
** Exact comparison: an argmax has no tolerance.
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "k_gpu.h"

/* Runs the two stages over x[rows, n] and returns the ids (caller frees). */
static uint32_t *gpu_argmax(kg_ctx *c, bool act_f16, const float *x, uint32_t rows, uint32_t n, uint32_t chunk,
                            uint32_t wg)
{
    dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    uint32_t n_chunks = (n + chunk - 1) / chunk;
    dp_gtensor *tx = kg_upload(c, adt, x, (uint64_t)rows * n), *tv = NULL, *ti = NULL, *to = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {(uint64_t)rows * n_chunks}, one[1] = {rows};
    if (dp_gtensor_create(c->dev, DP_F32, 1, shape, &tv, &e) != DP_OK ||
        dp_gtensor_create(c->dev, DP_I32, 1, shape, &ti, &e) != DP_OK ||
        dp_gtensor_create(c->dev, DP_I32, 1, one, &to, &e) != DP_OK)
        fail_msg("create: %s", e.msg);
    const char *defs[4];
    uint32_t nd = kg_defines(defs, act_f16, -1, false);

    dp_dispatch d1, d2;
    dp_dispatch_init(&d1, kg_kernel(c, "argmax/argmax_partial.comp", defs, nd, wg));
    dp_dispatch_tensor(&d1, "x", tx);
    dp_dispatch_tensor(&d1, "part_val", tv);
    dp_dispatch_tensor(&d1, "part_idx", ti);
    dp_dispatch_u32(&d1, "n", n);
    dp_dispatch_u32(&d1, "chunk", chunk);
    dp_dispatch_u32(&d1, "n_chunks", n_chunks);
    dp_dispatch_init(&d2, kg_kernel(c, "argmax/argmax_final.comp", NULL, 0, 32));
    dp_dispatch_tensor(&d2, "part_val", tv);
    dp_dispatch_tensor(&d2, "part_idx", ti);
    dp_dispatch_tensor(&d2, "ids", to);
    dp_dispatch_u32(&d2, "n_chunks", n_chunks);
    /* both stages in one recording: the recorder must put the barrier between them */
    if (dp_recorder_begin(c->rec, &e) != DP_OK || dp_recorder_dispatch(c->rec, &d1, n_chunks, rows, 1, &e) != DP_OK ||
        dp_recorder_dispatch(c->rec, &d2, rows, 1, 1, &e) != DP_OK || dp_recorder_submit(c->rec, &e) != DP_OK)
        fail_msg("argmax: %s", e.msg);
    uint32_t *ids = malloc(rows * 4);
    assert_non_null(ids);
    kg_download_u32(to, ids, rows);
    dp_gtensor_release(tx);
    dp_gtensor_release(tv);
    dp_gtensor_release(ti);
    dp_gtensor_release(to);
    return ids;
}

static void check(kg_ctx *c, bool act_f16, float *x, uint32_t rows, uint32_t n, uint32_t chunk, uint32_t wg,
                  const char *what)
{
    uint32_t *ref = malloc(rows * 4);
    assert_non_null(ref);
    kg_round(x, act_f16 ? DP_F16 : DP_F32, (uint64_t)rows * n);
    dp_ref_argmax(x, rows, n, ref);
    uint32_t *got = gpu_argmax(c, act_f16, x, rows, n, chunk, wg);
    for (uint32_t r = 0; r < rows; r++)
        if (got[r] != ref[r])
            fail_msg("%s act=%s n=%u chunk=%u WG=%u: row %u: %u (%g), ref %u (%g)", what, act_f16 ? "f16" : "f32", n,
                     chunk, wg, r, got[r], got[r] < n ? (double)x[(uint64_t)r * n + got[r]] : NAN, ref[r],
                     (double)x[(uint64_t)r * n + ref[r]]);
    print_message("  %s act=%s rows=%u n=%u chunk=%u WG=%u: ids match\n", what, act_f16 ? "f16" : "f32", rows, n,
                  chunk, wg);
    free(ref);
    free(got);
}

static void test_random_rows(void **state)
{
    kg_ctx *c = *state;
    const uint32_t rows = 3, n = 262144;
    float *x = malloc((uint64_t)rows * n * 4);
    assert_non_null(x);
    for (int act = 0; act < 2; act++) {
        kg_fill(c, x, (uint64_t)rows * n, 30.0f);
        check(c, act, x, rows, n, 4096, 256, "random");
        kg_fill(c, x, (uint64_t)rows * n, 30.0f);
        check(c, act, x, rows, n, 1000, 64, "random");
    }
    kg_fill(c, x, 7 * 777, 1.0f);
    check(c, false, x, 7, 777, 100, 32, "odd");
    kg_fill(c, x, 5, 1.0f);
    check(c, false, x, 1, 5, 2048, 256, "tiny");
    free(x);
}

static void test_ties(void **state)
{
    kg_ctx *c = *state;
    const uint32_t rows = 4, n = 262144;
    float *x = malloc((uint64_t)rows * n * 4);
    assert_non_null(x);
    for (int act = 0; act < 2; act++) {
        kg_fill(c, x, (uint64_t)rows * n, 1.0f);
        /* row 0: maxima in different workgroups; row 1: same invocation's stride (i, i + WG);
        ** row 2: neighbouring invocations, later one first in memory order of the reduction tree;
        ** row 3: the whole row equal -> 0 */
        float *r0 = x, *r1 = x + n, *r2 = x + 2 * (uint64_t)n, *r3 = x + 3 * (uint64_t)n;
        r0[250000] = r0[131072] = r0[70001] = 5.0f;
        r1[4096 * 3 + 7] = r1[4096 * 3 + 7 + 256] = 5.0f;
        r2[4096 * 9 + 129] = r2[4096 * 9 + 128] = r2[4096 * 9 + 1] = 5.0f;
        for (uint32_t i = 0; i < n; i++) r3[i] = -2.5f;
        check(c, act, x, rows, n, 4096, 256, "ties");
        uint32_t *ids = gpu_argmax(c, act, x, rows, n, 4096, 256);
        assert_int_equal(ids[0], 70001);
        assert_int_equal(ids[1], 4096 * 3 + 7);
        assert_int_equal(ids[2], 4096 * 9 + 1);
        assert_int_equal(ids[3], 0);
        free(ids);
    }
    free(x);
}

static void test_nan(void **state)
{
    kg_ctx *c = *state;
    const uint32_t n = 50000;
    float *x = malloc(2 * n * 4);
    assert_non_null(x);
    kg_fill(c, x, 2 * n, 1.0f);
    x[40000] = NAN;
    x[30000] = NAN;
    x[10] = 100.0f;
    x[n + 5] = INFINITY;
    check(c, false, x, 2, n, 2048, 128, "nan");
    uint32_t *ids = gpu_argmax(c, false, x, 2, n, 2048, 128);
    assert_int_equal(ids[0], 30000);
    assert_int_equal(ids[1], 5);
    free(ids);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_rows),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_nan),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
