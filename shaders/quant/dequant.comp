#version 460
// dequant: y[r, c] = dequantised W[r, c] for a quantised weight W [N, K] (n = N * K elements), written row-major
// [N, K] whatever W's block layout. Used once at load (or once per plan) by the dequant_f16 path of quantised
// linears, and by tests. Each invocation decodes one group of 8 consecutive elements of a row (dp_quant.glsl's
// dq8). A row is row_blocks blocks (0: K / QK, K a multiple of QK); a file that pads rows to whole blocks
// (doppler convert --pad-k) has more, and only the first K elements of each row are written: the padding is
// dropped here, so the f16 copy is the logical [N, K] matrix.
// Output: f16 by default, rounded to nearest even from the exact f32 value (dp_f32_to_f16_bits: the same
// bits as the CPU's dp_f32_to_f16 of core/quant.c's value); f32 with DP_DQ_F32 (bit-exact with core/quant.c).
//
// Dispatch: g = n / 8 groups of 8 elements; (gx, gy, 1) workgroups with gx = min(ceil(g / WG), 65535),
//   gy = ceil(ceil(g / WG) / gx); group index = (x + gx * y) * WG + local id; groups past g are no-ops.
// Push (by name):
//   w           quant blocks  [N, row_blocks]  (2-byte aligned, 16 with DP_LAYOUT_FLAT; device tensors are)
//   y           f16 | f32     [n]              row-major [N, K]
//   n           uint          elements N * K
//   K           uint          row length (a multiple of 8; of QK unless row_blocks is set)
//   row_blocks  uint          blocks from one row of W to the next; 0 = K / QK (unpadded)
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
    uint   K;
    uint   row_blocks;
} p;

void main()
{
    const uint g = (gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y) * WG + gl_LocalInvocationID.x;
    if (g >= p.n / 8u) return;
    const uint e0 = g * 8u;                        // first element (n < 2^32 elements: a uint index is enough)
    const uint K = p.K, nb = p.row_blocks != 0u ? p.row_blocks : K / QK;
    const uint r = e0 / K, c = e0 % K;             // K % 8 == 0: a group never straddles two rows
    float v[8];
    dq8(dq_block(uint64_t(p.w), r, c / QK, p.n / K, nb), c % QK, v);
    for (uint i = 0u; i < 8u; ++i) {
#ifdef DP_DQ_F32
        p.y.v[e0 + i] = v[i];
#else
        p.y.v[e0 + i] = dp_f32_to_f16_bits(v[i]);
#endif
    }
}
