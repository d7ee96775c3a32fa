/*
** tests/unit/test_k_attention_rope.c: attention_decode.comp with DP_ROPE_QK (the fusion attention_rope: the
** per-head q/k RMSNorm, RoPE and KV-cache append of rope_kv.comp done inside the flash-decoding dispatch) on
** lavapipe, against the pair it replaces run on the GPU: rope_kv.comp (q, k rotated in place, caches
** appended) followed by attention_decode.comp with the same variant (WG, LK, UK, chunks). Both compute every
** value with the same operations in the same order (rope_kv's lanes for the norm, its rounding points, the
** same attention arithmetic), so the attention output and the caches after the step must be bit-identical.
** Each output must also be finite (a NaN on both sides would compare equal bit for bit).
** The caches start NaN except the slots that a query of the step may read (keys lo .. pos[0] - 1, random),
** so a read of any other slot (in particular one this step overwrites: a ring slot of a key outside the
** window) poisons the fused output.
** Cases: head_dim 64 / 128 / 256; GQA 1, 2, 4; with (Gemma's 1 + w, Qwen's w) and without q/k norm; T 1 to 4;
** global and sliding layers with a ring that wraps and cap = window + T - 1 (the least rope_kv allows);
** f32 / f16 activations and KV; bf16 / f16 / f32 norm weights; partial rotary and q, k, v as slices of one
** fused projection (Phi-3); Llama 3 frequency scaling; softcap; several chunks, and one; the q heads of a kv
** head split over gs workgroups (hint attention_heads): both sides take that split, and the fused output must
** also be bit-identical to the fused kernel with every q head of a kv head in one workgroup (gs = 1: the same
** arithmetic per head, only the workgroup that does it differs).
** The unfused pair is checked against core/ref by test_k_rope_kv.c and test_k_attention_flash.c.
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

typedef struct ar_case {
    uint32_t T, Hq, Hkv, D, rot, window, cap, pos0;
    bool     norm;
    float    offset;
    bool     act_f16, kv_f16;
    dp_dtype wdt;
    bool     strided, llama3;
    float    softcap;
    uint32_t n_chunks, min_chunk;
    uint32_t gs;   /* workgroups per kv head (attention_heads: G = Hq / Hkv / gs q heads in each) */
} ar_case;

static uint32_t pow2_at_least(uint32_t n, uint32_t lo, uint32_t hi)
{
    uint32_t p = lo;
    while (p < n && p < hi) p *= 2;
    return p;
}

/* rope_kv's lanes per row: rmsnorm's layout for one row (lower/base.lua, norm_layout). */
static uint32_t norm_lanes(uint32_t D) { return pow2_at_least((D + 3) / 4, 8, 256); }

