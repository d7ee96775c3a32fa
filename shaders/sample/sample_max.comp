#version 460
// sample_max: stage 1 of a row maximum over the candidates (NaN and -inf ignored), for min-p:
// part_max[r * n_chunks + c] = max of x[r, c*chunk .. min(n, (c+1)*chunk)), -inf when the chunk has none.
// sample_gumbel.comp reduces the n_chunks partials itself. n_chunks = ceil(n / chunk).
// Dispatch: (n_chunks, rows, 1).
// Push:  x (f32 [rows, n], read)  part_max (f32 [rows, n_chunks], write)  n, chunk, n_chunks
// Spec:  WG  workgroup size, a power of two (default 256)
#include "dp_common.glsl"
#include "sample_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    F32In   x;
    F32Out  part_max;
    uint    n;
    uint    chunk;
    uint    n_chunks;
} p;

shared float sm[WG];

void main()
{
    uint c = gl_WorkGroupID.x, r = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint begin = c * p.chunk, end = min(p.n, begin + p.chunk);
    F32In xr = F32In(uint64_t(p.x) + uint64_t(r) * p.n * 4u);
    float m = uintBitsToFloat(0xff800000u);
    for (uint i = begin + tid; i < end; i += WG) {
        float z = xr.v[i];
        if (dp_candidate(z)) m = max(m, z);
    }
    sm[tid] = m;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) sm[tid] = max(sm[tid], sm[tid + s]);
        barrier();
    }
    if (tid == 0u) p.part_max.v[r * p.n_chunks + c] = sm[0];
}
