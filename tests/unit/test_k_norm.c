/*
** tests/unit/test_k_norm.c: shaders/norm/rmsnorm.comp and add_rmsnorm.comp against core/ref/norm.c on
** lavapipe, for activations f32/f16 x weights f32/f16/bf16, Gemma's (1 + w) and plain w, hidden rows
** (n = 1152, 67: odd, not a multiple of WG) and per-head rows (q[T, H, 32] as T*H rows of 32, in place).
** Inputs are rounded to their stored dtypes first, so the reference sees exactly what the GPU reads.
** norm_add_norm.comp (fusion norm_add_norm: y = x + rmsnorm(a; w1), h = rmsnorm(y; w2)) against core/ref and,
** bit for bit, against the chain it replaces (rmsnorm.comp then add_rmsnorm.comp with the same layout).
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

/* Allowed |gpu - ref| for an output whose reference is y.
** f32: the sum of n <= 1152 squares in f32 (tree order) is off by <= log2(n) * 2^-24 relative, inversesqrt by
** a few ulps, so y is off by ~1e-6 relative; with O(1) inputs |y| <= ~4: 1e-4 abs leaves a wide margin and
** still catches a wrong eps, offset or weight element (all >= 1e-3 here).
** f16 output: the f32 value is rounded once to f16: <= 2^-11 |y| (RNE), 2^-10 |y| allowed (RTZ is legal). */
static double tol(bool f16, double y)
{
    return 1e-4 + (f16 ? ldexp(fabs(y), -10) : 0.0);
}

typedef struct norm_case {
    uint32_t rows, n, wg;
    float    offset;
    bool     in_place;
    uint32_t per_wg;   /* ROWS: rows per workgroup (0 = the kernel's default, 1) */
} norm_case;

/* The kernel with WG and ROWS, and its group count (ceil(rows / ROWS) folded past 65535). */
static dp_kernel *norm_kernel(kg_ctx *c, const char *file, const char **defs, uint32_t nd, const norm_case *nc,
                              uint32_t *gx, uint32_t *gy)
{
    if (!nc->per_wg) {
        kg_groups_rows(nc->rows, gx, gy);
        return kg_kernel(c, file, defs, nd, nc->wg);
    }
    dp_kconst k[2] = {{"WG", nc->wg}, {"ROWS", nc->per_wg}};
    dp_kernel_desc kd = {.file = file, .defines = defs, .n_defines = nd, .constants = k, .n_constants = 2};
    dp_kernel *out = NULL;
    dp_err e = {0};
    if (dp_kernel_get(c->dev, &kd, &out, &e) != DP_OK) fail_msg("kernel %s: %s", file, e.msg);
    kg_groups_rows((nc->rows + nc->per_wg - 1) / nc->per_wg, gx, gy);
    return out;
}

static void check(const char *what, const float *got, const float *ref, uint64_t n, bool f16)
{
    double worst = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= tol(f16, ref[i])))
            fail_msg("%s: [%llu] = %.7g, ref %.7g (diff %.3g > %.3g)", what, (unsigned long long)i, got[i], ref[i],
                     d, tol(f16, ref[i]));
        if (d / tol(f16, ref[i]) > worst) worst = d / tol(f16, ref[i]);
    }
    print_message("  %s: worst err/tol %.3f\n", what, worst);
}

