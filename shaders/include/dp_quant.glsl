// shaders/include/dp_quant.glsl: decoding ggml's block-quantised weights on the GPU, one type per define:
//   DP_Q_Q8_0 (the default) | DP_Q_Q4_0 | DP_Q_Q5_0 | DP_Q_Q4_1 | DP_Q_Q5_1 | DP_Q_Q4_K | DP_Q_Q5_K | DP_Q_Q6_K
// Layouts and formulas: core/quant.c (the CPU reference, ggml's dequantize_row_*) and MODEL_REFERENCE §4.
// Provides:
//   QK                    elements per block (32, or 256 for the K-quants)
//   QB                    bytes per block
//   dq_blk                a handle to one block (where its bytes lie: see the layouts below)
//   dq_block(w, n, b, N, nb)  block b of row n of the weight [N, nb * QK] at byte address w
//   dq8(blk, e, v)        the 8 consecutive values e .. e+7 of block blk (e % 8 == 0)
// Layouts (core/quant_layout.h, docs/QUANTIZATION.md "Weight layouts"), one per define; only the addressing
// differs, the decode below is the same for all:
//   (none)          row_wise: GGUF order, block (n, b) at n * nb + b
//   DP_LAYOUT_COL   column_wise: block (n, b) at b * N + n
//   DP_LAYOUT_FLAT  flat: each block split into segments (codes | high bits | scales, DQ_SEG_*), segment s of all
//                   blocks stored as plane s (planes largest first, blocks in row_wise order within a plane). The
//                   planes keep code bytes 8-byte and K-quant headers 16-byte aligned whatever QB is, so the
//                   loads become one 32-bit load per word, one 64-bit load per pair of words and one 128-bit
//                   load per K-quant header (the tensor's base address is 16-byte aligned: device tensors are).
// The unit of work is 8 consecutive elements for every type: the matrix kernels and the dequantiser split
// rows into such groups, so that any K (a multiple of QK) keeps every thread busy, and x is read as 8
// consecutive activations. Each group's bytes are loaded with a few aligned 16-bit (or 32-bit, where the
// block size allows) loads: blocks of 34, 18, 22 and 210 bytes are only 2-byte aligned. Q4_K and Q5_K blocks
// (144 and 176 bytes, DQ_QB16) are 16-byte aligned in every layout where the tensor is, so there a 16-byte
// group (a header, 32 codes) is one 128-bit load after a check of the address (H100, Llama 3.2 1B Q4_K_M:
// gate+up 0.311 -> 0.291 ms per token, decode 1.015x; Gemma 3 1B unchanged; docs/BENCHMARKS.md 21g).
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
#define DQ_QB16
#elif defined(DP_Q_Q5_K)
#define QK 256u
#define QB 176u
#define DQ_QB16
#elif defined(DP_Q_Q6_K)
#define QK 256u
#define QB 210u
#endif

// A block's segments in flat plane order: (offset in the ggml block, bytes); core/quant_layout.c's table.
#if defined(DP_Q_Q8_0)
#define DQ_NSEG 2
const uint DQ_SEG_OFF[DQ_NSEG] = uint[](2u, 0u), DQ_SEG_SIZE[DQ_NSEG] = uint[](32u, 2u);      // qs | d
#elif defined(DP_Q_Q4_0)
#define DQ_NSEG 2
const uint DQ_SEG_OFF[DQ_NSEG] = uint[](2u, 0u), DQ_SEG_SIZE[DQ_NSEG] = uint[](16u, 2u);      // qs | d
#elif defined(DP_Q_Q4_1)
#define DQ_NSEG 2
const uint DQ_SEG_OFF[DQ_NSEG] = uint[](4u, 0u), DQ_SEG_SIZE[DQ_NSEG] = uint[](16u, 4u);      // qs | d, m
#elif defined(DP_Q_Q5_0)
#define DQ_NSEG 3
const uint DQ_SEG_OFF[DQ_NSEG] = uint[](6u, 2u, 0u), DQ_SEG_SIZE[DQ_NSEG] = uint[](16u, 4u, 2u);   // qs | qh | d
#elif defined(DP_Q_Q5_1)
#define DQ_NSEG 3
const uint DQ_SEG_OFF[DQ_NSEG] = uint[](8u, 4u, 0u), DQ_SEG_SIZE[DQ_NSEG] = uint[](16u, 4u, 4u);   // qs | qh | d, m
#elif defined(DP_Q_Q4_K)
#define DQ_NSEG 2
const uint DQ_SEG_OFF[DQ_NSEG] = uint[](16u, 0u), DQ_SEG_SIZE[DQ_NSEG] = uint[](128u, 16u);   // qs | d, dmin, scales
#elif defined(DP_Q_Q5_K)
#define DQ_NSEG 3
const uint DQ_SEG_OFF[DQ_NSEG] = uint[](48u, 16u, 0u), DQ_SEG_SIZE[DQ_NSEG] = uint[](128u, 32u, 16u);  // qs | qh | hdr
#elif defined(DP_Q_Q6_K)
#define DQ_NSEG 4
const uint DQ_SEG_OFF[DQ_NSEG] = uint[](0u, 128u, 192u, 208u),
           DQ_SEG_SIZE[DQ_NSEG] = uint[](128u, 64u, 16u, 2u);                      // ql | qh | scales | d
