/*
** tests/unit/test_k_matmul.c: shaders/matmul/gemv.comp and gemm.comp against dp_ref_matmul on lavapipe,
** for every weight dtype (f32, f16, bf16) x activation dtype (f32, f16), bias on and off, shapes that take
** the vectorised path (K = 1152, 640) and the element path (K = 67, or K % 8 != 0 with 16-bit weights, or
** a padded x row stride), N not a multiple of the row block or tile, and T = 1, 3, 17, 64.
** gemv.comp's UN (loads of UN chunks in flight) = 2 and 4 (2 only at two tokens per workgroup, as plans set
** it) on shapes whose chunks per thread are not a multiple of UN: each output within tol() of the reference
** AND bit for bit the UN = 1 output.
** The inputs are rounded to their stored dtype on the host first, so the reference sees exactly the values
** the GPU reads; what remains is accumulation order and output rounding (bounds: see tol()).
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

/* Allowed |gpu - ref| for one output whose reference value is y (the ref accumulates in double).
** f32 output: the GPU sums K f32 products in some order; with |x|, |w| <= 1 the rounding error of such a
** sum is a few ulps of the partial sums (~1e-6 relative for K <= 1152): 1e-4 * max(1, |y|) is loose enough
** for any order and tight enough to catch one wrong term (>= ~1e-3 here).
** f16 output: the f32 result is then rounded to f16, which costs at most one f16 ulp (2^-10 relative,
** allowing for round-toward-zero conversion, which Vulkan permits): 1e-3 * |y| on top of the f32 bound. */
static double tol(bool out_f16, double y)
{
    double a = fabs(y), b = 1e-4 * (a > 1.0 ? a : 1.0);
    return out_f16 ? b + 1e-3 * a : b;
}

typedef struct lin_case {
    const char *file;        /* "matmul/gemv.comp" or "matmul/gemm.comp" */
    uint32_t T, N, K;
    uint32_t x_stride;       /* 0 = K */
    uint32_t y_stride;       /* 0 = N */
    bool     bias;
    const dp_kconst *consts; /* NULL: shader defaults */
    uint32_t n_consts;
    uint32_t fold_gx;        /* gemv: force this many groups along x (0: no folding); tests the z fold */
    bool     unroll;         /* gemv: run with every UN a plan can set at TT (k_gemv_uns: 1, 2, 4 at TT 1, 1, 2 at
                                TT 2), each checked, and UN > 1 bit for bit = 1 */
} lin_case;

static uint32_t kconst(const lin_case *lc, const char *name, uint32_t def)
{
    for (uint32_t i = 0; i < lc->n_consts; i++)
        if (strcmp(lc->consts[i].name, name) == 0) return (uint32_t)lc->consts[i].value;
    return def;
}

