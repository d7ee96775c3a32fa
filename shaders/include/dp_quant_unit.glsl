// shaders/include/dp_quant_unit.glsl: 32-value units of ggml blocks for the matrix-vector kernel, read with
// 16-byte loads. Include after dp_quant.glsl (it provides the type define, QK, the layouts and dq_block).
//
// Why units: gemv_q streams every weight byte once, so its speed is the number of bytes in flight per
// thread. A unit is 16 code bytes of one block (one uvec4: a single 128-bit load on the flat layout, whose
// code planes are 16-byte aligned) plus the block's small header, and holds 32 values split in two halves
// of 16 consecutive k (each half has one scale a and one offset b: value = a * code + b). The dot product
// of a half with x is then a * sum(code * x) + b * sum(x): the scale leaves the inner loop.
//   DQU_PER_BLOCK      units per block: QK / 32 (1, or 8 for the K-quants)
//   dqu_load(blk, u)   unit u (0 .. DQU_PER_BLOCK) of a block: codes and per-half (a, b), and
//   dqu_k0(u, h)       the first element (within the block) of half h of unit u; the half covers 16 elements.
//   dqu_codes(un, u, h, q)            the 16 codes of half h as floats v = 1 + c / S in [1, 2) (see below)
//   dqu_half_acc(q, x, a, b, acc)     acc + a * sum(v * x) + b * sum(x), in one fixed order: gemv_q.comp and
//                                     fused/lm_head_q.comp both use it, so their logits agree bit for bit
// Why v = 1 + c / S and not c: a code c of B bits (S = 2^B) ORed into the top of the mantissa of 1.0 IS the
// float 1 + c / S, two integer operations (shift, mask-and-or) instead of an integer-to-float conversion,
// which NVIDIA GPUs run at a quarter of the FMA rate (on the H100 the quantised LM head went 0.431 -> 0.384 ms
// per token with it; the layer GEMVs, bound by memory latency, did not move: docs/BENCHMARKS.md, session 3). The affine map is folded into the unit's scales: value = a c + b with
// c = S (v - 1) + C0 gives a * sum(c x) + b * sum(x) = (a S) sum(v x) + (b + a (C0 - S)) sum(x), so dqu_load
// returns a' = a S and b' = b + a (C0 - S) (C0 = -128 for Q8_0's signed bytes, else 0). The cancellation
// between the two terms costs about log2(S / mean c) ~ 1-2 bits of the f32 sum.
// With DQU_RAW_SCALES defined before the include, dqu_load keeps the unit's scales unfolded (value = a * code +
// b, codes as stored): the integer dot products of dp_quant_x8.glsl (dqu_dot8) use them.
//   dqu_cluster_sum(v, cw)            sum over cw consecutive lanes (a power of two <= the subgroup size) by
//                                     shuffles, every lane getting the same value; the two kernels' reduction
// Unit layouts (core/quant.c is the reference; MODEL_REFERENCE §4):
//   Q8_0           unit = the block: codes qs[0..16) | qs[16..32) (two uvec4), one d; a = d, b = 0
//   Q4_0 / Q4_1    byte j of qs: low nibble = element j (half 0), high = element j + 16 (half 1);
//                  a = d, b = -8d (Q4_0) or m (Q4_1)
//   Q5_0 / Q5_1    as Q4_0 / Q4_1 with bit e of qh as the fifth bit; b = -16d (Q5_0) or m (Q5_1)
//   Q4_K / Q5_K    unit u = 2p + s: qs[32p + 16s .. + 16); low nibbles are sub-block 2p (half 0), high
//                  nibbles sub-block 2p + 1 (half 1), elements l = 16s .. 16s + 15 of each; Q5_K adds bit
//                  (2p + half) of qh[l]; a = d * sc, b = -dmin * m of the sub-block
//   Q6_K           unit u = 4h + 2c + s (h: 128-half, c: 0/1, s: 16-run): ql[64h + 32c + 16s .. + 16), low
//                  nibbles are quarter qd = c (half 0), high nibbles qd = c + 2 (half 1); bits 2qd of
//                  qh[32h + 16s + i] on top; a = d * scales[8h + s + 2qd], b = -32 a
#ifndef DP_QUANT_UNIT_GLSL
#define DP_QUANT_UNIT_GLSL

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require

#define DQU_PER_BLOCK (QK / 32u)

struct dq_unit {
    uvec4 c0;      // codes, packed (see the table above); c1 only for Q8_0's second half and Q6_K's high bits
    uvec4 c1;
    vec2  a;       // per half: value = a * code + b
    vec2  b;
};

// 16 bytes at a + off (off % 16 == 0 on the flat layout's code planes).
uvec4 dqu_u32x4(uint64_t a, uint off)
{
#ifdef DP_LAYOUT_FLAT
    return V4In(a + off).v[0];
#else
    return dq_u32x4(a + off);   // one 128-bit load for Q4_K / Q5_K (DQ_QB16), 16-bit loads otherwise
#endif
}

