/*
** tests/unit/test_k_attention_flash.c: the fast attention kernels on lavapipe against core/ref/attention.c:
**   attention_decode.comp (flash-decoding: split-K over chunks, merged by the last workgroup of each (kv
**   head, token) in the same dispatch), and attention_prefill.comp (tiled flash attention over (token, q head)
**   rows of one kv head).
** For each case a sequence of L tokens (random q, k, v) goes through the GPU twice:
**   chunked: in chunks of T tokens, attention before kv_append (lower/attention.lua's order): both kernels run on every
**            chunk (the decode kernel for any T, not only T <= 4, in a second variant: every q head of a kv head
**            in one workgroup, half the lanes per key row, a wider workgroup) and are compared with
**            dp_ref_attention;
**   decode:  one token at a time, kv_append then the decode kernel in lower/attention.lua's auto variant (one q
**            head per workgroup), compared with the chunked reference.
** The semantics (masks, which keys come from the cache) are attention.comp's; test_k_attention.c checks the
** reference itself against a naive whole-sequence attention. Cases: GQA ratios 1, 2, 4; head_dim 16, 32,
** 64, 96, 128, 256; windows crossed by a chunk; ring buffers that wrap; softcap; f32/f16 activations and KV;
** q, k, v as column slices of one fused projection (q_stride, kv_stride); caches at an address that is not
** 16-byte aligned (the element-load path); several chunks per query (min_chunk small) and chunks past the
** visible range (n_chunks large). Caches and partial buffers start as NaN, so a read of a slot that is not
** visible, or of a partial no chunk wrote, poisons the output. One merge-counter buffer serves every call of a
** case (as a replayed command buffer reuses it): it must be all zero again after each dispatch.
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

typedef struct flash_case {
    uint32_t Hq, Hkv, D, window, cap, L;
    float    softcap;
    bool     act_f16, kv_f16;
    bool     strided;      /* q, k, v are slices of one [T, (Hq + 2 Hkv) D] tensor */
    bool     unaligned;    /* caches start 1 element into their buffer */
    uint32_t n_chunks, min_chunk;   /* decode split */
    uint32_t br;                    /* prefill rows per workgroup */
    uint32_t chunks[8];             /* chunk sizes summing to L; 0 ends the list */
} flash_case;

/* Bound for GPU vs reference, as test_k_attention.c: both read identical stored values; what remains is f32
** arithmetic order (dot products of <= 256 terms, the per-cluster / per-tile online-softmax rescaling, the
** merge of chunks: a few f32 roundings of values <= ~e^|s|-scaled sums, ~1e-6 relative) against the
** reference's double sums. 1e-4 for f32 outputs; a wrong key (mask off by one, wrong slot or head, a chunk
** counted twice or missed) moves outputs by >= ~1e-2 with these sizes. f16 output: plus one rounding. */
static double tol(bool f16, double y) { return 1e-4 + (f16 ? ldexp(fabs(y), -10) : 0.0); }

