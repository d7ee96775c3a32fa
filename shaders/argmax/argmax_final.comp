#version 460
// argmax_final: stage 2 of the row-wise argmax: ids[r] = the index of the best of the row's n_chunks
// (value, index) pairs from argmax_partial.comp (torch.argmax order: NaN first, larger, lower index).
// Dispatch: (rows, 1, 1).
// Push:  part_val (f32 [rows, n_chunks], read)  part_idx (u32, read)  ids (u32 [rows], write)  n_chunks
// Spec:  WG  workgroup size, a power of two (default 64)
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(push_constant) uniform Push {
    F32In   part_val;
    U32In   part_idx;
    U32Out  ids;
    uint    n_chunks;
} p;

shared float sv[WG];
shared uint  si[WG];

bool beats(float a, uint ia, float b, uint ib)
{
    bool an = isnan(a), bn = isnan(b);
    if (an != bn) return an;
    if (an || a == b) return ia < ib;
    return a > b;
}

void main()
{
    uint r = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    float bv = 0.0;
    uint bi = 0xffffffffu;
    for (uint c = tid; c < p.n_chunks; c += WG) {
        float v = p.part_val.v[r * p.n_chunks + c];
        uint i = p.part_idx.v[r * p.n_chunks + c];
        if (bi == 0xffffffffu || beats(v, i, bv, bi)) { bv = v; bi = i; }
    }
    sv[tid] = bv;
    si[tid] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s && si[tid + s] != 0xffffffffu &&
            (si[tid] == 0xffffffffu || beats(sv[tid + s], si[tid + s], sv[tid], si[tid]))) {
            sv[tid] = sv[tid + s];
            si[tid] = si[tid + s];
        }
        barrier();
    }
    if (tid == 0u) p.ids.v[r] = si[0];
}
