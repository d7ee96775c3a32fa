/*
** tests/unit/test_k_rope_kv.c: shaders/rope/rope_kv.comp (the fusion rope_kv: q/k RMSNorm per head, RoPE on
** q and k, KV-cache append of k and v, in one dispatch) on lavapipe, two ways:
**   against core/ref (dp_ref_rmsnorm, rounded to the activation type as rmsnorm stores it; dp_ref_rope,
**   rounded again; dp_ref_kv_append), within the bounds below;
**   against the chain it replaces run on the GPU (rmsnorm.comp on q and on k with doppler.lower's layout,
**   rope.comp on q and on k, kv_append.comp): bit-identical q, k and caches, since the fused kernel keeps
**   every rounding point and rmsnorm's reduction order.
** Cases: Gemma 3 1B (Hq 4, Hkv 1, D 256, (1 + w) norm), Qwen 3 shapes (plain w norm, D 128), Llama
** (no norm, D 64, GQA 4), Phi-3 (q, k, v as column slices of one fused projection, no norm, partial rotary),
** several tokens (prefill-sized T where the append is allowed), a ring buffer that wraps (pos past cap), a
** call whose early tokens lose their slot to later ones (not appended), f32/f16 activations and KV, weights
** f32/bf16. Cache slots not written must keep their old values (caches start random).
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
#include "k_qkv.h"

typedef struct rkv_case {
    uint32_t T, Hq, Hkv, D, rot, cap, pos0;
    bool     norm;
    float    offset;
    bool     strided;
    bool     act_f16, kv_f16;
    dp_dtype wdt;
    double   theta;
} rkv_case;

/* Bound against the CPU reference. The GPU's f32 sum of squares and inversesqrt differ from the reference's
** by ~1e-6 relative; the normed value is then rounded to the activation type, which for f16 can land one
** ulp (2^-10 relative at most, RTZ allowed) away from the reference's rounding; rope mixes two such values
** (|y| <= sqrt(2) |x|) with cos/sin good to a few 1e-6 (test_k_rope.c) and rounds once more. So f32: 1e-4
** (a wrong weight, eps, pair or angle moves outputs by >= 1e-2 here); f16: plus 2^-9 |y| for the two roundings
** and one ulp of the normed input carried through the rotation. */
static double tol(bool f16, double y) { return 1e-4 + (f16 ? ldexp(fabs(y), -9) + ldexp(1.0, -10) : 0.0); }

static uint32_t pow2_at_least(uint32_t n, uint32_t lo, uint32_t hi)
{
    uint32_t p = lo;
    while (p < n && p < hi) p *= 2;
    return p;
}

/* doppler.lower's rmsnorm layout (lower/base.lua, norm_layout) for `rows` rows of d elements: lanes per row
** and rows per workgroup. */
static void norm_layout(uint32_t d, uint32_t rows, uint32_t *lanes, uint32_t *per)
{
    *lanes = pow2_at_least((d + 3) / 4, 8, 256);
    uint32_t a = 256 / *lanes, b = pow2_at_least(rows, 1, 256);
    *per = a < b ? a : b;
}

static dp_kernel *kernel(kg_ctx *c, const char *file, const char **defs, uint32_t nd, const dp_kconst *k,
                         uint32_t nk)
{
    dp_kernel_desc kd = {.file = file, .defines = defs, .n_defines = nd, .constants = k, .n_constants = nk};
    dp_kernel *out = NULL;
    dp_err e = {0};
    if (dp_kernel_get(c->dev, &kd, &out, &e) != DP_OK) fail_msg("kernel %s: %s", file, e.msg);
    return out;
}

typedef kqkv_bufs bufs;

static bufs bufs_make(kg_ctx *c, const rkv_case *rc, const float *q, const float *k, const float *v,
                      const float *kc, const float *vc)
{
    const kqkv_shape s = {rc->T, rc->Hq, rc->Hkv, rc->D, rc->cap, rc->act_f16, rc->kv_f16, rc->strided};
    return kqkv_make(c, &s, q, k, v, kc, vc);
}

static void bufs_read(const rkv_case *rc, const bufs *b, float *q, float *k)
{
    uint32_t T = rc->T, nq = rc->Hq * rc->D, nk = rc->Hkv * rc->D;
    if (!rc->strided) {
        kg_download(b->q, q, (uint64_t)T * nq);
        kg_download(b->k, k, (uint64_t)T * nk);
        return;
    }
    uint32_t row = nq + 2 * nk;
    float *f = malloc((uint64_t)T * row * 4);
    assert_non_null(f);
    kg_download(b->fused, f, (uint64_t)T * row);
    for (uint32_t t = 0; t < T; t++) {
        memcpy(q + (uint64_t)t * nq, f + (uint64_t)t * row, nq * 4);
        memcpy(k + (uint64_t)t * nk, f + (uint64_t)t * row + nq, nk * 4);
    }
    free(f);
}

