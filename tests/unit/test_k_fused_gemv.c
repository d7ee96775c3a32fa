/*
** tests/unit/test_k_fused_gemv.c: shaders/fused/gemv_multi.comp (the fused projections) against
** dp_ref_glu_linear / dp_ref_multi_linear on lavapipe, for every weight dtype (f32, f16, bf16) x activation
** dtype (f32, f16): DP_GLU with gelu_tanh and silu; three (Q, K, V) and two linears of one input, with and
** without biases; K on the vector path (640) and the element path (67, and a padded x stride); row counts
** whose row blocks straddle two weights (N0 odd with ROWS = 2, 3); T = 1, 3, 6 (T > TT: several token blocks).
** UN (loads of UN chunks in flight) = 1, 2, 4 in both modes (1, 2 at two tokens per workgroup, as plans set
** it) on shapes whose chunks per thread are not a multiple of UN (and on the element path, which ignores UN):
** each output within tolerance of the reference AND bit for bit the UN = 1 output.
** Inputs are rounded to their dtype on the host first, so the references see what the GPU reads.
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

#include "k_linear.h"


/* Allowed |gpu - ref| of a linear output y (as test_k_matmul.c): the GPU's f32 sum of K products in another
** order is within 1e-4 * max(1, |y|); an f16 output adds one f16 rounding (1e-3 |y|). */
static double tol_lin(bool out_f16, double y)
{
    double a = fabs(y), b = 1e-4 * (a > 1.0 ? a : 1.0);
    return out_f16 ? b + 1e-3 * a : b;
}

/* GLU output y = act(g) * u from f32 sums g, u, each within e(v) = 1e-4 max(1, |v|) of the reference:
** |dy| <= |act'(g)| e(g) |u| + |act(g)| e(u) (+ second order), with |act'| <= 1.13 for gelu_tanh and 1.1
** for silu; 1.2 covers both. The activation's own f32 evaluation adds a few ulps of |y| (1e-5 |y|). f16
** output: one f16 rounding on top (1e-3 |y|). */
static double tol_glu(bool out_f16, double g, double u, double y, double act_g)
{
    double eg = 1e-4 * (fabs(g) > 1.0 ? fabs(g) : 1.0), eu = 1e-4 * (fabs(u) > 1.0 ? fabs(u) : 1.0);
    double b = 1.2 * eg * fabs(u) + fabs(act_g) * eu + 1e-5 * fabs(y) + 1e-7;
    return out_f16 ? b + 1e-3 * fabs(y) : b;
}

static float *rand_rounded(ctx *c, dp_dtype dt, uint64_t n)
{
    dp_err e = {0};
    float *v = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(v);
    for (uint64_t i = 0; i < n; i++) v[i] = rnd(c);
    assert_int_equal(dp_ref_round(v, dt, n, &e), DP_OK);
    return v;
}

static const char *wdef(dp_dtype w) { return w == DP_F32 ? "DP_W_F32" : w == DP_F16 ? "DP_W_F16" : "DP_W_BF16"; }

/* gemv_multi.comp with WG 64, ROWS, TT and (un != 0) UN. */
static dp_kernel *multi_kernel(ctx *c, const char **defs, uint32_t nd, uint32_t rows, uint32_t tt, uint32_t un)
{
    const dp_kconst consts[] = {{"WG", 64}, {"ROWS", rows}, {"TT", tt}, {"UN", un}};
    dp_kernel_desc kd = {.file = "fused/gemv_multi.comp", .defines = defs, .n_defines = nd,
                         .constants = consts, .n_constants = un ? 4 : 3};
    dp_kernel *k = NULL;
    dp_err e = {0};
    if (dp_kernel_get(c->dev, &kd, &k, &e) != DP_OK) fail_msg("kernel: %s", e.msg);
    return k;
}

/* The output's bytes, for the bit comparison of UN > 1 with UN = 1. */
static void *download_raw(const dp_gtensor *t)
{
    void *b = malloc(t->bytes);
    dp_err e = {0};
    assert_non_null(b);
    if (dp_gtensor_download(t, 0, b, t->bytes, &e) != DP_OK) fail_msg("download: %s", e.msg);
    return b;
}

