#version 460
// add_rmsnorm: r = a + b (the new residual, stored), y[row, :] = rmsnorm(r[row, :]) * (w_offset + w)
// The norm reads r as stored (rounded to the activation type), as an unfused add followed by rmsnorm would.
// Method: as rmsnorm.comp (ROWS rows per workgroup, subgroup reductions, the first CACHE residual
// elements of each lane in registers); r is written in the first pass, so past the cache the second pass
// recomputes a + b instead of reading r back (r stays write-only and may alias a or b: each element is
// read before it is written by the same invocation, and never by another).
// Dispatch: one workgroup per ROWS rows: g = ceil(rows / ROWS) groups as (min(g, 65535), ceil(g / 65535), 1).
// Push:  a, b (ACT, read)  w (W [n], read)  r (ACT, write; may be the same tensor as a or b)
//        y (ACT, write)    rows, n, eps, w_offset
// Spec:  WG  workgroup size, a power of two (default 256)
//        ROWS rows per workgroup, a power of two dividing WG (default 1)
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16, DP_A_FIX64 (a is the fused MLP's fixed-point sum:
//          dp_types.glsl; r then never aliases a)
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint ROWS = 1;

#include "norm_rows.glsl"

layout(push_constant) uniform Push {
    A_In    a;   // [rows, n]
    ACT_In  b;   // [rows, n]
    W_In    w;   // [n]
    ACT_Out r;   // [rows, n]
    ACT_Out y;   // [rows, n]
    uint    rows;
    uint    n;
    float   eps;
    float   w_offset;
} p;

const uint CACHE = 8u;

// a + b rounded to the activation type: the value r holds.
float residual(A_In ar, ACT_In br, uint i)
{
    return float(ACT_T(a_load(ar, i) + act_load(br, i)));
}

void main()
{
    uint rw, ln;
    norm_lane(rw, ln);
    uint row = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * ROWS + rw;
    bool live = row < p.rows;
    uint n = live ? p.n : 0u;
    uint64_t off = uint64_t(live ? row : 0u) * p.n * ACT_BYTES;   // 64-bit address math
    A_In    ar = A_In(uint64_t(p.a) + uint64_t(live ? row : 0u) * p.n * A_BYTES);
    ACT_In  br = ACT_In(uint64_t(p.b) + off);
    ACT_Out rr = ACT_Out(uint64_t(p.r) + off), yr = ACT_Out(uint64_t(p.y) + off);

    // The cached elements' weights are loaded with the inputs: after the reduction (a barrier when LR exceeds
    // the subgroup) they would cost one more memory round trip on the critical path.
    float rc[CACHE], cw[CACHE];
    float ss = 0.0;
    DP_UNROLL for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        rc[k] = 0.0;
        cw[k] = i < n ? w_load(p.w, i) : 0.0;
        if (i < n) {
            rc[k] = residual(ar, br, i);
            act_store(rr, i, rc[k]);
        }
        ss += rc[k] * rc[k];
    }
    for (uint i = ln + CACHE * LR; i < n; i += LR) {
        float v = residual(ar, br, i);
        ss += v * v;
    }
    float inv = inversesqrt(norm_row_sum(ss, rw) / float(p.n) + p.eps);

    DP_UNROLL for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        if (i < n) act_store(yr, i, rc[k] * inv * (p.w_offset + cw[k]));
    }
    for (uint i = ln + CACHE * LR; i < n; i += LR) {
        float v = residual(ar, br, i);
        act_store(rr, i, v);
        act_store(yr, i, v * inv * (p.w_offset + w_load(p.w, i)));
    }
}