#define bufs_free kqkv_free

static uint32_t defines(const char **defs, const rkv_case *rc, bool with_w)
{
    return kg_defines(defs, rc->act_f16, with_w ? (int)rc->wdt : -1, rc->kv_f16);
}

static void run_fused(kg_ctx *c, const rkv_case *rc, bufs *b, dp_gtensor *tp, dp_gtensor *tf, dp_gtensor *tqw,
                      dp_gtensor *tkw)
{
    const char *defs[6];
    uint32_t nd = defines(defs, rc, rc->norm), lanes, per;
    if (rc->norm) defs[nd++] = "DP_QK_NORM";
    norm_layout(rc->D, 1, &lanes, &per);
    dp_kconst k[2] = {{"WG", lanes}, {"D", rc->D}};
    dp_dispatch d;
    dp_dispatch_init(&d, kernel(c, "rope/rope_kv.comp", defs, nd, k, 2));
    dp_dispatch_tensor(&d, "q", b->q);
    dp_dispatch_tensor(&d, "k", b->k);
    dp_dispatch_tensor(&d, "v", b->v);
    dp_dispatch_tensor(&d, "kc", b->kc);
    dp_dispatch_tensor(&d, "vc", b->vc);
    dp_dispatch_tensor(&d, "pos", tp);
    dp_dispatch_tensor(&d, "inv_freq", tf);
    if (rc->norm) {
        dp_dispatch_tensor(&d, "qw", tqw);
        dp_dispatch_tensor(&d, "kw", tkw);
        dp_dispatch_f32(&d, "eps", 1e-6f);
        dp_dispatch_f32(&d, "w_offset", rc->offset);
    }
    dp_dispatch_u32(&d, "n_tokens", rc->T);
    dp_dispatch_u32(&d, "n_q_heads", rc->Hq);
    dp_dispatch_u32(&d, "n_kv_heads", rc->Hkv);
    dp_dispatch_u32(&d, "cap", rc->cap);
    dp_dispatch_u32(&d, "rot_dim", rc->rot);
    dp_dispatch_u32(&d, "q_stride", b->q_stride);
    dp_dispatch_u32(&d, "kv_stride", b->kv_stride);
    kg_run(c, &d, rc->Hq + rc->Hkv, rc->T, 1);
}

/* The unfused chain, as doppler.lower records it without the fusion. */
static void run_chain(kg_ctx *c, const rkv_case *rc, bufs *b, dp_gtensor *tp, dp_gtensor *tf, dp_gtensor *tqw,
                      dp_gtensor *tkw)
{
    const char *defs[6];
    uint32_t nd;
    for (int which = 0; which < 2 && rc->norm; which++) {
        uint32_t rows = rc->T * (which ? rc->Hkv : rc->Hq), lanes, per;
        norm_layout(rc->D, rows, &lanes, &per);
        nd = defines(defs, rc, true);
        dp_kconst k[2] = {{"WG", lanes * per}, {"ROWS", per}};
        dp_dispatch d;
        dp_dispatch_init(&d, kernel(c, "norm/rmsnorm.comp", defs, nd, k, 2));
        dp_gtensor *x = which ? b->k : b->q;
        dp_dispatch_tensor(&d, "x", x);
        dp_dispatch_tensor(&d, "w", which ? tkw : tqw);
        dp_dispatch_tensor(&d, "y", x);
        dp_dispatch_u32(&d, "rows", rows);
        dp_dispatch_u32(&d, "n", rc->D);
        dp_dispatch_f32(&d, "eps", 1e-6f);
        dp_dispatch_f32(&d, "w_offset", rc->offset);
        kg_run(c, &d, (rows + per - 1) / per, 1, 1);
    }
    nd = defines(defs, rc, false);
    for (int which = 0; which < 2; which++) {
        uint32_t H = which ? rc->Hkv : rc->Hq, gx, gy;
        dp_dispatch d;
        dp_dispatch_init(&d, kg_kernel(c, "rope/rope.comp", defs, nd, 256));
        dp_dispatch_tensor(&d, "x", which ? b->k : b->q);
        dp_dispatch_tensor(&d, "pos", tp);
        dp_dispatch_tensor(&d, "inv_freq", tf);
        dp_dispatch_u32(&d, "n_tokens", rc->T);
        dp_dispatch_u32(&d, "n_heads", H);
        dp_dispatch_u32(&d, "head_dim", rc->D);
        dp_dispatch_u32(&d, "rot_dim", rc->rot);
        dp_dispatch_u32(&d, "x_stride", which ? b->kv_stride : b->q_stride);
        kg_groups_1d((uint64_t)rc->T * H * rc->rot / 2, 256, &gx, &gy);
        kg_run(c, &d, gx, gy, 1);
    }
    uint32_t gx, gy;
    dp_dispatch d;
    dp_dispatch_init(&d, kg_kernel(c, "attention/kv_append.comp", defs, nd, 256));
    dp_dispatch_tensor(&d, "k", b->k);
    dp_dispatch_tensor(&d, "v", b->v);
    dp_dispatch_tensor(&d, "kc", b->kc);
    dp_dispatch_tensor(&d, "vc", b->vc);
    dp_dispatch_tensor(&d, "pos", tp);
    dp_dispatch_u32(&d, "n_tokens", rc->T);
    dp_dispatch_u32(&d, "n_kv_heads", rc->Hkv);
    dp_dispatch_u32(&d, "head_dim", rc->D);
    dp_dispatch_u32(&d, "cap", rc->cap);
    dp_dispatch_u32(&d, "kv_stride", b->kv_stride);
    kg_groups_1d((uint64_t)rc->T * rc->Hkv * rc->D, 256, &gx, &gy);
    kg_run(c, &d, gx, gy, 1);
}

