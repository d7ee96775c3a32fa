// shaders/fused/lm_head_common.glsl: the parts of the fused "final norm + LM head + argmax / draw" kernels
// (lm_head.comp for float weights, lm_head_q.comp for quantised ones) that do not depend on the weight type.
//
// Why: a decode step ends with rmsnorm (one row) -> LM-head GEMV writing every logit (Gemma: 262,144 of them)
// -> softcap -> a two-stage argmax (or the sampler's Gumbel-max keys). Fused, the logits are never written
// or re-read and two dispatches and their barriers go away. Exactness is the contract (docs/OPS.md, Fusions,
// lm_head): the ids are those of the unfused kernels, so every value is computed as they compute it:
//   - the norm: every workgroup normalises the one row itself, with the lane layout and the reduction of
//     norm/rmsnorm.comp for a single row of NL lanes (norm_rows.glsl is included, not copied), and rounds
//     the result to the activation type, as rmsnorm.comp's store does; the row is kept in shared memory;
//   - the dot products: a "team" of GW threads computes ROWS rows exactly as one workgroup of the unfused
//     GEMV (WG = GW, ROWS, TT = 1) does: same split of K over threads, same fma order, same reduction.
//     A workgroup is WG = TEAMS * GW threads (WG >= NL, so the norm has its lanes), and loops over row
//     blocks, so that few pairs reach the final stage;
//   - the epilogue: softcap's formula (act/softcap.comp), then the candidate rule of argmax_partial.comp
//     (NaN first, larger, lower index) or, with DP_LMH_SAMPLE, sample_gumbel.comp's key and candidate test
//     (shaders/sample/sample_common.glsl, the CPU reference's arithmetic).
// DP_LMH_PRE=1|2 (fusion lm_head_pre): the row the final norm reads is formed here from the last layer's
// residual add, as the unfused kernels would store it: =1 x + a (graph/eltwise.comp's add, rounded to the
// activation type), =2 x + rmsnorm(a; wn1, eps1, off1) (norm/rmsnorm.comp for the one row, statement for
// statement with this kernel's norm lanes, rounded, then the add, rounded). Why: those were one or two
// single-workgroup dispatches of their own between the last GEMV and the head (~4-5 us each on the H100,
// docs/BENCHMARKS.md); every workgroup now forms the row itself, as it already normalises it.
// Each workgroup writes its best (value, index) to part_val/part_idx[workgroup]; argmax/argmax_final.comp
// reduces them to the id. With DP_LMH_LOGITS the logits are written too (push member logits, f32 [N]). The pair order is a strict total order, so the grouping does not change the id.
//
// Spec constants (by name):
//   WG    workgroup size (local_size_x_id), = TEAMS * GW, a multiple of NL
//   ROWS  rows per team (the unfused GEMV's ROWS)
//   GW    threads per team (the unfused GEMV's WG)
//   NL    lanes of the norm (the unfused rmsnorm's WG for one row)
//   KMAX  hidden size (the shared row's length), >= K
// Includer: defines LMH_W_In (the weight pointer type), and LMH_QUANT for block weights, before including this file.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "dp_types.glsl"
#ifdef DP_LMH_SAMPLE
#include "../sample/sample_common.glsl"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG   = 256;
layout(constant_id = 2) const uint GW   = 128;
layout(constant_id = 3) const uint NL   = 256;
layout(constant_id = 4) const uint KMAX = 1152;

const uint TEAMS = WG / GW;
// norm_rows.glsl takes its rows per workgroup from a constant named ROWS: here every "row" of the norm is
// the same hidden row (each group of NL lanes computes it; the first one stores it).
const uint NORM_ROWS = WG / NL;
#define ROWS NORM_ROWS
#include "../norm/norm_rows.glsl"
#undef ROWS
layout(constant_id = 1) const uint ROWS = 2;

// The final norm's weight type (independent of the LM head's): DP_NW_F16 | DP_NW_BF16 | none (f32).
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

#ifdef DP_LMH_QUEUE
// Written by atomics of every workgroup and read back by them: coherent.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer LMH_Queue { uint v[]; };
#endif

layout(push_constant) uniform Push {
    ACT_In   x;           // [K] the hidden row before the final norm
    NW_In    wn;          // [K] the final norm's weight
    LMH_W_In w;           // [N, K] the LM head
    F32Out   part_val;    // [gx] each workgroup's best value (or key)
    U32Out   part_idx;    // [gx] its index (0xffffffff: no candidate)
#ifdef DP_LMH_LOGITS
    F32Out   logits;      // [N] the (softcapped) logits, when the caller wants them besides the id
#endif
#ifdef DP_LMH_SAMPLE
    U32In    steps;       // [1] the draw counter (context length)
#endif
#ifdef DP_LMH_QUEUE
    LMH_Queue queue;      // [2] lm_head_q.comp's row-block queue: next block, workgroups done (zero between dispatches)
#endif
#ifdef DP_LMH_PRE
    A_In     ra;          // [K] the branch output added to x (DP_LMH_PRE above; DP_A_FIX64: dp_types.glsl)
#if DP_LMH_PRE == 2
    NW_In    wn1;         // [K] the weight of its norm (the final norm's dtype)
#endif
#endif
    uint     N;
    uint     K;
#ifdef LMH_QUANT
    uint     w_row_blocks;   // gemv_q.comp's: blocks from one row to the next, 0 = K / QK
#endif
    float    eps;
    float    w_offset;
    float    softcap;     // 0: none
#ifdef DP_LMH_SAMPLE
    float    temperature;
    uint     seed_lo;
    uint     seed_hi;
#endif
#if defined(DP_LMH_PRE) && DP_LMH_PRE == 2
    float    eps1;
    float    off1;
#endif
} p;

