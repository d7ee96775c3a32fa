// shaders/include/dp_rope.glsl: the exact angle reduction shared by rope.comp and rope_kv.comp, so that the
// fused kernel rotates by bit-identical cos/sin. Needs shaderInt64 (GL_EXT_shader_explicit_arithmetic_types,
// enabled by dp_common.glsl).
#ifndef DP_ROPE_GLSL
#define DP_ROPE_GLSL

const float PI = 3.14159265358979;

// a - 2 pi * round(a / 2 pi), exact but for the final f32 rounding (~2e-7 abs). GPU sin/cos are accurate
// only near zero, and both a plain f32 reduction and an fma-based Cody-Waite step lose ~1e-3 at angles
// ~3e4 rad (fma may be split into a multiply and an add: lavapipe does). So: a = M * 2^e (M the 24-bit
// significand) times 1 / (2 pi) as a 64-bit fixed-point fraction, X = floor(2^64 / (2 pi)) = X_HI * 2^31 +
// X_LO, in 64-bit integers; the low 64 bits of (M * X) * 2^e are the fraction of a turn, mod 1.
float reduce_angle(float a)
{
    if (abs(a) <= PI) return a;
    uint bits = floatBitsToUint(a);
    int e = int((bits >> 23) & 0xffu) - 150;                 // |a| = M * 2^e, e >= -22 here
    uint64_t M = uint64_t((bits & 0x7fffffu) | 0x800000u);
    const uint64_t X_HI = 1367130551ul, X_LO = 328271178ul;  // each < 2^31: products < 2^55
    uint64_t ph = M * X_HI, pl = M * X_LO;
    uint64_t low = (ph << 31) + pl;                          // bits 0..63 of M * X
    uint64_t high = (ph >> 33) + (low < pl ? 1ul : 0ul);     // bits 64.. (with the carry)
    uint64_t f;
    if (e >= 64)      f = 0ul;                              // |a| >= 2^87: a multiple of 2 pi in f32 terms
    else if (e >= 0)  f = low << uint(e);
    else {
        uint s = uint(-e);
        f = (low >> s) | (high << (64u - s));
    }
    float r = float(int64_t(f)) * 3.4061215800865545e-19;   // signed turns in [-1/2, 1/2) * 2 pi / 2^64
    return (bits >> 31) != 0u ? -r : r;
}

#endif
