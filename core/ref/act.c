/*
** core/ref/act.c: CPU reference activations (shaders/act/): the GLU products of the MLPs (GeGLU with
** the tanh GELU for Gemma, SwiGLU for Llama/Qwen/Mistral/Phi-3) and logit soft-capping.
*/
#include <math.h>

#include "core/ref/ref.h"

float dp_ref_gelu_tanh(float x)
{
    /* HF gelu_pytorch_tanh: sqrt(2/pi) = 0.7978845608... */
    double u = x;
    return (float)(0.5 * u * (1.0 + tanh(0.7978845608028654 * (u + 0.044715 * u * u * u))));
}

float dp_ref_silu(float x)
{
    return (float)((double)x / (1.0 + exp(-(double)x)));
}

void dp_ref_glu(dp_glu_kind kind, const float *gate, const float *up, float *y, uint32_t T, uint32_t F,
                uint32_t gate_stride, uint32_t up_stride)
{
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t f = 0; f < F; f++) {
            float g = gate[(uint64_t)t * gate_stride + f];
            float a = kind == DP_GLU_SILU ? dp_ref_silu(g) : dp_ref_gelu_tanh(g);
            y[(uint64_t)t * F + f] = a * up[(uint64_t)t * up_stride + f];
        }
}

void dp_ref_softcap(const float *x, float *y, uint64_t n, float c)
{
    for (uint64_t i = 0; i < n; i++) y[i] = (float)(c * tanh((double)x[i] / c));
}
