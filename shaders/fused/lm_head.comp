#version 460
// lm_head: final RMSNorm + LM head (float weights) + softcap + argmax stage 1 (or a Gumbel-max draw's stage 1)
// in one kernel:  z[n] = softcap(rmsnorm(x) · W[n]),  part[g] = the best (z[n], n) of workgroup g's rows.
// The method and the exactness argument are in lm_head_common.glsl: the norm is rmsnorm.comp's, and each
// team of GW threads computes ROWS rows as matmul/gemv.comp does with WG = GW, ROWS, TT = 1 (the dot
// product below is that kernel's, with x read from shared memory instead of global memory). Keep the two
// in step: tests/lua/test_lm_head_fusion.lua compares the ids with the unfused kernels'.
// Needs GW to be a multiple of the subgroup size (each team's subgroups are its own; the lowering checks).
// Dispatch: (gx, 1, 1), gx <= ceil(ceil(N / ROWS) / TEAMS); workgroup g takes the row blocks
//   g * TEAMS + team + i * gx * TEAMS (a team's ROWS rows each). Then argmax_final.comp over gx pairs.
// Push: x, wn, w, part_val, part_idx, [logits], [steps], N, K, eps, w_offset, softcap, [temperature, seed_lo, seed_hi]
//   (lm_head_common.glsl).
// Spec constants: WG, ROWS, GW, NL, KMAX (lm_head_common.glsl).
//   Shared memory: 4 * (KMAX + WG + TEAMS * ROWS * GW) + 8 * WG bytes.
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16 (the LM head), DP_NW_F16 | DP_NW_BF16 (the norm
//   weight; none: f32), DP_LMH_LOGITS (write the logits too), DP_LMH_SAMPLE (Gumbel-max keys: sample_gumbel.comp without min-p and penalty).
// DP_UNROLL marks the loops whose trip counts are spec constants: on a GPU unrolled at pipeline creation
// (dp_common.glsl), their arrays stay in registers (H100 decode: attention_decode 0.441 -> 0.416 ms per
// token, docs/BENCHMARKS.md 11h).
#extension GL_EXT_control_flow_attributes : require
#include "dp_types.glsl"
#define LMH_W_In W_In
#include "lm_head_common.glsl"

#include "dp_wchunk.glsl"

// Each team's subgroup sums, [TEAMS * ROWS][GW] (as gemv.comp's red[ROWS][WG]).
shared float red[TEAMS * ROWS * GW];

// Chunks of a row per thread on the vector path, and whether a row block's chunks fit in registers twice
// (PF): then the next block's weights are requested before the current block is summed, and the first
// block's before the norm. Why: each row block otherwise waited for its weights after the barriers of the
// block before (a full memory round trip per block on the critical path of every workgroup).
const uint CPT = (KMAX / VW + GW - 1u) / GW;
const bool PF = ROWS * CPT <= 8u;

// Loads the chunks lt, lt + GW, ... of the team's ROWS rows of row block blk_ into raw (clamped rows as in
// the loop below; nothing past the row's chunks).
#define LMH_LOAD(blk_)                                                                                    \
    {                                                                                                     \
        const uint n0_ = ((blk_) + team) * ROWS;                                                          \
        DP_UNROLL for (uint r_ = 0u; r_ < ROWS; ++r_) {                                                  \
            const uint64_t wr_ = uint64_t(p.w) + uint64_t(min(n0_ + r_, N - 1u)) * uint64_t(K) * W_BYTES; \
            DP_UNROLL for (uint j_ = 0u; j_ < CPT; ++j_) {                                               \
                const uint c_ = lt + j_ * GW;                                                             \
                if (c_ < chunks) raw[r_ * CPT + j_] = DP_RAW16_In(wr_).v[c_];                             \
            }                                                                                             \
        }                                                                                                 \
    }

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint team = tid / GW, lt = tid % GW;
    const uint sg_team = GW / gl_SubgroupSize;             // subgroups per team
    const uint lsg = gl_SubgroupID - team * sg_team;       // this subgroup within its team
    const uint K = p.K, N = p.N;
    const uint nb = (N + ROWS - 1u) / ROWS;
    const uint step = lmh_step();

    // gemv.comp's choice of path for its x (the rmsnorm output: arena memory, 256-byte aligned, stride K).
    const bool x_vec_ok =
#if defined(DP_ACT_F16) && defined(DP_W_F32)
        true;
#else
        ((K * ACT_BYTES) & 15u) == 0u;
#endif
    const bool vec = (K % VW) == 0u && (uint64_t(p.w) & 15ul) == 0ul && ((K * W_BYTES) & 15u) == 0u && x_vec_ok;
    const uint chunks = K / VW;
    const uint first = gl_WorkGroupID.x * TEAMS, stride = gl_NumWorkGroups.x * TEAMS;

    uvec4 raw[ROWS * CPT];
    if (PF && vec && first < nb) LMH_LOAD(first)
    lmh_norm();

    float bv = 0.0;
    uint bi = LMH_NO_ID;
    for (uint base = first; base < nb; base += stride) {
        const uint n0 = (base + team) * ROWS;              // past N for a spare team: clamped, dropped
        float acc[ROWS];
        for (uint r = 0u; r < ROWS; ++r) acc[r] = 0.0;
        if (PF && vec) {
            // this block's weights (requested one block ago), then the next block's request, then the sums in
            // the order of the loop below
            uvec4 cur[ROWS * CPT];
            DP_UNROLL for (uint i = 0u; i < ROWS * CPT; ++i) cur[i] = raw[i];
            if (base + stride < nb) LMH_LOAD(base + stride)
            DP_UNROLL for (uint j = 0u; j < CPT; ++j) {
                const uint c = lt + j * GW;
                if (c >= chunks) continue;
                float xv[VW];
                DP_UNROLL for (uint e = 0u; e < VW; ++e) xv[e] = lmh_x[c * VW + e];
                DP_UNROLL for (uint r = 0u; r < ROWS; ++r) {
                    float wv[VW];
                    w_unpack(cur[r * CPT + j], wv);
                    float s = acc[r];
                    DP_UNROLL for (uint e = 0u; e < VW; ++e) s = fma(wv[e], xv[e], s);
                    acc[r] = s;
                }
            }
        } else {
            uint64_t wrow[ROWS];                           // the loops below address the rows themselves
            for (uint r = 0u; r < ROWS; ++r)
                wrow[r] = uint64_t(p.w) + uint64_t(min(n0 + r, N - 1u)) * uint64_t(K) * W_BYTES;
            if (vec) {
                for (uint c = lt; c < chunks; c += GW) {
                    uvec4 raw[ROWS];
                    for (uint r = 0u; r < ROWS; ++r) raw[r] = DP_RAW16_In(wrow[r]).v[c];
                    float xv[VW];
                    DP_UNROLL for (uint e = 0u; e < VW; ++e) xv[e] = lmh_x[c * VW + e];
                    for (uint r = 0u; r < ROWS; ++r) {
                        float wv[VW];
                        w_unpack(raw[r], wv);
                        float s = acc[r];
                        DP_UNROLL for (uint e = 0u; e < VW; ++e) s = fma(wv[e], xv[e], s);
                        acc[r] = s;
                    }
                }
            } else {
                for (uint k = lt; k < K; k += GW) {
                    float wv[ROWS];
                    for (uint r = 0u; r < ROWS; ++r) wv[r] = w_load(W_In(wrow[r]), k);
                    float xv = lmh_x[k];
                    for (uint r = 0u; r < ROWS; ++r) acc[r] = fma(wv[r], xv, acc[r]);
                }
            }
        }
        for (uint r = 0u; r < ROWS; ++r) {
            float s = subgroupAdd(acc[r]);
            if (subgroupElect()) red[(team * ROWS + r) * GW + lsg] = s;
        }
        barrier();
        if (lt < ROWS && n0 + lt < N) {
            float s = 0.0;
            DP_UNROLL for (uint g = 0u; g < sg_team; ++g) s += red[(team * ROWS + lt) * GW + g];
            lmh_consider(s, n0 + lt, step, bv, bi);
        }
        barrier();                                         // red is written again by the next block
    }
    lmh_finish(bv, bi);
}
