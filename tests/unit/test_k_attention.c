/*
** tests/unit/test_k_attention.c: shaders/attention/kv_append.comp and attention.comp on lavapipe.
** For each case a sequence of L tokens (random q, k, v) goes through the GPU twice:
**   prefill: in chunks of T tokens (attention, then kv_append), compared per chunk with dp_ref_attention and
**            the GPU caches compared with dp_ref_kv_append's after every append;
**   decode:  one token at a time (kv_append, then attention), compared with the prefill outputs.
** The reference itself is checked against a naive attention over the whole sequence with HF's mask written
** out (j <= p, and p - W < j for sliding layers), so the ring-buffer bookkeeping is checked independently.
** Cases cover GQA ratios 1, 2, 4; head_dim 16, 32, 64, 256; windows crossed by a chunk (T > W); ring
** buffers that wrap (positions > cap); softcap on/off; f32/f16 activations and KV caches; several key blocks
** per query (online-softmax rescaling). Caches start as NaN so that reading a slot that is not visible, or
** not written yet, poisons the output.
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

typedef struct attn_case {
    uint32_t Hq, Hkv, D, window, cap, L;
    float    softcap;
    bool     act_f16, kv_f16;
    uint32_t wg;
    uint32_t chunks[8];    /* prefill chunk sizes, summing to L; 0 ends the list */
} attn_case;

/* Bound for GPU vs reference. Both read identical stored values (inputs rounded to the activation type; K/V
** rounded to the KV type by both sides, RNE; the caches are compared bit for bit below). What remains:
** f32 arithmetic order in the dot products (D <= 256 terms of |q k| <= 1: ~1e-6 relative), exp, and the
** online-softmax rescaling, against the reference's double sums: ~1e-6 on outputs that are convex
** combinations of |v| <= 1. 1e-4 is the f32 bound; a wrong key (mask off by one, wrong slot, wrong head)
** moves outputs by >= ~1e-2 with these sizes. f16 output: plus one rounding, 2^-10 |o|. */
static double tol(bool f16, double y) { return 1e-4 + (f16 ? ldexp(fabs(y), -10) : 0.0); }

/* Prefill vs decode on the GPU: the same kernel, the same key order and block partition, and the same
** values (in-chunk keys are rounded to the KV type on load exactly as kv_append stores them); only the
** compiler's freedom to fuse multiply-adds differently in the two load paths remains: 1e-6, plus one f16
** ulp of the output when f32 values within 1e-6 round to neighbouring f16 values. */
static double tol_same(bool f16, double y) { return 1e-6 + (f16 ? ldexp(fabs(y), -10) : 0.0); }