uint dqu_k0(uint u, uint h)
{
#if defined(DP_Q_Q8_0) || defined(DP_Q_Q4_0) || defined(DP_Q_Q4_1) || defined(DP_Q_Q5_0) || defined(DP_Q_Q5_1)
    return 16u * h;
#elif defined(DP_Q_Q6_K)
    const uint hb = u >> 2, c = (u >> 1) & 1u, s = u & 1u;
    return 128u * hb + 32u * (c + 2u * h) + 16u * s;
#else
    const uint p = u >> 1, s = u & 1u;
    return 32u * (2u * p + h) + 16u * s;
#endif
}

// 1 + c / 2^bits for a code c < 2^bits already placed at mantissa bit (23 - bits): no conversion instruction.
float dqu_v(uint mant) { return uintBitsToFloat(0x3f800000u | mant); }

#if defined(DP_Q_Q8_0)
#define DQU_S 256.0
#define DQU_C0 (-128.0)
#elif defined(DP_Q_Q4_0) || defined(DP_Q_Q4_1) || defined(DP_Q_Q4_K)
#define DQU_S 16.0
#define DQU_C0 0.0
#elif defined(DP_Q_Q5_0) || defined(DP_Q_Q5_1) || defined(DP_Q_Q5_K)
#define DQU_S 32.0
#define DQU_C0 0.0
#elif defined(DP_Q_Q6_K)
#define DQU_S 64.0
#define DQU_C0 0.0
#endif

// The unit's per-half (a, b) for codes c, turned into (a', b') for the values v = 1 + c / S (header above).
void dqu_fold(inout dq_unit r)
{
    const vec2 a = r.a;
    r.a = a * DQU_S;
    r.b = r.b + a * (DQU_C0 - DQU_S);
}

#if defined(DP_Q_Q4_K) || defined(DP_Q_Q5_K)
// Scale and min of sub-block j (get_scale_min_k4) from the header words sa, sb, sc12 (scales[0..12)).
uvec2 dqu_scale_min(uint sa, uint sb, uint sc12, uint j)
{
    if (j < 4u) return uvec2(dq_byte(sa, j) & 63u, dq_byte(sb, j) & 63u);
    const uint hi = dq_byte(sc12, j - 4u);
    return uvec2((hi & 15u) | ((dq_byte(sa, j - 4u) >> 6) << 4), (hi >> 4) | ((dq_byte(sb, j - 4u) >> 6) << 4));
}
#endif

dq_unit dqu_load(dq_blk blk, uint u)
{
    dq_unit r;
    r.c1 = uvec4(0u);
#if defined(DP_Q_Q8_0)
    const float d = dq_f16(dq_seg(blk, 1u), 0u);
    r.c0 = dqu_u32x4(dq_seg(blk, 0u), 0u);
    r.c1 = dqu_u32x4(dq_seg(blk, 0u), 16u);
    r.a = vec2(d); r.b = vec2(0.0);
#elif defined(DP_Q_Q4_0) || defined(DP_Q_Q4_1)
    const uint64_t dm = dq_seg(blk, 1u);
    const float d = dq_f16(dm, 0u);
    r.c0 = dqu_u32x4(dq_seg(blk, 0u), 0u);
    r.a = vec2(d);
#ifdef DP_Q_Q4_0
    r.b = vec2(-8.0 * d);
#else
    r.b = vec2(dq_f16(dm, 2u));
#endif
#elif defined(DP_Q_Q5_0) || defined(DP_Q_Q5_1)
    const uint64_t dm = dq_seg(blk, 2u);
    const float d = dq_f16(dm, 0u);
    r.c0 = dqu_u32x4(dq_seg(blk, 0u), 0u);
    r.c1.x = dq_u32(dq_seg(blk, 1u), 0u);                 // qh: bit e = fifth bit of element e
    r.a = vec2(d);
#ifdef DP_Q_Q5_0
    r.b = vec2(-16.0 * d);
#else
    r.b = vec2(dq_f16(dm, 2u));
#endif
#elif defined(DP_Q_Q4_K) || defined(DP_Q_Q5_K)
#ifdef DP_Q_Q4_K
    const uvec4 hd = dqu_u32x4(dq_seg(blk, 1u), 0u);      // d, dmin, scales[12]
#else
    const uvec4 hd = dqu_u32x4(dq_seg(blk, 2u), 0u);
#endif
    const float d = dp_f16_bits_to_f32(uint16_t(hd.x & 0xffffu)), dmin = dp_f16_bits_to_f32(uint16_t(hd.x >> 16));
    const uint p = u >> 1, s = u & 1u;
    const uvec2 sm0 = dqu_scale_min(hd.y, hd.z, hd.w, 2u * p), sm1 = dqu_scale_min(hd.y, hd.z, hd.w, 2u * p + 1u);
    r.a = vec2(d * float(sm0.x), d * float(sm1.x));
    r.b = vec2(-dmin * float(sm0.y), -dmin * float(sm1.y));
    r.c0 = dqu_u32x4(dq_seg(blk, 0u), 32u * p + 16u * s);
#ifdef DP_Q_Q5_K
    r.c1 = dqu_u32x4(dq_seg(blk, 1u), 16u * s);           // qh[l], bit j = sub-block j
#endif
#elif defined(DP_Q_Q6_K)
    const float d = dq_f16(dq_seg(blk, 3u), 0u);
    const uint hb = u >> 2, c = (u >> 1) & 1u, s = u & 1u;
    r.c0 = dqu_u32x4(dq_seg(blk, 0u), 64u * hb + 32u * c + 16u * s);
    r.c1 = dqu_u32x4(dq_seg(blk, 1u), 32u * hb + 16u * s);
    const uint sw = dq_u32(dq_seg(blk, 2u), 8u * hb);          // scales[8hb .. 8hb + 4)
    const uint sw2 = dq_u32(dq_seg(blk, 2u), 8u * hb + 4u);    // scales[8hb + 4 .. 8hb + 8)
    // scales[8hb + s + 2qd] for qd = c (half 0) and c + 2 (half 1): byte s + 2c of sw, byte s + 2c of sw2.
    const int s0 = bitfieldExtract(int(sw), int(8u * (s + 2u * c)), 8);
    const int s1 = bitfieldExtract(int(sw2), int(8u * (s + 2u * c)), 8);
    r.a = vec2(d * float(s0), d * float(s1));
    r.b = -32.0 * r.a;
#endif
#ifndef DQU_RAW_SCALES
    dqu_fold(r);
#endif
    return r;
}