static void run_case(ctx *c, const lin_case *lc, dp_dtype wdt, bool act_f16)
{
    const uint32_t T = lc->T, N = lc->N, K = lc->K;
    const uint32_t xs = lc->x_stride ? lc->x_stride : K, ys = lc->y_stride ? lc->y_stride : N;
    const dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    dp_err e = {0};

    float *x = malloc(sizeof(float) * T * xs), *w = malloc(sizeof(float) * N * K);
    float *b = malloc(sizeof(float) * N), *xc = malloc(sizeof(float) * T * K);
    float *ref = malloc(sizeof(float) * T * N), *got = malloc(sizeof(float) * T * ys);
    assert_true(x && w && b && xc && ref && got);
    for (uint64_t i = 0; i < (uint64_t)T * xs; i++) x[i] = rnd(c);
    for (uint64_t i = 0; i < (uint64_t)N * K; i++) w[i] = rnd(c);
    for (uint32_t i = 0; i < N; i++) b[i] = rnd(c);
    assert_int_equal(dp_ref_round(x, adt, (uint64_t)T * xs, &e), DP_OK);
    assert_int_equal(dp_ref_round(w, wdt, (uint64_t)N * K, &e), DP_OK);
    assert_int_equal(dp_ref_round(b, wdt, N, &e), DP_OK);
    for (uint32_t t = 0; t < T; t++) memcpy(xc + (uint64_t)t * K, x + (uint64_t)t * xs, sizeof(float) * K);
    dp_ref_matmul(xc, w, lc->bias ? b : NULL, ref, T, N, K);

    dp_gtensor *tx = upload(c, adt, x, (uint64_t)T * xs), *tw = upload(c, wdt, w, (uint64_t)N * K);
    dp_gtensor *tb = upload(c, wdt, b, N), *ty = NULL;
    /* Fill y with a sentinel so that columns outside the slice (y_stride > N) can be checked untouched. */
    float *sent = malloc(sizeof(float) * T * ys);
    assert_non_null(sent);
    for (uint64_t i = 0; i < (uint64_t)T * ys; i++) sent[i] = 7.0f;
    ty = upload(c, adt, sent, (uint64_t)T * ys);

    const char *defs[3];
    uint32_t nd = 0;
    defs[nd++] = wdt == DP_F32 ? "DP_W_F32" : wdt == DP_F16 ? "DP_W_F16" : "DP_W_BF16";
    if (act_f16) defs[nd++] = "DP_ACT_F16";
    if (lc->bias) defs[nd++] = "DP_BIAS";

    /* UN = 0: the case's constants only (the shader's default); else every UN a plan can set at the case's TT. */
    uint32_t uns[3];
    const uint32_t n_runs = k_case_uns(lc->unroll, kconst(lc, "TT", 1), uns);
    const size_t ybytes = (size_t)T * ys * (act_f16 ? 2 : 4);
    uint8_t *raw = malloc(ybytes), *raw1 = malloc(ybytes);
    assert_true(raw && raw1);
    for (uint32_t run = 0; run < n_runs; run++) {
        const uint32_t un = uns[run];
        dp_kconst consts[8];
        assert_true(lc->n_consts < DP_ARRAY_LEN(consts));
        uint32_t nc = 0;
        for (uint32_t i = 0; i < lc->n_consts; i++) consts[nc++] = lc->consts[i];
        if (un) consts[nc++] = (dp_kconst){"UN", un};
        dp_kernel_desc kd = {.file = lc->file, .defines = defs, .n_defines = nd,
                             .constants = nc ? consts : NULL, .n_constants = nc};
        dp_kernel *k = NULL;
        if (dp_kernel_get(c->dev, &kd, &k, &e) != DP_OK) fail_msg("kernel %s: %s", lc->file, e.msg);
        if (run > 0) {   /* a fresh sentinel: every run must write its outputs itself */
            dp_gtensor_release(ty);
            ty = upload(c, adt, sent, (uint64_t)T * ys);
        }

        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "x", tx);
        dp_dispatch_tensor(&d, "w", tw);
        dp_dispatch_tensor(&d, "y", ty);
        if (lc->bias) dp_dispatch_tensor(&d, "bias", tb);
        dp_dispatch_u32(&d, "T", T);
        dp_dispatch_u32(&d, "N", N);
        dp_dispatch_u32(&d, "K", K);
        dp_dispatch_u32(&d, "x_stride", lc->x_stride);
        dp_dispatch_u32(&d, "y_stride", lc->y_stride);

        uint32_t gx, gy, gz = 1;
        if (strstr(lc->file, "gemv")) {
            const uint32_t rows = kconst(lc, "ROWS", 2), tt = kconst(lc, "TT", 1);
            const uint32_t nb = (N + rows - 1) / rows;
            gx = lc->fold_gx ? lc->fold_gx : nb;
            gz = (nb + gx - 1) / gx;
            gy = (T + tt - 1) / tt;
        } else {
            const uint32_t bm = kconst(lc, "BM", 64), bn = kconst(lc, "BN", 64);
            gx = (N + bn - 1) / bn;
            gy = (T + bm - 1) / bm;
        }
        if (dp_recorder_begin(c->rec, &e) != DP_OK || dp_recorder_dispatch(c->rec, &d, gx, gy, gz, &e) != DP_OK ||
            dp_recorder_submit(c->rec, &e) != DP_OK)
            fail_msg("%s T=%u N=%u K=%u UN=%u: %s", lc->file, T, N, K, un, e.msg);
        download(ty, got, (uint64_t)T * ys);
        if (dp_gtensor_download(ty, 0, raw, ybytes, &e) != DP_OK) fail_msg("download: %s", e.msg);

        double worst = 0.0;
        for (uint32_t t = 0; t < T; t++) {
            for (uint32_t n = 0; n < ys; n++) {
                const float g = got[(uint64_t)t * ys + n];
                if (n >= N) {
                    if (g != 7.0f) fail_msg("%s: y[%u, %u] outside the slice was overwritten", lc->file, t, n);
                    continue;
                }
                const double r = ref[(uint64_t)t * N + n], diff = fabs((double)g - r);
                if (!(diff <= tol(act_f16, r)))
                    fail_msg("%s w=%s act=%s bias=%d T=%u N=%u K=%u UN=%u: y[%u, %u] = %.7g, ref %.7g (diff %.3g > %.3g)",
                             lc->file, dp_dtype_name(wdt), dp_dtype_name(adt), lc->bias, T, N, K, un, t, n, g, r,
                             diff, tol(act_f16, r));
                if (diff / tol(act_f16, r) > worst) worst = diff / tol(act_f16, r);
            }
        }
        /* the unrolled loop must sum in the UN = 1 order: the same bits */
        if (run == 0) memcpy(raw1, raw, ybytes);
        else if (memcmp(raw, raw1, ybytes) != 0)
            fail_msg("%s w=%s act=%s T=%u N=%u K=%u: UN=%u output differs from UN=1 (bits)", lc->file,
                     dp_dtype_name(wdt), dp_dtype_name(adt), T, N, K, un);
        print_message("  %s w=%-4s act=%s bias=%d T=%-2u N=%-4u K=%-4u xs=%u ys=%u UN=%u: worst err/tol %.3f%s\n",
                      lc->file, dp_dtype_name(wdt), dp_dtype_name(adt), lc->bias, T, N, K, xs, ys, un, worst,
                      run > 0 ? ", bits = UN=1" : "");
    }
    free(raw); free(raw1);

    dp_gtensor_release(tx);
    dp_gtensor_release(tw);
    dp_gtensor_release(tb);
    dp_gtensor_release(ty);
    free(x); free(w); free(b); free(xc); free(ref); free(got); free(sent);
}

