#version 460
// sample_topk: the draw when top-k or top-p needs an ordering (core/sample.h, steps 3-6). Each workgroup
// sorts SORT_N (value, id) entries in shared memory (bitonic; larger value first, ties to the lower id;
// entries that are no candidate, NaN or -inf, become (-inf, 0xffffffff) and sort last) and either
// keeps the first kp (the top kp of its entries, in order) or, in the last stage, draws the id.
//   mode 0: entries z[g*SORT_N + i] of the row (n = row length)               groups: ceil(n / SORT_N)
//   mode 1: SORT_N / kp sorted lists of kp entries from in_val/in_id [n_lists * kp] (n = n_lists), lists
//           g*F .. g*F + F - 1 with F = SORT_N / kp                           groups: ceil(n / F)
// The top kp of a union is the top kp of the parts' top kp, so stages of mode 1 shrink the lists by F
// until one group is left; that one runs with final = 1 and writes ids[0]:
//   the first k entries are the top-k; top-p (top_p < 1): cum_i = sum_{j<=i} dp_sample_exp(v_j - v_0) in
//   order in f32 (thread 0), keep the first m with cum_{m-1} >= top_p * cum_{k-1}; min-p: v >= v_0 +
//   log_min_p (log_min_p = -inf: off); then the largest key v + temperature * gumbel(seed, steps[0], id),
//   ties to the lower id. ids[0] = 0xffffffff when the row has no candidate.
// Push:  z (f32 [n], read)  in_val (f32, read)  in_id (u32, read)  out_val (f32 [groups * kp], write)
//        out_id (u32, write)  ids (u32 [1], write)  steps (u32 [1], read)
//        n, kp (a power of two <= SORT_N / 2), k (<= kp), mode, final,
//        temperature (> 0), top_p, log_min_p, seed_lo, seed_hi
// Unused pointers must still be set (any tensor): the recorder checks every member.
// Spec:  WG  workgroup size, a power of two <= SORT_N / 2 (default 256)
//        SORT_N  entries sorted per workgroup (default 2048: 16 KiB of shared memory, Vulkan's minimum)
#include "dp_common.glsl"
#include "sample_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint SORT_N = 2048;

layout(push_constant) uniform Push {
    F32In   z;
    F32In   in_val;
    U32In   in_id;
    F32Out  out_val;
    U32Out  out_id;
    U32Out  ids;
    U32In   steps;
    uint    n;
    uint    kp;
    uint    k;
    uint    mode;
    uint    final_stage;
    float   temperature;
    float   top_p;
    float   log_min_p;
    uint    seed_lo;
    uint    seed_hi;
} p;

shared float sv[SORT_N];
shared uint  si[SORT_N];
shared uint  s_keep;

void load_entries(uint g, uint tid)
{
    float neg_inf = uintBitsToFloat(0xff800000u);
    for (uint i = tid; i < SORT_N; i += WG) {
        float v = neg_inf;
        uint id = DP_NO_ID;
        if (p.mode == 0u) {
            uint src = g * SORT_N + i;
            if (src < p.n) {
                float zz = p.z.v[src];
                if (dp_candidate(zz)) { v = zz; id = src; }
            }
        } else {
            uint f = SORT_N / p.kp;
            uint list = g * f + i / p.kp;
            if (list < p.n) {
                uint at = list * p.kp + i % p.kp;
                v = p.in_val.v[at];
                id = p.in_id.v[at];
            }
        }
        sv[i] = v;
        si[i] = id;
    }
}

void bitonic_sort(uint tid)
{
    for (uint size = 2u; size <= SORT_N; size <<= 1) {
        for (uint stride = size >> 1; stride > 0u; stride >>= 1) {
            for (uint t = tid; t < SORT_N / 2u; t += WG) {
                uint lo = 2u * t - (t & (stride - 1u)), hi = lo + stride;
                float a = sv[lo], b = sv[hi];
                uint ia = si[lo], ib = si[hi];
                bool in_order = (lo & size) == 0u;      // this block ends up in dp_before order
                bool swap = in_order ? dp_before(b, ib, a, ia) : dp_before(a, ia, b, ib);
                if (swap) {
                    sv[lo] = b; sv[hi] = a;
                    si[lo] = ib; si[hi] = ia;
                }
            }
            barrier();
        }
    }
}

void pick(uint tid)
{
    const uint HALF = SORT_N / 2u;              // entries past kp are free: scratch for cum and the reduction
    float v0 = sv[0];
    if (si[0] == DP_NO_ID) {
        if (tid == 0u) p.ids.v[0] = DP_NO_ID;
        return;
    }
    uint k = p.k;
    if (p.top_p < 1.0) {
        for (uint i = tid; i < k; i += WG) sv[HALF + i] = si[i] != DP_NO_ID ? dp_sample_exp(sv[i] - v0) : 0.0;
        barrier();
        if (tid == 0u) {
            precise float s = 0.0;
            for (uint i = 0u; i < k; i++) {
                s = s + sv[HALF + i];
                sv[HALF + i] = s;
            }
            precise float lim = p.top_p * s;
            uint keep = k;
            for (uint i = 0u; i < k; i++)
                if (sv[HALF + i] >= lim) { keep = i + 1u; break; }
            s_keep = keep;
        }
    } else if (tid == 0u) {
        s_keep = k;
    }
    barrier();
    uint m = s_keep;
    float lim = uintBitsToFloat(0xff800000u);
    if (p.log_min_p != lim) {
        precise float l = v0 + p.log_min_p;
        lim = l;
    }
    uint step = p.steps.v[0];
    float bv = 0.0;
    uint bi = DP_NO_ID;
    for (uint i = tid; i < m; i += WG) {
        uint id = si[i];
        float v = sv[i];
        if (id == DP_NO_ID || !(v >= lim)) continue;
        float key = dp_sample_key(v, p.temperature, p.seed_lo, p.seed_hi, step, id);
        if (bi == DP_NO_ID || dp_before(key, id, bv, bi)) { bv = key; bi = id; }
    }
    sv[HALF + tid] = bv;
    si[HALF + tid] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        uint a = HALF + tid, b = HALF + tid + s;
        if (tid < s && si[b] != DP_NO_ID && (si[a] == DP_NO_ID || dp_before(sv[b], si[b], sv[a], si[a]))) {
            sv[a] = sv[b];
            si[a] = si[b];
        }
        barrier();
    }
    if (tid == 0u) p.ids.v[0] = si[HALF];
}

void main()
{
    uint g = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    load_entries(g, tid);
    barrier();
    bitonic_sort(tid);
    if (p.final_stage != 0u) {
        pick(tid);
        return;
    }
    for (uint i = tid; i < p.kp; i += WG) {
        p.out_val.v[g * p.kp + i] = sv[i];
        p.out_id.v[g * p.kp + i] = si[i];
    }
}