static void submit(ctx *c, dp_dispatch *d, uint32_t rows_total, uint32_t T, uint32_t rows, uint32_t tt)
{
    dp_err e = {0};
    const uint32_t nb = (rows_total + rows - 1) / rows;
    if (dp_recorder_begin(c->rec, &e) != DP_OK || dp_recorder_dispatch(c->rec, d, nb, (T + tt - 1) / tt, 1, &e) != DP_OK ||
        dp_recorder_submit(c->rec, &e) != DP_OK)
        fail_msg("gemv_multi: %s", e.msg);
}

/* x [T, xs] with the first K columns used; returns the contiguous copy for the references. */
static float *compact(const float *x, uint32_t T, uint32_t K, uint32_t xs)
{
    float *xc = malloc(sizeof(float) * T * K);
    assert_non_null(xc);
    for (uint32_t t = 0; t < T; t++) memcpy(xc + (uint64_t)t * K, x + (uint64_t)t * xs, sizeof(float) * K);
    return xc;
}

typedef struct fcase {
    uint32_t T, K, xs; uint32_t N[3]; uint32_t count; bool bias; uint32_t rows, tt;
    bool unroll;   /* run with every UN a plan can set at tt (else the default) */
} fcase;

static void run_glu(ctx *c, const fcase *fc, dp_glu_kind kind, dp_dtype wdt, bool act_f16)
{
    const uint32_t T = fc->T, K = fc->K, N = fc->N[0], xs = fc->xs ? fc->xs : K;
    const dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    float *x = rand_rounded(c, adt, (uint64_t)T * xs), *wg = rand_rounded(c, wdt, (uint64_t)N * K);
    float *wu = rand_rounded(c, wdt, (uint64_t)N * K), *xc = compact(x, T, K, xs);
    float *ref = malloc(sizeof(float) * T * N), *g = malloc(sizeof(float) * T * N), *u = malloc(sizeof(float) * T * N);
    float *got = malloc(sizeof(float) * T * N);
    assert_true(ref && g && u && got);
    dp_ref_glu_linear(kind, xc, wg, wu, ref, T, N, K);
    dp_ref_matmul(xc, wg, NULL, g, T, N, K);
    dp_ref_matmul(xc, wu, NULL, u, T, N, K);

    dp_gtensor *tx = upload(c, adt, x, (uint64_t)T * xs), *twg = upload(c, wdt, wg, (uint64_t)N * K);
    dp_gtensor *twu = upload(c, wdt, wu, (uint64_t)N * K), *ty = upload(c, adt, ref, (uint64_t)T * N);
    const char *defs[3] = {"DP_GLU", wdef(wdt), "DP_ACT_F16"};
    /* y starts as garbage (a sentinel) so an unwritten element fails */
    float *sent = malloc(sizeof(float) * T * N);
    assert_non_null(sent);
    for (uint64_t i = 0; i < (uint64_t)T * N; i++) sent[i] = 7.0f;
    void *raw1 = NULL;
    uint32_t uns[3];   /* every UN a plan can set at the case's TT, or the shader's default (k_case_uns) */
    const uint32_t n_runs = k_case_uns(fc->unroll, fc->tt, uns);
    for (uint32_t run = 0; run < n_runs; run++) {
        const uint32_t un = uns[run];
        dp_kernel *k = multi_kernel(c, defs, act_f16 ? 3 : 2, fc->rows, fc->tt, un);
        dp_gtensor_release(ty);
        ty = upload(c, adt, sent, (uint64_t)T * N);
        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "x", tx);
        dp_dispatch_tensor(&d, "wg", twg);
        dp_dispatch_tensor(&d, "wu", twu);
        dp_dispatch_tensor(&d, "y", ty);
        dp_dispatch_u32(&d, "T", T);
        dp_dispatch_u32(&d, "N", N);
        dp_dispatch_u32(&d, "K", K);
        dp_dispatch_u32(&d, "x_stride", fc->xs);
        dp_dispatch_u32(&d, "kind", kind == DP_GLU_SILU ? 1u : 0u);
        submit(c, &d, N, T, fc->rows, fc->tt);
        download(ty, got, (uint64_t)T * N);
        for (uint64_t i = 0; i < (uint64_t)T * N; i++) {
            const double ag = kind == DP_GLU_SILU ? dp_ref_silu(g[i]) : dp_ref_gelu_tanh(g[i]);
            const double tl = tol_glu(act_f16, g[i], u[i], ref[i], ag), diff = fabs((double)got[i] - ref[i]);
            if (!(diff <= tl))
                fail_msg("glu %s w=%s act=%s T=%u N=%u K=%u UN=%u: y[%llu] = %.7g, ref %.7g (diff %.3g > %.3g)",
                         kind == DP_GLU_SILU ? "silu" : "gelu_tanh", dp_dtype_name(wdt), dp_dtype_name(adt), T, N, K,
                         un, (unsigned long long)i, got[i], ref[i], diff, tl);
        }
        void *raw = download_raw(ty);
        if (run == 0) raw1 = raw;
        else {
            if (memcmp(raw, raw1, ty->bytes) != 0)
                fail_msg("glu w=%s act=%s T=%u N=%u K=%u: UN=%u output differs from UN=1 (bits)", dp_dtype_name(wdt),
                         dp_dtype_name(adt), T, N, K, un);
            free(raw);
        }
    }
    free(raw1);
    dp_gtensor_release(tx); dp_gtensor_release(twg); dp_gtensor_release(twu); dp_gtensor_release(ty);
    free(x); free(wg); free(wu); free(xc); free(ref); free(g); free(u); free(got); free(sent);
}