// The 16 codes of half h as v = 1 + c / S: each code's bits moved to the top of the mantissa of 1.0.
void dqu_codes(dq_unit un, uint u, uint h, out float q[16])
{
#if defined(DP_Q_Q8_0)
    // signed byte e of word w: (byte ^ 0x80) = c + 128, 8 bits at mantissa bits 15..22
    const uvec4 w = (h == 0u ? un.c0 : un.c1) ^ uvec4(0x80808080u);
    for (uint i = 0u; i < 16u; ++i) {
        const uint b = 8u * (i & 3u), x = w[i >> 2];
        q[i] = dqu_v(b <= 15u ? (x << (15u - b)) & 0x7f8000u : (x >> (b - 15u)) & 0x7f8000u);
    }
#elif defined(DP_Q_Q4_0) || defined(DP_Q_Q4_1) || defined(DP_Q_Q4_K)
    // nibble at bit 8e + 4h of the word, moved to mantissa bits 19..22
    const uint sh = 4u * h;
    for (uint i = 0u; i < 16u; ++i) {
        const uint b = 8u * (i & 3u) + sh, x = un.c0[i >> 2];
        q[i] = dqu_v(b <= 19u ? (x << (19u - b)) & 0x780000u : (x >> (b - 19u)) & 0x780000u);
    }
#elif defined(DP_Q_Q5_0) || defined(DP_Q_Q5_1)
    // nibble to mantissa bits 18..21, the fifth bit (bit i of hi) to bit 22
    const uint sh = 4u * h, hi = un.c1.x >> (16u * h);
    for (uint i = 0u; i < 16u; ++i) {
        const uint b = 8u * (i & 3u) + sh, x = un.c0[i >> 2];
        const uint lo = b <= 18u ? (x << (18u - b)) & 0x3c0000u : (x >> (b - 18u)) & 0x3c0000u;
        const uint top = i <= 22u ? (hi << (22u - i)) & 0x400000u : (hi >> (i - 22u)) & 0x400000u;
        q[i] = dqu_v(lo | top);
    }
#elif defined(DP_Q_Q5_K)
    const uint sh = 4u * h, bit = 2u * (u >> 1) + h;
    for (uint i = 0u; i < 16u; ++i) {
        const uint b = 8u * (i & 3u) + sh, x = un.c0[i >> 2];
        const uint lo = b <= 18u ? (x << (18u - b)) & 0x3c0000u : (x >> (b - 18u)) & 0x3c0000u;
        q[i] = dqu_v(lo | (((un.c1[i >> 2] >> (8u * (i & 3u) + bit)) & 1u) << 22));
    }
#elif defined(DP_Q_Q6_K)
    // low nibble to mantissa bits 17..20, the two high bits to 21..22
    const uint sh = 4u * h, qd = ((u >> 1) & 1u) + 2u * h;
    for (uint i = 0u; i < 16u; ++i) {
        const uint b = 8u * (i & 3u) + sh, x = un.c0[i >> 2];
        const uint lo = b <= 17u ? (x << (17u - b)) & 0x1e0000u : (x >> (b - 17u)) & 0x1e0000u;
        q[i] = dqu_v(lo | (((un.c1[i >> 2] >> (8u * (i & 3u) + 2u * qd)) & 3u) << 21));
    }
#endif
}

float dqu_half_acc(float q[16], float xv[16], float a, float b, float acc)
{
    float sq = 0.0, sx = 0.0;
    for (uint i = 0u; i < 16u; ++i) { sq = fma(q[i], xv[i], sq); sx += xv[i]; }
    return fma(a, sq, fma(b, sx, acc));
}

float dqu_cluster_sum(float v, uint cw)
{
    for (uint o = 1u; o < cw; o <<= 1) v += subgroupShuffleXor(v, o);
    return v;
}

#endif