static void check_near(const char *what, const char *name, const float *got, const float *ref, uint64_t n, bool f16)
{
    double worst = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - ref[i]);
        if (!(diff <= tol(f16, ref[i])))
            fail_msg("%s: %s[%llu] = %.7g, ref %.7g (diff %.3g > %.3g)", what, name, (unsigned long long)i, got[i],
                     ref[i], diff, tol(f16, ref[i]));
        if (diff / tol(f16, ref[i]) > worst) worst = diff / tol(f16, ref[i]);
    }
    print_message("  %s: %s worst err/tol %.3f\n", what, name, worst);
}

static void check_same(const char *what, const char *name, const float *got, const float *want, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], 4) != 0)
            fail_msg("%s: %s[%llu] = %.9g, unfused chain %.9g (must be bit-identical)", what, name,
                     (unsigned long long)i, got[i], want[i]);
}

static void run_case(kg_ctx *c, const rkv_case *rc)
{
    dp_dtype adt = rc->act_f16 ? DP_F16 : DP_F32, kvt = rc->kv_f16 ? DP_F16 : DP_F32;
    uint32_t T = rc->T, D = rc->D;
    uint64_t nq = (uint64_t)T * rc->Hq * D, nk = (uint64_t)T * rc->Hkv * D, nc = (uint64_t)rc->Hkv * rc->cap * D;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *kc = malloc(nc * 4), *vc = malloc(nc * 4);
    float *rq = malloc(nq * 4), *rk = malloc(nk * 4), *rkc = malloc(nc * 4), *rvc = malloc(nc * 4);
    float *gq = malloc(nq * 4), *gk = malloc(nk * 4), *gkc = malloc(nc * 4), *gvc = malloc(nc * 4);
    float *cq = malloc(nq * 4), *ck = malloc(nk * 4), *ckc = malloc(nc * 4), *cvc = malloc(nc * 4);
    float qw[256], kw[256], freq[128];
    uint32_t pos[64];
    dp_err e = {0};
    assert_true(q && k && v && kc && vc && rq && rk && rkc && rvc && gq && gk && gkc && gvc && cq && ck && ckc && cvc);
    assert_true(D <= 256 && T <= 64);
    kg_fill(c, q, nq, 2.0f);
    kg_fill(c, k, nk, 2.0f);
    kg_fill(c, v, nk, 1.0f);
    kg_fill(c, kc, nc, 1.0f);
    kg_fill(c, vc, nc, 1.0f);
    kg_fill(c, qw, D, 1.0f);
    kg_fill(c, kw, D, 1.0f);
    kg_round(q, adt, nq);
    kg_round(k, adt, nk);
    kg_round(v, adt, nk);
    kg_round(kc, kvt, nc);
    kg_round(vc, kvt, nc);
    kg_round(qw, rc->wdt, D);
    kg_round(kw, rc->wdt, D);
    for (uint32_t t = 0; t < T; t++) pos[t] = rc->pos0 + t;
    assert_int_equal(dp_rope_inv_freq(rc->theta, rc->rot, NULL, freq, &e), DP_OK);

    /* reference: norm (stored: rounded), rope (stored: rounded), append */
    memcpy(rq, q, nq * 4);
    memcpy(rk, k, nk * 4);
    if (rc->norm) {
        dp_ref_rmsnorm(rq, qw, rq, T * rc->Hq, D, 1e-6f, rc->offset);
        dp_ref_rmsnorm(rk, kw, rk, T * rc->Hkv, D, 1e-6f, rc->offset);
        kg_round(rq, adt, nq);
        kg_round(rk, adt, nk);
    }
    dp_ref_rope(rq, T, rc->Hq, D, rc->rot, pos, freq);
    dp_ref_rope(rk, T, rc->Hkv, D, rc->rot, pos, freq);
    kg_round(rq, adt, nq);
    kg_round(rk, adt, nk);
    memcpy(rkc, kc, nc * 4);
    memcpy(rvc, vc, nc * 4);
    dp_attn_params prm = {.n_tokens = T, .n_q_heads = rc->Hq, .n_kv_heads = rc->Hkv, .head_dim = D,
                          .cap = rc->cap, .kv_f16 = rc->kv_f16};
    dp_ref_kv_append(&prm, rk, v, pos, rkc, rvc);

    dp_gtensor *tp = kg_upload_u32(c, pos, T), *tf = kg_upload(c, DP_F32, freq, rc->rot / 2);
    dp_gtensor *tqw = kg_upload(c, rc->wdt, qw, D), *tkw = kg_upload(c, rc->wdt, kw, D);
    bufs fb = bufs_make(c, rc, q, k, v, kc, vc), cb = bufs_make(c, rc, q, k, v, kc, vc);
    run_fused(c, rc, &fb, tp, tf, tqw, tkw);
    run_chain(c, rc, &cb, tp, tf, tqw, tkw);
    bufs_read(rc, &fb, gq, gk);
    bufs_read(rc, &cb, cq, ck);
    kg_download(fb.kc, gkc, nc);
    kg_download(fb.vc, gvc, nc);
    kg_download(cb.kc, ckc, nc);
    kg_download(cb.vc, cvc, nc);

    char what[200];
    snprintf(what, sizeof what, "rope_kv T=%u Hq=%u Hkv=%u D=%u rot=%u cap=%u pos0=%u norm=%d off=%g%s act=%s kv=%s w=%s",
             T, rc->Hq, rc->Hkv, D, rc->rot, rc->cap, rc->pos0, rc->norm, (double)rc->offset,
             rc->strided ? " strided" : "", dp_dtype_name(adt), dp_dtype_name(kvt), dp_dtype_name(rc->wdt));
    check_near(what, "q", gq, rq, nq, rc->act_f16);
    check_near(what, "k", gk, rk, nk, rc->act_f16);
    check_near(what, "kc", gkc, rkc, nc, rc->act_f16 || rc->kv_f16);
    for (uint64_t i = 0; i < nc; i++)   /* v is copied: act -> KV conversion only, exact on both sides */
        if (gvc[i] != rvc[i]) fail_msg("%s: vc[%llu] = %.8g, ref %.8g", what, (unsigned long long)i, gvc[i], rvc[i]);
    check_same(what, "q", gq, cq, nq);
    check_same(what, "k", gk, ck, nk);
    check_same(what, "kc", gkc, ckc, nc);
    check_same(what, "vc", gvc, cvc, nc);

    bufs_free(&fb);
    bufs_free(&cb);
    dp_gtensor_release(tp);
    dp_gtensor_release(tf);
    dp_gtensor_release(tqw);
    dp_gtensor_release(tkw);
    free(q); free(k); free(v); free(kc); free(vc); free(rq); free(rk); free(rkc); free(rvc);
    free(gq); free(gk); free(gkc); free(gvc); free(cq); free(ck); free(ckc); free(cvc);
}

