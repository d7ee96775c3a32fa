// shaders/include/dp_prenorm.glsl: the "prenorm" prologue of the GEMV kernels (matmul/gemv.comp,
// fused/gemv_multi.comp): the RMSNorm in front of a decode GEMV computed by the GEMV itself, so that the
// norm's dispatch and its barrier leave the plan (fusion prenorm, lua/lib/doppler/fusions.lua).
//
// Every workgroup normalises the one token row itself, with the lane layout and the reduction of the
// unfused norm kernel for a single row of NL lanes (norm/norm_rows.glsl is included, not copied; the
// statements below follow rmsnorm.comp, add_rmsnorm.comp and norm_add_norm.comp), rounds h to the
// activation type as those kernels' stores do, and keeps it in shared memory (pn_h, f32). The dot products
// then read x from pn_h instead of global memory. A workgroup is WG = TEAMS * GW threads with WG >= NL:
// each team of GW threads computes ROWS rows exactly as one workgroup of the unfused GEMV (WG = GW), and
// the WG / NL groups of NL lanes all compute the norm (group 0 stores it). Same values, same order: the
// outputs are bit for bit those of the unfused chain (tests/unit/test_k_prenorm.c).
// Where the norm also makes the residual stream (add_rmsnorm, norm_add_norm), every workgroup computes it
// in registers for its own sums and workgroup 0 alone stores it (pn_y): pn_y must not alias x or pn_a/pn_b,
// which the other workgroups are still reading (the planner gives it its own memory).
// Only T = 1 (TT = 1): one row in shared memory.
//
// Defines (one of): DP_PRENORM_RMS   h = rmsnorm(x; pn_w)                   (rmsnorm.comp)
//                   DP_PRENORM_ADD   y = x + pn_b, h = rmsnorm(y; pn_w)     (add_rmsnorm.comp: a = x, b = pn_b)
//                   DP_PRENORM_NAN   y = x + rmsnorm(pn_a; pn_w1), h = rmsnorm(y; pn_w)  (norm_add_norm.comp)
//   and the norm weight's type DP_NW_F16 | DP_NW_BF16 | none (f32), independent of the GEMV's weights.
// Without one of them this file only defines GW = WG, TEAMS = 1 and empty push macros: the plain GEMV.
// Spec constants (ids 3..5): GW (threads per team: the unfused GEMV's WG), NL (the unfused norm's lanes, a
//   power of two dividing WG), KMAX (pn_h's length, >= K). Shared memory: 4 * (KMAX + WG) bytes on top of
//   the GEMV's.
// Push members (macros for the includer's push block): DP_PRENORM_PTRS after the pointers,
//   DP_PRENORM_SCALARS after the scalars; the norm's input row is the GEMV's own x. DP_PRENORM_RUN() runs the
//   prologue (every invocation must reach it: it has barriers) and ends with a barrier.
// Includer: declares WG (constant_id 0) and includes dp_types.glsl and the subgroup basic/arithmetic
//   extensions first; then reads x element k as pn_h[k].
#if defined(DP_PRENORM_RMS) || defined(DP_PRENORM_ADD) || defined(DP_PRENORM_NAN)
#define DP_PRENORM 1
#extension GL_KHR_shader_subgroup_shuffle : require

layout(constant_id = 3) const uint GW   = 128;
layout(constant_id = 4) const uint NL   = 256;
layout(constant_id = 5) const uint KMAX = 1152;
const uint TEAMS = WG / GW;

// norm_rows.glsl takes its rows per workgroup from a constant named ROWS: here each group of NL lanes
// computes the same token row.
const uint PN_ROWS = WG / NL;
#define ROWS PN_ROWS
#include "../norm/norm_rows.glsl"
#undef ROWS

#if defined(DP_NW_F16)
#define NW_In F16In
#define nw_load(p, i) float((p).v[(i)])
#elif defined(DP_NW_BF16)
#define NW_In BF16In
#define nw_load(p, i) dp_bf16_to_f32((p).v[(i)])
#else
#define NW_In F32In
#define nw_load(p, i) ((p).v[(i)])
#endif

const uint PN_CACHE = 8u;     // the norm kernels' CACHE
shared float pn_h[KMAX];      // the normalised row, rounded to the activation type

float pn_round(float v) { return float(ACT_T(v)); }

// Workgroup 0 stores the residual stream.
bool pn_stores_y()
{
    return gl_WorkGroupID.x == 0u && gl_WorkGroupID.y == 0u && gl_WorkGroupID.z == 0u;
}

#if defined(DP_PRENORM_RMS)
#define DP_PRENORM_PTRS    NW_In pn_w;
#define DP_PRENORM_SCALARS float pn_eps; float pn_off;
#define DP_PRENORM_RUN()   pn_rms(p.x, p.pn_w, p.K, p.pn_eps, p.pn_off)

// rmsnorm.comp for one row.
void pn_rms(ACT_In xr, NW_In w, uint n, float eps, float off)
{
    uint rw, ln;
    norm_lane(rw, ln);
    float xc[PN_CACHE];
    float ss = 0.0;
    for (uint k = 0u; k < PN_CACHE; k++) {
        uint i = ln + k * LR;
        xc[k] = i < n ? act_load(xr, i) : 0.0;
        ss += xc[k] * xc[k];
    }
    for (uint i = ln + PN_CACHE * LR; i < n; i += LR) {
        float v = act_load(xr, i);
        ss += v * v;
    }
    float inv = inversesqrt(norm_row_sum(ss, rw) / float(n) + eps);
    if (rw == 0u) {
        for (uint k = 0u; k < PN_CACHE; k++) {
            uint i = ln + k * LR;
            if (i < n) pn_h[i] = pn_round(xc[k] * inv * (off + nw_load(w, i)));
        }
        for (uint i = ln + PN_CACHE * LR; i < n; i += LR)
            pn_h[i] = pn_round(act_load(xr, i) * inv * (off + nw_load(w, i)));
    }
    barrier();
}

