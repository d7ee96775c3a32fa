#version 460
// lm_head_q: final RMSNorm + LM head with block-quantised weights (a GGUF's token_embd / output: Q8_0, Q6_K,
// any type dp_quant.glsl decodes, in any layout) + softcap + argmax stage 1 (or a draw's stage 1).
// lm_head.comp's scheme (lm_head_common.glsl) with the dot product of matmul/gemv_q.comp: a team of GW
// threads computes ROWS rows exactly as one gemv_q workgroup (WG = GW, ROWS, TT = 1) does: TPR = GW / ROWS
// threads per row take 32-value units (dp_quant_unit.glsl), accumulate with dqu_half_acc and reduce with
// dqu_cluster_sum and the clusters in order, as gemv_q.comp does. Keep lmh_row_partial in step with gemv_q's
// loop: tests/lua/test_lm_head_fusion.lua compares the ids and logits with the unfused kernels' bit for bit.
// Dispatch: as lm_head.comp. Push: the same members, w being the blocks (U16In), plus w_row_blocks.
// Spec constants: WG, ROWS, GW, NL, KMAX, and TICKET, MAXT (DP_LMH_QUEUE: team blocks per ticket, most tickets
//   per workgroup). Shared memory:
//   4 * KMAX + 16 * WG bytes, + (16 * planes + 16) * ceil(KMAX / 16) with DP_XQ8 (lower.lm_head_q_shared).
// Defines: the weight type DP_Q_* and its layout DP_LAYOUT_COL | DP_LAYOUT_FLAT, DP_ACT_F16,
//   DP_NW_F16 | DP_NW_BF16, DP_LMH_LOGITS, DP_LMH_SAMPLE, DP_LMH_QUEUE (below), and DP_XQ8 with DP_XQ8_PLANES
//   (x in int8 planes, as gemv_q.comp's DP_XQ8; the lowering gives the head the mode its unfused gemv_q takes,
//   lower.gemv_q_x).
// DP_LMH_QUEUE: workgroups take their row blocks from a queue (push member queue, two u32 words, zero before
//   the dispatch; the last workgroup to finish sets them back to zero) instead of the fixed blocks g * TEAMS,
//   g * TEAMS + gx * TEAMS, ...: a ticket of TICKET * TEAMS blocks at a time, the next ticket requested
//   before the current one's rows are computed, so that its atomic's latency hides behind them. Why: with
//   fixed blocks every workgroup has the same share, and where fewer workgroups than gx fit on the GPU at
//   once the last ones start a wave late and run a whole share alone: on the H100, by their registers, the
//   side prefetcher's resident workgroups (gpu/prefetch.h) leave Gemma 3 1B's Q8_0 head three slots instead of
//   four on 32 SMs, and the head took 0.182 ms per token against 0.141 without them (docs/BENCHMARKS.md 41a). From a
//   queue the late workgroups find less left, the tail is one ticket, and the head took 0.143 (41b). Rows,
//   sums and the candidate rule are unchanged, and the candidates' order is strict, so the id does not depend
//   on who took which rows. MAXT (spec constant, 0 = no bound) caps the tickets one workgroup takes; the
//   lowering then dispatches at least (tickets in all) / MAXT workgroups, so the queue still ends empty: each
//   workgroup takes MAXT tickets unless the queue ran out first. Why: on a CPU device the workgroups that run
//   first would otherwise take every ticket, and llvmpipe ends all of an invocation's loops once they have run
//   65535 iterations together (lower/cpu.lua, CPU_LOOP_BUDGET).
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
#ifdef DP_LMH_QUEUE
layout(constant_id = 5) const uint TICKET = 2;   // team blocks per ticket
layout(constant_id = 6) const uint MAXT = 0;     // most tickets per workgroup, 0: no bound (header)
shared uint lmh_ticket;                      // the workgroup's current ticket: its first row block
#endif

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

// Row block base + team (ROWS rows per team): every row's logit goes to lmh_consider. Called by every
// invocation (barriers inside).
void lmh_block(uint base, uint step, inout float bv, inout uint bi)
{
    const uint tid = gl_LocalInvocationID.x;
    const uint team = tid / GW, lt = tid % GW;
    const uint r = lt / TPR, lane = lt % TPR;
    const uint N = p.N;
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

void main()
{
#ifdef DP_LMH_QUEUE
    // the first ticket, requested before the norm so that its latency hides behind it (the norm's barrier
    // publishes it)
    if (gl_LocalInvocationID.x == 0u) lmh_ticket = atomicAdd(p.queue.v[0], TICKET * TEAMS);
#endif
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

    const uint nb = (p.N + ROWS - 1u) / ROWS;
    const uint step = lmh_step();
    float bv = 0.0;
    uint bi = LMH_NO_ID;
#ifdef DP_LMH_QUEUE
    uint start = lmh_ticket;
    uint taken = 1u;
    while (start < nb) {   // uniform: start comes from shared memory
        uint next = nb;    // past the end: this workgroup's last ticket
        if (gl_LocalInvocationID.x == 0u && (MAXT == 0u || taken < MAXT))
            next = atomicAdd(p.queue.v[0], TICKET * TEAMS);   // used after the rows
        ++taken;
        const uint end = min(start + TICKET * TEAMS, nb);
        for (uint base = start; base < end; base += TEAMS) lmh_block(base, step, bv, bi);
        if (gl_LocalInvocationID.x == 0u) lmh_ticket = next;
        barrier();
        start = lmh_ticket;
        barrier();   // every invocation has read it before it is written again
    }
    // The last workgroup out resets the queue for the next dispatch. Every workgroup's last ticket has
    // returned (it was read above) before its count, so no ticket is taken after the reset.
    if (gl_LocalInvocationID.x == 0u && atomicAdd(p.queue.v[1], 1u) == gl_NumWorkGroups.x - 1u) {
        atomicExchange(p.queue.v[0], 0u);
        atomicExchange(p.queue.v[1], 0u);
    }
#else
    for (uint base = gl_WorkGroupID.x * TEAMS; base < nb; base += gl_NumWorkGroups.x * TEAMS)
        lmh_block(base, step, bv, bi);
#endif
    lmh_finish(bv, bi);
}