static void run_rmsnorm(kg_ctx *c, const norm_case *nc, bool act_f16, dp_dtype wdt)
{
    dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    uint64_t len = (uint64_t)nc->rows * nc->n;
    float *x = malloc(len * 4), *w = malloc(nc->n * 4), *ref = malloc(len * 4), *got = malloc(len * 4);
    assert_true(x && w && ref && got);
    kg_fill(c, x, len, 2.0f);
    kg_fill(c, w, nc->n, 1.0f);
    kg_round(x, adt, len);
    kg_round(w, wdt, nc->n);
    dp_ref_rmsnorm(x, w, ref, nc->rows, nc->n, 1e-6f, nc->offset);

    dp_gtensor *tx = kg_upload(c, adt, x, len), *tw = kg_upload(c, wdt, w, nc->n);
    dp_gtensor *ty = nc->in_place ? tx : kg_upload(c, adt, x, len);
    const char *defs[4];
    uint32_t nd = kg_defines(defs, act_f16, wdt, false);
    dp_dispatch d;
    uint32_t gx, gy;
    dp_dispatch_init(&d, norm_kernel(c, "norm/rmsnorm.comp", defs, nd, nc, &gx, &gy));
    dp_dispatch_tensor(&d, "x", tx);
    dp_dispatch_tensor(&d, "w", tw);
    dp_dispatch_tensor(&d, "y", ty);
    dp_dispatch_u32(&d, "rows", nc->rows);
    dp_dispatch_u32(&d, "n", nc->n);
    dp_dispatch_f32(&d, "eps", 1e-6f);
    dp_dispatch_f32(&d, "w_offset", nc->offset);
    kg_run(c, &d, gx, gy, 1);
    kg_download(ty, got, len);

    char what[160];
    snprintf(what, sizeof what, "rmsnorm act=%s w=%s rows=%u n=%u WG=%u ROWS=%u offset=%g%s", dp_dtype_name(adt),
             dp_dtype_name(wdt), nc->rows, nc->n, nc->wg, nc->per_wg ? nc->per_wg : 1, (double)nc->offset, nc->in_place ? " in place" : "");
    check(what, got, ref, len, act_f16);
    dp_gtensor_release(tx);
    dp_gtensor_release(tw);
    if (!nc->in_place) dp_gtensor_release(ty);
    free(x); free(w); free(ref); free(got);
}

static void run_add_rmsnorm(kg_ctx *c, const norm_case *nc, bool act_f16, dp_dtype wdt)
{
    dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    uint64_t len = (uint64_t)nc->rows * nc->n;
    float *a = malloc(len * 4), *b = malloc(len * 4), *w = malloc(nc->n * 4);
    float *rr = malloc(len * 4), *ry = malloc(len * 4), *gr = malloc(len * 4), *gy_ = malloc(len * 4);
    assert_true(a && b && w && rr && ry && gr && gy_);
    kg_fill(c, a, len, 2.0f);
    kg_fill(c, b, len, 1.0f);
    kg_fill(c, w, nc->n, 1.0f);
    kg_round(a, adt, len);
    kg_round(b, adt, len);
    kg_round(w, wdt, nc->n);
    dp_ref_add_rmsnorm(a, b, w, rr, ry, nc->rows, nc->n, 1e-6f, nc->offset, act_f16);

    dp_gtensor *ta = kg_upload(c, adt, a, len), *tb = kg_upload(c, adt, b, len), *tw = kg_upload(c, wdt, w, nc->n);
    dp_gtensor *ty = kg_upload(c, adt, b, len);
    dp_gtensor *tr = nc->in_place ? ta : kg_upload(c, adt, a, len);   /* in place: the residual stream */
    const char *defs[4];
    uint32_t nd = kg_defines(defs, act_f16, wdt, false);
    dp_dispatch d;
    uint32_t gx, gy;
    dp_dispatch_init(&d, norm_kernel(c, "norm/add_rmsnorm.comp", defs, nd, nc, &gx, &gy));
    dp_dispatch_tensor(&d, "a", ta);
    dp_dispatch_tensor(&d, "b", tb);
    dp_dispatch_tensor(&d, "w", tw);
    dp_dispatch_tensor(&d, "r", tr);
    dp_dispatch_tensor(&d, "y", ty);
    dp_dispatch_u32(&d, "rows", nc->rows);
    dp_dispatch_u32(&d, "n", nc->n);
    dp_dispatch_f32(&d, "eps", 1e-6f);
    dp_dispatch_f32(&d, "w_offset", nc->offset);
    kg_run(c, &d, gx, gy, 1);
    kg_download(tr, gr, len);
    kg_download(ty, gy_, len);

    /* r = a + b of two stored values: exact in f32 for f16 inputs, then one rounding to f16, RNE on both
    ** sides (a rounding-mode difference would show here first); for f32 it is the same f32 add. */
    for (uint64_t i = 0; i < len; i++)
        if (gr[i] != rr[i])
            fail_msg("add_rmsnorm act=%s: r[%llu] = %.8g, ref %.8g", dp_dtype_name(adt), (unsigned long long)i,
                     gr[i], rr[i]);
    char what[160];
    snprintf(what, sizeof what, "add_rmsnorm act=%s w=%s rows=%u n=%u WG=%u ROWS=%u offset=%g%s", dp_dtype_name(adt),
             dp_dtype_name(wdt), nc->rows, nc->n, nc->wg, nc->per_wg ? nc->per_wg : 1, (double)nc->offset, nc->in_place ? " in place" : "");
    check(what, gy_, ry, len, act_f16);
    dp_gtensor_release(ta);
    dp_gtensor_release(tb);
    dp_gtensor_release(tw);
    dp_gtensor_release(ty);
    if (!nc->in_place) dp_gtensor_release(tr);
    free(a); free(b); free(w); free(rr); free(ry); free(gr); free(gy_);
}

