#version 460
// lm_head_q: final RMSNorm + LM head with block-quantised weights (a GGUF's token_embd / output: Q8_0, Q6_K,
// any type dp_quant.glsl decodes, in any layout) + softcap + argmax stage 1 (or a draw's stage 1).
// lm_head.comp's scheme (lm_head_common.glsl) with the dot product of matmul/gemv_q.comp: a team of GW
// threads computes ROWS rows exactly as one gemv_q workgroup (WG = GW, ROWS, TT = 1) does: TPR = GW / ROWS
// threads per row take groups of 8 weights (dq8 decodes them: the CPU reference's values), fma in the same
// order, then the same shared-memory tree per row. Keep this function in step with gemv_q.comp's loop:
// tests/lua/test_lm_head_fusion.lua compares the ids with the unfused kernels' bit for bit.
// Dispatch: as lm_head.comp. Push: the same members, w being the blocks (U16In).
// Spec constants: WG, ROWS, GW, NL, KMAX. Shared memory: 4 * (KMAX + WG + TEAMS * GW) + 8 * WG bytes.
// Defines: the weight type DP_Q_* and its layout DP_LAYOUT_COL | DP_LAYOUT_FLAT, DP_ACT_F16,
//   DP_NW_F16 | DP_NW_BF16, DP_LMH_LOGITS, DP_LMH_SAMPLE.
#include "dp_types.glsl"
#define LMH_W_In U16In
#include "lm_head_common.glsl"
#include "dp_quant.glsl"

const uint TPR = GW / ROWS;               // threads per row (gemv_q.comp's TPR)

shared float red[TEAMS * GW];             // [TEAMS][GW]: gemv_q.comp's red[WG] per team

// gemv_q.comp's partial sum of row n (n < N) for thread `lane` of the row's TPR threads.
float lmh_row_partial(uint n, uint lane)
{
    const uint K = p.K;
    const uint nb = K / QK;
    const uint groups = K / 8u;
    float acc = 0.0;
    for (uint g = lane; g < groups; g += TPR) {
        const uint k0 = g * 8u;
        float wv[8];
        dq8(dq_block(uint64_t(p.w), n, k0 / QK, p.N, nb), k0 % QK, wv);
        float s = acc;
        for (uint i = 0u; i < 8u; ++i) s = fma(wv[i], lmh_x[k0 + i], s);
        acc = s;
    }
    return acc;
}

void main()
{
    lmh_norm();

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
        red[tid] = n < N ? lmh_row_partial(n, lane) : 0.0;
        barrier();
        for (uint s = TPR / 2u; s > 0u; s >>= 1) {
            if (lane < s) red[tid] += red[tid + s];
            barrier();
        }
        if (lane == 0u && n < N) lmh_consider(red[tid], n, step, bv, bi);
        barrier();
    }
    lmh_finish(bv, bi);
}
