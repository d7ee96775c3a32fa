// shaders/argmax/argmax_order.glsl: the order of the argmax candidates, torch.argmax's: a NaN beats every
// number (so the first NaN wins), then the larger value, then, between equal values, the lower index. One
// definition for argmax_partial.comp, argmax_reduce.glsl (argmax_final.comp, loop/advance.comp) and the fused
// LM head (fused/lm_head_common.glsl), whose ids must agree.
#ifndef DP_ARGMAX_ORDER_GLSL
#define DP_ARGMAX_ORDER_GLSL

bool am_beats(float a, uint ia, float b, uint ib)
{
    bool an = isnan(a), bn = isnan(b);
    if (an != bn) return an;
    if (an || a == b) return ia < ib;
    return a > b;
}

#endif
