// shaders/argmax/argmax_reduce.glsl: stage 2 of the row-wise argmax, for argmax_final.comp and the GPU decode
// loop's advance.comp (which takes it over from argmax_final at the end of a step): the best of n (value,
// index) pairs from argmax_partial.comp or the fused LM head, in torch.argmax order (NaN first, larger, lower
// index). The order is a strict total order, so the workgroup size does not change the result.
// Needs WG (the workgroup size, a power of two) declared before the include, and dp_common.glsl.

#include "argmax_order.glsl"

shared float am_sv[WG];
shared uint  am_si[WG];

const uint AM_NONE = 0xffffffffu;   // no candidate

// The index of the best of pairs base .. base + n - 1 of (val, idx), to every invocation of the workgroup
// (AM_NONE when none has an index). Every invocation must call it (barriers).
uint argmax_reduce(F32In val, U32In idx, uint base, uint n)
{
    uint tid = gl_LocalInvocationID.x;
    float bv = 0.0;
    uint bi = AM_NONE;
    for (uint c = tid; c < n; c += WG) {
        float v = val.v[base + c];
        uint i = idx.v[base + c];
        if (bi == AM_NONE || am_beats(v, i, bv, bi)) { bv = v; bi = i; }
    }
    am_sv[tid] = bv;
    am_si[tid] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s && am_si[tid + s] != AM_NONE &&
            (am_si[tid] == AM_NONE || am_beats(am_sv[tid + s], am_si[tid + s], am_sv[tid], am_si[tid]))) {
            am_sv[tid] = am_sv[tid + s];
            am_si[tid] = am_si[tid + s];
        }
        barrier();
    }
    return am_si[0];
}
