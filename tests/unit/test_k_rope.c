/*
** tests/unit/test_k_rope.c: the inverse-frequency tables of core/ref/rope.c (default, linear, llama3, checked
** against values computed by hand from the formulas of MODEL_REFERENCE.md 2.2) and shaders/rope/rope.comp
** against dp_ref_rope on lavapipe: head_dim 16/32/64/256, full and partial rotary, small and large
** positions (angles up to ~1e5 rad), f32 and f16 activations.
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

static void assert_rel(double got, double want, double rel, const char *what, int i)
{
    if (!(fabs(got - want) <= rel * fabs(want)))
        fail_msg("%s[%d] = %.9g, want %.9g (rel %.3g > %.3g)", what, i, got, want, fabs(got - want) / fabs(want), rel);
}

/* f32 tables vs the formula in double: the f32 steps (exponent, pow, reciprocal) cost a few ulps: 1e-6. */
static void test_table_default_linear(void **state)
{
    (void)state;
    float f[128];
    dp_err e = {0};
    assert_int_equal(dp_rope_inv_freq(10000.0, 64, NULL, f, &e), DP_OK);
    for (int i = 0; i < 32; i++) assert_rel(f[i], pow(10000.0, -2.0 * i / 64), 1e-6, "default", i);
    dp_rope_freq_scaling lin = {.kind = DP_ROPE_LINEAR, .factor = 8.0f};
    assert_int_equal(dp_rope_inv_freq(1e6, 256, &lin, f, &e), DP_OK);
    for (int i = 0; i < 128; i++) assert_rel(f[i], pow(1e6, -2.0 * i / 256) / 8.0, 1e-6, "linear", i);
}

/* Llama 3.2 1B: d = 64, base 5e5, factor 32, low 1, high 4, original 8192. Hand-computed (double) from
** 2.2: lambda_i = 2 pi / f_i; i <= 14 have lambda < 2048 (unchanged), i >= 18 have lambda > 8192 (/ 32),
** i = 15, 16, 17 blend with g = (8192 / lambda - 1) / 3 = 0.592849, 0.281283, 0.0745266. */
static void test_table_llama3(void **state)
{
    (void)state;
    float f[32];
    dp_err e = {0};
    dp_rope_freq_scaling s = {.kind = DP_ROPE_LLAMA3, .factor = 32.0f, .low_freq_factor = 1.0f,
                         .high_freq_factor = 4.0f, .original_max_pos = 8192.0f};
    assert_int_equal(dp_rope_inv_freq(500000.0, 64, &s, f, &e), DP_OK);
    for (int i = 0; i <= 14; i++) assert_rel(f[i], pow(500000.0, -2.0 * i / 64), 1e-6, "llama3 high", i);
    for (int i = 18; i < 32; i++) assert_rel(f[i], pow(500000.0, -2.0 * i / 64) / 32.0, 1e-6, "llama3 low", i);
    assert_rel(f[13], 0.004839421345719893, 1e-6, "llama3", 13);
    assert_rel(f[15], 0.001290547928209264, 1e-5, "llama3 blend", 15);
    assert_rel(f[16], 0.00042955679655936815, 1e-5, "llama3 blend", 16);
    assert_rel(f[17], 9.70828780262767e-05, 1e-5, "llama3 blend", 17);
    assert_rel(f[19], 1.291476718704739e-05, 1e-6, "llama3", 19);
}

static void test_table_errors(void **state)
{
    (void)state;
    float f[8];
    dp_err e = {0};
    dp_rope_freq_scaling bad = {.kind = DP_ROPE_LLAMA3, .factor = 32.0f, .low_freq_factor = 4.0f,
                           .high_freq_factor = 1.0f, .original_max_pos = 8192.0f};
    assert_int_equal(dp_rope_inv_freq(10000.0, 7, NULL, f, &e), DP_EINVAL);
    assert_non_null(strstr(e.msg, "even"));
    dp_err_clear(&e);
    assert_int_equal(dp_rope_inv_freq(10000.0, 8, &bad, f, &e), DP_EINVAL);
    assert_non_null(strstr(e.msg, "llama3"));
    dp_err_clear(&e);
    dp_rope_freq_scaling zero = {.kind = DP_ROPE_LINEAR, .factor = 0.0f};
    assert_int_equal(dp_rope_inv_freq(10000.0, 8, &zero, f, &e), DP_EINVAL);
}

/* The rotation itself by hand: pos 1, one pair, f = 1: (1, 0) -> (cos 1, sin 1). */
static void test_ref_by_hand(void **state)
{
    (void)state;
    float x[4] = {1, 0, 0, 5}, f[2] = {1.0f, 0.0f};
    uint32_t pos[1] = {1};
    dp_ref_rope(x, 1, 1, 4, 2, pos, f);      /* partial: rot_dim 2 of D 4 */
    assert_true(fabs(x[0] - cos(1.0)) < 1e-7 && fabs(x[1] - sin(1.0)) < 1e-7);
    assert_true(x[2] == 0.0f && x[3] == 5.0f);   /* dims >= rot_dim untouched */
}

typedef struct rope_case {
    uint32_t T, H, D, rot;
    uint32_t pos0;
    dp_rope_freq_scaling scaling;
    double theta;
} rope_case;

