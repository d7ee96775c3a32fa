/*
** tests/unit/k_qkv.h: q, k, v and KV-cache buffers on the device for the attention-prologue kernel tests
** (test_k_rope_kv.c, test_k_attention_rope.c): separate tensors, or column slices of one fused projection.
** Header-only (static inline) like k_gpu.h; include after <cmocka.h> and k_gpu.h.
*/
#ifndef DP_TEST_K_QKV_H
#define DP_TEST_K_QKV_H

#include <string.h>

typedef struct kqkv_shape {
    uint32_t T, Hq, Hkv, D, cap;
    bool     act_f16, kv_f16, strided;
} kqkv_shape;

typedef struct kqkv_bufs {
    dp_gtensor *fused, *q, *k, *v, *kc, *vc;
    uint32_t    q_stride, kv_stride;
} kqkv_bufs;

/* q [T, Hq, D], k, v [T, Hkv, D] on the device (separate, or slices of one [T, (Hq + 2 Hkv) D] tensor) and
** the caches. */
static inline kqkv_bufs kqkv_make(kg_ctx *c, const kqkv_shape *ac, const float *q, const float *k, const float *v,
                      const float *kc, const float *vc)
{
    dp_dtype adt = ac->act_f16 ? DP_F16 : DP_F32, kvt = ac->kv_f16 ? DP_F16 : DP_F32;
    uint32_t T = ac->T, nq = ac->Hq * ac->D, nk = ac->Hkv * ac->D;
    uint64_t nc = (uint64_t)ac->Hkv * ac->cap * ac->D;
    kqkv_bufs b = {0};
    b.kc = kg_upload(c, kvt, kc, nc);
    b.vc = kg_upload(c, kvt, vc, nc);
    if (!ac->strided) {
        b.q = kg_upload(c, adt, q, (uint64_t)T * nq);
        b.k = kg_upload(c, adt, k, (uint64_t)T * nk);
        b.v = kg_upload(c, adt, v, (uint64_t)T * nk);
        return b;
    }
    uint32_t row = nq + 2 * nk;
    float *f = malloc((uint64_t)T * row * 4);
    assert_non_null(f);
    for (uint32_t t = 0; t < T; t++) {
        memcpy(f + (uint64_t)t * row, q + (uint64_t)t * nq, nq * 4);
        memcpy(f + (uint64_t)t * row + nq, k + (uint64_t)t * nk, nk * 4);
        memcpy(f + (uint64_t)t * row + nq + nk, v + (uint64_t)t * nk, nk * 4);
    }
    b.fused = kg_upload(c, adt, f, (uint64_t)T * row);
    free(f);
    dp_err e = {0};
    uint64_t es = ac->act_f16 ? 2 : 4, shq[1] = {(uint64_t)(T - 1) * row + nq}, shk[1] = {(uint64_t)(T - 1) * row + nk};
    if (dp_gtensor_view(b.fused, 0, adt, 1, shq, &b.q, &e) != DP_OK ||
        dp_gtensor_view(b.fused, nq * es, adt, 1, shk, &b.k, &e) != DP_OK ||
        dp_gtensor_view(b.fused, (nq + nk) * es, adt, 1, shk, &b.v, &e) != DP_OK)
        fail_msg("view: %s", e.msg);
    b.q_stride = b.kv_stride = row;
    return b;
}

static inline void kqkv_free(kqkv_bufs *b)
{
    dp_gtensor_release(b->q);
    dp_gtensor_release(b->k);
    dp_gtensor_release(b->v);
    dp_gtensor_release(b->kc);
    dp_gtensor_release(b->vc);
    dp_gtensor_release(b->fused);
}

#endif
