// shaders/include/dp_quant.glsl: decoding ggml's block-quantised weights on the GPU, one type per define:
//   DP_Q_Q8_0 (the default) | DP_Q_Q4_0 | DP_Q_Q5_0 | DP_Q_Q4_1 | DP_Q_Q5_1 | DP_Q_Q4_K | DP_Q_Q5_K | DP_Q_Q6_K
// Layouts and formulas: core/quant.c (the CPU reference, ggml's dequantize_row_*) and MODEL_REFERENCE §4.
// Provides:
//   QK                    elements per block (32, or 256 for the K-quants)
//   QB                    bytes per block
//   dq8(blk, e, v)        the 8 consecutive values e .. e+7 of the block at byte address blk (e % 8 == 0)
// The unit of work is 8 consecutive elements for every type: the matrix kernels and the dequantiser split
// rows into such groups, so that any K (a multiple of QK) keeps every thread busy, and x is read as 8
// consecutive activations. Each group's bytes are loaded with a few aligned 16-bit (or 32-bit, where the
// block size allows) loads: blocks of 34, 18, 22 and 210 bytes are only 2-byte aligned.
// Bit-exactness: scales are widened from f16 bits exactly (dp_f16_bits_to_f32, subnormals kept), and each
// value is formed with the CPU's operations in the CPU's order; `precise` forbids fusing d1 * q - m1 into an
// fma or reassociating (d * s) * q, so the dequantised f32 equals core/quant.c's bit for bit.
#ifndef DP_QUANT_GLSL
#define DP_QUANT_GLSL

#include "dp_common.glsl"

// No type define: Q8_0 (so that a kernel compiles with default defines, e.g. under `doppler shaders`).
#if !defined(DP_Q_Q8_0) && !defined(DP_Q_Q4_0) && !defined(DP_Q_Q4_1) && !defined(DP_Q_Q5_0) && \
    !defined(DP_Q_Q5_1) && !defined(DP_Q_Q4_K) && !defined(DP_Q_Q5_K) && !defined(DP_Q_Q6_K)
#define DP_Q_Q8_0
#endif

#if defined(DP_Q_Q8_0)
#define QK 32u
#define QB 34u
#elif defined(DP_Q_Q4_0)
#define QK 32u
#define QB 18u
#elif defined(DP_Q_Q4_1)
#define QK 32u
#define QB 20u
#elif defined(DP_Q_Q5_0)
#define QK 32u
#define QB 22u
#elif defined(DP_Q_Q5_1)
#define QK 32u
#define QB 24u
#elif defined(DP_Q_Q4_K)
#define QK 256u
#define QB 144u
#elif defined(DP_Q_Q5_K)
#define QK 256u
#define QB 176u
#elif defined(DP_Q_Q6_K)
#define QK 256u
#define QB 210u
#endif

// 16 bits at an even byte offset of a block.
uint dq_u16(uint64_t blk, uint off) { return uint(U16In(blk + off).v[0]); }
// 32 bits (4 bytes, little endian) at an even byte offset.
uint dq_u32(uint64_t blk, uint off) { return dq_u16(blk, off) | (dq_u16(blk, off + 2u) << 16); }
// One byte at any offset.
uint dq_u8(uint64_t blk, uint off) { return (dq_u16(blk, off & ~1u) >> (8u * (off & 1u))) & 0xffu; }
float dq_f16(uint64_t blk, uint off) { return dp_f16_bits_to_f32(uint16_t(dq_u16(blk, off))); }

// Byte i (0..3) of a packed word, and its low / high nibble.
uint dq_byte(uint w, uint i) { return (w >> (8u * i)) & 0xffu; }