static bool same_or_both_nan(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

static dp_kernel *kernel(kg_ctx *c, const char *file, const flash_case *fc, const dp_kconst *k, uint32_t nk)
{
    const char *defs[4];
    uint32_t nd = kg_defines(defs, fc->act_f16, -1, fc->kv_f16);
    dp_kernel_desc kd = {.file = file, .defines = defs, .n_defines = nd, .constants = k, .n_constants = nk};
    dp_kernel *out = NULL;
    dp_err e = {0};
    if (dp_kernel_get(c->dev, &kd, &out, &e) != DP_OK) fail_msg("kernel %s: %s", file, e.msg);
    return out;
}

static uint32_t subgroup(kg_ctx *c) { return dp_device_get_caps(c->dev)->subgroup_size; }
static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

typedef struct io {
    dp_gtensor *fused, *q, *k, *v, *pos;
    uint32_t    q_stride, kv_stride;
} io;

/* q, k, v for tokens s .. s + T - 1, contiguous or as slices of one fused tensor. */
static io io_make(kg_ctx *c, const flash_case *fc, const float *q, const float *k, const float *v,
                  const uint32_t *pos, uint32_t T)
{
    dp_dtype adt = fc->act_f16 ? DP_F16 : DP_F32;
    uint32_t D = fc->D, nq = fc->Hq * D, nk = fc->Hkv * D;
    io r = {0};
    r.pos = kg_upload_u32(c, pos, T);
    if (!fc->strided) {
        r.q = kg_upload(c, adt, q, (uint64_t)T * nq);
        r.k = kg_upload(c, adt, k, (uint64_t)T * nk);
        r.v = kg_upload(c, adt, v, (uint64_t)T * nk);
        return r;
    }
    uint32_t row = nq + 2 * nk;
    float *f = malloc((uint64_t)T * row * 4);
    assert_non_null(f);
    for (uint32_t t = 0; t < T; t++) {
        memcpy(f + (uint64_t)t * row, q + (uint64_t)t * nq, nq * 4);
        memcpy(f + (uint64_t)t * row + nq, k + (uint64_t)t * nk, nk * 4);
        memcpy(f + (uint64_t)t * row + nq + nk, v + (uint64_t)t * nk, nk * 4);
    }
    r.fused = kg_upload(c, adt, f, (uint64_t)T * row);
    free(f);
    dp_err e = {0};
    uint64_t es = (uint64_t)(adt == DP_F16 ? 2 : 4), shq[1] = {(uint64_t)(T - 1) * row + nq}, shk[1] = {(uint64_t)(T - 1) * row + nk};
    if (dp_gtensor_view(r.fused, 0, adt, 1, shq, &r.q, &e) != DP_OK ||
        dp_gtensor_view(r.fused, nq * es, adt, 1, shk, &r.k, &e) != DP_OK ||
        dp_gtensor_view(r.fused, (nq + nk) * es, adt, 1, shk, &r.v, &e) != DP_OK)
        fail_msg("view: %s", e.msg);
    r.q_stride = r.kv_stride = row;
    return r;
}

static void io_free(io *r)
{
    dp_gtensor_release(r->q);
    dp_gtensor_release(r->k);
    dp_gtensor_release(r->v);
    dp_gtensor_release(r->pos);
    dp_gtensor_release(r->fused);
}

typedef struct caches {
    dp_gtensor *kbuf, *vbuf, *kc, *vc;
} caches;

static caches caches_make(kg_ctx *c, const flash_case *fc, const float *nan_fill)
{
    dp_dtype kvt = fc->kv_f16 ? DP_F16 : DP_F32;
    uint64_t n = (uint64_t)fc->Hkv * fc->cap * fc->D, off = fc->unaligned ? 1 : 0;
    caches r = {0};
    r.kbuf = kg_upload(c, kvt, nan_fill, n + off);
    r.vbuf = kg_upload(c, kvt, nan_fill, n + off);
    dp_err e = {0};
    uint64_t sh[1] = {n};
    if (dp_gtensor_view(r.kbuf, off * (kvt == DP_F16 ? 2 : 4), kvt, 1, sh, &r.kc, &e) != DP_OK ||
        dp_gtensor_view(r.vbuf, off * (kvt == DP_F16 ? 2 : 4), kvt, 1, sh, &r.vc, &e) != DP_OK)
        fail_msg("view: %s", e.msg);
    return r;
}

static void caches_free(caches *r)
{
    dp_gtensor_release(r->kc);
    dp_gtensor_release(r->vc);
    dp_gtensor_release(r->kbuf);
    dp_gtensor_release(r->vbuf);
}

static void gpu_append(kg_ctx *c, const flash_case *fc, caches *g, const io *x, uint32_t T)
{
    dp_kconst wg = {"WG", 64};
    dp_dispatch d;
    uint32_t gx, gy;
    dp_dispatch_init(&d, kernel(c, "attention/kv_append.comp", fc, &wg, 1));
    dp_dispatch_tensor(&d, "k", x->k);
    dp_dispatch_tensor(&d, "v", x->v);
    dp_dispatch_tensor(&d, "kc", g->kc);
    dp_dispatch_tensor(&d, "vc", g->vc);
    dp_dispatch_tensor(&d, "pos", x->pos);
    dp_dispatch_u32(&d, "n_tokens", T);
    dp_dispatch_u32(&d, "n_kv_heads", fc->Hkv);
    dp_dispatch_u32(&d, "head_dim", fc->D);
    dp_dispatch_u32(&d, "cap", fc->cap);
    dp_dispatch_u32(&d, "kv_stride", x->kv_stride);
    kg_groups_1d((uint64_t)T * fc->Hkv * fc->D, 64, &gx, &gy);
    kg_run(c, &d, gx, gy, 1);
}

/* The push members both attention kernels share. */
static void common_push(dp_dispatch *d, const flash_case *fc, float scale, const caches *g, const io *x, uint32_t T)
{
    dp_dispatch_tensor(d, "q", x->q);
    dp_dispatch_tensor(d, "k", x->k);
    dp_dispatch_tensor(d, "v", x->v);
    dp_dispatch_tensor(d, "kc", g->kc);
    dp_dispatch_tensor(d, "vc", g->vc);
    dp_dispatch_tensor(d, "pos", x->pos);
    dp_dispatch_u32(d, "n_tokens", T);
    dp_dispatch_u32(d, "n_q_heads", fc->Hq);
    dp_dispatch_u32(d, "n_kv_heads", fc->Hkv);
    dp_dispatch_u32(d, "cap", fc->cap);
    dp_dispatch_u32(d, "window", fc->window);
    dp_dispatch_f32(d, "scale", scale);
    dp_dispatch_f32(d, "softcap", fc->softcap);
    dp_dispatch_u32(d, "q_stride", x->q_stride);
    dp_dispatch_u32(d, "kv_stride", x->kv_stride);
}

/* attention_decode.comp's shared memory for a variant, as lower/attention.lua's decode_shared computes it. */
static uint32_t decode_shared(uint32_t wg, uint32_t lk, uint32_t D, uint32_t G)
{
    uint32_t ncl = wg / lk, mg = 2 * G * 64 + G;
    return 4 * (ncl * G * 2 + (ncl * D > mg ? ncl * D : mg)) + 4;
}

/* lower/attention.lua's auto lanes per key row: the largest power of two <= the subgroup size with D / LK a multiple of
** VEC (min(subgroup, D / VEC) for a power-of-two head_dim; head_dim 96 with an f16 cache: 4 lanes of 24). */
static uint32_t decode_lanes(uint32_t sg, uint32_t D, uint32_t vec)
{
    uint32_t lk = 1;
    while (lk * 2 <= sg && D % (lk * 2) == 0 && (D / (lk * 2)) % vec == 0) lk *= 2;
    return lk;
}

/* Flash decoding in one dispatch, partials NaN-filled. Spec constants as lower/attention.lua's auto picks them (alt =
** false: one q head per workgroup, GS = Hq / Hkv workgroups per kv head, LK = decode_lanes, WG = 8 clusters of
** LK lanes, UK = 1 key per round), or a second variant (alt: every q head of a kv head in one workgroup, LK
** halved where it can be, the widest WG <= 256 that fits, UK = 2). The counter must come back all zero. */
static void gpu_decode(kg_ctx *c, const flash_case *fc, float scale, const caches *g, const io *x,
                       dp_gtensor *out, uint32_t T, const float *nan_fill, dp_gtensor *counter, bool alt)
{
    uint32_t vec = fc->kv_f16 ? 8 : 4, lk = decode_lanes(subgroup(c), fc->D, vec), NC = fc->n_chunks;
    uint32_t gs = alt ? 1 : fc->Hq / fc->Hkv, G = fc->Hq / fc->Hkv / gs, uk = alt ? 2 : 1;
    if (alt && lk > 1) lk /= 2;
    uint32_t wg = 8 * lk;
    if (alt) {
        wg = decode_shared(256, lk, fc->D, G) <= 32768 ? 256 : (lk > 128 ? lk : 128);
        while (wg > lk && decode_shared(wg, lk, fc->D, G) > 32768) wg /= 2;   /* lavapipe: 32 KiB */
    }
    assert_true(decode_shared(wg, lk, fc->D, G) <= 32768);
    dp_kconst k1[6] = {{"WG", wg}, {"D", fc->D}, {"G", G}, {"LK", lk}, {"UK", uk}, {"GS", gs}};
    dp_gtensor *po = kg_upload(c, DP_F32, nan_fill, (uint64_t)T * fc->Hq * NC * fc->D);
    dp_gtensor *pml = kg_upload(c, DP_F32, nan_fill, (uint64_t)T * fc->Hq * NC * 2);
    dp_dispatch d;
    dp_dispatch_init(&d, kernel(c, "attention/attention_decode.comp", fc, k1, 6));
    common_push(&d, fc, scale, g, x, T);
    dp_dispatch_tensor(&d, "o", out);
    dp_dispatch_tensor(&d, "part_o", po);
    dp_dispatch_tensor(&d, "part_ml", pml);
    dp_dispatch_tensor(&d, "counter", counter);
    dp_dispatch_u32(&d, "n_chunks", NC);
    dp_dispatch_u32(&d, "min_chunk", fc->min_chunk);
    kg_run(c, &d, fc->Hkv * gs, NC, T);
    dp_gtensor_release(po);
    dp_gtensor_release(pml);

    uint32_t n = T * fc->Hkv * gs, cnt[256];
    assert_true(n <= 256);
    kg_download_u32(counter, cnt, n);
    for (uint32_t i = 0; i < n; i++)
        if (cnt[i] != 0) fail_msg("attention_decode LK=%u WG=%u UK=%u: merge counter %u left at %u", lk, wg, uk, i, cnt[i]);
}

static void gpu_prefill(kg_ctx *c, const flash_case *fc, float scale, const caches *g, const io *x,
                        dp_gtensor *out, uint32_t T)
{
    /* lower/attention.lua's auto choice: the largest power of two <= min(subgroup, D / 8) dividing D */
    uint32_t lanes = 1;
    while (lanes * 2 <= min_u32(subgroup(c), fc->D / 8) && fc->D % (lanes * 2) == 0) lanes *= 2;
    uint32_t bc = min_u32(64, (fc->kv_f16 ? 4096 : 2048) / fc->D);
    dp_kconst kc[4] = {{"WG", fc->br * lanes}, {"D", fc->D}, {"LANES", lanes}, {"BC", bc}};
    dp_dispatch d;
    dp_dispatch_init(&d, kernel(c, "attention/attention_prefill.comp", fc, kc, 4));
    common_push(&d, fc, scale, g, x, T);
    dp_dispatch_tensor(&d, "o", out);
    uint32_t rows = T * (fc->Hq / fc->Hkv);
    kg_run(c, &d, (rows + fc->br - 1) / fc->br, fc->Hkv, 1);
}

static void compare(const char *name, const char *what, int step, const float *got, const float *ref, uint64_t n,
                    uint32_t Hq, uint32_t D, bool f16, double *worst)
{
    for (uint64_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - ref[i]);
        if (!(diff <= tol(f16, ref[i])))
            fail_msg("%s: %s %d token %u head %u dim %u: %.7g, ref %.7g (diff %.3g)", name, what, step,
                     (uint32_t)(i / ((uint64_t)Hq * D)), (uint32_t)(i / D % Hq), (uint32_t)(i % D), got[i], ref[i],
                     diff);
        if (diff / tol(f16, ref[i]) > *worst) *worst = diff / tol(f16, ref[i]);
    }
}