/* One dispatch of a norm kernel with the case's layout; the tensors and scalars by name. */
typedef struct named { const char *name; dp_gtensor *t; } named;

static void run_norm_kernel(kg_ctx *c, const char *file, const norm_case *nc, const char **defs, uint32_t nd,
                            const named *ts, uint32_t nts, const float *eps, const float *offs, uint32_t nnorms)
{
    dp_dispatch d;
    uint32_t gx, gy;
    dp_dispatch_init(&d, norm_kernel(c, file, defs, nd, nc, &gx, &gy));
    for (uint32_t i = 0; i < nts; i++) dp_dispatch_tensor(&d, ts[i].name, ts[i].t);
    dp_dispatch_u32(&d, "rows", nc->rows);
    dp_dispatch_u32(&d, "n", nc->n);
    if (nnorms == 1) {
        dp_dispatch_f32(&d, "eps", eps[0]);
        dp_dispatch_f32(&d, "w_offset", offs[0]);
    } else {
        dp_dispatch_f32(&d, "eps1", eps[0]);
        dp_dispatch_f32(&d, "w_offset1", offs[0]);
        dp_dispatch_f32(&d, "eps2", eps[1]);
        dp_dispatch_f32(&d, "w_offset2", offs[1]);
    }
    kg_run(c, &d, gx, gy, 1);
}

