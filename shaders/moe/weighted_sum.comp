#version 460
// weighted_sum: y[t, n] = sum_j w[t, j] * x[t, j, n]     for t < n_tokens, n < N, j < top_k
// The mixture-of-experts combine: each token's expert outputs weighted by its routing weights. f32 sums,
// in order j = 0, 1, ... (HF adds the experts' contributions one expert at a time).
// Dispatch: one invocation per output element: count = n_tokens * N;
//           groups (min(g, 65535), ceil(g / 65535), 1) with g = ceil(count / WG).
// Push:  x (ACT [n_tokens, top_k, N], read)  w (f32 [n_tokens, top_k], read)  y (ACT [n_tokens, N], write)
//        n_tokens, N, top_k
// Spec:  WG  workgroup size (default 256)
// Defines: DP_ACT_F16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_In  x;
    F32In   w;
    ACT_Out y;
    uint    n_tokens;
    uint    N;
    uint    top_k;
} p;

void main()
{
    uint gid = gl_GlobalInvocationID.x + gl_WorkGroupID.y * 65535u * WG;
    if (gid >= p.n_tokens * p.N) return;
    uint n = gid % p.N, t = gid / p.N;
    float s = 0.0;
    for (uint j = 0u; j < p.top_k; j++)
        s += p.w.v[t * p.top_k + j] * act_load(p.x, (t * p.top_k + j) * p.N + n);
    act_store(p.y, gid, s);
}
