/*
** core/ref/rope.c: rotary position embedding: the host-side inverse-frequency tables (default, linear,
** llama3) that shaders/rope/rope.comp reads, and the CPU reference rotation.
** The tables follow HF's modeling_rope_utils.py step by step in f32, in the same order of operations, so
** that the frequencies match HF to the last bit or so (pow may differ by an ulp). MODEL_REFERENCE.md 2.2.
** Scaling kinds that also scale cos/sin (yarn, longrope: an attention factor) are not here yet.
*/
#include <math.h>

#include "core/ref/ref.h"

/* torch evaluates `scalar / tensor` as reciprocal(tensor) * scalar, in the tensor's dtype. */
static float rdiv(float scalar, float t) { return (1.0f / t) * scalar; }

dp_status dp_rope_inv_freq(double theta, uint32_t rot_dim, const dp_rope_freq_scaling *scaling, float *out,
                           dp_err *err)
{
    dp_rope_kind kind = scaling ? scaling->kind : DP_ROPE_DEFAULT;
    if (rot_dim == 0 || rot_dim % 2 != 0)
        return DP_FAIL(err, DP_EINVAL, "rope: rotary dimension %u must be even and > 0", rot_dim);
    if (!(theta > 1.0))
        return DP_FAIL(err, DP_EINVAL, "rope: base theta %g must be > 1", theta);
    if (kind >= DP_ROPE_KIND_COUNT)
        return DP_FAIL(err, DP_EINVAL, "rope: unknown scaling kind %d", (int)kind);
    if (kind != DP_ROPE_DEFAULT && !(scaling->factor > 0.0f))
        return DP_FAIL(err, DP_EINVAL, "rope: scaling factor %g must be > 0", (double)scaling->factor);
    if (kind == DP_ROPE_LLAMA3 &&
        (!(scaling->low_freq_factor > 0.0f) || !(scaling->high_freq_factor > scaling->low_freq_factor) ||
         !(scaling->original_max_pos > 0.0f)))
        return DP_FAIL(err, DP_EINVAL,
                       "rope: llama3 scaling needs 0 < low_freq_factor (%g) < high_freq_factor (%g) and "
                       "original_max_position_embeddings (%g) > 0",
                       (double)scaling->low_freq_factor, (double)scaling->high_freq_factor,
                       (double)scaling->original_max_pos);

    /* default: 1.0 / (base ** (arange(0, dim, 2).float() / dim)); the scalar base is used as f32 */
    float base = (float)theta;
    for (uint32_t i = 0; i < rot_dim / 2; i++) {
        float e = (float)(2 * i) / (float)rot_dim;
        float pw = (float)pow((double)base, (double)e);
        out[i] = 1.0f / pw;
    }
    if (kind == DP_ROPE_LINEAR) {
        for (uint32_t i = 0; i < rot_dim / 2; i++) out[i] = out[i] / scaling->factor;
    } else if (kind == DP_ROPE_LLAMA3) {
        /* _compute_llama3_parameters: python doubles for the band edges, f32 tensors for the rest */
        float s = scaling->factor, lo = scaling->low_freq_factor, hi = scaling->high_freq_factor;
        double old_ctx = scaling->original_max_pos;
        float low_wavelen = (float)(old_ctx / lo), high_wavelen = (float)(old_ctx / hi);
        float two_pi = (float)(2.0 * M_PI), band = (float)((double)hi - (double)lo);
        for (uint32_t i = 0; i < rot_dim / 2; i++) {
            float f = out[i];
            float wavelen = rdiv(two_pi, f);
            float f_llama = wavelen > low_wavelen ? f / s : f;
            float smooth = (rdiv((float)old_ctx, wavelen) - lo) / band;
            float smoothed = (1.0f - smooth) * f_llama / s + smooth * f_llama;
            bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
            out[i] = medium ? smoothed : f_llama;
        }
    }
    return DP_OK;
}

void dp_ref_rope(float *x, uint32_t T, uint32_t H, uint32_t D, uint32_t rot_dim, const uint32_t *pos,
                 const float *inv_freq)
{
    uint32_t half = rot_dim / 2;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < H; h++) {
            float *row = x + ((uint64_t)t * H + h) * D;
            for (uint32_t i = 0; i < half; i++) {
                float a = (float)pos[t] * inv_freq[i];   /* one f32 product, as HF's f32 matmul */
                float c = (float)cos((double)a), s = (float)sin((double)a);
                float x0 = row[i], x1 = row[i + half];
                row[i] = x0 * c - x1 * s;
                row[i + half] = x1 * c + x0 * s;
            }
        }
}
