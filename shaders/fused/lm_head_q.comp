#version 460
// lm_head_q: final RMSNorm + LM head with block-quantised weights (a GGUF's token_embd / output: Q8_0, Q6_K,
// any type dp_quant.glsl decodes, in any layout) + softcap + argmax stage 1 (or a draw's stage 1).
// lm_head.comp's scheme (lm_head_common.glsl) with the dot product of matmul/gemv_q.comp: a team of GW
// threads computes ROWS rows exactly as one gemv_q workgroup (WG = GW, ROWS, TT = 1) does: TPR = GW / ROWS
// threads per row take 32-value units (dp_quant_unit.glsl), accumulate with dqu_half_acc and reduce with
// dqu_cluster_sum and the clusters in order, as gemv_q.comp does. Keep lmh_row_partial in step with gemv_q's
// loop: tests/lua/test_lm_head_fusion.lua compares the ids and logits with the unfused kernels' bit for bit.
// Dispatch: as lm_head.comp. Push: the same members, w being the blocks (U16In), plus w_row_blocks.
// Spec constants: WG, ROWS, GW, NL, KMAX. Shared memory: 4 * KMAX + 16 * WG bytes, + (16 * planes + 16) *
//   ceil(KMAX / 16) with DP_XQ8 (lower.lm_head_q_shared).
// Defines: the weight type DP_Q_* and its layout DP_LAYOUT_COL | DP_LAYOUT_FLAT, DP_ACT_F16,
//   DP_NW_F16 | DP_NW_BF16, DP_LMH_LOGITS, DP_LMH_SAMPLE, and DP_XQ8 with DP_XQ8_PLANES (x in int8 planes,
//   as gemv_q.comp's DP_XQ8; the lowering gives the head the mode its unfused gemv_q takes, lower.gemv_q_x).
// Why DP_XQ8 pays here more than in any plain gemv_q: x is staged once per workgroup, after the norm, and
//   serves every row block of the workgroup (hundreds of rows), while the dot products of 16 codes with x
//   become 4 packed integer dot products per plane instead of ~5 instructions per code.
// DP_UNROLL marks the loops whose trip counts are spec constants: on a GPU unrolled at pipeline creation
// (dp_common.glsl), their arrays stay in registers (H100 decode: attention_decode 0.441 -> 0.416 ms per
// token, docs/BENCHMARKS.md 11h).
#extension GL_EXT_control_flow_attributes : require
#include "dp_types.glsl"
#define LMH_W_In U16In
#define LMH_QUANT
#include "lm_head_common.glsl"
#include "dp_quant.glsl"
#ifdef DP_XQ8
#define DQU_RAW_SCALES
#endif
#include "dp_quant_unit.glsl"
#ifdef DP_XQ8
#include "dp_quant_x8.glsl"
// the normalised row as gemv_q.comp's DP_XQ8 stages its x: 16-value int8 groups (x8_quantise16)
shared x8group lmh_x8[(KMAX + 15u) / 16u];
#endif

const uint TPR = GW / ROWS;               // threads per row (gemv_q.comp's TPR)

shared float red[TEAMS * GW];             // [TEAMS][GW / cluster]: gemv_q.comp's red per team

// gemv_q.comp's partial sum of row n (n < N) for thread `lane` of the row's TPR threads: the same units,
// halves and dqu_half_acc, x read from the normalised row in shared memory (the values gemv_q reads).
float lmh_row_partial(uint n, uint lane)
{
    const uint K = p.K;
    const uint nb = p.w_row_blocks != 0u ? p.w_row_blocks : K / QK;
    const uint units = (K + QK - 1u) / QK * DQU_PER_BLOCK;
    float acc = 0.0;
    for (uint v = lane; v < units; v += TPR) {
        const uint b = v / DQU_PER_BLOCK, u = v % DQU_PER_BLOCK;
        const dq_unit un = dqu_load(dq_block(uint64_t(p.w), n, b, p.N, nb), u);
        DP_UNROLL for (uint h = 0u; h < 2u; ++h) {
            const uint k0 = b * QK + dqu_k0(u, h);
            if (k0 >= K) continue;
#ifdef DP_XQ8
            // gemv_q.comp's DP_XQ8 half: integer dot products with the staged groups
            acc = x8_half_acc(dqu_codes8(un, u, h), lmh_x8[k0 / 16u], un.a[h], un.b[h], acc);
#else
            float q[16], xv[16];
            dqu_codes(un, u, h, q);
            DP_UNROLL for (uint i = 0u; i < 16u; ++i) xv[i] = lmh_x[k0 + i];
            acc = dqu_half_acc(q, xv, un.a[h], un.b[h], acc);
#endif
        }
    }
    return acc;
}

void main()
{
    lmh_norm();
#ifdef DP_XQ8
    // gemv_q.comp's stage_x8 from the same values (lmh_x holds the norm's output as rmsnorm.comp stores it),
    // once per workgroup: every row block of the workgroup uses it
    for (uint g = gl_LocalInvocationID.x; g < p.K / 16u; g += WG) {
        float v[16];
        DP_UNROLL for (uint i = 0u; i < 16u; ++i) v[i] = lmh_x[16u * g + i];
        lmh_x8[g] = x8_quantise16(v);
    }
    barrier();
#endif

    const uint tid = gl_LocalInvocationID.x;
    const uint team = tid / GW, lt = tid % GW;
    const uint r = lt / TPR, lane = lt % TPR;
    const uint N = p.N;
    const uint nb = (N + ROWS - 1u) / ROWS;
    const uint step = lmh_step();

    float bv = 0.0;
    uint bi = LMH_NO_ID;
    for (uint base = gl_WorkGroupID.x * TEAMS; base < nb; base += gl_NumWorkGroups.x * TEAMS) {
        const uint n = (base + team) * ROWS + r;
        // gemv_q.comp's reduction: shuffles within clusters of CW lanes, then the row's clusters in order.
        const uint CW = min(TPR, gl_SubgroupSize), per_row = TPR / CW;
        const float part = dqu_cluster_sum(n < N ? lmh_row_partial(n, lane) : 0.0, CW);
        if (lt % CW == 0u) red[tid / CW] = part;
        barrier();
        if (lane == 0u && n < N) {
            float s = 0.0;
            for (uint c = 0u; c < per_row; ++c) s += red[(team * GW + r * TPR) / CW + c];
            lmh_consider(s, n, step, bv, bi);
        }
        barrier();
    }
    lmh_finish(bv, bi);
}
