#version 460
// rmsnorm: y[r, :] = x[r, :] * inversesqrt(mean(x[r, :]^2) + eps) * (w_offset + w[:])
// Used for hidden rows (n = hidden) and for per-head q/k norms (a row = one head, n = head_dim; x = q[T*H, D]).
// All math in f32; y is rounded to the activation type once, at the end (Gemma's norm; Llama's HF norm
// rounds x_hat before the weight multiply, which differs by one f16 rounding at most).
// Dispatch: one workgroup per row: (min(rows, 65535), ceil(rows / 65535), 1); row = x + y * 65535.
// Push:  x (ACT, read)  w (W [n], read)  y (ACT, write; may be the same tensor as x)
//        rows, n, eps, w_offset (1.0 for Gemma's (1 + w), 0.0 otherwise)
// Spec:  WG  workgroup size, a power of two (default 256; choose ~ n for short rows, e.g. 32 for D = 32)
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16 (shaders/include/dp_types.glsl)
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_In  x;   // [rows, n]
    W_In    w;   // [n]
    ACT_Out y;   // [rows, n]
    uint    rows;
    uint    n;
    float   eps;
    float   w_offset;
} p;

shared float partial[WG];

void main()
{
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u;
    if (row >= p.rows) return;   // uniform per workgroup: no barrier is skipped by part of it
    uint tid = gl_LocalInvocationID.x;
    uint64_t off = uint64_t(row) * p.n;   // 64-bit address math: rows * n may pass 2^32
    ACT_In  xr = ACT_In(uint64_t(p.x) + off * ACT_BYTES);
    ACT_Out yr = ACT_Out(uint64_t(p.y) + off * ACT_BYTES);

    float ss = 0.0;
    for (uint i = tid; i < p.n; i += WG) {
        float v = act_load(xr, i);
        ss += v * v;
    }
    partial[tid] = ss;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        barrier();
    }
    float inv = inversesqrt(partial[0] / float(p.n) + p.eps);

    for (uint i = tid; i < p.n; i += WG)
        act_store(yr, i, act_load(xr, i) * inv * (p.w_offset + w_load(p.w, i)));
}
