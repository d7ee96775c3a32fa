#version 460
// embed_norm: the token embedding lookup and the norm that reads it, in one kernel (fusion embed_norm,
// lua/lib/doppler/fusions.lua):
//   x[t, c] = table[ids[t], c] * scale    as embed/gather.comp (or gather_q.comp for a table in ggml blocks)
//                                         computes it, stored in the activation type;
//   h[t]    = rmsnorm(x[t]; w, eps, w_offset)   as norm/rmsnorm.comp computes it.
// The same values at the same rounding points: the workgroup gathers its rows into shared memory (values
// scaled in f32 and rounded to the activation type, the values rmsnorm.comp would load) and stores x; then
// rmsnorm.comp's statements run on them with its lanes (norm_rows.glsl) and summation order. Bit for bit on
// lavapipe; on the H100 x is too, and h with f16 activations within one f16 ulp (the driver compiles the two
// kernels' same statements differently: docs/BENCHMARKS.md 30f, 30g).
// Why: in a decode step the first layer's input norm was a single-workgroup dispatch of its own right after
// the lookup, on the critical path (~4-5 us on the H100, docs/BENCHMARKS.md session 23).
// An id >= rows yields a zero row, as in gather.comp.
//
// Dispatch: rmsnorm.comp's for T rows of C (lower/base.lua, norm_layout): (gx, gy, 1), ROWS rows per workgroup,
//   row (x + 65535 y) * ROWS + r.
// Push (by name): ids U32 [T]; table W [rows, C] (or blocks, DP_TABLE_Q); x ACT [T, C] (write); w NW [C];
//   y ACT [T, C] (write: h); T, C, rows (the table's); scale; row_blocks (DP_TABLE_Q: gather_q.comp's; 0
//   otherwise); eps, w_offset
// Spec constants (by name): WG, ROWS (rmsnorm.comp's), CMAX (>= C: the length of a shared row)
// Defines: DP_ACT_F16; the table: DP_W_F32 | DP_W_F16 | DP_W_BF16, or DP_TABLE_Q with a DP_Q_* type and its
//   layout (dp_quant.glsl; C a multiple of 8); the norm weight: DP_NW_F16 | DP_NW_BF16 | none (f32).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "dp_types.glsl"
#ifdef DP_TABLE_Q
#include "dp_quant.glsl"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint ROWS = 1;
layout(constant_id = 2) const uint CMAX = 1024;

#include "../norm/norm_rows.glsl"

#if defined(DP_NW_F16)
#define NW_In F16In
#define nw_load(q, i) float((q).v[(i)])
#elif defined(DP_NW_BF16)
#define NW_In BF16In
#define nw_load(q, i) dp_bf16_to_f32((q).v[(i)])
#else
#define NW_In F32In
#define nw_load(q, i) ((q).v[(i)])
#endif

layout(push_constant) uniform Push {
    U32In   ids;
#ifdef DP_TABLE_Q
    U16In   table;
#else
    W_In    table;
#endif
    ACT_Out x;
    NW_In   w;
    ACT_Out y;
    uint    T;
    uint    C;
    uint    rows;
    float   scale;
    uint    row_blocks;
    float   eps;
    float   w_offset;
} p;

shared float xs[ROWS * CMAX];   // the workgroup's rows of x, as stored
const uint CACHE = 8u;          // rmsnorm.comp's

// Row t's values c0 .. c0 + 7 of the table (zeros for an id past the table), as the gather kernels read them.
void table8(uint id, uint c0, out float v[8])
{
    if (id >= p.rows) { for (uint i = 0u; i < 8u; ++i) v[i] = 0.0; return; }
#ifdef DP_TABLE_Q
    const uint nb = p.row_blocks != 0u ? p.row_blocks : p.C / QK;
    dq8(dq_block(uint64_t(p.table), id, c0 / QK, p.rows, nb), c0 % QK, v);
#else
    W_In row = W_In(uint64_t(p.table) + uint64_t(id) * uint64_t(p.C) * W_BYTES);
    for (uint i = 0u; i < 8u; ++i) v[i] = c0 + i < p.C ? w_load(row, c0 + i) : 0.0;
#endif
}

void main()
{
    const uint tid = gl_LocalInvocationIndex;
    const uint row0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * ROWS;
    const uint C = p.C, G = (C + 7u) / 8u;

    // 1. the lookup: 8 consecutive columns per step (gather_q.comp's groups), scaled, rounded, stored
    for (uint j = tid; j < ROWS * G; j += WG) {
        const uint r = j / G, c0 = 8u * (j % G), t = row0 + r;
        if (t >= p.T) continue;
        float v[8];
        table8(p.ids.v[t], c0, v);
        ACT_Out xrow = ACT_Out(uint64_t(p.x) + uint64_t(t) * uint64_t(C) * ACT_BYTES);
        for (uint i = 0u; i < 8u && c0 + i < C; ++i) {
            const float s = act_round(v[i] * p.scale);
            xs[r * CMAX + c0 + i] = s;
            act_store(xrow, c0 + i, s);
        }
    }
    barrier();

    // 2. rmsnorm.comp on the shared rows, statement for statement
    uint rw, ln;
    norm_lane(rw, ln);
    uint row = row0 + rw;
    bool live = row < p.T;      // a dead row still takes part in the reduction's barrier
    uint n = live ? C : 0u;
    const uint xb = rw * CMAX;
    ACT_Out yr = ACT_Out(uint64_t(p.y) + uint64_t(live ? row : 0u) * uint64_t(C) * ACT_BYTES);

    float xc[CACHE];
    float ss = 0.0;
    for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        xc[k] = i < n ? xs[xb + i] : 0.0;
        ss += xc[k] * xc[k];
    }
    for (uint i = ln + CACHE * LR; i < n; i += LR) {
        float v = xs[xb + i];
        ss += v * v;
    }
    float inv = inversesqrt(norm_row_sum(ss, rw) / float(C) + p.eps);

    for (uint k = 0u; k < CACHE; k++) {
        uint i = ln + k * LR;
        if (i < n) act_store(yr, i, xc[k] * inv * (p.w_offset + nw_load(p.w, i)));
    }
    for (uint i = ln + CACHE * LR; i < n; i += LR)
        act_store(yr, i, xs[xb + i] * inv * (p.w_offset + nw_load(p.w, i)));
}
