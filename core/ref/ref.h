/*
** core/ref/ref.h: CPU reference implementations of the GPU kernels. Plain loops, f32 math: these
** functions define the semantics every kernel is tested against (HF transformers is their source,
** see docs MODEL_REFERENCE.md). They are not fast and never run in the engine's hot path.
** Each helper keeps its declarations in its own marked block so that branches merge cleanly.
*/
#ifndef DP_CORE_REF_H
#define DP_CORE_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

/* ==== norm / rope / attention / activations (branch kattn) ================================== */

/* --- norm.c --- */
/* y[r, :] = x[r, :] * 1/sqrt(mean(x[r, :]^2) + eps) * (w_offset + w). Gemma: w_offset = 1, else 0.
** x, y: [rows, n]; w: [n]. y may equal x. */
void dp_ref_rmsnorm(const float *x, const float *w, float *y, uint32_t rows, uint32_t n,
                    float eps, float w_offset);
/* r = a + b (the new residual), y = rmsnorm(r). round_f16: r is rounded to f16 before the norm, as the
** f16-activation kernel stores it and normalises the stored value. r may equal a or b. */
void dp_ref_add_rmsnorm(const float *a, const float *b, const float *w, float *r, float *y,
                        uint32_t rows, uint32_t n, float eps, float w_offset, bool round_f16);

/* --- rope.c --- */
typedef enum dp_rope_kind {
    DP_ROPE_DEFAULT = 0,  /* f_i = theta^(-2i/d) */
    DP_ROPE_LINEAR,       /* f_i / factor (Gemma 3 4B+ global layers) */
    DP_ROPE_LLAMA3,       /* Llama 3.1+ band-wise scaling */
    DP_ROPE_KIND_COUNT
} dp_rope_kind;

typedef struct dp_rope_freq_scaling {
    dp_rope_kind kind;
    float factor;             /* linear, llama3: s */
    float low_freq_factor;    /* llama3 */
    float high_freq_factor;   /* llama3 */
    float original_max_pos;   /* llama3: original_max_position_embeddings */
} dp_rope_freq_scaling;

/* Inverse frequencies out[0 .. rot_dim/2) exactly as HF's modeling_rope_utils computes them (f32 tensor
** ops, same order). rot_dim: rotated dimensions (head_dim, or head_dim * partial_rotary_factor), even.
** scaling NULL = default. Bad parameters => DP_EINVAL naming the parameter. */
dp_status dp_rope_inv_freq(double theta, uint32_t rot_dim, const dp_rope_freq_scaling *scaling, float *out,
                           dp_err *err);
/* In place on x[T, H, D]: for i < rot_dim/2, angle a = (float)pos[t] * inv_freq[i] (f32),
**   x[i] <- x[i] cos a - x[i + rot_dim/2] sin a,  x[i + rot_dim/2] <- x[i + rot_dim/2] cos a + x[i] sin a
** (NeoX / HF rotate_half pairing); dims >= rot_dim are unchanged. */
void dp_ref_rope(float *x, uint32_t T, uint32_t H, uint32_t D, uint32_t rot_dim, const uint32_t *pos,
                 const float *inv_freq);

/* --- attention.c --- */
/* Shapes and parameters of one attention call. Caches are Kc, Vc [n_kv_heads, cap, head_dim]; the key
** of absolute position j lives at slot j % cap. */
typedef struct dp_attn_params {
    uint32_t n_tokens;     /* T: queries (and new keys) in this call; positions pos[0] + t, consecutive */
    uint32_t n_q_heads;
    uint32_t n_kv_heads;   /* divides n_q_heads; q head h uses kv head h / (n_q_heads / n_kv_heads) */
    uint32_t head_dim;     /* <= 256 */
    uint32_t cap;          /* cache slots: >= window for sliding layers, > last position for global */
    uint32_t window;       /* 0: global (causal); W: the query at p sees keys p-W < j <= p (HF) */
    float    scale;        /* applied to q.k before the softcap */
    float    softcap;      /* 0: off; c: s = c * tanh(s / c) */
    bool     kv_f16;       /* KV cache is f16: new keys/values are rounded to f16 before use, as stored */
} dp_attn_params;

/* Kc[slot(pos[t])] = k[t], same for V, for the tokens whose slot no later token of the call reuses. */
void dp_ref_kv_append(const dp_attn_params *p, const float *k, const float *v, const uint32_t *pos,
                      float *Kc, float *Vc);
/* out[t, h, :] = softmax_j(cap(scale * q[t,h] . K_j)) V_j over the visible keys j of pos[t]. Keys of
** positions >= pos[0] come from k, v [T, n_kv_heads, D] (this call's), older ones from the caches, so the
** result does not depend on whether kv_append ran before (see attention.c for when that is allowed). */
void dp_ref_attention(const dp_attn_params *p, const float *q, const float *k, const float *v,
                      const float *Kc, const float *Vc, const uint32_t *pos, float *out);
/* First visible key position of a query at position qpos: max(0, qpos - window + 1), or 0 if global. */
uint32_t dp_attn_first_key(uint32_t qpos, uint32_t window);

