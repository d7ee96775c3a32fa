#version 460
// norm_add_norm: Gemma's sandwich norm around a residual add, in one dispatch (fusion norm_add_norm,
// lua/lib/doppler/fusions.lua; it replaces rmsnorm followed by add_rmsnorm):
//   an = rmsnorm(a; w1, eps1, w_offset1)     (the branch output's post-norm, rounded as rmsnorm stores it)
//   y  = x + an                             (the new residual stream, stored)
//   h  = rmsnorm(y; w2, eps2, w_offset2)     (the next block's pre-norm)
// with rmsnorm.comp's semantics: f32 math, each stored value rounded once to the activation type, and the
// norm of y reads y as stored (add_rmsnorm.comp). Both sums of squares use the lanes and order of
// rmsnorm.comp / add_rmsnorm.comp for the same row layout, so the results are bit-identical to the chain.
// Method: as add_rmsnorm.comp (ROWS rows per workgroup, subgroup reductions, norm_rows.glsl); each lane keeps
// its first CACHE elements of a, then of y, in registers. Past the cache, y is recomputed from x and a in
// the last pass instead of being read back, so y stays write-only and may alias x (each element is read
// before it is written by the same invocation, and never by another).
// Dispatch: one workgroup per ROWS rows: g = ceil(rows / ROWS) groups as (min(g, 65535), ceil(g / 65535), 1).
// Push:  x, a (ACT [rows, n], read)  w1, w2 (W [n], read)  y (ACT, write; may be x)  h (ACT, write)
//        rows, n, eps1, w_offset1, eps2, w_offset2
// Spec:  WG  workgroup size, a power of two (default 256)
//        ROWS rows per workgroup, a power of two dividing WG (default 1)
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16, DP_A_FIX64 (a is the fused MLP's fixed-point sum:
//          dp_types.glsl)
// DP_UNROLL marks the loops whose trip counts are spec constants: on a GPU unrolled at pipeline creation
// (dp_common.glsl), their arrays stay in registers (H100 decode: attention_decode 0.441 -> 0.416 ms per
// token, docs/BENCHMARKS.md 11h).
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
    ACT_In  x;
    A_In    a;
    W_In    w1;
    W_In    w2;
    ACT_Out y;
    ACT_Out h;
    uint    rows;
    uint    n;
    float   eps1;
    float   w_offset1;
    float   eps2;
    float   w_offset2;
} p;

const uint CACHE = 8u;

// y[i] as stored: x + the stored normed a
float residual(ACT_In xr, A_In ar, uint i, float inv1)
{
    float an = act_round(a_load(ar, i) * inv1 * (p.w_offset1 + w_load(p.w1, i)));
    return act_round(act_load(xr, i) + an);
}

void main()
{
    uint rw, ln;
    norm_lane(rw, ln);
    uint row = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * ROWS + rw;
    bool live = row < p.rows;
    uint n = live ? p.n : 0u;
    uint64_t off = uint64_t(live ? row : 0u) * p.n * ACT_BYTES;   // 64-bit address math
    ACT_In  xr = ACT_In(uint64_t(p.x) + off);
    A_In    ar = A_In(uint64_t(p.a) + uint64_t(live ? row : 0u) * p.n * A_BYTES);
    ACT_Out yr = ACT_Out(uint64_t(p.y) + off), hr = ACT_Out(uint64_t(p.h) + off);

    // pass 1: the branch output's sum of squares. The cached elements' x, w1 and w2 are loaded here too:
    // they do not depend on the sums, and loaded after a reduction (a barrier when LR exceeds the subgroup)
    // each would cost one more memory round trip on the critical path.
    float c[CACHE], cx[CACHE], cw1[CACHE], cw2[CACHE];
    float ss = 0.0;
    DP_UNROLL for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        bool in_row = i < n;
        c[k] = in_row ? a_load(ar, i) : 0.0;
        cx[k] = in_row ? act_load(xr, i) : 0.0;
        cw1[k] = in_row ? w_load(p.w1, i) : 0.0;
        cw2[k] = in_row ? w_load(p.w2, i) : 0.0;
    }
    DP_UNROLL for (uint k = 0u; k < CACHE; k++) ss += c[k] * c[k];
    for (uint i = ln + CACHE * LR; i < n; i += LR) {
        float v = a_load(ar, i);
        ss += v * v;
    }
    float inv1 = inversesqrt(norm_row_sum(ss, rw) / float(p.n) + p.eps1);
    if (LR > gl_SubgroupSize) barrier();   // norm_red is reused by the second sum (uniform branch)

    // pass 2: y = x + norm(a) (stored for the cached elements), its sum of squares
    ss = 0.0;
    DP_UNROLL for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        float yv = 0.0;
        if (i < n) {
            yv = act_round(cx[k] + act_round(c[k] * inv1 * (p.w_offset1 + cw1[k])));
            act_store(yr, i, yv);
        }
        c[k] = yv;
        ss += yv * yv;
    }
    for (uint i = ln + CACHE * LR; i < n; i += LR) {
        float v = residual(xr, ar, i, inv1);
        ss += v * v;
    }
    float inv2 = inversesqrt(norm_row_sum(ss, rw) / float(p.n) + p.eps2);

    // pass 3: h = norm(y)
    DP_UNROLL for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        if (i < n) act_store(hr, i, c[k] * inv2 * (p.w_offset2 + cw2[k]));
    }
    for (uint i = ln + CACHE * LR; i < n; i += LR) {
        float v = residual(xr, ar, i, inv1);
        act_store(yr, i, v);
        act_store(hr, i, v * inv2 * (p.w_offset2 + w_load(p.w2, i)));
    }
}
