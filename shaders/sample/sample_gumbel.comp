#version 460
// sample_gumbel: stage 1 of a draw that needs no sorting (greedy, temperature, min-p; see core/sample.h).
// Workgroup (c, r) reduces row r's chunk x[r, c*chunk .. min(n, (c+1)*chunk)) to the candidate with the
// largest key = z + temperature * gumbel(seed, steps[r], i) (temperature <= 0: key = z), ties to the lower i,
// among z that are numbers above -inf and, with min-p, z >= zmax + log_min_p, zmax being the row maximum
// reduced from sample_max.comp's n_max partials (n_max = 0: min-p off). Writes part_val/part_idx
// [r * n_chunks + c] (part_idx = 0xffffffff when the chunk has no candidate); argmax/argmax_final.comp
// then picks the row's id (it skips 0xffffffff and keeps the lower index on ties, as here).
// Dispatch: (n_chunks, rows, 1).
// Push:  x (f32 [rows, n], read)  part_max (f32 [rows, n_max], read)  part_val (f32 [rows, n_chunks], write)
//        part_idx (u32, write)  steps (u32 [rows], read: the draw counter of each row)
//        n, chunk, n_chunks, n_max, temperature, log_min_p, seed_lo, seed_hi
// Spec:  WG  workgroup size, a power of two (default 256)
#include "dp_common.glsl"
#include "sample_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    F32In   x;
    F32In   part_max;
    F32Out  part_val;
    U32Out  part_idx;
    U32In   steps;
    uint    n;
    uint    chunk;
    uint    n_chunks;
    uint    n_max;
    float   temperature;
    float   log_min_p;
    uint    seed_lo;
    uint    seed_hi;
} p;

shared float sv[WG];
shared uint  si[WG];

void main()
{
    uint c = gl_WorkGroupID.x, r = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    float neg_inf = uintBitsToFloat(0xff800000u);
    float lim = neg_inf;
    if (p.n_max > 0u) {
        float m = neg_inf;
        for (uint k = tid; k < p.n_max; k += WG) m = max(m, p.part_max.v[r * p.n_max + k]);
        sv[tid] = m;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1) {
            if (tid < s) sv[tid] = max(sv[tid], sv[tid + s]);
            barrier();
        }
        precise float l = sv[0] + p.log_min_p;
        lim = l;
        barrier();                          // sv is reused below
    }
    uint step = p.steps.v[r];
    uint begin = c * p.chunk, end = min(p.n, begin + p.chunk);
    F32In xr = F32In(uint64_t(p.x) + uint64_t(r) * p.n * 4u);
    float bv = 0.0;
    uint bi = DP_NO_ID;
    for (uint i = begin + tid; i < end; i += WG) {
        float z = xr.v[i];
        if (!dp_candidate(z) || !(z >= lim)) continue;
        float key = dp_sample_key(z, p.temperature, p.seed_lo, p.seed_hi, step, i);
        if (bi == DP_NO_ID || dp_before(key, i, bv, bi)) { bv = key; bi = i; }
    }
    sv[tid] = bv;
    si[tid] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s && si[tid + s] != DP_NO_ID &&
            (si[tid] == DP_NO_ID || dp_before(sv[tid + s], si[tid + s], sv[tid], si[tid]))) {
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
