#version 460
// expert_gemv: the matrix product of the experts a token was routed to (mixture of experts), reading only
// those experts' weights:
//   y[s, n] = sum_k x[r(s), k] * W[ids[s], n, k]     for each slot s < S = n_tokens * top_k, n < N
// where slot s = t * top_k + j is the j-th expert of token t, and r(s) = t when x_per_slot = 0 (x [T, K]: the
// layer input, shared by a token's experts) or s when x_per_slot = 1 (x [S, K]: each expert's own hidden
// state, e.g. its SwiGLU output going into the down projection). W holds every expert stacked, [E, N, K]
// (PyTorch Linear layout per expert). An id >= n_experts (never made by topk_softmax) gives a NaN row.
// Each workgroup owns ROWS consecutive rows of one slot's expert; its WG threads split K, partial sums are
// reduced with subgroupAdd, then across subgroups in shared memory (any subgroup size). Accumulation is f32.
// Dispatch: nb = ceil(N / ROWS) row blocks; groups (gx, S, gz) with gx = min(nb, 65535), gz = ceil(nb / gx)
//           (row block = x + gx * z); S <= 65535 slots per dispatch.
// Push:  x (ACT, read)  w (W [n_experts, N, K], read)  ids (u32 [S], read)  y (ACT [S, N], write)
//        n_slots (S), N, K, top_k, x_per_slot (0 | 1), n_experts
// Spec:  WG    workgroup size (default 128)
//        ROWS  rows of W per workgroup (default 2, 1..8)
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16 (dp_types.glsl)
#include "dp_types.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG   = 128;
layout(constant_id = 1) const uint ROWS = 2;

layout(push_constant) uniform Push {
    ACT_In  x;
    W_In    w;
    U32In   ids;
    ACT_Out y;
    uint    n_slots;
    uint    N;
    uint    K;
    uint    top_k;
    uint    x_per_slot;
    uint    n_experts;
} p;

shared float red[ROWS * WG];

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint block = gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.z;
    const uint n0 = block * ROWS;
    const uint s = gl_WorkGroupID.y;
    if (n0 >= p.N || s >= p.n_slots) return;          // uniform over the workgroup

    const uint K = p.K;
    const uint e = p.ids.v[s];
    const bool bad = e >= p.n_experts;
    const uint ec = bad ? 0u : e;
    const uint xr = p.x_per_slot != 0u ? s : s / p.top_k;
    ACT_In xrow = ACT_In(uint64_t(p.x) + uint64_t(xr) * uint64_t(K) * ACT_BYTES);
    uint64_t wrow[ROWS];
    for (uint r = 0u; r < ROWS; ++r)
        wrow[r] = uint64_t(p.w) + (uint64_t(ec) * uint64_t(p.N) + uint64_t(min(n0 + r, p.N - 1u))) * uint64_t(K) * W_BYTES;

    float acc[ROWS];
    for (uint r = 0u; r < ROWS; ++r) acc[r] = 0.0;
    for (uint k = tid; k < K; k += WG) {
        float xv = act_load(xrow, k);
        for (uint r = 0u; r < ROWS; ++r) acc[r] = fma(w_load(W_In(wrow[r]), k), xv, acc[r]);
    }
    for (uint r = 0u; r < ROWS; ++r) {
        float v = subgroupAdd(acc[r]);
        if (subgroupElect()) red[r * WG + gl_SubgroupID] = v;
    }
    barrier();
    for (uint r = tid; r < ROWS; r += WG) {
        const uint n = n0 + r;
        if (n >= p.N) continue;
        float v = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; ++g) v += red[r * WG + g];
        act_store(p.y, s * p.N + n, bad ? uintBitsToFloat(0x7fc00000u) : v);
    }
}
