/*
** tests/unit/test_k_prenorm.c: the prenorm prologue (shaders/include/dp_prenorm.glsl) of matmul/gemv.comp and
** fused/gemv_multi.comp (both modes) against the unfused chain on lavapipe, bit for bit: the norm kernel
** (norm/rmsnorm.comp, add_rmsnorm.comp, norm_add_norm.comp with the planner's layout: NL lanes, one row)
** followed by the GEMV with WG = GW, versus the GEMV with DP_PRENORM_* (WG = max(GW, NL), TEAMS = WG / GW).
** The GEMV outputs and, for add / norm_add_norm, the residual y (written by workgroup 0 alone, over a sentinel)
** must be identical. Cases: f16 and f32 activations; f32, f16 and bf16 norm weights; K on the vector path
** (640), odd K on the element path (67: NL = 32 < GW, several norm groups per workgroup) and past the
** norms' register cache (2104: elements re-read); GW = 64 and 128 (up to four teams); row counts that leave
** a team past the end; T = 1 (the only T the prologue takes).
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "k_gpu.h"

typedef enum pn_kind { PN_RMS, PN_ADD, PN_NAN } pn_kind;
typedef enum pn_gemv { G_PLAIN, G_QKV, G_GLU } pn_gemv;

static const char *const PN_DEF[] = {"DP_PRENORM_RMS", "DP_PRENORM_ADD", "DP_PRENORM_NAN"};
static const char *const NORM_FILE[] = {"norm/rmsnorm.comp", "norm/add_rmsnorm.comp", "norm/norm_add_norm.comp"};

static const char *wdef(dp_dtype w) { return w == DP_F32 ? "DP_W_F32" : w == DP_F16 ? "DP_W_F16" : "DP_W_BF16"; }

/* lower.lua's norm_layout for one row: lanes = the power of two >= ceil(K / 4), within [8, 256]. */
static uint32_t norm_lanes(uint32_t K)
{
    uint32_t l = 8;
    while (l < (K + 3) / 4 && l < 256) l *= 2;
    return l;
}

static dp_kernel *kernel(kg_ctx *c, const char *file, const char **defs, uint32_t nd, const dp_kconst *k, uint32_t nk)
{
    dp_kernel_desc kd = {.file = file, .defines = defs, .n_defines = nd, .constants = k, .n_constants = nk};
    dp_kernel *out = NULL;
    dp_err e = {0};
    if (dp_kernel_get(c->dev, &kd, &out, &e) != DP_OK) fail_msg("kernel %s: %s", file, e.msg);
    return out;
}

static dp_gtensor *rand_tensor(kg_ctx *c, dp_dtype dt, uint64_t n, float scale)
{
    float *v = malloc(sizeof(float) * n);
    assert_non_null(v);
    kg_fill(c, v, n, scale);
    dp_gtensor *t = kg_upload(c, dt, v, n);
    free(v);
    return t;
}

static dp_gtensor *sentinel(kg_ctx *c, dp_dtype dt, uint64_t n)
{
    float *v = malloc(sizeof(float) * n);
    assert_non_null(v);
    for (uint64_t i = 0; i < n; i++) v[i] = 7.0f;
    dp_gtensor *t = kg_upload(c, dt, v, n);
    free(v);
    return t;
}