/* attention_decode.comp's shared memory, as lower/attention.lua's decode_shared (nl = 0: the plain variant). */
static uint32_t decode_shared(uint32_t wg, uint32_t lk, uint32_t D, uint32_t G, uint32_t nl)
{
    uint32_t ncl = wg / lk, mg = 2 * G * 64 + G, sh = ncl * D > mg ? ncl * D : mg;
    if (nl && (wg / nl + G + 4) * D > sh) sh = (wg / nl + G + 4) * D;
    return 4 * (ncl * G * 2 + sh) + 4 + (nl ? 4 * wg : 0);
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

static bufs bufs_make(kg_ctx *c, const ar_case *ac, const float *q, const float *k, const float *v,
                      const float *kc, const float *vc)
{
    const kqkv_shape s = {ac->T, ac->Hq, ac->Hkv, ac->D, ac->cap, ac->act_f16, ac->kv_f16, ac->strided};
    return kqkv_make(c, &s, q, k, v, kc, vc);
}

#define bufs_free kqkv_free

typedef struct shared_in {
    dp_gtensor *pos, *freq, *qw, *kw, *counter, *part_o, *part_ml;
    float       scale;
    uint32_t    wg, lk, uk;
} shared_in;

static uint32_t defines(const char **defs, const ar_case *ac, bool with_w)
{
    return kg_defines(defs, ac->act_f16, with_w ? (int)ac->wdt : -1, ac->kv_f16);
}

/* The push members of both attention variants. */
static void attn_push(dp_dispatch *d, const ar_case *ac, const shared_in *s, bufs *b, dp_gtensor *out)
{
    dp_dispatch_tensor(d, "q", b->q);
    dp_dispatch_tensor(d, "k", b->k);
    dp_dispatch_tensor(d, "v", b->v);
    dp_dispatch_tensor(d, "kc", b->kc);
    dp_dispatch_tensor(d, "vc", b->vc);
    dp_dispatch_tensor(d, "pos", s->pos);
    dp_dispatch_tensor(d, "o", out);
    dp_dispatch_tensor(d, "part_o", s->part_o);
    dp_dispatch_tensor(d, "part_ml", s->part_ml);
    dp_dispatch_tensor(d, "counter", s->counter);
    dp_dispatch_u32(d, "cap", ac->cap);
    dp_dispatch_u32(d, "window", ac->window);
    dp_dispatch_f32(d, "scale", s->scale);
    dp_dispatch_f32(d, "softcap", ac->softcap);
    dp_dispatch_u32(d, "q_stride", b->q_stride);
    dp_dispatch_u32(d, "kv_stride", b->kv_stride);
}

static void run_fused(kg_ctx *c, const ar_case *ac, const shared_in *s, bufs *b, dp_gtensor *out, uint32_t gs)
{
    const char *defs[8];
    uint32_t nd = defines(defs, ac, ac->norm);
    defs[nd++] = "DP_ROPE_QK";
    if (ac->norm) defs[nd++] = "DP_QK_NORM";
    dp_kconst k[11] = {{"WG", s->wg}, {"D", ac->D}, {"G", ac->Hq / ac->Hkv / gs}, {"LK", s->lk}, {"UK", s->uk},
                       {"MINC", ac->min_chunk}, {"ROT", ac->rot}, {"NL", norm_lanes(ac->D)}, {"GS", gs},
                       {"EPS", 1e-6}, {"WOFF", ac->offset}};
    dp_dispatch d;
    dp_dispatch_init(&d, kernel(c, "attention/attention_decode.comp", defs, nd, k, ac->norm ? 11 : 9));
    attn_push(&d, ac, s, b, out);
    dp_dispatch_tensor(&d, "inv_freq", s->freq);
    if (ac->norm) {
        dp_dispatch_tensor(&d, "qw", s->qw);
        dp_dispatch_tensor(&d, "kw", s->kw);
    }
    kg_run(c, &d, ac->Hkv * gs, ac->n_chunks, ac->T);
}

/* rope_kv.comp, then attention_decode.comp (doppler.lower's order with the rope_kv fusion). */
static void run_pair(kg_ctx *c, const ar_case *ac, const shared_in *s, bufs *b, dp_gtensor *out, uint32_t gs)
{
    const char *defs[8];
    uint32_t nd = defines(defs, ac, ac->norm);
    if (ac->norm) defs[nd++] = "DP_QK_NORM";
    dp_kconst kr[2] = {{"WG", norm_lanes(ac->D)}, {"D", ac->D}};
    dp_dispatch d;
    dp_dispatch_init(&d, kernel(c, "rope/rope_kv.comp", defs, nd, kr, 2));
    dp_dispatch_tensor(&d, "q", b->q);
    dp_dispatch_tensor(&d, "k", b->k);
    dp_dispatch_tensor(&d, "v", b->v);
    dp_dispatch_tensor(&d, "kc", b->kc);
    dp_dispatch_tensor(&d, "vc", b->vc);
    dp_dispatch_tensor(&d, "pos", s->pos);
    dp_dispatch_tensor(&d, "inv_freq", s->freq);
    if (ac->norm) {
        dp_dispatch_tensor(&d, "qw", s->qw);
        dp_dispatch_tensor(&d, "kw", s->kw);
        dp_dispatch_f32(&d, "eps", 1e-6f);
        dp_dispatch_f32(&d, "w_offset", ac->offset);
    }
    dp_dispatch_u32(&d, "n_tokens", ac->T);
    dp_dispatch_u32(&d, "n_q_heads", ac->Hq);
    dp_dispatch_u32(&d, "n_kv_heads", ac->Hkv);
    dp_dispatch_u32(&d, "cap", ac->cap);
    dp_dispatch_u32(&d, "rot_dim", ac->rot);
    dp_dispatch_u32(&d, "q_stride", b->q_stride);
    dp_dispatch_u32(&d, "kv_stride", b->kv_stride);
    kg_run(c, &d, ac->Hq + ac->Hkv, ac->T, 1);

    nd = defines(defs, ac, false);
    dp_kconst ka[6] = {{"WG", s->wg}, {"D", ac->D}, {"G", ac->Hq / ac->Hkv / gs}, {"LK", s->lk}, {"UK", s->uk},
                       {"GS", gs}};
    dp_dispatch_init(&d, kernel(c, "attention/attention_decode.comp", defs, nd, ka, 6));
    attn_push(&d, ac, s, b, out);
    dp_dispatch_u32(&d, "n_tokens", ac->T);
    dp_dispatch_u32(&d, "n_q_heads", ac->Hq);
    dp_dispatch_u32(&d, "n_kv_heads", ac->Hkv);
    dp_dispatch_u32(&d, "n_chunks", ac->n_chunks);
    dp_dispatch_u32(&d, "min_chunk", ac->min_chunk);
    kg_run(c, &d, ac->Hkv * gs, ac->n_chunks, ac->T);
}

static void check_same(const char *what, const char *name, const float *got, const float *want, uint64_t n,
                       bool finite)
{
    for (uint64_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], 4) != 0)
            fail_msg("%s: %s[%llu] = %.9g, rope_kv + attention_decode %.9g (must be bit-identical)", what, name,
                     (unsigned long long)i, got[i], want[i]);
        if (finite && !isfinite(got[i])) fail_msg("%s: %s[%llu] = %g", what, name, (unsigned long long)i, got[i]);
    }
}