#if defined(DP_Q_Q8_0)
void dq8(uint64_t blk, uint e, out float v[8])
{
    const float d = dq_f16(blk, 0u);
    const uint w0 = dq_u32(blk, 2u + e), w1 = dq_u32(blk, 6u + e);
    for (uint i = 0u; i < 4u; ++i) {
        precise float a = float(bitfieldExtract(int(w0), int(8u * i), 8)) * d;
        precise float b = float(bitfieldExtract(int(w1), int(8u * i), 8)) * d;
        v[i] = a; v[4u + i] = b;
    }
}
#elif defined(DP_Q_Q4_0) || defined(DP_Q_Q4_1)
// Byte j of qs holds element j (low nibble) and element j + 16 (high nibble).
void dq8(uint64_t blk, uint e, out float v[8])
{
#ifdef DP_Q_Q4_0
    const uint qs = 2u;
#else
    const uint qs = 4u;
    const float m = dq_f16(blk, 2u);
#endif
    const float d = dq_f16(blk, 0u);
    const uint sh = e >= 16u ? 4u : 0u, j = e & 15u;
    const uint w0 = dq_u32(blk, qs + j), w1 = dq_u32(blk, qs + j + 4u);
    for (uint i = 0u; i < 4u; ++i) {
        const uint q0 = (w0 >> (8u * i + sh)) & 15u, q1 = (w1 >> (8u * i + sh)) & 15u;
#ifdef DP_Q_Q4_0
        precise float a = float(int(q0) - 8) * d;
        precise float b = float(int(q1) - 8) * d;
#else
        precise float a = float(q0) * d + m;
        precise float b = float(q1) * d + m;
#endif
        v[i] = a; v[4u + i] = b;
    }
}
#elif defined(DP_Q_Q5_0) || defined(DP_Q_Q5_1)
// As Q4_0 / Q4_1, plus bit e of the 32-bit qh as each value's fifth bit.
void dq8(uint64_t blk, uint e, out float v[8])
{
#ifdef DP_Q_Q5_0
    const uint qh_off = 2u, qs = 6u;
#else
    const uint qh_off = 4u, qs = 8u;
    const float m = dq_f16(blk, 2u);
#endif
    const float d = dq_f16(blk, 0u);
    const uint qh = dq_u32(blk, qh_off);
    const uint sh = e >= 16u ? 4u : 0u, j = e & 15u;
    const uint w0 = dq_u32(blk, qs + j), w1 = dq_u32(blk, qs + j + 4u);
    for (uint i = 0u; i < 4u; ++i) {
        const uint q0 = ((w0 >> (8u * i + sh)) & 15u) | (((qh >> (e + i)) & 1u) << 4);
        const uint q1 = ((w1 >> (8u * i + sh)) & 15u) | (((qh >> (e + 4u + i)) & 1u) << 4);
#ifdef DP_Q_Q5_0
        precise float a = float(int(q0) - 16) * d;
        precise float b = float(int(q1) - 16) * d;
#else
        precise float a = float(q0) * d + m;
        precise float b = float(q1) * d + m;
#endif
        v[i] = a; v[4u + i] = b;
    }
}
#elif defined(DP_Q_Q4_K) || defined(DP_Q_Q5_K)
// Super-block of 8 sub-blocks of 32; sub-block j = e / 32 has a 6-bit scale and min packed in scales[12]
// (get_scale_min_k4). Its values are the low (j even) or high (j odd) nibbles of qs[32 (j/2) .. + 32);
// Q5_K adds bit j of qh[l] (l = e % 32) as the fifth bit. y = (d * sc) * q - (dmin * m).
void dq8(uint64_t blk, uint e, out float v[8])
{
    const float d = dq_f16(blk, 0u), dmin = dq_f16(blk, 2u);
    const uint j = e >> 5, l = e & 31u;
    const uint sa = dq_u32(blk, 4u), sb = dq_u32(blk, 8u), sc12 = dq_u32(blk, 12u);   // scales[0..12)
    uint sc, mn;
    if (j < 4u) {
        sc = dq_byte(sa, j) & 63u;
        mn = dq_byte(sb, j) & 63u;
    } else {
        const uint hi = dq_byte(sc12, j - 4u);                   // scales[j + 4]
        sc = (hi & 15u) | ((dq_byte(sa, j - 4u) >> 6) << 4);     // scales[j - 4]
        mn = (hi >> 4) | ((dq_byte(sb, j - 4u) >> 6) << 4);      // scales[j]
    }
    precise float d1 = d * float(sc);
    precise float m1 = dmin * float(mn);
#ifdef DP_Q_Q4_K
    const uint qs = 16u;
#else
    const uint qs = 48u;
    const uint h0 = dq_u32(blk, 16u + l), h1 = dq_u32(blk, 20u + l);
#endif
    const uint sh = (j & 1u) * 4u;
    const uint w0 = dq_u32(blk, qs + 32u * (j >> 1) + l), w1 = dq_u32(blk, qs + 32u * (j >> 1) + l + 4u);
    for (uint i = 0u; i < 4u; ++i) {
        uint q0 = (w0 >> (8u * i + sh)) & 15u, q1 = (w1 >> (8u * i + sh)) & 15u;
#ifdef DP_Q_Q5_K
        q0 |= ((dq_byte(h0, i) >> j) & 1u) << 4;
        q1 |= ((dq_byte(h1, i) >> j) & 1u) << 4;
#endif
        precise float a = d1 * float(q0) - m1;
        precise float b = d1 * float(q1) - m1;
        v[i] = a; v[4u + i] = b;
    }
}
#elif defined(DP_Q_Q6_K)
// ql[128] @0, qh[64] @128, scales int8[16] @192, d f16 @208. Element e: half h = e / 128, quarter
// qd = (e % 128) / 32, l = e % 32. Low 4 bits: ql[64h + l + 32 (qd & 1)], low nibble for qd < 2;
// high 2 bits: qh[32h + l] >> 2qd; scale: scales[8h + l / 16 + 2qd]. y = (d * scale) * (q - 32).
void dq8(uint64_t blk, uint e, out float v[8])
{
    const float d = dq_f16(blk, 208u);
    const uint h = e >> 7, qd = (e >> 5) & 3u, l = e & 31u;
    const uint ql = 64u * h + l + 32u * (qd & 1u), sh = qd >= 2u ? 4u : 0u;
    const uint lw0 = dq_u32(blk, ql), lw1 = dq_u32(blk, ql + 4u);
    const uint hw0 = dq_u32(blk, 128u + 32u * h + l), hw1 = dq_u32(blk, 132u + 32u * h + l);
    const int s = bitfieldExtract(int(dq_u8(blk, 192u + 8u * h + (l >> 4) + 2u * qd)), 0, 8);
    precise float ds = d * float(s);
    for (uint i = 0u; i < 4u; ++i) {
        const uint q0 = ((lw0 >> (8u * i + sh)) & 15u) | (((hw0 >> (8u * i + 2u * qd)) & 3u) << 4);
        const uint q1 = ((lw1 >> (8u * i + sh)) & 15u) | (((hw1 >> (8u * i + 2u * qd)) & 3u) << 4);
        precise float a = ds * float(int(q0) - 32);
        precise float b = ds * float(int(q1) - 32);
        v[i] = a; v[4u + i] = b;
    }
}
#endif

#endif