/* y = x + rmsnorm(a; w1), h = rmsnorm(y; w2). The two norms get different eps and weights (a swapped pair
** shows). Reference: an = rmsnorm(a) rounded to the activation type as stored; y = x + an rounded; y's bound
** adds one ulp of an (the GPU's an may round the other way: an absolute error that survives cancellation in
** x + an). h is checked against rmsnorm of the GPU's own y (the usual bound), and everything bit for bit
** against the unfused GPU chain. In place: y overwrites x (the residual stream). */
static void run_norm_add_norm(kg_ctx *c, const norm_case *nc, bool act_f16, dp_dtype wdt)
{
    dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    uint64_t len = (uint64_t)nc->rows * nc->n;
    float *x = malloc(len * 4), *a = malloc(len * 4), *w1 = malloc(nc->n * 4), *w2 = malloc(nc->n * 4);
    float *an = malloc(len * 4), *ry = malloc(len * 4), *rh = malloc(len * 4), *gy_ = malloc(len * 4);
    float *gh = malloc(len * 4), *cy = malloc(len * 4), *ch = malloc(len * 4);
    assert_true(x && a && w1 && w2 && an && ry && rh && gy_ && gh && cy && ch);
    kg_fill(c, x, len, 2.0f);
    kg_fill(c, a, len, 3.0f);
    kg_fill(c, w1, nc->n, 1.0f);
    kg_fill(c, w2, nc->n, 1.0f);
    kg_round(x, adt, len);
    kg_round(a, adt, len);
    kg_round(w1, wdt, nc->n);
    kg_round(w2, wdt, nc->n);
    const float eps[2] = {1e-6f, 1e-5f}, offs[2] = {nc->offset, nc->offset};
    dp_ref_rmsnorm(a, w1, an, nc->rows, nc->n, eps[0], offs[0]);
    kg_round(an, adt, len);
    for (uint64_t i = 0; i < len; i++) ry[i] = x[i] + an[i];
    kg_round(ry, adt, len);

    const char *defs[4];
    uint32_t nd = kg_defines(defs, act_f16, wdt, false);
    dp_gtensor *tx = kg_upload(c, adt, x, len), *ta = kg_upload(c, adt, a, len);
    dp_gtensor *tw1 = kg_upload(c, wdt, w1, nc->n), *tw2 = kg_upload(c, wdt, w2, nc->n);
    dp_gtensor *ty = nc->in_place ? tx : kg_upload(c, adt, a, len), *th = kg_upload(c, adt, a, len);
    named fused[] = {{"x", tx}, {"a", ta}, {"w1", tw1}, {"w2", tw2}, {"y", ty}, {"h", th}};
    run_norm_kernel(c, "norm/norm_add_norm.comp", nc, defs, nd, fused, 6, eps, offs, 2);
    kg_download(ty, gy_, len);
    kg_download(th, gh, len);

    /* the chain: an = rmsnorm(a) into a scratch, then add_rmsnorm(x, an) */
    dp_gtensor *cx = kg_upload(c, adt, x, len), *can = kg_upload(c, adt, a, len);
    dp_gtensor *cyt = nc->in_place ? cx : kg_upload(c, adt, a, len), *cht = kg_upload(c, adt, a, len);
    named n1[] = {{"x", ta}, {"w", tw1}, {"y", can}};
    run_norm_kernel(c, "norm/rmsnorm.comp", nc, defs, nd, n1, 3, eps, offs, 1);
    named n2[] = {{"a", cx}, {"b", can}, {"w", tw2}, {"r", cyt}, {"y", cht}};
    run_norm_kernel(c, "norm/add_rmsnorm.comp", nc, defs, nd, n2, 5, eps + 1, offs + 1, 1);
    kg_download(cyt, cy, len);
    kg_download(cht, ch, len);

    char what[200];
    snprintf(what, sizeof what, "norm_add_norm act=%s w=%s rows=%u n=%u WG=%u ROWS=%u offset=%g%s", dp_dtype_name(adt),
             dp_dtype_name(wdt), nc->rows, nc->n, nc->wg, nc->per_wg ? nc->per_wg : 1, (double)nc->offset,
             nc->in_place ? " in place" : "");
    for (uint64_t i = 0; i < len; i++) {
        double bound = tol(act_f16, ry[i]) + (act_f16 ? ldexp(fabs(an[i]), -10) : 0.0);
        if (!(fabs((double)gy_[i] - ry[i]) <= bound))
            fail_msg("%s: y[%llu] = %.7g, ref %.7g (bound %.3g)", what, (unsigned long long)i, gy_[i], ry[i], bound);
    }
    dp_ref_rmsnorm(gy_, w2, rh, nc->rows, nc->n, eps[1], offs[1]);
    check(what, gh, rh, len, act_f16);
    for (uint64_t i = 0; i < len; i++)
        if (memcmp(&gy_[i], &cy[i], 4) != 0 || memcmp(&gh[i], &ch[i], 4) != 0)
            fail_msg("%s: [%llu] y = %.9g, h = %.9g; unfused chain y = %.9g, h = %.9g (must be bit-identical)", what,
                     (unsigned long long)i, gy_[i], gh[i], cy[i], ch[i]);

    dp_gtensor *rel[] = {tx, ta, tw1, tw2, th, cx, can, cht, nc->in_place ? NULL : ty, nc->in_place ? NULL : cyt};
    for (size_t i = 0; i < DP_ARRAY_LEN(rel); i++) dp_gtensor_release(rel[i]);
    free(x); free(a); free(w1); free(w2); free(an); free(ry); free(rh); free(gy_); free(gh); free(cy); free(ch);
}

