#version 460
// read_chain: a probe of what reading a layer's weights costs as one dependent dispatch
// (recipes/bench/read_chain.lua), not a model kernel. Every invocation XORs the uvec4s it is given of a region
// of n uvec4s and stores its sum: the minimum a GEMV over those bytes has to do, without the arithmetic,
// the staging of x or the reductions. The bench records one dispatch per step on distinct regions (together
// larger than the L2), a barrier between steps, as doppler's decode orders its kernels.
// Invocation g of G = groups * WG takes the uvec4s g + G * (L * j + i), i < L: each trip issues its L loads
// before it uses any (L in flight per invocation), so L and the grid set the bytes in flight.
// Dispatch: (groups, 1, 1). Push: src (V4In, the region), dst (V4Out [G]: each invocation's XOR), n (uvec4s).
// Spec constants: WG (workgroup size, local_size_x_id = 0), L (loads per invocation per trip, 1..16).
#extension GL_EXT_control_flow_attributes : require
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint L = 4;

layout(push_constant) uniform Push { V4In src; V4Out dst; uint n; } p;

void main()
{
    const uint G = gl_NumWorkGroups.x * WG, g = gl_GlobalInvocationID.x;
    uvec4 acc = uvec4(0u);
    for (uint i0 = g; i0 < p.n; i0 += L * G) {
        uvec4 t[L];
        [[unroll]] for (uint i = 0u; i < L; ++i) t[i] = i0 + i * G < p.n ? p.src.v[i0 + i * G] : uvec4(0u);
        [[unroll]] for (uint i = 0u; i < L; ++i) acc ^= t[i];
    }
    p.dst.v[g] = acc;
}