static void check_counter(const char *what, dp_gtensor *counter, uint32_t n)
{
    uint32_t cnt[64];
    assert_true(n <= 64);
    kg_download_u32(counter, cnt, n);
    for (uint32_t i = 0; i < n; i++)
        if (cnt[i] != 0) fail_msg("%s: merge counter %u left at %u", what, i, cnt[i]);
}

static void run_case(kg_ctx *c, const ar_case *ac)
{
    dp_dtype adt = ac->act_f16 ? DP_F16 : DP_F32, kvt = ac->kv_f16 ? DP_F16 : DP_F32;
    uint32_t T = ac->T, D = ac->D, gs = ac->gs, G = ac->Hq / ac->Hkv / gs;
    uint64_t nq = (uint64_t)T * ac->Hq * D, nk = (uint64_t)T * ac->Hkv * D, nc = (uint64_t)ac->Hkv * ac->cap * D;
    uint64_t npart = (uint64_t)T * ac->Hq * ac->n_chunks * D;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *kc = malloc(nc * 4), *vc = malloc(nc * 4);
    float *fo = malloc(nq * 4), *po = malloc(nq * 4), *fkc = malloc(nc * 4), *fvc = malloc(nc * 4);
    float *pkc = malloc(nc * 4), *pvc = malloc(nc * 4), *nanf = malloc((npart > nq ? npart : nq) * 4);
    float qw[256], kw[256], freq[128];
    uint32_t pos[4], zeros[64] = {0};
    dp_err e = {0};
    assert_true(q && k && v && kc && vc && fo && po && fkc && fvc && pkc && pvc && nanf);
    assert_true(D <= 256 && T >= 1 && T <= 4 && ac->Hkv * gs * T <= 64 && ac->Hq % (ac->Hkv * gs) == 0);
    /* the append-before-attention order that attention_rope requires (rope_kv's rule) */
    assert_true(ac->window == 0 ? ac->cap > ac->pos0 + T - 1 : ac->cap >= ac->window + T - 1);
    for (uint64_t i = 0; i < (npart > nq ? npart : nq); i++) nanf[i] = NAN;
    kg_fill(c, q, nq, 2.0f);
    kg_fill(c, k, nk, 2.0f);
    kg_fill(c, v, nk, 1.0f);
    kg_fill(c, qw, D, 1.0f);
    kg_fill(c, kw, D, 1.0f);
    kg_round(q, adt, nq);
    kg_round(k, adt, nk);
    kg_round(v, adt, nk);
    kg_round(qw, ac->wdt, D);
    kg_round(kw, ac->wdt, D);
    for (uint32_t t = 0; t < T; t++) pos[t] = ac->pos0 + t;
    /* caches: random in the slots of keys lo .. pos0 - 1 that some query of the step sees, NaN elsewhere */
    for (uint64_t i = 0; i < nc; i++) kc[i] = vc[i] = NAN;
    uint32_t lo = ac->window && ac->pos0 >= ac->window ? ac->pos0 - ac->window + 1 : 0;
    for (uint32_t h = 0; h < ac->Hkv; h++)
        for (uint32_t j = lo; j < ac->pos0; j++) {
            float *kr = kc + ((uint64_t)h * ac->cap + j % ac->cap) * D, *vr = vc + ((uint64_t)h * ac->cap + j % ac->cap) * D;
            kg_fill(c, kr, D, 2.0f);
            kg_fill(c, vr, D, 1.0f);
            kg_round(kr, kvt, D);
            kg_round(vr, kvt, D);
        }
    dp_rope_freq_scaling l3 = {.kind = DP_ROPE_LLAMA3, .factor = 32.0f, .low_freq_factor = 1.0f,
                               .high_freq_factor = 4.0f, .original_max_pos = 8192.0f};
    assert_int_equal(dp_rope_inv_freq(ac->llama3 ? 500000.0 : 10000.0, ac->rot, ac->llama3 ? &l3 : NULL, freq, &e), DP_OK);

    shared_in s = {0};
    uint32_t sg = dp_device_get_caps(c->dev)->subgroup_size, vec = ac->kv_f16 ? 8 : 4, nl = norm_lanes(D);
    s.lk = sg < D / vec ? sg : D / vec;
    s.uk = 2;
    /* lower/attention.lua's auto choice for all the kv head's q heads in one workgroup (gs = 1 runs too; fewer heads
       per workgroup need less shared memory) */
    s.wg = decode_shared(256, s.lk, D, G * gs, nl) <= 32768 ? 256 : 128;
    assert_true(decode_shared(s.wg, s.lk, D, G * gs, nl) <= 32768 && s.wg % nl == 0);
    s.scale = 2.0f / sqrtf((float)D);
    s.pos = kg_upload_u32(c, pos, T);
    s.freq = kg_upload(c, DP_F32, freq, ac->rot / 2);
    s.qw = kg_upload(c, ac->wdt, qw, D);
    s.kw = kg_upload(c, ac->wdt, kw, D);
    s.counter = kg_upload_u32(c, zeros, 64);
    s.part_o = kg_upload(c, DP_F32, nanf, npart);
    s.part_ml = kg_upload(c, DP_F32, nanf, (uint64_t)T * ac->Hq * ac->n_chunks * 2);

    char what[220];
    snprintf(what, sizeof what, "attention_rope T=%u Hq=%u Hkv=%u D=%u rot=%u W=%u cap=%u pos0=%u norm=%d off=%g%s%s "
             "act=%s kv=%s w=%s softcap=%g chunks=%u/%u WG=%u LK=%u GS=%u",
             T, ac->Hq, ac->Hkv, D, ac->rot, ac->window, ac->cap, ac->pos0, ac->norm, (double)ac->offset,
             ac->strided ? " strided" : "", ac->llama3 ? " llama3" : "", dp_dtype_name(adt), dp_dtype_name(kvt),
             dp_dtype_name(ac->wdt), (double)ac->softcap, ac->n_chunks, ac->min_chunk, s.wg, s.lk, gs);

    bufs fb = bufs_make(c, ac, q, k, v, kc, vc), pb = bufs_make(c, ac, q, k, v, kc, vc);
    dp_gtensor *fout = kg_upload(c, adt, nanf, nq), *pout = kg_upload(c, adt, nanf, nq);
    run_fused(c, ac, &s, &fb, fout, gs);
    check_counter(what, s.counter, T * ac->Hkv * gs);
    run_pair(c, ac, &s, &pb, pout, gs);
    check_counter(what, s.counter, T * ac->Hkv * gs);
    kg_download(fout, fo, nq);
    kg_download(pout, po, nq);
    kg_download(fb.kc, fkc, nc);
    kg_download(fb.vc, fvc, nc);
    kg_download(pb.kc, pkc, nc);
    kg_download(pb.vc, pvc, nc);
    check_same(what, "o", fo, po, nq, true);
    check_same(what, "kc", fkc, pkc, nc, false);
    check_same(what, "vc", fvc, pvc, nc, false);
    if (gs > 1) {   /* the same heads computed by one workgroup per kv head (gs = 1): the same bits */
        bufs ob = bufs_make(c, ac, q, k, v, kc, vc);
        dp_gtensor *oout = kg_upload(c, adt, nanf, nq);
        run_fused(c, ac, &s, &ob, oout, 1);
        check_counter(what, s.counter, T * ac->Hkv);
        kg_download(oout, po, nq);
        kg_download(ob.kc, pkc, nc);
        kg_download(ob.vc, pvc, nc);
        check_same(what, "o against GS=1", fo, po, nq, true);
        check_same(what, "kc against GS=1", fkc, pkc, nc, false);
        check_same(what, "vc against GS=1", fvc, pvc, nc, false);
        bufs_free(&ob);
        dp_gtensor_release(oout);
    }
    /* every token's slot was written (none loses it to a later token here) */
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < ac->Hkv; h++)
            for (uint32_t d = 0; d < D; d++) {
                uint64_t i = ((uint64_t)h * ac->cap + pos[t] % ac->cap) * D + d;
                if (!isfinite(fkc[i]) || !isfinite(fvc[i])) fail_msg("%s: token %u kv head %u not appended", what, t, h);
            }
    print_message("  %s: bit-identical\n", what);

    bufs_free(&fb);
    bufs_free(&pb);
    dp_gtensor_release(fout);
    dp_gtensor_release(pout);
    dp_gtensor_release(s.pos);
    dp_gtensor_release(s.freq);
    dp_gtensor_release(s.qw);
    dp_gtensor_release(s.kw);
    dp_gtensor_release(s.counter);
    dp_gtensor_release(s.part_o);
    dp_gtensor_release(s.part_ml);
    free(q); free(k); free(v); free(kc); free(vc); free(fo); free(po); free(fkc); free(fvc); free(pkc); free(pvc);
    free(nanf);
}