#endif

#if defined(DP_LAYOUT_COL) && defined(DP_LAYOUT_FLAT)
#error "one layout define at most"
#endif

#ifdef DP_LAYOUT_FLAT
struct dq_blk { uint64_t seg[DQ_NSEG]; };  // the address of each segment of the block, in its plane
#else
struct dq_blk { uint64_t addr; };          // the block's byte address
#endif

dq_blk dq_block(uint64_t w, uint n, uint b, uint N, uint nb)
{
    dq_blk r;
#if defined(DP_LAYOUT_FLAT)
    const uint64_t i = uint64_t(n) * nb + b, total = uint64_t(N) * nb;
    uint64_t plane = w;
    for (uint s = 0u; s < DQ_NSEG; ++s) {
        r.seg[s] = plane + i * DQ_SEG_SIZE[s];
        plane += total * DQ_SEG_SIZE[s];
    }
#elif defined(DP_LAYOUT_COL)
    r.addr = w + (uint64_t(b) * N + n) * QB;
#else
    r.addr = w + (uint64_t(n) * nb + b) * QB;
#endif
    return r;
}

// The byte address of segment s of a block (s: its index in DQ_SEG_*).
uint64_t dq_seg(dq_blk b, uint s)
{
#ifdef DP_LAYOUT_FLAT
    return b.seg[s];
#else
    return b.addr + DQ_SEG_OFF[s];
#endif
}

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer DqU32x2In { uvec2 v[]; };

// Loads at byte address a + off. Row-wise and column-wise blocks of 34, 18, 22 and 210 bytes are only 2-byte
// aligned, so there every load is made of aligned 16-bit loads; flat planes keep 32-bit words 4-byte aligned,
// pairs of words (dq_u32x2, off % 8 == 0) 8-byte aligned and K-quant headers (dq_u32x4) 16-byte aligned.
// 16 bits at an even offset.
uint dq_u16(uint64_t a, uint off) { return uint(U16In(a + off).v[0]); }
#ifdef DP_LAYOUT_FLAT
// 32 bits (4 bytes, little endian).
uint dq_u32(uint64_t a, uint off) { return U32In(a + off).v[0]; }
// Words off and off + 4.
uvec2 dq_u32x2(uint64_t a, uint off) { return DqU32x2In(a + off).v[0]; }
// The 16 bytes at a.
uvec4 dq_u32x4(uint64_t a) { return V4In(a).v[0]; }
#else
uint dq_u32(uint64_t a, uint off) { return dq_u16(a, off) | (dq_u16(a, off + 2u) << 16); }
uvec2 dq_u32x2(uint64_t a, uint off) { return uvec2(dq_u32(a, off), dq_u32(a, off + 4u)); }
uvec4 dq_u32x4(uint64_t a)
{
#ifdef DQ_QB16
    if ((a & 15ul) == 0ul) return V4In(a).v[0];   // every block of an aligned tensor; a view elsewhere: below
#endif
    return uvec4(dq_u32(a, 0u), dq_u32(a, 4u), dq_u32(a, 8u), dq_u32(a, 12u));
}
#endif
// One byte at any offset.
uint dq_u8(uint64_t blk, uint off) { return (dq_u16(blk, off & ~1u) >> (8u * (off & 1u))) & 0xffu; }
float dq_f16(uint64_t blk, uint off) { return dp_f16_bits_to_f32(uint16_t(dq_u16(blk, off))); }

// Byte i (0..3) of a packed word, and its low / high nibble.
uint dq_byte(uint w, uint i) { return (w >> (8u * i)) & 0xffu; }