#define LMH_NO_ID 0xffffffffu
const uint LMH_CACHE = 8u;    // rmsnorm.comp's CACHE

shared float lmh_x[KMAX];     // the normalised row, rounded to the activation type
shared float lmh_sv[WG];
shared uint  lmh_si[WG];

// Element i of the row the final norm reads: x's, or with DP_LMH_PRE the last layer's sum as stored
// (inv1: the scale of a's norm, =2).
float lmh_in(uint i, float inv1)
{
#ifdef DP_LMH_PRE
    // precise: the unfused kernels store a's normed value before the add reads it, so no multiply-add may
    // be contracted into an fma here (with f32 activations the stores round nothing to stop it)
#if DP_LMH_PRE == 2
    precise const float an = act_round(a_load(p.ra, i) * inv1 * (p.off1 + nw_load(p.wn1, i)));   // rmsnorm.comp's store
#else
    precise const float an = a_load(p.ra, i);
#endif
    precise const float y = act_load(p.x, i) + an;                                         // eltwise.comp's add
    return act_round(y);
#else
    return act_load(p.x, i);
#endif
}

// norm/rmsnorm.comp for one row, statement for statement; the result goes to shared memory. With
// DP_LMH_PRE=2 first the same for a, whose scale lmh_in applies.
void lmh_norm()
{
    uint rw, ln;
    norm_lane(rw, ln);
    uint n = p.K;
    float inv1 = 1.0;
#if defined(DP_LMH_PRE) && DP_LMH_PRE == 2
    {
        float ac[LMH_CACHE];
        float sa = 0.0;
        for (uint k = 0u; k < LMH_CACHE; k++) {
            uint i = ln + k * LR;
            ac[k] = i < n ? a_load(p.ra, i) : 0.0;
            sa += ac[k] * ac[k];
        }
        for (uint i = ln + LMH_CACHE * LR; i < n; i += LR) {
            float v = a_load(p.ra, i);
            sa += v * v;
        }
        inv1 = inversesqrt(norm_row_sum(sa, rw) / float(p.K) + p.eps1);
        barrier();   // norm_red is written again by the row's sum below
    }
#endif
    float xc[LMH_CACHE];
    float ss = 0.0;
    for (uint k = 0u; k < LMH_CACHE; k++) {
        uint i = ln + k * LR;
        xc[k] = i < n ? lmh_in(i, inv1) : 0.0;
        ss += xc[k] * xc[k];
    }
    for (uint i = ln + LMH_CACHE * LR; i < n; i += LR) {
        float v = lmh_in(i, inv1);
        ss += v * v;
    }
    float inv = inversesqrt(norm_row_sum(ss, rw) / float(p.K) + p.eps);
    if (rw == 0u) {
        for (uint k = 0u; k < LMH_CACHE; k++) {
            uint i = ln + k * LR;
            if (i < n) lmh_x[i] = act_round(xc[k] * inv * (p.w_offset + nw_load(p.wn, i)));
        }
        for (uint i = ln + LMH_CACHE * LR; i < n; i += LR)
            lmh_x[i] = act_round(lmh_in(i, inv1) * inv * (p.w_offset + nw_load(p.wn, i)));
    }
    barrier();
}

// act/softcap.comp's tanh.
float lmh_tanh(float x)
{
    float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

#include "../argmax/argmax_order.glsl"   // argmax_partial.comp's order: NaN first, then larger, then lower index

bool lmh_before(float a, uint ia, float b, uint ib)
{
#ifdef DP_LMH_SAMPLE
    return dp_before(a, ia, b, ib);
#else
    return am_beats(a, ia, b, ib);
#endif
}

// Row n's dot product s (f32, as the unfused GEMV stores the f32 logits) -> the softcapped logit -> the
// running candidate (bv, bi) of this thread.
void lmh_consider(float s, uint n, uint step, inout float bv, inout uint bi)
{
    float z = s;
    if (p.softcap != 0.0) z = p.softcap * lmh_tanh(z / p.softcap);
#ifdef DP_LMH_LOGITS
    p.logits.v[n] = z;
#endif
#ifdef DP_LMH_SAMPLE
    if (!dp_candidate(z)) return;
    float key = dp_sample_key(z, p.temperature, p.seed_lo, p.seed_hi, step, n);
    if (bi == LMH_NO_ID || dp_before(key, n, bv, bi)) { bv = key; bi = n; }
#else
    if (bi == LMH_NO_ID || am_beats(z, n, bv, bi)) { bv = z; bi = n; }
#endif
}

uint lmh_step()
{
#ifdef DP_LMH_SAMPLE
    return p.steps.v[0];
#else
    return 0u;
#endif
}

// The workgroup's best pair -> part_val / part_idx[workgroup] (argmax_partial.comp's tree).
void lmh_finish(float bv, uint bi)
{
    const uint tid = gl_LocalInvocationID.x;
    lmh_sv[tid] = bv;
    lmh_si[tid] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s && lmh_si[tid + s] != LMH_NO_ID &&
            (lmh_si[tid] == LMH_NO_ID || lmh_before(lmh_sv[tid + s], lmh_si[tid + s], lmh_sv[tid], lmh_si[tid]))) {
            lmh_sv[tid] = lmh_sv[tid + s];
            lmh_si[tid] = lmh_si[tid + s];
        }
        barrier();
    }
    if (tid == 0u) {
        p.part_val.v[gl_WorkGroupID.x] = lmh_sv[0];
        p.part_idx.v[gl_WorkGroupID.x] = lmh_si[0];
    }
}