/* Allowed |gpu - ref|, |x| <= 1. The GPU reduces the f32 angle (the same f32 value as the reference's) to
** [-pi, pi] exactly in 64-bit fixed point, then rounds once to f32 (~2e-7); cos/sin on [-pi, pi] cost ~1e-6
** more; an output mixes two such products: a few 1e-6. 1e-4 is the f32 bound; it caught an fma-based
** reduction (3e-4 at angles ~3e4 on lavapipe), and a wrong pairing, position or frequency moves outputs by
** >= ~1e-2. f16: plus one rounding of the output (|y| <= sqrt(2)): 2^-10 |y|. */
static double tol(bool f16, double y) { return 1e-4 + (f16 ? ldexp(fabs(y), -10) : 0.0); }

static void run_rope(kg_ctx *c, const rope_case *rc, bool act_f16)
{
    dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    uint64_t len = (uint64_t)rc->T * rc->H * rc->D;
    float *x = malloc(len * 4), *ref = malloc(len * 4), *got = malloc(len * 4), freq[128];
    uint32_t *pos = malloc(rc->T * 4);
    dp_err e = {0};
    assert_true(x && ref && got && pos);
    kg_fill(c, x, len, 1.0f);
    kg_round(x, adt, len);
    memcpy(ref, x, len * 4);
    for (uint32_t t = 0; t < rc->T; t++) pos[t] = rc->pos0 + t;
    assert_int_equal(dp_rope_inv_freq(rc->theta, rc->rot, &rc->scaling, freq, &e), DP_OK);
    dp_ref_rope(ref, rc->T, rc->H, rc->D, rc->rot, pos, freq);

    dp_gtensor *tx = kg_upload(c, adt, x, len), *tf = kg_upload(c, DP_F32, freq, rc->rot / 2);
    dp_gtensor *tp = kg_upload_u32(c, pos, rc->T);
    const char *defs[4];
    uint32_t nd = kg_defines(defs, act_f16, -1, false), wg = 64;
    dp_dispatch d;
    dp_dispatch_init(&d, kg_kernel(c, "rope/rope.comp", defs, nd, wg));
    dp_dispatch_tensor(&d, "x", tx);
    dp_dispatch_tensor(&d, "pos", tp);
    dp_dispatch_tensor(&d, "inv_freq", tf);
    dp_dispatch_u32(&d, "n_tokens", rc->T);
    dp_dispatch_u32(&d, "n_heads", rc->H);
    dp_dispatch_u32(&d, "head_dim", rc->D);
    dp_dispatch_u32(&d, "rot_dim", rc->rot);
    dp_dispatch_u32(&d, "x_stride", 0);
    uint32_t gx, gy;
    kg_groups_1d((uint64_t)rc->T * rc->H * rc->rot / 2, wg, &gx, &gy);
    kg_run(c, &d, gx, gy, 1);
    kg_download(tx, got, len);

    double worst = 0.0;
    for (uint64_t i = 0; i < len; i++) {
        double diff = fabs((double)got[i] - ref[i]);
        uint32_t dim = (uint32_t)(i % rc->D);
        if (dim >= rc->rot && got[i] != x[i])
            fail_msg("rope: x[%llu] (dim %u >= rot_dim %u) changed", (unsigned long long)i, dim, rc->rot);
        if (!(diff <= tol(act_f16, ref[i])))
            fail_msg("rope act=%s T=%u H=%u D=%u rot=%u pos0=%u kind=%d: x[%llu] = %.7g, ref %.7g (diff %.3g)",
                     dp_dtype_name(adt), rc->T, rc->H, rc->D, rc->rot, rc->pos0, (int)rc->scaling.kind,
                     (unsigned long long)i, got[i], ref[i], diff);
        if (diff / tol(act_f16, ref[i]) > worst) worst = diff / tol(act_f16, ref[i]);
    }
    print_message("  rope act=%s T=%u H=%u D=%u rot=%u pos0=%u kind=%d: worst err/tol %.3f\n", dp_dtype_name(adt),
                  rc->T, rc->H, rc->D, rc->rot, rc->pos0, (int)rc->scaling.kind, worst);
    dp_gtensor_release(tx);
    dp_gtensor_release(tf);
    dp_gtensor_release(tp);
    free(x); free(ref); free(got); free(pos);
}

static void test_rope_gpu(void **state)
{
    kg_ctx *c = *state;
    const dp_rope_freq_scaling none = {.kind = DP_ROPE_DEFAULT};
    const dp_rope_freq_scaling lin = {.kind = DP_ROPE_LINEAR, .factor = 8.0f};
    const dp_rope_freq_scaling l3 = {.kind = DP_ROPE_LLAMA3, .factor = 32.0f, .low_freq_factor = 1.0f,
                                .high_freq_factor = 4.0f, .original_max_pos = 8192.0f};
    const rope_case cases[] = {
        {7, 4, 32, 32, 0, none, 10000.0},      /* gemma3-tiny: q[7, 4, 32], positions 0..6 */
        {5, 2, 16, 16, 3, lin, 1e6},           /* gemma3-tiny-scaled global layer */
        {3, 1, 256, 256, 32000, none, 1e6},    /* Gemma 1B head, long positions: angles ~3e4 rad */
        {9, 3, 64, 64, 100000, l3, 500000.0},  /* Llama 3.2 1B table, angles ~1e5 rad */
        {4, 3, 32, 16, 11, none, 10000.0},     /* partial rotary: 16 of 32 dims */
    };
    for (size_t i = 0; i < DP_ARRAY_LEN(cases); i++) {
        run_rope(c, &cases[i], false);
        run_rope(c, &cases[i], true);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_default_linear),
        cmocka_unit_test(test_table_llama3),
        cmocka_unit_test(test_table_errors),
        cmocka_unit_test(test_ref_by_hand),
        cmocka_unit_test(test_rope_gpu),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