static void same(const dp_gtensor *got, const dp_gtensor *want, uint64_t n, const char *what)
{
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    assert_true(a && b);
    kg_download(got, a, n);
    kg_download(want, b, n);
    for (uint64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
            fail_msg("%s: [%llu] = %.9g, unfused %.9g", what, (unsigned long long)i, a[i], b[i]);
    free(a);
    free(b);
}

typedef struct pcase {
    pn_kind kind;
    pn_gemv gemv;
    bool act_f16;
    dp_dtype w, nw;      /* GEMV weights, norm weights */
    uint32_t K, gw, rows;
    uint32_t N[3];       /* plain / GLU: N[0]; QKV: N0..N2 (N2 = 0: a pair) */
} pcase;

static void run_case(kg_ctx *c, const pcase *pc)
{
    const dp_dtype adt = pc->act_f16 ? DP_F16 : DP_F32;
    const uint32_t K = pc->K, nl = norm_lanes(K), wg = pc->gw > nl ? pc->gw : nl, teams = wg / pc->gw;
    const uint32_t nout = pc->gemv == G_QKV ? 3 : 1;
    char what[160];
    snprintf(what, sizeof what, "%s %s act=%s w=%s nw=%s K=%u GW=%u ROWS=%u", PN_DEF[pc->kind],
             pc->gemv == G_PLAIN ? "gemv" : pc->gemv == G_QKV ? "qkv" : "glu", dp_dtype_name(adt),
             dp_dtype_name(pc->w), dp_dtype_name(pc->nw), K, pc->gw, pc->rows);

    /* inputs: x (the norm's row), xb (b of add_rmsnorm / a of norm_add_norm), norm weights */
    dp_gtensor *x = rand_tensor(c, adt, K, 2.0f), *xb = rand_tensor(c, adt, K, 3.0f);
    dp_gtensor *w1 = rand_tensor(c, pc->nw, K, 0.5f), *w2 = rand_tensor(c, pc->nw, K, 0.5f);
    const float eps1 = 1e-6f, off1 = 1.0f, eps = pc->kind == PN_RMS ? 1e-5f : 1e-6f;
    const float off = pc->kind == PN_NAN ? 1.0f : 0.0f;
    /* GEMV weights and outputs */
    uint32_t N[3] = {pc->N[0], pc->N[1], pc->N[2]}, rows_total = 0;
    dp_gtensor *w[3] = {0}, *yu[3] = {0}, *yf[3] = {0};
    const uint32_t nw = pc->gemv == G_QKV ? 3 : pc->gemv == G_GLU ? 2 : 1;
    for (uint32_t i = 0; i < nw; i++) {
        const uint32_t n = pc->gemv == G_QKV ? N[i] : N[0];
        w[i] = rand_tensor(c, pc->w, (uint64_t)(n ? n : 1) * K, 0.1f);
    }
    for (uint32_t i = 0; i < nout; i++) {
        const uint32_t n = N[i] ? N[i] : 1;
        yu[i] = sentinel(c, adt, n);
        yf[i] = sentinel(c, adt, n);
        rows_total += N[i];
    }
    dp_gtensor *h = sentinel(c, adt, K), *ru = sentinel(c, adt, K), *rf = sentinel(c, adt, K);

    /* the unfused chain: norm kernel (NL lanes, one row), then the GEMV with WG = GW */
    const char *ndefs[2];
    uint32_t nnd = kg_defines(ndefs, pc->act_f16, pc->nw, false);
    const dp_kconst nk[] = {{"WG", nl}, {"ROWS", 1}};
    dp_kernel *knorm = kernel(c, NORM_FILE[pc->kind], ndefs, nnd, nk, 2);
    dp_dispatch dn;
    dp_dispatch_init(&dn, knorm);
    dp_dispatch_u32(&dn, "rows", 1);
    dp_dispatch_u32(&dn, "n", K);
    if (pc->kind == PN_RMS) {
        dp_dispatch_tensor(&dn, "x", x);
        dp_dispatch_tensor(&dn, "w", w2);
        dp_dispatch_tensor(&dn, "y", h);
        dp_dispatch_f32(&dn, "eps", eps);
        dp_dispatch_f32(&dn, "w_offset", off);
    } else if (pc->kind == PN_ADD) {
        dp_dispatch_tensor(&dn, "a", x);
        dp_dispatch_tensor(&dn, "b", xb);
        dp_dispatch_tensor(&dn, "w", w2);
        dp_dispatch_tensor(&dn, "r", ru);
        dp_dispatch_tensor(&dn, "y", h);
        dp_dispatch_f32(&dn, "eps", eps);
        dp_dispatch_f32(&dn, "w_offset", off);
    } else {
        dp_dispatch_tensor(&dn, "x", x);
        dp_dispatch_tensor(&dn, "a", xb);
        dp_dispatch_tensor(&dn, "w1", w1);
        dp_dispatch_tensor(&dn, "w2", w2);
        dp_dispatch_tensor(&dn, "y", ru);
        dp_dispatch_tensor(&dn, "h", h);
        dp_dispatch_f32(&dn, "eps1", eps1);
        dp_dispatch_f32(&dn, "w_offset1", off1);
        dp_dispatch_f32(&dn, "eps2", eps);
        dp_dispatch_f32(&dn, "w_offset2", off);
    }

    const char *file = pc->gemv == G_PLAIN ? "matmul/gemv.comp" : "fused/gemv_multi.comp";
    const char *gdefs[6];
    uint32_t ngd = 0;
    if (pc->act_f16) gdefs[ngd++] = "DP_ACT_F16";
    gdefs[ngd++] = wdef(pc->w);
    if (pc->gemv == G_GLU) gdefs[ngd++] = "DP_GLU";
    const dp_kconst gu[] = {{"WG", pc->gw}, {"ROWS", pc->rows}, {"TT", 1}};
    dp_kernel *kplain = kernel(c, file, gdefs, ngd, gu, 3);
    gdefs[ngd++] = PN_DEF[pc->kind];
    if (pc->nw == DP_F16) gdefs[ngd++] = "DP_NW_F16";
    else if (pc->nw == DP_BF16) gdefs[ngd++] = "DP_NW_BF16";
    const dp_kconst gf[] = {{"WG", wg}, {"ROWS", pc->rows}, {"TT", 1}, {"GW", pc->gw}, {"NL", nl}, {"KMAX", K}};
    dp_kernel *kfused = kernel(c, file, gdefs, ngd, gf, 6);

    dp_dispatch du, df;
    dp_dispatch_init(&du, kplain);
    dp_dispatch_init(&df, kfused);
    dp_dispatch *both[2] = {&du, &df};
    dp_gtensor **ys[2] = {yu, yf};
    for (int j = 0; j < 2; j++) {
        dp_dispatch *d = both[j];
        dp_dispatch_tensor(d, "x", j == 0 ? h : x);
        dp_dispatch_u32(d, "T", 1);
        dp_dispatch_u32(d, "K", K);
        dp_dispatch_u32(d, "x_stride", 0);
        if (pc->gemv == G_PLAIN) {
            dp_dispatch_tensor(d, "w", w[0]);
            dp_dispatch_tensor(d, "y", ys[j][0]);
            dp_dispatch_u32(d, "N", N[0]);
            dp_dispatch_u32(d, "y_stride", 0);
        } else if (pc->gemv == G_GLU) {
            dp_dispatch_tensor(d, "wg", w[0]);
            dp_dispatch_tensor(d, "wu", w[1]);
            dp_dispatch_tensor(d, "y", ys[j][0]);
            dp_dispatch_u32(d, "N", N[0]);
            dp_dispatch_u32(d, "kind", pc->K % 2);   /* gelu_tanh or silu */
        } else {
            static const char *wn[3] = {"w0", "w1", "w2"}, *yn[3] = {"y0", "y1", "y2"}, *nn[3] = {"N0", "N1", "N2"};
            for (uint32_t i = 0; i < 3; i++) {
                dp_dispatch_tensor(d, wn[i], w[i]);
                dp_dispatch_tensor(d, yn[i], ys[j][i]);
                dp_dispatch_u32(d, nn[i], N[i]);
            }
        }
    }
    if (pc->kind == PN_RMS) {
        dp_dispatch_tensor(&df, "pn_w", w2);
    } else if (pc->kind == PN_ADD) {
        dp_dispatch_tensor(&df, "pn_b", xb);
        dp_dispatch_tensor(&df, "pn_w", w2);
        dp_dispatch_tensor(&df, "pn_y", rf);
    } else {
        dp_dispatch_tensor(&df, "pn_a", xb);
        dp_dispatch_tensor(&df, "pn_w1", w1);
        dp_dispatch_tensor(&df, "pn_w", w2);
        dp_dispatch_tensor(&df, "pn_y", rf);
        dp_dispatch_f32(&df, "pn_eps1", eps1);
        dp_dispatch_f32(&df, "pn_off1", off1);
    }
    dp_dispatch_f32(&df, "pn_eps", eps);
    dp_dispatch_f32(&df, "pn_off", off);

    const uint32_t nrows = pc->gemv == G_QKV ? rows_total : N[0];
    const uint32_t nb = (nrows + pc->rows - 1) / pc->rows, nbf = (nb + teams - 1) / teams;
    dp_err e = {0};
    if (dp_recorder_begin(c->rec, &e) != DP_OK || dp_recorder_dispatch(c->rec, &dn, 1, 1, 1, &e) != DP_OK ||
        dp_recorder_dispatch(c->rec, &du, nb, 1, 1, &e) != DP_OK ||
        dp_recorder_dispatch(c->rec, &df, nbf, 1, 1, &e) != DP_OK || dp_recorder_submit(c->rec, &e) != DP_OK)
        fail_msg("%s: %s", what, e.msg);

    char w2s[200];
    for (uint32_t i = 0; i < nout; i++) {
        if (N[i] == 0) continue;
        snprintf(w2s, sizeof w2s, "%s: output %u", what, i);
        same(yf[i], yu[i], N[i], w2s);
    }
    if (pc->kind != PN_RMS) {
        snprintf(w2s, sizeof w2s, "%s: residual y", what);
        same(rf, ru, K, w2s);
    }
    dp_gtensor_release(x); dp_gtensor_release(xb); dp_gtensor_release(w1); dp_gtensor_release(w2);
    dp_gtensor_release(h); dp_gtensor_release(ru); dp_gtensor_release(rf);
    for (uint32_t i = 0; i < 3; i++) {
        dp_gtensor_release(w[i]);
        dp_gtensor_release(yu[i]);
        dp_gtensor_release(yf[i]);
    }
}

static void run_all(kg_ctx *c, pn_gemv g, const uint32_t N[3])
{
    static const uint32_t Ks[] = {640, 67, 2104};
    static const dp_dtype nws[] = {DP_F32, DP_F16, DP_BF16};
    int v = 0;
    for (int kind = PN_RMS; kind <= PN_NAN; kind++)
        for (size_t ki = 0; ki < DP_ARRAY_LEN(Ks); ki++)
            for (int a = 0; a < 2; a++, v++) {
                pcase pc = {.kind = (pn_kind)kind, .gemv = g, .act_f16 = a != 0, .w = (v % 3) ? DP_F16 : DP_BF16,
                            .nw = nws[v % 3], .K = Ks[ki], .gw = (v % 2) ? 64 : 128, .rows = 2 + (uint32_t)(v % 2),
                            .N = {N[0], N[1], N[2]}};
                if (a == 0 && ki == 1) pc.w = DP_F32;   /* f32 weights (element x loads with f16 activations) */
                run_case(c, &pc);
            }
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

static void test_gemv(void **state)
{
    static const uint32_t N[3] = {37, 0, 0};
    run_all(*state, G_PLAIN, N);
}

static void test_qkv(void **state)
{
    static const uint32_t N3[3] = {33, 8, 8}, N2[3] = {21, 13, 0};
    run_all(*state, G_QKV, N3);
    run_all(*state, G_QKV, N2);
}

static void test_glu(void **state)
{
    static const uint32_t N[3] = {45, 0, 0};
    run_all(*state, G_GLU, N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_qkv),
        cmocka_unit_test(test_glu),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
