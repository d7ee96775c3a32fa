/*
** core/ref/norm.c: CPU reference RMSNorm and fused residual-add + RMSNorm (shaders/norm/).
** Gemma's norm is x_hat * (1 + w), Llama's x_hat * w: one function, the offset says which.
** All math in f32 with a double sum of squares, so the reference is the more exact side of a comparison.
*/
#include <math.h>

#include "core/dtype.h"
#include "core/ref/ref.h"

static void norm_row(const float *x, const float *w, float *y, uint32_t n, float eps, float w_offset)
{
    double ss = 0.0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (uint32_t i = 0; i < n; i++) y[i] = x[i] * inv * (w_offset + w[i]);
}

void dp_ref_rmsnorm(const float *x, const float *w, float *y, uint32_t rows, uint32_t n,
                    float eps, float w_offset)
{
    for (uint32_t r = 0; r < rows; r++)
        norm_row(x + (uint64_t)r * n, w, y + (uint64_t)r * n, n, eps, w_offset);
}

void dp_ref_add_rmsnorm(const float *a, const float *b, const float *w, float *r, float *y,
                        uint32_t rows, uint32_t n, float eps, float w_offset, bool round_f16)
{
    for (uint64_t i = 0; i < (uint64_t)rows * n; i++) {
        float s = a[i] + b[i];
        r[i] = round_f16 ? dp_f16_to_f32(dp_f32_to_f16(s)) : s;
    }
    dp_ref_rmsnorm(r, w, y, rows, n, eps, w_offset);
}
