#version 460
// dequant: y[i] = dequantised w[i] for i < n, w a run of quantised blocks (a [N, K] weight: K % QK == 0, so the
// rows' blocks lie end to end). Used once at load (or once per plan) by the dequant_f16 path of quantised
// linears, and by tests. Each invocation decodes one group of 8 consecutive elements (dp_quant.glsl's dq8).
// Output: f16 by default, rounded to nearest even from the exact f32 value (dp_f32_to_f16_bits: the same
// bits as the CPU's dp_f32_to_f16 of core/quant.c's value); f32 with DP_DQ_F32 (bit-exact with core/quant.c).
//
// Dispatch: g = n / 8 groups of 8 elements; (gx, gy, 1) workgroups with gx = min(ceil(g / WG), 65535),
//   gy = ceil(ceil(g / WG) / gx); group index = (x + gx * y) * WG + local id; groups past g are no-ops.
// Push (by name):
//   w   quant blocks  [n / QK blocks]   (2-byte aligned, 16 with DP_LAYOUT_FLAT; device tensors are)
//   y   f16 | f32     [n]               row-major [N, K] whatever w's layout
//   n   uint          elements (a multiple of QK)
//   K   uint          row length, only with DP_LAYOUT_COL (the other layouts keep each row's blocks in order)
// Spec constants: WG (local_size_x_id = 0), default 256.
// Defines: one of DP_Q_Q8_0, DP_Q_Q4_0, DP_Q_Q4_1, DP_Q_Q5_0, DP_Q_Q5_1, DP_Q_Q4_K, DP_Q_Q5_K, DP_Q_Q6_K
//   (dp_quant.glsl); the layout DP_LAYOUT_COL | DP_LAYOUT_FLAT (none: row_wise); DP_DQ_F32 (f32 output).
#include "dp_quant.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    U16In  w;
#ifdef DP_DQ_F32
    F32Out y;
#else
    U16Out y;      // f16 bits, written exactly (no reliance on the hardware's f32 -> f16 rounding)
#endif
    uint   n;
#ifdef DP_LAYOUT_COL
    uint   K;
#endif
} p;

void main()
{
    const uint g = (gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y) * WG + gl_LocalInvocationID.x;
    if (g >= p.n / 8u) return;
    const uint e0 = g * 8u;                        // first element (n < 2^32 elements: a uint index is enough)
    const uint blk = e0 / QK, e = e0 % QK;
    float v[8];
#ifdef DP_LAYOUT_COL
    const uint nb = p.K / QK;
    dq8(dq_block(uint64_t(p.w), blk / nb, blk % nb, p.n / p.K, nb), e, v);
#else
    // row_wise and flat keep blocks in row order: the whole tensor reads as one row of n / QK blocks
    dq8(dq_block(uint64_t(p.w), 0u, blk, 1u, p.n / QK), e, v);
#endif
    for (uint i = 0u; i < 8u; ++i) {
#ifdef DP_DQ_F32
        p.y.v[e0 + i] = v[i];
#else
        p.y.v[e0 + i] = dp_f32_to_f16_bits(v[i]);
#endif
    }
}