/* --- act.c --- */
float dp_ref_gelu_tanh(float x);   /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
float dp_ref_silu(float x);        /* x / (1 + exp(-x)) */
typedef enum dp_glu_kind { DP_GLU_GELU_TANH = 0, DP_GLU_SILU, DP_GLU_KIND_COUNT } dp_glu_kind;
/* y[t, f] = act(gate[t * gate_stride + f]) * up[t * up_stride + f] for t < T, f < F. Separate tensors:
** strides F, F. Fused [T, 2F] gate-then-up (Phi-3 gate_up_proj): gate = gu, up = gu + F, strides 2F. */
void dp_ref_glu(dp_glu_kind kind, const float *gate, const float *up, float *y, uint32_t T, uint32_t F,
                uint32_t gate_stride, uint32_t up_stride);
/* y = c * tanh(x / c) over n elements; y may equal x. */
void dp_ref_softcap(const float *x, float *y, uint64_t n, float c);

/* --- argmax.c --- */
/* out[r] = index of the largest x[r, :] (n > 0), the lowest index on ties; a NaN counts as larger than
** any number (torch.argmax), so the first NaN wins. */
void dp_ref_argmax(const float *x, uint32_t rows, uint32_t n, uint32_t *out);

/* ==== end norm / rope / attention / activations ============================================== */

/* ==== matmul / embedding (branch kmat) ======================================================= */

#include "core/dtype.h"   /* dp_dtype */

/* --- matmul.c --- */
/* y[t, n] = sum_k x[t, k] * W[n, k] (+ bias[n] when bias is not NULL): PyTorch's Linear, y = x W^T.
** x: [T, K], W: [N, K], bias: [N] or NULL, y: [T, N]. Accumulates in double, so the reference is the more
** exact side of a comparison with any GPU accumulation order. */
void dp_ref_matmul(const float *x, const float *w, const float *bias, float *y,
                   uint32_t T, uint32_t N, uint32_t K);

/* Widen n stored elements to f32 (dtype f32, f16 or bf16; src holds float, or uint16 bit patterns).
** Any other dtype => DP_EINVAL naming it. */
dp_status dp_ref_to_f32(const void *src, dp_dtype dtype, float *dst, uint64_t n, dp_err *err);
/* Round n floats in place to the nearest f16 / bf16 value (round to nearest even), for building
** references from the same rounded inputs the GPU reads. dtype f32 leaves x unchanged. */
dp_status dp_ref_round(float *x, dp_dtype dtype, uint64_t n, dp_err *err);

/* y[t, c] = table[ids[t], c] * scale (f32 math), table [rows, C] stored as dtype (f32, f16 or bf16),
** y [T, C]. An id >= rows gives a zero row, as the gather kernel does; the call then still returns
** DP_EINVAL naming the first such token, so that hosts notice. */
dp_status dp_ref_embed(const void *table, dp_dtype dtype, uint32_t rows, uint32_t C, const uint32_t *ids,
                       uint32_t T, float scale, float *y, dp_err *err);

/* ==== end matmul / embedding ================================================================== */

/* ==== moe (branch fam) ========================================================================= */

/* --- moe.c --- */
/* Routing per row of logits [T, E] (HF MixtralSparseMoeBlock): p = softmax(row) over E; ids[t, 0..k) = the k
** largest p, descending, the lowest index first on ties; w[t, j] = p[ids[t, j]] / sum_j' p[ids[t, j']].
** A NaN anywhere in a row makes its k weights NaN. ids, w: [T, k]; 1 <= k <= E. */
void dp_ref_topk_softmax(const float *logits, uint32_t T, uint32_t E, uint32_t k, uint32_t *ids, float *w);
/* y[s, n] = sum_i x[r(s), i] * W[ids[s], n, i] for slots s < T * k (s = t * k + j), r(s) = s when x_per_slot
** (x [T * k, K]), else s / k (x [T, K]). W: [E, N, K] (the experts stacked); an id >= E gives a NaN row. */
void dp_ref_expert_matmul(const float *x, const float *W, const uint32_t *ids, uint32_t T, uint32_t k,
                          uint32_t E, uint32_t N, uint32_t K, bool x_per_slot, float *y);
/* y[t, n] = sum_j w[t, j] * x[t, j, n]: x [T, k, N], w [T, k], y [T, N]. */
void dp_ref_weighted_sum(const float *x, const float *w, uint32_t T, uint32_t k, uint32_t N, float *y);

/* ==== end moe ================================================================================= */

/* ==== fused projections (branch fuse) ======================================================== */

/* y[t, n] = act(x[t] . wg[n]) * (x[t] . wu[n]): gate and up projections with the activation in one pass
** (shaders/fused/gemv_multi.comp, DP_GLU). x [T, K], wg and wu [N, K], y [T, N]. */
void dp_ref_glu_linear(dp_glu_kind kind, const float *x, const float *wg, const float *wu, float *y,
                       uint32_t T, uint32_t N, uint32_t K);
/* y[i] = x . w[i]^T (+ bias[i]) for i < count: linears of one input in one pass (Q, K, V projections).
** w[i] [N[i], K], y[i] [T, N[i]]; bias NULL for none. */
void dp_ref_multi_linear(const float *x, uint32_t T, uint32_t K, uint32_t count, const float *const *w,
                         const float *const *bias, float *const *y, const uint32_t *N);

/* ==== end fused projections ==================================================================== */

#endif
