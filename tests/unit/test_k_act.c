/*
** tests/unit/test_k_act.c: shaders/act/glu.comp (GeGLU with the tanh GELU, SwiGLU; separate gate/up tensors
** and Phi-3's fused [T, 2F] gate_up tensor read through a view) and shaders/act/softcap.comp against
** core/ref/act.c on lavapipe, f32 and f16 activations, odd sizes.
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

/* Allowed |gpu - ref| (the reference works in double). f32: tanh/exp in f32 are good to a few ulps
** (GLSL allows 3 + 2|x| ulps for exp), so outputs are off by ~1e-6 relative: 1e-4 * max(1, |y|) is the f32
** bound, well below the change from a wrong constant (0.044715, sqrt(2/pi)) or a swapped gate/up (>= 1e-2).
** f16: plus one rounding of the output, 2^-10 |y|. */
static double tol(bool f16, double y)
{
    double a = fabs(y);
    return 1e-4 * (a > 1.0 ? a : 1.0) + (f16 ? ldexp(a, -10) : 0.0);
}

static void compare(const char *what, const float *got, const float *ref, uint64_t n, bool f16)
{
    double worst = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= tol(f16, ref[i])))
            fail_msg("%s: [%llu] = %.7g, ref %.7g (diff %.3g)", what, (unsigned long long)i, got[i], ref[i], d);
        if (d / tol(f16, ref[i]) > worst) worst = d / tol(f16, ref[i]);
    }
    print_message("  %s: worst err/tol %.3f\n", what, worst);
}

static void run_glu(kg_ctx *c, dp_glu_kind kind, bool fused, bool act_f16, uint32_t T, uint32_t F)
{
    dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    uint64_t n = (uint64_t)T * F;
    float *gu = malloc(n * 2 * 4), *ref = malloc(n * 4), *got = malloc(n * 4);
    dp_err e = {0};
    assert_true(gu && ref && got);
    kg_fill(c, gu, 2 * n, 4.0f);   /* gate in [-4, 4): both tails of GELU / SiLU */
    kg_round(gu, adt, 2 * n);

    /* fused: gu is [T, 2F], gate = row[0 .. F), up = row[F .. 2F). separate: gate = gu[0 .. n), up = gu[n ..) */
    uint32_t gs = fused ? 2 * F : F, us = fused ? 2 * F : F;
    const float *gate = gu, *up = fused ? gu + F : gu + n;
    dp_ref_glu(kind, gate, up, ref, T, F, gs, us);

    dp_gtensor *tgu = kg_upload(c, adt, gu, 2 * n), *ty = kg_upload(c, adt, ref, n), *tup = NULL;
    uint64_t esz = act_f16 ? 2 : 4, up_off = fused ? F : n, view_n = 2 * n - up_off;
    if (dp_gtensor_view(tgu, up_off * esz, adt, 1, &view_n, &tup, &e) != DP_OK) fail_msg("view: %s", e.msg);
    const char *defs[4];
    uint32_t nd = kg_defines(defs, act_f16, -1, false), gx, gy;
    dp_dispatch d;
    dp_dispatch_init(&d, kg_kernel(c, "act/glu.comp", defs, nd, 128));
    dp_dispatch_tensor(&d, "gate", tgu);
    dp_dispatch_tensor(&d, "up", tup);
    dp_dispatch_tensor(&d, "y", ty);
    dp_dispatch_u32(&d, "n_tokens", T);
    dp_dispatch_u32(&d, "F", F);
    dp_dispatch_u32(&d, "gate_stride", gs);
    dp_dispatch_u32(&d, "up_stride", us);
    dp_dispatch_u32(&d, "kind", (uint32_t)kind);
    kg_groups_1d(n, 128, &gx, &gy);
    kg_run(c, &d, gx, gy, 1);
    kg_download(ty, got, n);

    char what[128];
    snprintf(what, sizeof what, "%s %s act=%s T=%u F=%u", kind == DP_GLU_SILU ? "swiglu" : "geglu",
             fused ? "fused" : "separate", dp_dtype_name(adt), T, F);
    compare(what, got, ref, n, act_f16);
    dp_gtensor_release(tup);
    dp_gtensor_release(tgu);
    dp_gtensor_release(ty);
    free(gu); free(ref); free(got);
}

static void test_glu(void **state)
{
    kg_ctx *c = *state;
    for (int kind = 0; kind < DP_GLU_KIND_COUNT; kind++)
        for (int act = 0; act < 2; act++) {
            run_glu(c, (dp_glu_kind)kind, false, act, 5, 691);   /* odd F */
            run_glu(c, (dp_glu_kind)kind, true, act, 3, 333);
            run_glu(c, (dp_glu_kind)kind, false, act, 1, 6912);  /* Gemma 1B decode row */
        }
}

static void run_softcap(kg_ctx *c, bool act_f16, uint32_t n, float cap)
{
    dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    float *x = malloc(n * 4), *ref = malloc(n * 4), *got = malloc(n * 4);
    assert_true(x && ref && got);
    kg_fill(c, x, n, 200.0f);   /* far beyond the cap: tanh saturates, must not overflow to NaN */
    x[0] = 1e30f * (act_f16 ? 0.0f : 1.0f);
    kg_round(x, adt, n);
    dp_ref_softcap(x, ref, n, cap);
    dp_gtensor *tx = kg_upload(c, adt, x, n);
    const char *defs[4];
    uint32_t nd = kg_defines(defs, act_f16, -1, false), gx, gy;
    dp_dispatch d;
    dp_dispatch_init(&d, kg_kernel(c, "act/softcap.comp", defs, nd, 64));
    dp_dispatch_tensor(&d, "x", tx);
    dp_dispatch_u32(&d, "n", n);
    dp_dispatch_f32(&d, "c", cap);
    kg_groups_1d(n, 64, &gx, &gy);
    kg_run(c, &d, gx, gy, 1);
    kg_download(tx, got, n);
    char what[96];
    snprintf(what, sizeof what, "softcap act=%s n=%u c=%g", dp_dtype_name(adt), n, (double)cap);
    compare(what, got, ref, n, act_f16);
    dp_gtensor_release(tx);
    free(x); free(ref); free(got);
}

static void test_softcap(void **state)
{
    kg_ctx *c = *state;
    run_softcap(c, false, 1001, 30.0f);
    run_softcap(c, true, 1001, 30.0f);
    run_softcap(c, false, 77, 50.0f);
}

/* The reference by hand: gelu_tanh(1) = 0.5 (1 + tanh(0.7978845608 * 1.044715)) = 0.8411919906;
** silu(1) = 1 / (1 + e^-1) = 0.7310585786. */
static void test_ref_by_hand(void **state)
{
    (void)state;
    assert_true(fabs(dp_ref_gelu_tanh(1.0f) - 0.8411919906) < 1e-7);
    assert_true(fabs(dp_ref_silu(1.0f) - 0.7310585786) < 1e-7);
    float x = 60.0f, y;
    dp_ref_softcap(&x, &y, 1, 30.0f);
    assert_true(fabs(y - 30.0 * tanh(2.0)) < 1e-5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_by_hand),
        cmocka_unit_test(test_glu),
        cmocka_unit_test(test_softcap),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
