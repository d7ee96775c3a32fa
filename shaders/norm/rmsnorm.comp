#version 460
// rmsnorm: y[r, :] = x[r, :] * inversesqrt(mean(x[r, :]^2) + eps) * (w_offset + w[:])
// Used for hidden rows (n = hidden) and for per-head q/k norms (a row = one head, n = head_dim; x = q[T*H, D]).
// All math in f32; y is rounded to the activation type once, at the end (Gemma's norm; Llama's HF norm
// rounds x_hat before the weight multiply, which differs by one f16 rounding at most).
// Method: ROWS rows per workgroup, LR = WG / ROWS lanes per row (norm_rows.glsl): short rows (q/k norms)
// share a workgroup instead of leaving most of it idle; the sum of squares is reduced with subgroup
// operations (at most one barrier). Each lane keeps its first CACHE elements in registers, so x is read
// from memory once for rows of up to CACHE * LR elements (and re-read only past that).
// Dispatch: one workgroup per ROWS rows: g = ceil(rows / ROWS) groups as (min(g, 65535), ceil(g / 65535), 1);
//           workgroup index = x + y * 65535.
// Push:  x (ACT, read)  w (W [n], read)  y (ACT, write; may be the same tensor as x)
//        rows, n, eps, w_offset (1.0 for Gemma's (1 + w), 0.0 otherwise)
// Spec:  WG  workgroup size, a power of two (default 256)
//        ROWS rows per workgroup, a power of two dividing WG (default 1)
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16 (shaders/include/dp_types.glsl)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint ROWS = 1;

#include "norm_rows.glsl"

layout(push_constant) uniform Push {
    ACT_In  x;   // [rows, n]
    W_In    w;   // [n]
    ACT_Out y;   // [rows, n]
    uint    rows;
    uint    n;
    float   eps;
    float   w_offset;
} p;

const uint CACHE = 8u;   // elements per lane kept in registers

void main()
{
    uint rw, ln;
    norm_lane(rw, ln);
    uint row = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * ROWS + rw;
    bool live = row < p.rows;   // a dead row still takes part in the reduction's barrier
    uint n = live ? p.n : 0u;
    uint64_t off = uint64_t(live ? row : 0u) * p.n;   // 64-bit address math: rows * n may pass 2^32
    ACT_In  xr = ACT_In(uint64_t(p.x) + off * ACT_BYTES);
    ACT_Out yr = ACT_Out(uint64_t(p.y) + off * ACT_BYTES);

    float xc[CACHE];
    float ss = 0.0;
    for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        xc[k] = i < n ? act_load(xr, i) : 0.0;
        ss += xc[k] * xc[k];
    }
    for (uint i = ln + CACHE * LR; i < n; i += LR) {
        float v = act_load(xr, i);
        ss += v * v;
    }
    float inv = inversesqrt(norm_row_sum(ss, rw) / float(p.n) + p.eps);

    for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        if (i < n) act_store(yr, i, xc[k] * inv * (p.w_offset + w_load(p.w, i)));
    }
    for (uint i = ln + CACHE * LR; i < n; i += LR)
        act_store(yr, i, act_load(xr, i) * inv * (p.w_offset + w_load(p.w, i)));
}
