#version 460
// argmax_partial: stage 1 of a row-wise argmax (torch.argmax rules: the lowest index wins ties, and a NaN
// beats every number, so the first NaN wins). Workgroup (c, r) reduces x[r, c*chunk .. min(n, (c+1)*chunk))
// to one (value, index) pair: part_val[r * n_chunks + c], part_idx[r * n_chunks + c].
// Stage 2 (argmax_final.comp) reduces each row's n_chunks pairs. n_chunks = ceil(n / chunk).
// Dispatch: (n_chunks, rows, 1).
// Push:  x (ACT [rows, n], read)  part_val (f32 [rows, n_chunks], write)  part_idx (u32, write)
//        n, chunk, n_chunks
// Spec:  WG  workgroup size, a power of two (default 256)
// Defines: DP_ACT_F16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_In  x;
    F32Out  part_val;
    U32Out  part_idx;
    uint    n;
    uint    chunk;
    uint    n_chunks;
} p;

shared float sv[WG];
shared uint  si[WG];

// Does (a, ia) come before (b, ib) in torch.argmax's order? NaN first, then larger, then lower index.
#include "argmax_order.glsl"

void main()
{
    uint c = gl_WorkGroupID.x, r = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint begin = c * p.chunk, end = min(p.n, begin + p.chunk);
    ACT_In xr = ACT_In(uint64_t(p.x) + uint64_t(r) * p.n * ACT_BYTES);   // rows * n may pass 2^32

    float bv = 0.0;
    uint bi = 0xffffffffu;          // "none yet": loses to any element
    for (uint i = begin + tid; i < end; i += WG) {
        float v = act_load(xr, i);
        if (bi == 0xffffffffu || am_beats(v, i, bv, bi)) { bv = v; bi = i; }
    }
    sv[tid] = bv;
    si[tid] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s && si[tid + s] != 0xffffffffu &&
            (si[tid] == 0xffffffffu || am_beats(sv[tid + s], si[tid + s], sv[tid], si[tid]))) {
            sv[tid] = sv[tid + s];
            si[tid] = si[tid + s];
        }
        barrier();
    }
    if (tid == 0u) {
        p.part_val.v[r * p.n_chunks + c] = sv[0];
        p.part_idx.v[r * p.n_chunks + c] = si[0];
    }
}
