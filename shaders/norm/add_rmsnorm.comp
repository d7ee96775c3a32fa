#version 460
// add_rmsnorm: r = a + b (the new residual, stored), y[row, :] = rmsnorm(r[row, :]) * (w_offset + w)
// The norm reads r as stored (rounded to the activation type), as an unfused add followed by rmsnorm would.
// Dispatch: one workgroup per row: (min(rows, 65535), ceil(rows / 65535), 1); row = x + y * 65535.
// Push:  a, b (ACT, read)  w (W [n], read)  r (ACT, write; may be the same tensor as a or b)
//        y (ACT, write)    rows, n, eps, w_offset
// Spec:  WG  workgroup size, a power of two (default 256)
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_In  a;   // [rows, n]
    ACT_In  b;   // [rows, n]
    W_In    w;   // [n]
    ACT_Out r;   // [rows, n]
    ACT_Out y;   // [rows, n]
    uint    rows;
    uint    n;
    float   eps;
    float   w_offset;
} p;

shared float partial[WG];

// a + b rounded to the activation type: the value r holds. Recomputed in the second pass instead of
// reading r back, so r stays write-only (and may alias a or b: each element is read before it is written
// by the same invocation, and never by another).
float residual(ACT_In ar, ACT_In br, uint i)
{
    return float(ACT_T(act_load(ar, i) + act_load(br, i)));
}

void main()
{
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u;
    if (row >= p.rows) return;
    uint tid = gl_LocalInvocationID.x;
    uint64_t off = uint64_t(row) * p.n * ACT_BYTES;   // 64-bit address math: rows * n may pass 2^32
    ACT_In  ar = ACT_In(uint64_t(p.a) + off), br = ACT_In(uint64_t(p.b) + off);
    ACT_Out rr = ACT_Out(uint64_t(p.r) + off), yr = ACT_Out(uint64_t(p.y) + off);

    float ss = 0.0;
    for (uint i = tid; i < p.n; i += WG) {
        float v = residual(ar, br, i);
        ss += v * v;
    }
    partial[tid] = ss;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        barrier();
    }
    float inv = inversesqrt(partial[0] / float(p.n) + p.eps);

    for (uint i = tid; i < p.n; i += WG) {
        float v = residual(ar, br, i);
        act_store(rr, i, v);
        act_store(yr, i, v * inv * (p.w_offset + w_load(p.w, i)));
    }
}