static bool same_or_both_nan(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

typedef struct gpu_state {
    dp_gtensor *kc, *vc;
} gpu_state;

static void gpu_append(kg_ctx *c, const attn_case *ac, gpu_state *g, dp_gtensor *k, dp_gtensor *v,
                       dp_gtensor *pos, uint32_t T)
{
    const char *defs[4];
    uint32_t nd = kg_defines(defs, ac->act_f16, -1, ac->kv_f16), gx, gy;
    dp_dispatch d;
    dp_dispatch_init(&d, kg_kernel(c, "attention/kv_append.comp", defs, nd, 64));
    dp_dispatch_tensor(&d, "k", k);
    dp_dispatch_tensor(&d, "v", v);
    dp_dispatch_tensor(&d, "kc", g->kc);
    dp_dispatch_tensor(&d, "vc", g->vc);
    dp_dispatch_tensor(&d, "pos", pos);
    dp_dispatch_u32(&d, "n_tokens", T);
    dp_dispatch_u32(&d, "n_kv_heads", ac->Hkv);
    dp_dispatch_u32(&d, "head_dim", ac->D);
    dp_dispatch_u32(&d, "cap", ac->cap);
    dp_dispatch_u32(&d, "kv_stride", 0);
    kg_groups_1d((uint64_t)T * ac->Hkv * ac->D, 64, &gx, &gy);
    kg_run(c, &d, gx, gy, 1);
}

static void gpu_attend(kg_ctx *c, const attn_case *ac, float scale, gpu_state *g, dp_gtensor *q, dp_gtensor *k,
                       dp_gtensor *v, dp_gtensor *pos, dp_gtensor *out, uint32_t T)
{
    const char *defs[4];
    uint32_t nd = kg_defines(defs, ac->act_f16, -1, ac->kv_f16);
    dp_dispatch d;
    dp_dispatch_init(&d, kg_kernel(c, "attention/attention.comp", defs, nd, ac->wg));
    dp_dispatch_tensor(&d, "q", q);
    dp_dispatch_tensor(&d, "k", k);
    dp_dispatch_tensor(&d, "v", v);
    dp_dispatch_tensor(&d, "kc", g->kc);
    dp_dispatch_tensor(&d, "vc", g->vc);
    dp_dispatch_tensor(&d, "pos", pos);
    dp_dispatch_tensor(&d, "o", out);
    dp_dispatch_u32(&d, "n_tokens", T);
    dp_dispatch_u32(&d, "n_q_heads", ac->Hq);
    dp_dispatch_u32(&d, "n_kv_heads", ac->Hkv);
    dp_dispatch_u32(&d, "head_dim", ac->D);
    dp_dispatch_u32(&d, "cap", ac->cap);
    dp_dispatch_u32(&d, "window", ac->window);
    dp_dispatch_f32(&d, "scale", scale);
    dp_dispatch_f32(&d, "softcap", ac->softcap);
    dp_dispatch_u32(&d, "q_stride", 0);
    dp_dispatch_u32(&d, "kv_stride", 0);
    kg_run(c, &d, ac->Hq, T, 1);
}

static void gpu_state_init(kg_ctx *c, const attn_case *ac, gpu_state *g, const float *nan_fill)
{
    dp_dtype kvt = ac->kv_f16 ? DP_F16 : DP_F32;
    uint64_t n = (uint64_t)ac->Hkv * ac->cap * ac->D;
    g->kc = kg_upload(c, kvt, nan_fill, n);
    g->vc = kg_upload(c, kvt, nan_fill, n);
}

/* Naive attention of query position p over the whole sequence, HF's mask written out. */
static void naive(const attn_case *ac, float scale, const float *q_all, const float *k_all, const float *v_all,
                  uint32_t p, uint32_t h, float *o)
{
    uint32_t D = ac->D, hk = h / (ac->Hq / ac->Hkv);
    double w[256], mx = -INFINITY, sum = 0.0;
    for (uint32_t j = 0; j < ac->L; j++) {
        bool visible = j <= p && (ac->window == 0 || (int64_t)j > (int64_t)p - (int64_t)ac->window);
        if (!visible) { w[j] = -INFINITY; continue; }
        double s = 0.0;
        for (uint32_t d = 0; d < D; d++)
            s += (double)q_all[((uint64_t)p * ac->Hq + h) * D + d] * k_all[((uint64_t)j * ac->Hkv + hk) * D + d];
        s *= scale;
        if (ac->softcap > 0.0f) s = ac->softcap * tanh(s / ac->softcap);
        w[j] = s;
        if (s > mx) mx = s;
    }
    for (uint32_t j = 0; j < ac->L; j++) sum += (w[j] = w[j] == -INFINITY ? 0.0 : exp(w[j] - mx));
    for (uint32_t d = 0; d < D; d++) {
        double acc = 0.0;
        for (uint32_t j = 0; j < ac->L; j++)
            if (w[j] != 0.0) acc += w[j] * v_all[((uint64_t)j * ac->Hkv + hk) * D + d];
        o[d] = (float)(acc / sum);
    }
}

static void run_case(kg_ctx *c, const attn_case *ac)
{
    const uint32_t L = ac->L, Hq = ac->Hq, Hkv = ac->Hkv, D = ac->D;
    const dp_dtype adt = ac->act_f16 ? DP_F16 : DP_F32, kvt = ac->kv_f16 ? DP_F16 : DP_F32;
    const float scale = 2.0f / sqrtf((float)D);   /* scores of a few units: a peaked, not flat, softmax */
    const uint64_t nq = (uint64_t)L * Hq * D, nk = (uint64_t)L * Hkv * D, ncache = (uint64_t)Hkv * ac->cap * D;
    assert_true(L <= 256);

    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *kr = malloc(nk * 4), *vr = malloc(nk * 4);
    float *out_pre = malloc(nq * 4), *out_dec = malloc(nq * 4), *ref = malloc(nq * 4), *want = malloc(nq * 4);
    /* NaN filler for the caches and for output tensors (up to L tokens of Hq heads) */
    uint64_t n_nan = ncache > (uint64_t)L * Hq * D ? ncache : (uint64_t)L * Hq * D;
    float *nanf = malloc(n_nan * 4), *rkc = malloc(ncache * 4), *rvc = malloc(ncache * 4);
    float *gkc = malloc(ncache * 4), *gvc = malloc(ncache * 4);
    uint32_t *pos = malloc(L * 4);
    assert_true(q && k && v && kr && vr && out_pre && out_dec && ref && want && nanf && rkc && rvc && gkc && gvc && pos);
    kg_fill(c, q, nq, 1.0f);
    kg_fill(c, k, nk, 1.0f);
    kg_fill(c, v, nk, 1.0f);
    kg_round(q, adt, nq);
    kg_round(k, adt, nk);
    kg_round(v, adt, nk);
    for (uint64_t i = 0; i < ncache; i++) rkc[i] = rvc[i] = NAN;
    for (uint64_t i = 0; i < n_nan; i++) nanf[i] = NAN;
    for (uint32_t t = 0; t < L; t++) pos[t] = t;
    memcpy(kr, k, nk * 4);   /* the values attention sees: rounded to the KV type */
    memcpy(vr, v, nk * 4);
    kg_round(kr, kvt, nk);
    kg_round(vr, kvt, nk);

    char name[160];
    snprintf(name, sizeof name, "Hq=%u Hkv=%u D=%u W=%u cap=%u L=%u softcap=%g act=%s kv=%s WG=%u", Hq, Hkv, D,
             ac->window, ac->cap, L, (double)ac->softcap, dp_dtype_name(adt), dp_dtype_name(kvt), ac->wg);

    /* the reference against the naive whole-sequence attention */
    for (uint32_t p = 0; p < L; p++)
        for (uint32_t h = 0; h < Hq; h++) naive(ac, scale, q, kr, vr, p, h, want + ((uint64_t)p * Hq + h) * D);

    dp_attn_params prm = {.n_q_heads = Hq, .n_kv_heads = Hkv, .head_dim = D, .cap = ac->cap,
                          .window = ac->window, .scale = scale, .softcap = ac->softcap, .kv_f16 = ac->kv_f16};

    /* ---- prefill in chunks: attention, then append ---- */
    gpu_state g;
    gpu_state_init(c, ac, &g, nanf);
    double worst = 0.0;
    uint32_t s = 0;
    for (int ci = 0; ci < 8 && ac->chunks[ci]; ci++) {
        uint32_t T = ac->chunks[ci];
        assert_true(s + T <= L);
        const float *qc = q + (uint64_t)s * Hq * D, *kc = k + (uint64_t)s * Hkv * D, *vc = v + (uint64_t)s * Hkv * D;
        dp_gtensor *tq = kg_upload(c, adt, qc, (uint64_t)T * Hq * D), *tk = kg_upload(c, adt, kc, (uint64_t)T * Hkv * D);
        dp_gtensor *tv = kg_upload(c, adt, vc, (uint64_t)T * Hkv * D), *tpos = kg_upload_u32(c, pos + s, T);
        dp_gtensor *to = kg_upload(c, adt, nanf, (uint64_t)T * Hq * D);

        prm.n_tokens = T;
        dp_ref_attention(&prm, qc, kc, vc, rkc, rvc, pos + s, ref + (uint64_t)s * Hq * D);
        gpu_attend(c, ac, scale, &g, tq, tk, tv, tpos, to, T);
        kg_download(to, out_pre + (uint64_t)s * Hq * D, (uint64_t)T * Hq * D);
        dp_ref_kv_append(&prm, kc, vc, pos + s, rkc, rvc);
        gpu_append(c, ac, &g, tk, tv, tpos, T);

        kg_download(g.kc, gkc, ncache);
        kg_download(g.vc, gvc, ncache);
        for (uint64_t i = 0; i < ncache; i++)
            if (!same_or_both_nan(gkc[i], rkc[i]) || !same_or_both_nan(gvc[i], rvc[i]))
                fail_msg("%s: after chunk %d cache element %llu: K %.8g / ref %.8g, V %.8g / ref %.8g", name, ci,
                         (unsigned long long)i, gkc[i], rkc[i], gvc[i], rvc[i]);
        for (uint64_t i = (uint64_t)s * Hq * D; i < (uint64_t)(s + T) * Hq * D; i++) {
            uint32_t t = (uint32_t)(i / ((uint64_t)Hq * D));
            if (!(fabs((double)ref[i] - want[i]) <= 1e-5))
                fail_msg("%s: reference vs naive at position %u: %.7g vs %.7g", name, t, ref[i], want[i]);
            double diff = fabs((double)out_pre[i] - ref[i]);
            if (!(diff <= tol(ac->act_f16, ref[i])))
                fail_msg("%s: prefill chunk %d (T=%u) position %u head %u dim %u: %.7g, ref %.7g (diff %.3g)", name,
                         ci, T, t, (uint32_t)(i / D % Hq), (uint32_t)(i % D), out_pre[i], ref[i], diff);
            if (diff / tol(ac->act_f16, ref[i]) > worst) worst = diff / tol(ac->act_f16, ref[i]);
        }
        dp_gtensor_release(tq);
        dp_gtensor_release(tk);
        dp_gtensor_release(tv);
        dp_gtensor_release(tpos);
        dp_gtensor_release(to);
        s += T;
    }
    assert_int_equal(s, L);
    dp_gtensor_release(g.kc);
    dp_gtensor_release(g.vc);

    /* ---- decode, one token at a time: append, then attention ---- */
    gpu_state_init(c, ac, &g, nanf);
    double worst_dec = 0.0;
    for (uint32_t t = 0; t < L; t++) {
        dp_gtensor *tq = kg_upload(c, adt, q + (uint64_t)t * Hq * D, (uint64_t)Hq * D);
        dp_gtensor *tk = kg_upload(c, adt, k + (uint64_t)t * Hkv * D, (uint64_t)Hkv * D);
        dp_gtensor *tv = kg_upload(c, adt, v + (uint64_t)t * Hkv * D, (uint64_t)Hkv * D);
        dp_gtensor *tpos = kg_upload_u32(c, pos + t, 1), *to = kg_upload(c, adt, nanf, (uint64_t)Hq * D);
        gpu_append(c, ac, &g, tk, tv, tpos, 1);
        gpu_attend(c, ac, scale, &g, tq, tk, tv, tpos, to, 1);
        kg_download(to, out_dec + (uint64_t)t * Hq * D, (uint64_t)Hq * D);
        for (uint64_t i = (uint64_t)t * Hq * D; i < (uint64_t)(t + 1) * Hq * D; i++) {
            double diff = fabs((double)out_dec[i] - out_pre[i]);
            if (!(diff <= tol_same(ac->act_f16, out_pre[i])))
                fail_msg("%s: decode step %u head %u dim %u: %.8g, prefill %.8g (diff %.3g)", name, t,
                         (uint32_t)(i / D % Hq), (uint32_t)(i % D), out_dec[i], out_pre[i], diff);
            if (diff / tol_same(ac->act_f16, out_pre[i]) > worst_dec)
                worst_dec = diff / tol_same(ac->act_f16, out_pre[i]);
        }
        dp_gtensor_release(tq);
        dp_gtensor_release(tk);
        dp_gtensor_release(tv);
        dp_gtensor_release(tpos);
        dp_gtensor_release(to);
    }
    kg_download(g.kc, gkc, ncache);
    for (uint64_t i = 0; i < ncache; i++)
        if (!same_or_both_nan(gkc[i], rkc[i]))
            fail_msg("%s: decode cache element %llu differs from the prefill's", name, (unsigned long long)i);
    dp_gtensor_release(g.kc);
    dp_gtensor_release(g.vc);
    print_message("  %s: prefill worst err/tol %.3f, decode vs prefill %.3f\n", name, worst, worst_dec);

    free(q); free(k); free(v); free(kr); free(vr); free(out_pre); free(out_dec); free(ref); free(want);
    free(nanf); free(rkc); free(rvc); free(gkc); free(gvc); free(pos);
}

static const attn_case CASES[] = {
    /* gemma3-tiny shape: MQA (ratio 4), D 32, ring of W = 8 slots; an 11-token chunk crosses the window and
    ** later chunks wrap the ring several times */
    {4, 1, 32, 8, 8, 27, 0.0f, false, false, 32, {11, 1, 1, 7, 1, 6}},
    {4, 1, 32, 8, 8, 27, 0.0f, true, true, 32, {11, 1, 1, 7, 1, 6}},
    /* gemma3-tiny-scaled: ratio 2, D 16, W 6, softcap on, f16 everything */
    {4, 2, 16, 6, 6, 20, 1.0f, true, true, 16, {9, 1, 10}},
    {4, 2, 16, 6, 6, 20, 1.0f, false, true, 16, {9, 1, 10}},
    /* Gemma 1B head: D 256 (WG 128 < D: two dims per invocation), global, ratio 1 */
    {2, 2, 256, 0, 24, 23, 0.0f, false, true, 128, {5, 1, 17}},
    {2, 2, 256, 0, 24, 23, 30.0f, false, false, 128, {5, 1, 17}},
    /* Llama 3.2 1B head: D 64, ratio 4, global, 70 keys in blocks of WG 32: online-softmax rescaling */
    {8, 2, 64, 0, 80, 70, 0.0f, false, false, 32, {40, 1, 29}},
    {8, 2, 64, 0, 80, 70, 0.0f, true, false, 32, {40, 1, 29}},
    /* sliding with a ring larger than the window (cap 9, W 5), tiny workgroup (lavapipe's subgroup) */
    {2, 1, 32, 5, 9, 30, 0.5f, false, true, 8, {3, 4, 1, 12, 10}},
    /* WG 256 > D and > keys: many idle invocations */
    {3, 3, 16, 4, 4, 13, 0.0f, false, false, 256, {13}},
};

static void test_attention(void **state)
{
    kg_ctx *c = *state;
    for (size_t i = 0; i < DP_ARRAY_LEN(CASES); i++) run_case(c, &CASES[i]);
}

/* The visible range by hand (MODEL_REFERENCE.md 1.6): W = 512 sees 512 keys including itself. */
static void test_first_key(void **state)
{
    (void)state;
    assert_int_equal(dp_attn_first_key(0, 512), 0);
    assert_int_equal(dp_attn_first_key(511, 512), 0);
    assert_int_equal(dp_attn_first_key(512, 512), 1);
    assert_int_equal(dp_attn_first_key(1000, 512), 489);   /* 489 .. 1000: 512 keys */
    assert_int_equal(dp_attn_first_key(1000, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_key),
        cmocka_unit_test(test_attention),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