static const norm_case CASES[] = {
    {5, 1152, 256, 1.0f, false, 0},   /* Gemma 1B hidden rows */
    {7, 67, 64, 0.0f, false, 0},      /* odd n, several elements per invocation skipped */
    {12, 32, 32, 1.0f, true, 0},      /* q-norm: q[3, 4, 32] as 12 rows of one head, in place */
    {3, 256, 128, 1.0f, true, 0},     /* head_dim 256 */
    {2, 1000, 8, 0.0f, false, 0},     /* a workgroup as small as lavapipe's subgroup */
    {70001, 8, 8, 1.0f, false, 0},    /* more rows than one grid dimension holds: (65535, 2) groups */
    /* several rows per workgroup (ROWS): lanes per row below, at and above the subgroup size, dead rows in
    ** the last workgroup, rows longer than the register cache (8 elements per lane) */
    {13, 256, 256, 1.0f, true, 4},    /* q-norm, head_dim 256, 64 lanes a row */
    {9, 16, 64, 0.0f, false, 8},      /* 8 lanes a row */
    {21, 32, 64, 1.0f, true, 16},     /* 4 lanes a row, 8 elements each */
    {5, 1152, 256, 1.0f, false, 2},   /* hidden rows, 128 lanes a row */
    {3, 3001, 128, 0.0f, false, 1},   /* past the register cache */
    {70001, 8, 64, 1.0f, false, 32},  /* (2188, 1) groups of 32 rows */
};

static void test_rmsnorm(void **state)
{
    kg_ctx *c = *state;
    for (size_t i = 0; i < DP_ARRAY_LEN(CASES); i++)
        for (int act = 0; act < 2; act++) {
            run_rmsnorm(c, &CASES[i], act, DP_F32);
            run_rmsnorm(c, &CASES[i], act, DP_F16);
            run_rmsnorm(c, &CASES[i], act, DP_BF16);
        }
}

static void test_add_rmsnorm(void **state)
{
    kg_ctx *c = *state;
    for (size_t i = 0; i < DP_ARRAY_LEN(CASES); i++)
        for (int act = 0; act < 2; act++) {
            run_add_rmsnorm(c, &CASES[i], act, DP_F32);
            run_add_rmsnorm(c, &CASES[i], act, DP_BF16);
        }
}

static void test_norm_add_norm(void **state)
{
    kg_ctx *c = *state;
    for (size_t i = 0; i < DP_ARRAY_LEN(CASES); i++)
        for (int act = 0; act < 2; act++) {
            run_norm_add_norm(c, &CASES[i], act, DP_F32);
            run_norm_add_norm(c, &CASES[i], act, DP_BF16);
        }
}

/* The reference itself against a hand-computed row: x = (1, 2, 3, 4), eps 0: rms = sqrt(7.5). */
static void test_ref_by_hand(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, w[4] = {0, 1, -1, 0.5f}, y[4];
    dp_ref_rmsnorm(x, w, y, 1, 4, 0.0f, 1.0f);
    double inv = 1.0 / sqrt(7.5);
    double want[4] = {1 * inv * 1, 2 * inv * 2, 3 * inv * 0, 4 * inv * 1.5};
    for (int i = 0; i < 4; i++) assert_true(fabs(y[i] - want[i]) < 1e-6);
    dp_ref_rmsnorm(x, w, y, 1, 4, 0.0f, 0.0f);
    assert_true(fabs(y[1] - 2 * inv) < 1e-6 && y[0] == 0.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_by_hand),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_add_rmsnorm),
        cmocka_unit_test(test_norm_add_norm),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
