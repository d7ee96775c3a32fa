/*
** core/ref/attention.c: CPU reference KV-cache append and attention (shaders/attention/).
**
** Cache layout Kc, Vc [n_kv_heads, cap, head_dim]; absolute position j lives at slot j % cap (a ring
** buffer when cap < context: sliding layers need cap >= window).
** Visible keys of a query at position p (HF masking_utils; MODEL_REFERENCE.md 1.6): 0 <= j <= p for
** global layers; p - W < j <= p, i.e. max(0, p - W + 1) .. p, for sliding layers with window W.
** Keys of this call's positions (>= pos[0]) are read from the new k, v tensors, older keys from the
** cache. So attention may run before kv_append (any T, any cap >= W), or after it when no slot a query
** needs was overwritten: always for T = 1, and for T > 1 when cap >= W + T - 1 (or global layers).
** With an f16 cache the new keys and values are rounded to f16 first, so a key has the same value
** whether it comes from the call's tensors or from the cache, and prefill equals token-by-token decode.
*/
#include <math.h>
#include <stdlib.h>

#include "core/dtype.h"
#include "core/ref/ref.h"

uint32_t dp_attn_first_key(uint32_t qpos, uint32_t window)
{
    return (window > 0 && qpos >= window) ? qpos - window + 1 : 0;
}

static float kv_round(const dp_attn_params *p, float x)
{
    return p->kv_f16 ? dp_f16_to_f32(dp_f32_to_f16(x)) : x;
}

void dp_ref_kv_append(const dp_attn_params *p, const float *k, const float *v, const uint32_t *pos,
                      float *Kc, float *Vc)
{
    uint32_t T = p->n_tokens, D = p->head_dim, last = pos[T - 1];
    for (uint32_t t = 0; t < T; t++) {
        if ((uint64_t)pos[t] + p->cap <= last) continue;   /* a later token of this call takes the slot */
        uint32_t slot = pos[t] % p->cap;
        for (uint32_t h = 0; h < p->n_kv_heads; h++)
            for (uint32_t d = 0; d < D; d++) {
                uint64_t src = ((uint64_t)t * p->n_kv_heads + h) * D + d;
                uint64_t dst = ((uint64_t)h * p->cap + slot) * D + d;
                Kc[dst] = kv_round(p, k[src]);
                Vc[dst] = kv_round(p, v[src]);
            }
    }
}

void dp_ref_attention(const dp_attn_params *p, const float *q, const float *k, const float *v,
                      const float *Kc, const float *Vc, const uint32_t *pos, float *out)
{
    uint32_t T = p->n_tokens, D = p->head_dim, Hq = p->n_q_heads, Hkv = p->n_kv_heads;
    uint32_t group = Hq / Hkv, p0 = pos[0];
    double *w = malloc(sizeof(double) * ((size_t)pos[T - 1] + 1));
    DP_ASSERT(w);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < Hq; h++) {
            uint32_t hk = h / group, qp = pos[t], lo = dp_attn_first_key(qp, p->window);
            const float *qr = q + ((uint64_t)t * Hq + h) * D;
            double mx = -INFINITY, sum = 0.0;
            for (uint32_t j = lo; j <= qp; j++) {
                double s = 0.0;
                for (uint32_t d = 0; d < D; d++) {
                    float kd = j >= p0 ? kv_round(p, k[((uint64_t)(j - p0) * Hkv + hk) * D + d])
                                       : Kc[((uint64_t)hk * p->cap + j % p->cap) * D + d];
                    s += (double)qr[d] * kd;
                }
                s *= p->scale;
                if (p->softcap > 0.0f) s = p->softcap * tanh(s / p->softcap);
                w[j] = s;
                if (s > mx) mx = s;
            }
            for (uint32_t j = lo; j <= qp; j++) sum += (w[j] = exp(w[j] - mx));
            float *o = out + ((uint64_t)t * Hq + h) * D;
            for (uint32_t d = 0; d < D; d++) {
                double acc = 0.0;
                for (uint32_t j = lo; j <= qp; j++) {
                    float vd = j >= p0 ? kv_round(p, v[((uint64_t)(j - p0) * Hkv + hk) * D + d])
                                       : Vc[((uint64_t)hk * p->cap + j % p->cap) * D + d];
                    acc += w[j] * vd;
                }
                o[d] = (float)(acc / sum);
            }
        }
    free(w);
}