static void run_multi(ctx *c, const fcase *fc, dp_dtype wdt, bool act_f16)
{
    const uint32_t T = fc->T, K = fc->K, xs = fc->xs ? fc->xs : K, n = fc->count;
    const dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    float *x = rand_rounded(c, adt, (uint64_t)T * xs), *xc = compact(x, T, K, xs);
    float *w[3], *b[3], *ref[3], *got[3];
    dp_gtensor *tw[3], *tb[3], *ty[3];
    dp_gtensor *tx = upload(c, adt, x, (uint64_t)T * xs);
    uint32_t N[3];
    for (uint32_t i = 0; i < 3; i++) {
        const uint32_t j = i < n ? i : n - 1;   /* a pair repeats its last member with N2 = 0 */
        N[i] = i < n ? fc->N[i] : 0;
        if (i < n) {
            w[i] = rand_rounded(c, wdt, (uint64_t)fc->N[i] * K);
            b[i] = rand_rounded(c, wdt, fc->N[i]);
            ref[i] = malloc(sizeof(float) * T * fc->N[i]);
            got[i] = malloc(sizeof(float) * T * fc->N[i]);
            assert_true(ref[i] && got[i]);
            for (uint64_t e = 0; e < (uint64_t)T * fc->N[i]; e++) got[i][e] = 7.0f;   /* sentinel */
            tw[i] = upload(c, wdt, w[i], (uint64_t)fc->N[i] * K);
            tb[i] = upload(c, wdt, b[i], fc->N[i]);
            ty[i] = upload(c, adt, got[i], (uint64_t)T * fc->N[i]);
        } else {
            tw[i] = tw[j]; tb[i] = tb[j]; ty[i] = ty[j];
        }
    }
    dp_ref_multi_linear(xc, T, K, n, (const float *const *)w, fc->bias ? (const float *const *)b : NULL, ref, N);

    const char *defs[3] = {wdef(wdt), "DP_BIAS", "DP_ACT_F16"};
    const char *defs_nb[2] = {wdef(wdt), "DP_ACT_F16"};
    static const char *wn[3] = {"w0", "w1", "w2"}, *yn[3] = {"y0", "y1", "y2"}, *bn[3] = {"b0", "b1", "b2"},
                      *nn[3] = {"N0", "N1", "N2"};
    void *raw1[3] = {NULL, NULL, NULL};
    uint32_t uns[3];   /* every UN a plan can set at the case's TT, or the shader's default (k_case_uns) */
    const uint32_t n_runs = k_case_uns(fc->unroll, fc->tt, uns);
    for (uint32_t run = 0; run < n_runs; run++) {
        const uint32_t un = uns[run];
        dp_kernel *k = multi_kernel(c, fc->bias ? defs : defs_nb, (fc->bias ? 2u : 1u) + (act_f16 ? 1u : 0u),
                                    fc->rows, fc->tt, un);
        if (run > 0)   /* a fresh sentinel: every run must write its outputs itself */
            for (uint32_t i = 0; i < n; i++) {
                for (uint64_t q = 0; q < (uint64_t)T * N[i]; q++) got[i][q] = 7.0f;
                dp_gtensor_release(ty[i]);
                ty[i] = upload(c, adt, got[i], (uint64_t)T * N[i]);
            }
        for (uint32_t i = n; i < 3; i++) ty[i] = ty[n - 1];
        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "x", tx);
        for (uint32_t i = 0; i < 3; i++) {
            dp_dispatch_tensor(&d, wn[i], tw[i]);
            dp_dispatch_tensor(&d, yn[i], ty[i]);
            if (fc->bias) dp_dispatch_tensor(&d, bn[i], tb[i]);
            dp_dispatch_u32(&d, nn[i], N[i]);
        }
        dp_dispatch_u32(&d, "T", T);
        dp_dispatch_u32(&d, "K", K);
        dp_dispatch_u32(&d, "x_stride", fc->xs);
        submit(c, &d, N[0] + N[1] + N[2], T, fc->rows, fc->tt);
        for (uint32_t i = 0; i < n; i++) {
            download(ty[i], got[i], (uint64_t)T * N[i]);
            for (uint64_t q = 0; q < (uint64_t)T * N[i]; q++) {
                const double diff = fabs((double)got[i][q] - ref[i][q]), tl = tol_lin(act_f16, ref[i][q]);
                if (!(diff <= tl))
                    fail_msg("multi %u/%u w=%s act=%s bias=%d T=%u N=%u K=%u UN=%u: y%u[%llu] = %.7g, ref %.7g "
                             "(diff %.3g > %.3g)", i, n, dp_dtype_name(wdt), dp_dtype_name(adt), fc->bias, T, N[i],
                             K, un, i, (unsigned long long)q, got[i][q], ref[i][q], diff, tl);
            }
            void *raw = download_raw(ty[i]);
            if (run == 0) raw1[i] = raw;
            else {
                if (memcmp(raw, raw1[i], ty[i]->bytes) != 0)
                    fail_msg("multi %u/%u w=%s act=%s T=%u N=%u K=%u: UN=%u output y%u differs from UN=1 (bits)", i, n,
                             dp_dtype_name(wdt), dp_dtype_name(adt), T, N[i], K, un, i);
                free(raw);
            }
        }
    }
    for (uint32_t i = 0; i < n; i++) free(raw1[i]);
    dp_gtensor_release(tx);
    for (uint32_t i = 0; i < n; i++) {
        dp_gtensor_release(tw[i]); dp_gtensor_release(tb[i]); dp_gtensor_release(ty[i]);
        free(w[i]); free(b[i]); free(ref[i]); free(got[i]);
    }
    free(x); free(xc);
}