#if defined(DP_Q_Q8_0)
void dq8(dq_blk blk, uint e, out float v[8])
{
    const float d = dq_f16(dq_seg(blk, 1u), 0u);
    const uvec2 w = dq_u32x2(dq_seg(blk, 0u), e);
    for (uint i = 0u; i < 4u; ++i) {
        precise float a = float(bitfieldExtract(int(w.x), int(8u * i), 8)) * d;
        precise float b = float(bitfieldExtract(int(w.y), int(8u * i), 8)) * d;
        v[i] = a; v[4u + i] = b;
    }
}
#elif defined(DP_Q_Q4_0) || defined(DP_Q_Q4_1)
// Byte j of qs holds element j (low nibble) and element j + 16 (high nibble).
void dq8(dq_blk blk, uint e, out float v[8])
{
    const uint64_t dm = dq_seg(blk, 1u);
#ifdef DP_Q_Q4_1
    const float m = dq_f16(dm, 2u);
#endif
    const float d = dq_f16(dm, 0u);
    const uint sh = e >= 16u ? 4u : 0u, j = e & 15u;
    const uvec2 w = dq_u32x2(dq_seg(blk, 0u), j);
    for (uint i = 0u; i < 4u; ++i) {
        const uint q0 = (w.x >> (8u * i + sh)) & 15u, q1 = (w.y >> (8u * i + sh)) & 15u;
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
void dq8(dq_blk blk, uint e, out float v[8])
{
    const uint64_t dm = dq_seg(blk, 2u);
#ifdef DP_Q_Q5_1
    const float m = dq_f16(dm, 2u);
#endif
    const float d = dq_f16(dm, 0u);
    const uint qh = dq_u32(dq_seg(blk, 1u), 0u);
    const uint sh = e >= 16u ? 4u : 0u, j = e & 15u;
    const uvec2 w = dq_u32x2(dq_seg(blk, 0u), j);
    for (uint i = 0u; i < 4u; ++i) {
        const uint q0 = ((w.x >> (8u * i + sh)) & 15u) | (((qh >> (e + i)) & 1u) << 4);
        const uint q1 = ((w.y >> (8u * i + sh)) & 15u) | (((qh >> (e + 4u + i)) & 1u) << 4);
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
void dq8(dq_blk blk, uint e, out float v[8])
{
#ifdef DP_Q_Q4_K
    const uvec4 hd = dq_u32x4(dq_seg(blk, 1u));              // d, dmin, scales[12]
#else
    const uvec4 hd = dq_u32x4(dq_seg(blk, 2u));
#endif
    const float d = dp_f16_bits_to_f32(uint16_t(hd.x & 0xffffu)), dmin = dp_f16_bits_to_f32(uint16_t(hd.x >> 16));
    const uint j = e >> 5, l = e & 31u;
    const uint sa = hd.y, sb = hd.z, sc12 = hd.w;            // scales[0..12)
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
#ifdef DP_Q_Q5_K
    const uvec2 h = dq_u32x2(dq_seg(blk, 1u), l);
#endif
    const uint sh = (j & 1u) * 4u;
    const uvec2 w = dq_u32x2(dq_seg(blk, 0u), 32u * (j >> 1) + l);
    for (uint i = 0u; i < 4u; ++i) {
        uint q0 = (w.x >> (8u * i + sh)) & 15u, q1 = (w.y >> (8u * i + sh)) & 15u;
#ifdef DP_Q_Q5_K
        q0 |= ((dq_byte(h.x, i) >> j) & 1u) << 4;
        q1 |= ((dq_byte(h.y, i) >> j) & 1u) << 4;
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
void dq8(dq_blk blk, uint e, out float v[8])
{
    const float d = dq_f16(dq_seg(blk, 3u), 0u);
    const uint h = e >> 7, qd = (e >> 5) & 3u, l = e & 31u;
    const uint sh = qd >= 2u ? 4u : 0u;
    const uvec2 lw = dq_u32x2(dq_seg(blk, 0u), 64u * h + l + 32u * (qd & 1u));
    const uvec2 hw = dq_u32x2(dq_seg(blk, 1u), 32u * h + l);
    const int s = bitfieldExtract(int(dq_u8(dq_seg(blk, 2u), 8u * h + (l >> 4) + 2u * qd)), 0, 8);
    precise float ds = d * float(s);
    for (uint i = 0u; i < 4u; ++i) {
        const uint q0 = ((lw.x >> (8u * i + sh)) & 15u) | (((hw.x >> (8u * i + 2u * qd)) & 3u) << 4);
        const uint q1 = ((lw.y >> (8u * i + sh)) & 15u) | (((hw.y >> (8u * i + 2u * qd)) & 3u) << 4);
        precise float a = ds * float(int(q0) - 32);
        precise float b = ds * float(int(q1) - 32);
        v[i] = a; v[4u + i] = b;
    }
}
#endif

#endif