static void run_case(kg_ctx *c, const flash_case *fc)
{
    const uint32_t L = fc->L, Hq = fc->Hq, Hkv = fc->Hkv, D = fc->D;
    const dp_dtype adt = fc->act_f16 ? DP_F16 : DP_F32;
    const float scale = 2.0f / sqrtf((float)D);   /* scores of a few units: a peaked, not flat, softmax */
    const uint64_t nq = (uint64_t)L * Hq * D, nk = (uint64_t)L * Hkv * D, ncache = (uint64_t)Hkv * fc->cap * D;
    const uint64_t npart = (uint64_t)L * Hq * fc->n_chunks * D;

    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *ref = malloc(nq * 4);
    float *got = malloc(nq * 4), *rkc = malloc(ncache * 4), *rvc = malloc(ncache * 4), *gkc = malloc(ncache * 4);
    uint64_t n_nan = ncache + 1;
    if (nq > n_nan) n_nan = nq;
    if (npart > n_nan) n_nan = npart;
    float *nanf = malloc(n_nan * 4);
    uint32_t *pos = malloc(L * 4);
    assert_true(q && k && v && ref && got && rkc && rvc && gkc && nanf && pos);
    kg_fill(c, q, nq, 1.0f);
    kg_fill(c, k, nk, 1.0f);
    kg_fill(c, v, nk, 1.0f);
    kg_round(q, adt, nq);
    kg_round(k, adt, nk);
    kg_round(v, adt, nk);
    for (uint64_t i = 0; i < ncache; i++) rkc[i] = rvc[i] = NAN;
    for (uint64_t i = 0; i < n_nan; i++) nanf[i] = NAN;
    for (uint32_t t = 0; t < L; t++) pos[t] = t;

    char name[200];
    snprintf(name, sizeof name, "Hq=%u Hkv=%u D=%u W=%u cap=%u L=%u softcap=%g act=%s kv=%s%s%s chunks=%u/%u br=%u",
             Hq, Hkv, D, fc->window, fc->cap, L, (double)fc->softcap, dp_dtype_name(adt),
             fc->kv_f16 ? "f16" : "f32", fc->strided ? " strided" : "", fc->unaligned ? " unaligned" : "",
             fc->n_chunks, fc->min_chunk, fc->br);
    dp_attn_params prm = {.n_q_heads = Hq, .n_kv_heads = Hkv, .head_dim = D, .cap = fc->cap,
                          .window = fc->window, .scale = scale, .softcap = fc->softcap, .kv_f16 = fc->kv_f16};

    uint32_t zeros[256] = {0};
    assert_true(L * Hkv <= 256 && Hq <= 256);   /* a chunk's (token, kv head) pairs; a step's q heads */
    dp_gtensor *counter = kg_upload_u32(c, zeros, 256);

    /* ---- chunked: attention (both kernels), then append ---- */
    caches g = caches_make(c, fc, nanf);
    double worst_pre = 0.0, worst_dec = 0.0, worst_step = 0.0;
    uint32_t s = 0;
    for (int ci = 0; ci < 8 && fc->chunks[ci]; ci++) {
        uint32_t T = fc->chunks[ci];
        assert_true(s + T <= L);
        const float *qc = q + (uint64_t)s * Hq * D, *kc = k + (uint64_t)s * Hkv * D, *vc = v + (uint64_t)s * Hkv * D;
        uint64_t no = (uint64_t)T * Hq * D;
        io x = io_make(c, fc, qc, kc, vc, pos + s, T);
        prm.n_tokens = T;
        dp_ref_attention(&prm, qc, kc, vc, rkc, rvc, pos + s, ref + (uint64_t)s * Hq * D);

        dp_gtensor *to = kg_upload(c, adt, nanf, no);
        gpu_prefill(c, fc, scale, &g, &x, to, T);
        kg_download(to, got, no);
        compare(name, "prefill chunk", ci, got, ref + (uint64_t)s * Hq * D, no, Hq, D, fc->act_f16, &worst_pre);
        dp_gtensor_release(to);

        to = kg_upload(c, adt, nanf, no);
        gpu_decode(c, fc, scale, &g, &x, to, T, nanf, counter, true);
        kg_download(to, got, no);
        compare(name, "decode kernel, chunk", ci, got, ref + (uint64_t)s * Hq * D, no, Hq, D, fc->act_f16, &worst_dec);
        dp_gtensor_release(to);

        dp_ref_kv_append(&prm, kc, vc, pos + s, rkc, rvc);
        gpu_append(c, fc, &g, &x, T);
        kg_download(g.kc, gkc, ncache);
        for (uint64_t i = 0; i < ncache; i++)
            if (!same_or_both_nan(gkc[i], rkc[i]))
                fail_msg("%s: after chunk %d cache element %llu: %.8g, ref %.8g", name, ci, (unsigned long long)i,
                         gkc[i], rkc[i]);
        io_free(&x);
        s += T;
    }
    assert_int_equal(s, L);
    caches_free(&g);

    /* ---- decode, one token at a time: append, then attention ---- */
    g = caches_make(c, fc, nanf);
    for (uint32_t t = 0; t < L; t++) {
        io x = io_make(c, fc, q + (uint64_t)t * Hq * D, k + (uint64_t)t * Hkv * D, v + (uint64_t)t * Hkv * D,
                       pos + t, 1);
        dp_gtensor *to = kg_upload(c, adt, nanf, (uint64_t)Hq * D);
        gpu_append(c, fc, &g, &x, 1);
        gpu_decode(c, fc, scale, &g, &x, to, 1, nanf, counter, false);
        kg_download(to, got, (uint64_t)Hq * D);
        compare(name, "decode step", (int)t, got, ref + (uint64_t)t * Hq * D, (uint64_t)Hq * D, Hq, D, fc->act_f16,
                &worst_step);
        dp_gtensor_release(to);
        io_free(&x);
    }
    caches_free(&g);
    dp_gtensor_release(counter);
    print_message("  %s: worst err/tol prefill %.3f, decode kernel %.3f, decode steps %.3f\n", name, worst_pre,
                  worst_dec, worst_step);
    free(q); free(k); free(v); free(ref); free(got); free(rkc); free(rvc); free(gkc); free(nanf); free(pos);
}