static void test_rope_kv(void **state)
{
    kg_ctx *c = *state;
    const rkv_case cases[] = {
        /* T  Hq Hkv  D  rot cap  pos0  norm offset strided act16  kv16  w       theta */
        {1, 4, 1, 256, 256, 640, 700, true, 1.0f, false, true, true, DP_BF16, 10000.0},   /* Gemma 1B decode, ring wrapped */
        {1, 4, 1, 256, 256, 640, 700, true, 1.0f, false, false, false, DP_F32, 10000.0},  /* the f32 mode */
        {3, 8, 2, 128, 128, 64, 5, true, 0.0f, false, true, true, DP_F16, 1e6},          /* Qwen 3 norm, a prefill */
        {5, 8, 2, 128, 128, 4, 9, true, 0.0f, false, false, true, DP_F32, 1e6},          /* slots reused in the call */
        {1, 32, 8, 64, 64, 100, 31, false, 0.0f, false, true, true, DP_F32, 500000.0},   /* Llama decode */
        {4, 32, 8, 64, 64, 100, 31, false, 0.0f, false, false, false, DP_F32, 500000.0}, /* Llama, f32 */
        {2, 4, 4, 96, 48, 40, 17, false, 0.0f, true, true, true, DP_F32, 10000.0},       /* Phi-3: strided, partial */
        {2, 6, 2, 67, 66, 20, 3, true, 1.0f, false, true, false, DP_BF16, 10000.0},      /* odd D, D > 4 lanes */
    };
    for (size_t i = 0; i < DP_ARRAY_LEN(cases); i++) run_case(c, &cases[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_kv),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
