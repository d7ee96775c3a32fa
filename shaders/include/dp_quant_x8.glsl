// shaders/include/dp_quant_x8.glsl: activations quantised to 8 bits, and the integer dot products of a
// quantised weight unit's half with them (gemv_q.comp's DP_XQ8). Include after dp_quant_unit.glsl, with
// DQU_RAW_SCALES defined before it (the units keep value = a * code + b).
//
// Why: gemv_q with f32 activations spends ~5 instructions per weight (code to float, FMA, sum of x, the
// unpacking of x) and runs far below the memory's speed on the H100 (docs/BENCHMARKS.md 11g: 9 MB of Q4_K
// gate+up in 17.6 us). With x as int8, 16 codes meet 16 activations in 4 packed dot products (dp4a) after a
// mask per word: the same per-group scheme as llama.cpp's q8_1 activations for its quantised mat-vec kernels.
//   x8_quantise16(v)          16 values -> an x8group: 16 int8 q = roundEven(v * 127 / amax) packed 4 per
//                             word, and d = amax / 127: the group then holds d * q, within d / 2 (+ the
//                             rounding of 127 / amax) of v; and the sum of the values it holds (the b term's).
//   dqu_codes8(un, u, h)      the 16 codes of half h of unit un as bytes, and
//   x8_dot16(c, q)            sum of code * q over them (exact, an int)
//   x8_half_acc(c, xg, a, b, acc)  a half-unit's term added to acc, in the one order both kernels use
// The dot products are dp_dot8.glsl's.
#ifndef DP_QUANT_X8_GLSL
#define DP_QUANT_X8_GLSL

#include "dp_dot8.glsl"

// The two-plane form (DP_XQ8_PLANES 2): the remainder r = v - d * q1 (|r| <= d / 2) quantised again with
// e = d / 254, so that x = d * q1 + e * q2 within e / 2 = max|x| / 64516 (finer than f16's 2^-11): one
// int8 plane alone moved llama-q's logits by 0.70 (tests/lua/test_gguf_fixtures.lua bounds them by 0.5),
// two keep them at the f16 path's level for twice the dot products.
#ifndef DP_XQ8_PLANES
#define DP_XQ8_PLANES 1
#endif
struct x8group {
    uvec4 q[DP_XQ8_PLANES];   // 16 int8 per plane, element e in byte e % 4 of word e / 4
    vec4  ds;                 // (d, e, d * sum(q1) + e * sum(q2), 0); e = 0 with one plane
};

x8group x8_quantise16(float v[16])
{
    x8group r;
    float amax = 0.0;
    [[unroll]] for (uint i = 0u; i < 16u; ++i) amax = max(amax, abs(v[i]));
    const float d = amax * (1.0 / 127.0);
    const float id = amax > 0.0 ? 127.0 / amax : 0.0;
    int s1 = 0, s2 = 0;
    [[unroll]] for (uint p = 0u; p < DP_XQ8_PLANES; ++p) r.q[p] = uvec4(0u);
    [[unroll]] for (uint i = 0u; i < 16u; ++i) {
        const int q = clamp(int(roundEven(v[i] * id)), -127, 127);
        s1 += q;
        r.q[0][i >> 2] |= uint(q & 255) << (8u * (i & 3u));
#if DP_XQ8_PLANES == 2
        const int q2 = clamp(int(roundEven((v[i] - d * float(q)) * (id * 254.0))), -127, 127);
        s2 += q2;
        r.q[1][i >> 2] |= uint(q2 & 255) << (8u * (i & 3u));
#endif
    }
    const float e = DP_XQ8_PLANES == 2 ? d * (1.0 / 254.0) : 0.0;
    r.ds = vec4(d, e, d * float(s1) + e * float(s2), 0.0);
    return r;
}

// The 16 codes of half h of unit un, one per byte as stored (unsigned; signed for Q8_0): word i holds elements
// 4i .. 4i + 3 (dp_quant_unit.glsl lays element e of a half in byte e of the unit's 16 bytes), the order
// x8_quantise16 packs x in.
uvec4 dqu_codes8(dq_unit un, uint u, uint h)
{
#if defined(DP_Q_Q8_0)
    return h == 0u ? un.c0 : un.c1;
#else
    uvec4 c;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        c[i] = (un.c0[i] >> (4u * h)) & 0x0f0f0f0fu;                  // the low 4 bits of each code
#if defined(DP_Q_Q5_0) || defined(DP_Q_Q5_1)
        // the fifth bits of elements 4i .. 4i + 3, bit e of n to bit 4 of byte e: n * 0x02040810 is n shifted
        // left by 4, 11, 18 and 25 (four copies that do not overlap, so the sum is their OR), and bit e of
        // the copy shifted by 4 + 7e lands on 8e + 4. One multiply and a mask instead of four masks and
        // shifts: Gemma 3 1B's Q5_0 gate+up (6912 x 1152) 13.1 -> 12.3 us on the H100 (docs/BENCHMARKS.md 31b).
        const uint n = (un.c1.x >> (16u * h + 4u * i)) & 15u;
        c[i] |= (n * 0x02040810u) & 0x10101010u;
#elif defined(DP_Q_Q5_K)
        c[i] |= ((un.c1[i] >> (2u * (u >> 1) + h)) & 0x01010101u) << 4;
#elif defined(DP_Q_Q6_K)
        c[i] |= ((un.c1[i] >> (2u * (((u >> 1) & 1u) + 2u * h))) & 0x03030303u) << 4;
#endif
    }
    return c;
#endif
}

// sum over 16 elements of code * q (exact, an int): codes from dqu_codes8, q one plane of an x8group.
int x8_dot16(uvec4 c, uvec4 q)
{
    int s = 0;
#if defined(DP_Q_Q8_0)
    [[unroll]] for (uint i = 0u; i < 4u; ++i) s += x8_sdot4(q[i], c[i], 0);
#else
    [[unroll]] for (uint i = 0u; i < 4u; ++i) s += x8_sudot4(q[i], c[i], 0);
#endif
    return s;
}

// acc + a * (d * sum(code * q1) + e * sum(code * q2)) + b * (the sum of the values the group holds): a
// half-unit's term with x8 (value = a * code + b), in one fixed order. gemv_q.comp and fused/lm_head_q.comp
// both use it, so their logits agree bit for bit (as dqu_half_acc for x as it is).
float x8_half_acc(uvec4 c, x8group xg, float a, float b, float acc)
{
    float dot = xg.ds.x * float(x8_dot16(c, xg.q[0]));
#if DP_XQ8_PLANES == 2
    dot = fma(xg.ds.y, float(x8_dot16(c, xg.q[1])), dot);
#endif
    return fma(a, dot, fma(b, xg.ds.z, acc));
}

#endif