static const flash_case CASES[] = {
    /* gemma3-tiny: MQA (ratio 4), D 32, ring of W = 8; an 11-token chunk crosses the window, later chunks wrap */
    {4, 1, 32, 8, 8, 27, 0.0f, false, false, false, false, 3, 2, 16, {11, 1, 1, 7, 1, 6}},
    {4, 1, 32, 8, 8, 27, 0.0f, true, true, true, false, 4, 1, 8, {11, 1, 1, 7, 1, 6}},
    /* gemma3-tiny-scaled: ratio 2, D 16, W 6, softcap, f16; caches unaligned (element loads) */
    {4, 2, 16, 6, 6, 20, 1.0f, true, true, false, true, 2, 3, 4, {9, 1, 10}},
    {4, 2, 16, 6, 6, 20, 1.0f, false, true, true, true, 8, 1, 16, {9, 1, 10}},
    /* Gemma 1B head: D 256, global, ratio 1 and 4, softcap */
    {2, 2, 256, 0, 24, 23, 0.0f, false, true, false, false, 4, 2, 8, {5, 1, 17}},
    {4, 1, 256, 0, 24, 23, 30.0f, true, false, true, false, 3, 4, 16, {5, 1, 4, 13}},
    /* Llama 3.2 1B head: D 64, ratio 4, global, 70 keys: many chunks and many prefill tiles */
    {8, 2, 64, 0, 80, 70, 0.0f, false, false, false, false, 16, 2, 16, {40, 1, 29}},
    {8, 2, 64, 0, 80, 70, 0.0f, true, true, true, false, 5, 8, 32, {40, 1, 29}},
    /* up to 24 chunks with keys: the decode merge sums more partials than it loads in its first batch (16) */
    {8, 2, 64, 0, 80, 70, 0.0f, false, true, false, false, 32, 2, 16, {40, 1, 29}},
    /* D 128 (Llama 8B / Qwen), ratio 2, sliding W 12 in a ring of 16, f32 KV, unaligned */
    {4, 2, 128, 12, 16, 40, 0.0f, false, false, false, true, 6, 2, 8, {20, 2, 3, 15}},
    /* Phi-3 mini's head: D 96, not a power of two (f16 cache: 4 lanes of 24 elements; f32: 8 of 12) */
    {4, 4, 96, 0, 40, 33, 0.0f, true, true, false, false, 4, 2, 8, {17, 1, 15}},
    {4, 2, 96, 0, 40, 33, 0.0f, false, false, true, false, 6, 2, 16, {17, 1, 15}},
    /* sliding with a ring larger than the window (cap 9, W 5), softcap, one chunk for everything */
    {2, 1, 32, 5, 9, 30, 0.5f, false, true, false, false, 1, 64, 4, {3, 4, 1, 12, 10}},
};

static void test_flash(void **state)
{
    kg_ctx *c = *state;
    for (size_t i = 0; i < DP_ARRAY_LEN(CASES); i++) run_case(c, &CASES[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flash),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
