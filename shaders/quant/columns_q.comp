#version 460
// columns_q: a Q4_K or Q6_K matrix W [K, N] (K rows of N values in blocks, any layout) re-laid by columns, for the
// fused MLP's down projection (matmul/gemv_q.comp, DP_DOWN with DP_DCOL_Q4 / DP_DCOL_Q6): for each block of 32
// columns c (one Q4_K sub-block, or two Q6_K sub-blocks of 16) and each row j, the row's 32 codes of those
// columns and their scales, at index c * K + j of each plane, so that a workgroup holding 32 values of h reads
// one 16-byte unit (and 8 bytes for Q6_K's high bits) and one scale pair per output j, neighbouring j at
// neighbouring addresses. The values are the matrix's own, exactly (core/quant.c's formulas):
//   Q4_K (DP_Q_Q4_K): plane 0 codes, uvec4 [N/32][K]: column 32c + e in nibble e % 8 of word e / 8;
//                     plane 1 scales, vec2 [N/32][K]: (a, b) = (d * sc, dmin * m) of the sub-block;
//                     W[j, 32c + e] = a * code - b.
//   Q6_K (DP_Q_Q6_K): plane 0 low 4 bits as Q4_K's codes; plane 1 the high 2 bits, uvec2 [N/32][K]: column
//                     32c + e at bits 2 (e % 16) of word e / 16; plane 2 scales, vec2 [N/32][K]: (a0, a1) =
//                     d * scale of columns 32c .. 32c + 15 and 32c + 16 .. 32c + 31; W = a * (code - 32).
// Dispatch: u = (N / 32) * K units; (gx, gy, 1) workgroups, gx = min(ceil(u / WG), 65535), gy = ceil(ceil(u / WG)
//   / gx); unit index (x + gx * y) * WG + local id = c * K + j; units past u are no-ops.
// Push: w (the blocks), y (the planes, one tensor: plane p at the sum of the sizes before it), K, N, row_blocks
//   (blocks from one row to the next; 0 = N / 256).
// Spec constants: WG (local_size_x_id = 0), default 256.
// Defines: DP_Q_Q4_K (also with no type define, so that `doppler shaders` compiles it) | DP_Q_Q6_K, the layout
//   DP_LAYOUT_COL | DP_LAYOUT_FLAT (none: row_wise).
#if defined(DP_Q_Q8_0) || defined(DP_Q_Q4_0) || defined(DP_Q_Q4_1) || defined(DP_Q_Q5_0) || defined(DP_Q_Q5_1) || \
    defined(DP_Q_Q5_K)
#error "columns_q takes Q4_K or Q6_K"
#endif
#if !defined(DP_Q_Q6_K) && !defined(DP_Q_Q4_K)
#define DP_Q_Q4_K
#endif
#include "dp_quant.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer V2Out { vec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer U2Out { uvec2 v[]; };

layout(push_constant) uniform Push {
    U16In  w;
    V4Out  y;
    uint   K;
    uint   N;
    uint   row_blocks;
} p;

// The 4-bit fields at bit `sh` of the 32 bytes b[0..8) (bytes l = 0..31 in little-endian words) as one uvec4:
// field l in nibble l % 8 of word l / 8.
uvec4 pack_nibbles(uvec2 b0, uvec2 b1, uvec2 b2, uvec2 b3, uint sh)
{
    const uint words[8] = uint[](b0.x, b0.y, b1.x, b1.y, b2.x, b2.y, b3.x, b3.y);
    uvec4 r = uvec4(0u);
    for (uint l = 0u; l < 32u; ++l) r[l >> 3] |= ((words[l >> 2] >> (8u * (l & 3u) + sh)) & 15u) << (4u * (l & 7u));
    return r;
}

void main()
{
    const uint C = p.N / 32u;
    const uint i = (gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y) * WG + gl_LocalInvocationID.x;
    if (uint64_t(i) >= uint64_t(C) * p.K) return;
    const uint c = i / p.K, j = i % p.K;
    const uint nb = p.row_blocks != 0u ? p.row_blocks : p.N / QK;
    const dq_blk blk = dq_block(uint64_t(p.w), j, c / 8u, p.K, nb);
    const uint64_t base = uint64_t(p.y);
#ifdef DP_Q_Q4_K
    const uint sb = c % 8u;                                  // sub-block within the super-block
    const uvec4 hd = dq_u32x4(dq_seg(blk, 1u));              // d, dmin, scales[12]
    const float d = dp_f16_bits_to_f32(uint16_t(hd.x & 0xffffu)), dmin = dp_f16_bits_to_f32(uint16_t(hd.x >> 16));
    uint sc, mn;                                             // get_scale_min_k4, as dp_quant.glsl's dq8
    if (sb < 4u) {
        sc = dq_byte(hd.y, sb) & 63u;
        mn = dq_byte(hd.z, sb) & 63u;
    } else {
        const uint hi = dq_byte(hd.w, sb - 4u);
        sc = (hi & 15u) | ((dq_byte(hd.y, sb - 4u) >> 6) << 4);
        mn = (hi >> 4) | ((dq_byte(hd.z, sb - 4u) >> 6) << 4);
    }
    precise float a = d * float(sc);
    precise float b = dmin * float(mn);
    const uint q0 = 32u * (sb >> 1);
    const uint64_t qs = dq_seg(blk, 0u);
    V4Out(base).v[i] = pack_nibbles(dq_u32x2(qs, q0), dq_u32x2(qs, q0 + 8u), dq_u32x2(qs, q0 + 16u),
                                    dq_u32x2(qs, q0 + 24u), 4u * (sb & 1u));
    V2Out(base + uint64_t(C) * p.K * 16ul).v[i] = vec2(a, b);
#else
    const uint hb = (c % 8u) >> 2, qd = c % 4u;              // 128-half and quarter of the super-block
    const float d = dq_f16(dq_seg(blk, 3u), 0u);
    const uint64_t ql = dq_seg(blk, 0u), qh = dq_seg(blk, 1u), scl = dq_seg(blk, 2u);
    const uint lo0 = 64u * hb + 32u * (qd & 1u), hi0 = 32u * hb;
    V4Out(base).v[i] = pack_nibbles(dq_u32x2(ql, lo0), dq_u32x2(ql, lo0 + 8u), dq_u32x2(ql, lo0 + 16u),
                                    dq_u32x2(ql, lo0 + 24u), qd >= 2u ? 4u : 0u);
    uvec2 h = uvec2(0u);
    for (uint l = 0u; l < 32u; l += 8u) {
        const uvec2 wv = dq_u32x2(qh, hi0 + l);
        for (uint t = 0u; t < 8u; ++t) {
            const uint e = l + t;
            const uint bits = ((t < 4u ? wv.x : wv.y) >> (8u * (t & 3u) + 2u * qd)) & 3u;
            h[e >> 4] |= bits << (2u * (e & 15u));
        }
    }
    U2Out(base + uint64_t(C) * p.K * 16ul).v[i] = h;
    const int s0 = bitfieldExtract(int(dq_u8(scl, 8u * hb + 2u * qd)), 0, 8);
    const int s1 = bitfieldExtract(int(dq_u8(scl, 8u * hb + 1u + 2u * qd)), 0, 8);
    precise float a0 = d * float(s0);
    precise float a1 = d * float(s1);
    V2Out(base + uint64_t(C) * p.K * 24ul).v[i] = vec2(a0, a1);
#endif
}