#elif defined(DP_PRENORM_ADD)
#define DP_PRENORM_PTRS    ACT_In pn_b; NW_In pn_w; ACT_Out pn_y;
#define DP_PRENORM_SCALARS float pn_eps; float pn_off;
#define DP_PRENORM_RUN()   pn_add(p.x, p.pn_b, p.pn_w, p.pn_y, p.K, p.pn_eps, p.pn_off)

// add_rmsnorm.comp for one row: y = a + b (stored by workgroup 0), h = rmsnorm(y).
void pn_add(ACT_In ar, ACT_In br, NW_In w, ACT_Out yr, uint n, float eps, float off)
{
    uint rw, ln;
    norm_lane(rw, ln);
    const bool st = rw == 0u && pn_stores_y();
    float rc[PN_CACHE];
    float ss = 0.0;
    for (uint k = 0u; k < PN_CACHE; k++) {
        uint i = ln + k * LR;
        rc[k] = 0.0;
        if (i < n) {
            rc[k] = pn_round(act_load(ar, i) + act_load(br, i));
            if (st) act_store(yr, i, rc[k]);
        }
        ss += rc[k] * rc[k];
    }
    for (uint i = ln + PN_CACHE * LR; i < n; i += LR) {
        float v = pn_round(act_load(ar, i) + act_load(br, i));
        ss += v * v;
    }
    float inv = inversesqrt(norm_row_sum(ss, rw) / float(n) + eps);
    if (rw == 0u) {
        for (uint k = 0u; k < PN_CACHE; k++) {
            uint i = ln + k * LR;
            if (i < n) pn_h[i] = pn_round(rc[k] * inv * (off + nw_load(w, i)));
        }
        for (uint i = ln + PN_CACHE * LR; i < n; i += LR) {
            float v = pn_round(act_load(ar, i) + act_load(br, i));
            if (st) act_store(yr, i, v);
            pn_h[i] = pn_round(v * inv * (off + nw_load(w, i)));
        }
    }
    barrier();
}

#else   // DP_PRENORM_NAN
#define DP_PRENORM_PTRS    ACT_In pn_a; NW_In pn_w1; NW_In pn_w; ACT_Out pn_y;
#define DP_PRENORM_SCALARS float pn_eps1; float pn_off1; float pn_eps; float pn_off;
#define DP_PRENORM_RUN()   pn_nan(p.x, p.pn_a, p.pn_w1, p.pn_w, p.pn_y, p.K, p.pn_eps1, p.pn_off1, p.pn_eps, p.pn_off)

// norm_add_norm.comp for one row: y = x + rmsnorm(a; w1) (stored by workgroup 0), h = rmsnorm(y; w2).
void pn_nan(ACT_In xr, ACT_In ar, NW_In w1, NW_In w2, ACT_Out yr, uint n, float eps1, float off1, float eps2, float off2)
{
    uint rw, ln;
    norm_lane(rw, ln);
    const bool st = rw == 0u && pn_stores_y();
    // pass 1: the branch output's sum of squares
    float c[PN_CACHE];
    float ss = 0.0;
    for (uint k = 0u; k < PN_CACHE; k++) {
        uint i = ln + k * LR;
        c[k] = i < n ? act_load(ar, i) : 0.0;
        ss += c[k] * c[k];
    }
    for (uint i = ln + PN_CACHE * LR; i < n; i += LR) {
        float v = act_load(ar, i);
        ss += v * v;
    }
    float inv1 = inversesqrt(norm_row_sum(ss, rw) / float(n) + eps1);
    if (LR > gl_SubgroupSize) barrier();   // norm_red is reused by the second sum (uniform branch)

    // pass 2: y = x + norm(a), its sum of squares
    ss = 0.0;
    for (uint k = 0u; k < PN_CACHE; k++) {
        uint i = ln + k * LR;
        float yv = 0.0;
        if (i < n) {
            yv = pn_round(act_load(xr, i) + pn_round(c[k] * inv1 * (off1 + nw_load(w1, i))));
            if (st) act_store(yr, i, yv);
        }
        c[k] = yv;
        ss += yv * yv;
    }
    for (uint i = ln + PN_CACHE * LR; i < n; i += LR) {
        float v = pn_round(act_load(xr, i) + pn_round(act_load(ar, i) * inv1 * (off1 + nw_load(w1, i))));
        ss += v * v;
    }
    float inv2 = inversesqrt(norm_row_sum(ss, rw) / float(n) + eps2);

    // pass 3: h = norm(y)
    if (rw == 0u) {
        for (uint k = 0u; k < PN_CACHE; k++) {
            uint i = ln + k * LR;
            if (i < n) pn_h[i] = pn_round(c[k] * inv2 * (off2 + nw_load(w2, i)));
        }
        for (uint i = ln + PN_CACHE * LR; i < n; i += LR) {
            float v = pn_round(act_load(xr, i) + pn_round(act_load(ar, i) * inv1 * (off1 + nw_load(w1, i))));
            if (st) act_store(yr, i, v);
            pn_h[i] = pn_round(v * inv2 * (off2 + nw_load(w2, i)));
        }
    }
    barrier();
}
#endif

#else   // no prologue: the plain GEMV
#define GW WG
#define TEAMS 1u
#define DP_PRENORM_PTRS
#define DP_PRENORM_SCALARS
#endif
