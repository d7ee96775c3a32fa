#version 460
// gather_q: y[t, c] = dequantised table[ids[t], c] * scale      token embedding lookup from a quantised table
// The same lookup as gather.comp for a table that stays in ggml blocks (a GGUF's token_embd in Q8_0, Q4_K,
// Q6_K, ...), so that one quantised copy serves both the lookup and a tied LM head (gemv_q / gemm_q), instead
// of a float copy of the whole table. Values are decoded by dp_quant.glsl's dq8, bit-exact with core/quant.c,
// then scaled in f32 and stored in the activation type. An id >= rows yields a zero row (see gather.comp).
//
// Dispatch: (ceil(C / 8 / WG), min(T, 65535), 1); each invocation decodes 8 consecutive columns (one dq8
// group), each workgroup walks tokens y, y + 65535, ...
// Push (by name):
//   ids    U32           [T]                   token ids
//   table  quant blocks  [rows, row_blocks]    in the layout the define names (dp_quant.glsl's dq_block)
//   y      ACT           [T, C]                output
//   T, C, rows  uint     C a multiple of QK, or of 8 with row_blocks
//   scale  float         multiplier (1.0 for none)
//   row_blocks  uint     blocks from one table row to the next; 0 = C / QK. A file that pads rows to whole
//                        blocks (doppler convert --pad-k) has more: only the first C columns are decoded.
// Spec constants (by name): WG workgroup size (local_size_x_id = 0), default 256.
// Defines: DP_ACT_F16 (dp_types.glsl); one of DP_Q_Q8_0, DP_Q_Q4_0, DP_Q_Q4_1, DP_Q_Q5_0, DP_Q_Q5_1,
//   DP_Q_Q4_K, DP_Q_Q5_K, DP_Q_Q6_K, and the layout DP_LAYOUT_COL | DP_LAYOUT_FLAT (none: row_wise) (dp_quant.glsl).
#include "dp_types.glsl"
#include "dp_quant.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    U32In   ids;
    U16In   table;
    ACT_Out y;
    uint    T;
    uint    C;
    uint    rows;
    float   scale;
    uint    row_blocks;
} p;

void main()
{
    const uint g = gl_GlobalInvocationID.x;
    if (g >= p.C / 8u) return;
    const uint c0 = g * 8u;
    const uint blk = c0 / QK, e = c0 % QK;
    const uint nb = p.row_blocks != 0u ? p.row_blocks : p.C / QK;
    for (uint t = gl_WorkGroupID.y; t < p.T; t += gl_NumWorkGroups.y) {
        const uint id = p.ids.v[t];
        float v[8];
        if (id < p.rows) {
            dq8(dq_block(uint64_t(p.table), id, blk, p.rows, nb), e, v);
        } else {
            for (uint i = 0u; i < 8u; ++i) v[i] = 0.0;
        }
        ACT_Out yrow = ACT_Out(uint64_t(p.y) + uint64_t(t) * uint64_t(p.C) * ACT_BYTES);
        for (uint i = 0u; i < 8u; ++i) act_store(yrow, c0 + i, v[i] * p.scale);
    }
}