static void test_attention_rope(void **state)
{
    kg_ctx *c = *state;
    const ar_case cases[] = {
        /* T Hq Hkv  D  rot   W  cap pos0 norm  off   act16  kv16  w        strided llama3 softcap chunks gs */
        /* Gemma 3 1B sliding layer: MQA (GQA 4), D 256, (1 + w) norm, ring wrapped, cap = W */
        {1, 4, 1, 256, 256, 8, 8, 21, true, 1.0f, true, true, DP_BF16, false, false, 0.0f, 4, 2, 1},
        {1, 4, 1, 256, 256, 8, 8, 21, true, 1.0f, false, false, DP_BF16, false, false, 0.0f, 4, 2, 1},
        /* Gemma global layer, one chunk for all keys */
        {1, 4, 1, 256, 256, 0, 40, 30, true, 1.0f, true, true, DP_BF16, false, false, 0.0f, 1, 64, 1},
        /* Qwen 3: GQA 2, D 128, plain w norm; a 3-token pass (keys of the call in several chunks) */
        {3, 4, 2, 128, 128, 0, 64, 5, true, 0.0f, true, true, DP_F16, false, false, 0.0f, 4, 2, 1},
        /* sliding, 4 tokens, cap = W + T - 1: every slot of the ring is live or being written */
        {4, 4, 2, 128, 128, 6, 9, 25, true, 0.0f, false, false, DP_F32, false, false, 0.0f, 3, 2, 1},
        {4, 2, 2, 128, 128, 6, 9, 25, true, 0.0f, true, false, DP_F16, false, false, 30.0f, 5, 1, 1},
        /* Llama 3: GQA 4, D 64, no norm, frequency scaling; decode and a 2-token pass */
        {1, 8, 2, 64, 64, 0, 100, 40, false, 0.0f, true, true, DP_F32, false, true, 0.0f, 16, 2, 1},
        {2, 8, 2, 64, 64, 0, 100, 40, false, 0.0f, false, false, DP_F32, false, true, 0.0f, 8, 3, 1},
        /* Phi-3: q, k, v slices of one projection, partial rotary, GQA 1 */
        {2, 4, 4, 64, 32, 0, 50, 17, false, 0.0f, true, true, DP_F32, true, false, 0.0f, 4, 2, 1},
        /* the first step: no cached key at all */
        {1, 2, 1, 128, 128, 0, 16, 0, true, 1.0f, true, true, DP_BF16, false, false, 0.0f, 4, 2, 1},
        /* q heads split over workgroups (attention_heads): Gemma 1 head per workgroup, sliding and global */
        {1, 4, 1, 256, 256, 8, 8, 21, true, 1.0f, true, true, DP_BF16, false, false, 0.0f, 4, 2, 4},
        {1, 4, 1, 256, 256, 0, 40, 30, true, 1.0f, true, true, DP_BF16, false, false, 0.0f, 1, 64, 2},
        /* Llama 3, 2 of 4 heads per workgroup, a 2-token pass; Qwen 3 with 3 tokens, 1 head per workgroup */
        {2, 8, 2, 64, 64, 0, 100, 40, false, 0.0f, false, false, DP_F32, false, true, 0.0f, 8, 3, 2},
        {3, 4, 2, 128, 128, 0, 64, 5, true, 0.0f, true, true, DP_F16, false, false, 0.0f, 4, 2, 2},
    };
    for (size_t i = 0; i < DP_ARRAY_LEN(cases); i++) run_case(c, &cases[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_rope),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
