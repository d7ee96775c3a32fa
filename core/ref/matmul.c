/*
** core/ref/matmul.c: CPU reference for the linear layer (shaders/matmul/gemv.comp and gemm.comp), and the
** dtype helpers the tests use to feed both sides the same rounded inputs: a reference computed from the
** very f16/bf16 values the GPU reads differs from it only by accumulation order and output rounding.
*/
#include "core/ref/ref.h"

void dp_ref_matmul(const float *x, const float *w, const float *bias, float *y,
                   uint32_t T, uint32_t N, uint32_t K)
{
    for (uint32_t t = 0; t < T; t++) {
        const float *xr = x + (uint64_t)t * K;
        for (uint32_t n = 0; n < N; n++) {
            const float *wr = w + (uint64_t)n * K;
            double s = bias ? bias[n] : 0.0;
            for (uint32_t k = 0; k < K; k++) s += (double)xr[k] * wr[k];
            y[(uint64_t)t * N + n] = (float)s;
        }
    }
}

dp_status dp_ref_to_f32(const void *src, dp_dtype dtype, float *dst, uint64_t n, dp_err *err)
{
    const uint16_t *h = src;
    switch (dtype) {
    case DP_F32:
        for (uint64_t i = 0; i < n; i++) dst[i] = ((const float *)src)[i];
        return DP_OK;
    case DP_F16:
        for (uint64_t i = 0; i < n; i++) dst[i] = dp_f16_to_f32(h[i]);
        return DP_OK;
    case DP_BF16:
        for (uint64_t i = 0; i < n; i++) dst[i] = dp_bf16_to_f32(h[i]);
        return DP_OK;
    default:
        return DP_FAIL(err, DP_EINVAL, "ref to_f32: dtype %s is not f32, f16 or bf16", dp_dtype_name(dtype));
    }
}

dp_status dp_ref_round(float *x, dp_dtype dtype, uint64_t n, dp_err *err)
{
    switch (dtype) {
    case DP_F32:
        return DP_OK;
    case DP_F16:
        for (uint64_t i = 0; i < n; i++) x[i] = dp_f16_to_f32(dp_f32_to_f16(x[i]));
        return DP_OK;
    case DP_BF16:
        for (uint64_t i = 0; i < n; i++) x[i] = dp_bf16_to_f32(dp_f32_to_bf16(x[i]));
        return DP_OK;
    default:
        return DP_FAIL(err, DP_EINVAL, "ref round: dtype %s is not f32, f16 or bf16", dp_dtype_name(dtype));
    }
}