static void run_all_dtypes(ctx *c, const lin_case *cases, size_t n)
{
    static const dp_dtype wdts[] = {DP_F32, DP_F16, DP_BF16};
    for (size_t i = 0; i < n; i++)
        for (size_t w = 0; w < 3; w++)
            for (int a = 0; a < 2; a++) run_case(c, &cases[i], wdts[w], a != 0);
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

static const dp_kconst GEMV_WIDE[] = {{"WG", 64}, {"ROWS", 4}, {"TT", 3}};
static const dp_kconst GEMV_ONE[]  = {{"WG", 32}, {"ROWS", 1}, {"TT", 1}};

/* UN = 1, 2, 4 at TT 1, and 1, 2 at TT 2 (what a plan can set: k_gemv_uns): chunks per thread not a multiple
** of UN. f16/bf16 weights (8 per chunk): K = 1152 is 144 chunks, 4 or 5 per thread at WG = 32; K = 640 is 80,
** 2 or 3. f32 weights (4 per chunk): 9 per thread at K = 1152, 5 at K = 640, 4 or 5 at WG = 64. GEMV_UN_B
** with T = 3: the second token block holds one token. */
static const dp_kconst GEMV_UN_A[] = {{"WG", 32}, {"ROWS", 2}, {"TT", 1}};
static const dp_kconst GEMV_UN_B[] = {{"WG", 32}, {"ROWS", 4}, {"TT", 2}};
static const dp_kconst GEMV_UN_C[] = {{"WG", 64}, {"ROWS", 1}, {"TT", 2}};

static void test_gemv(void **state)
{
    ctx *c = *state;
    const lin_case cases[] = {
        /* decode shapes: vectorised path; N not a multiple of ROWS */
        {"matmul/gemv.comp", 1, 37, 1152, 0, 0, false, NULL, 0, 0, false},
        {"matmul/gemv.comp", 1, 33, 640, 0, 0, true, NULL, 0, 0, false},
        /* K = 67: element path; K = 36: vectorised for f32 weights only (36 % 8 != 0) */
        {"matmul/gemv.comp", 1, 13, 67, 0, 0, true, NULL, 0, 0, false},
        {"matmul/gemv.comp", 3, 9, 36, 0, 0, false, NULL, 0, 0, false},
        /* several tokens per pass, 4 rows per group, tokens not a multiple of TT, padded x rows */
        {"matmul/gemv.comp", 3, 30, 640, 0, 0, true, GEMV_WIDE, 3, 0, false},
        {"matmul/gemv.comp", 17, 21, 67, 0, 0, false, GEMV_WIDE, 3, 0, false},
        {"matmul/gemv.comp", 3, 11, 64, 68, 0, false, GEMV_WIDE, 3, 0, false},
        {"matmul/gemv.comp", 2, 10, 96, 97, 0, true, NULL, 0, 0, false},
        /* row blocks folded into x * z (gx = 4 for 7 blocks: one no-op block); y a column slice */
        {"matmul/gemv.comp", 1, 7, 1152, 0, 12, true, GEMV_ONE, 3, 4, false},
        /* UN = 1, 2, 4: decode shape; several tokens per pass; folded row blocks, a y slice, bias; and
           the element path (K = 67), which ignores UN */
        {"matmul/gemv.comp", 1, 37, 1152, 0, 0, false, GEMV_UN_A, 3, 0, true},
        {"matmul/gemv.comp", 3, 30, 640, 0, 0, true, GEMV_UN_B, 3, 0, true},
        {"matmul/gemv.comp", 2, 7, 1152, 0, 12, true, GEMV_UN_C, 3, 4, true},
        {"matmul/gemv.comp", 1, 13, 67, 0, 0, true, GEMV_UN_A, 3, 0, true},
    };
    run_all_dtypes(c, cases, DP_ARRAY_LEN(cases));
}

static const dp_kconst GEMM_SMALL[] = {{"WG", 128}, {"BM", 32}, {"BN", 64}, {"BK", 32}, {"TM", 2}, {"TN", 8}};

static void test_gemm(void **state)
{
    ctx *c = *state;
    const lin_case cases[] = {
        {"matmul/gemm.comp", 17, 70, 67, 0, 0, true, NULL, 0, 0, false},
        {"matmul/gemm.comp", 64, 96, 640, 0, 0, false, NULL, 0, 0, false},
        {"matmul/gemm.comp", 3, 65, 1152, 0, 0, true, NULL, 0, 0, false},
        {"matmul/gemm.comp", 64, 40, 1152, 1153, 45, false, GEMM_SMALL, 6, 0, false},
        {"matmul/gemm.comp", 17, 130, 67, 0, 0, true, GEMM_SMALL, 6, 0, false},
    };
    run_all_dtypes(c, cases, DP_ARRAY_LEN(cases));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_gemm),
    };
    return cmocka_run_group_tests(tests, lin_setup, kg_teardown);
}
