// shaders/include/dp_act.glsl: the gate activations of GLU MLPs, one definition for every kernel that
// applies them (act/glu.comp and the fused GEMVs), so that fused and unfused paths compute the same values.
//   dp_glu_act(g, kind)   kind 0: gelu_tanh (GeGLU, Gemma), kind 1: silu (SwiGLU, Llama and most others)
#ifndef DP_ACT_GLSL
#define DP_ACT_GLSL

// tanh without overflow for large |x|.
float dp_safe_tanh(float x)
{
    float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

float dp_glu_act(float g, uint kind)
{
    if (kind == 0u) return 0.5 * g * (1.0 + dp_safe_tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
    return g / (1.0 + exp(-g));
}

#endif