static const fcase CASES[] = {
    /* T, K, xs, {N0, N1, N2}, count, bias, ROWS, TT */
    {1, 640, 0, {37, 8, 8}, 3, false, 2, 1, false},
    {1, 67, 0, {24, 9, 9}, 3, true, 3, 1, false},
    {3, 640, 0, {21, 7, 5}, 3, true, 2, 3, false},
    {6, 96, 100, {13, 13, 0}, 2, false, 2, 4, false},
    {6, 67, 0, {15, 6, 6}, 3, true, 4, 4, false},
    /* UN = 1, 2, 4 (1, 2 at TT 2) at WG = 64. K = 1152: 144 chunks of 8 (f16/bf16 weights), 2 or 3 per
       thread; 288 of 4 (f32), 4 or 5. K = 2112: 264 (5 or 4 per thread) and 528 (9 or 8). K = 67: the element
       path. */
    {1, 1152, 0, {37, 8, 8}, 3, false, 2, 1, true},
    {2, 2112, 0, {13, 7, 0}, 2, true, 3, 2, true},
    {1, 67, 0, {15, 6, 6}, 3, true, 2, 1, true},
};

static void test_glu(void **state)
{
    ctx *c = *state;
    static const dp_dtype wdts[] = {DP_F32, DP_F16, DP_BF16};
    for (size_t i = 0; i < DP_ARRAY_LEN(CASES); i++)
        for (size_t w = 0; w < 3; w++)
            for (int a = 0; a < 2; a++)
                run_glu(c, &CASES[i], (i % 2) ? DP_GLU_SILU : DP_GLU_GELU_TANH, wdts[w], a != 0);
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

static void test_multi(void **state)
{
    ctx *c = *state;
    static const dp_dtype wdts[] = {DP_F32, DP_F16, DP_BF16};
    for (size_t i = 0; i < DP_ARRAY_LEN(CASES); i++)
        for (size_t w = 0; w < 3; w++)
            for (int a = 0; a < 2; a++) run_multi(c, &CASES[i], wdts[w], a != 0);
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glu),
        cmocka_unit_test(test_multi),
    };
    return cmocka_run_group_tests(tests, lin_setup, kg_teardown);
}
