/*
** core/ref/fused.c: CPU references of the fused projection kernels (shaders/fused/gemv_multi.comp), built on
** the unfused references so that the fused kernels are checked against the very semantics they replace:
** gate+up with the activation (GeGLU / SwiGLU in one pass) and two or three linears of one input (Q, K, V).
*/
#include <stdlib.h>

#include "core/ref/ref.h"

void dp_ref_glu_linear(dp_glu_kind kind, const float *x, const float *wg, const float *wu, float *y,
                       uint32_t T, uint32_t N, uint32_t K)
{
    float *g = malloc(sizeof(float) * T * N), *u = malloc(sizeof(float) * T * N);
    if (!g || !u) { free(g); free(u); return; }   /* the caller's test fails on the unchanged y */
    dp_ref_matmul(x, wg, NULL, g, T, N, K);
    dp_ref_matmul(x, wu, NULL, u, T, N, K);
    dp_ref_glu(kind, g, u, y, T, N, N, N);
    free(g);
    free(u);
}

void dp_ref_multi_linear(const float *x, uint32_t T, uint32_t K, uint32_t count, const float *const *w,
                         const float *const *bias, float *const *y, const uint32_t *N)
{
    for (uint32_t i = 0; i < count; i++) dp_ref_matmul(x, w[i], bias ? bias[i] : NULL, y[i], T, N[i], K);
}
