/*
** core/dtype.c: the dtype table and scalar float conversions (see dtype.h).
** Block sizes and byte counts follow ggml's type traits (ggml/src/ggml.c), so that sizes
** computed here agree with GGUF files written by llama.cpp.
*/
#include "core/dtype.h"

#include <math.h>
#include <string.h>
#include <strings.h>

static const dp_dtype_info dtype_table[DP_DTYPE_COUNT] = {
    [DP_F32]   = {"f32", 1, 4, true, false},
    [DP_F16]   = {"f16", 1, 2, true, false},
    [DP_BF16]  = {"bf16", 1, 2, true, false},
    [DP_F64]   = {"f64", 1, 8, true, false},
    [DP_I8]    = {"i8", 1, 1, false, false},
    [DP_U8]    = {"u8", 1, 1, false, false},
    [DP_I16]   = {"i16", 1, 2, false, false},
    [DP_I32]   = {"i32", 1, 4, false, false},
    [DP_I64]   = {"i64", 1, 8, false, false},
    [DP_Q4_0]  = {"q4_0", 32, 2 + 16, false, true},          /* d, 32 nibbles */
    [DP_Q4_1]  = {"q4_1", 32, 2 + 2 + 16, false, true},      /* d, m, 32 nibbles */
    [DP_Q5_0]  = {"q5_0", 32, 2 + 4 + 16, false, true},      /* d, high bits, nibbles */
    [DP_Q5_1]  = {"q5_1", 32, 2 + 2 + 4 + 16, false, true},
    [DP_Q8_0]  = {"q8_0", 32, 2 + 32, false, true},
    [DP_Q8_1]  = {"q8_1", 32, 2 + 2 + 32, false, true},
    [DP_Q2_K]  = {"q2_k", 256, 16 + 64 + 2 + 2, false, true},
    [DP_Q3_K]  = {"q3_k", 256, 32 + 64 + 12 + 2, false, true},
    [DP_Q4_K]  = {"q4_k", 256, 2 + 2 + 12 + 128, false, true},
    [DP_Q5_K]  = {"q5_k", 256, 2 + 2 + 12 + 32 + 128, false, true},
    [DP_Q6_K]  = {"q6_k", 256, 128 + 64 + 16 + 2, false, true},
    [DP_Q8_K]  = {"q8_k", 256, 4 + 256 + 32, false, true},
    [DP_MXFP4] = {"mxfp4", 32, 1 + 16, false, true},
};

const dp_dtype_info *dp_dtype_get(dp_dtype t)
{
    return ((unsigned)t < DP_DTYPE_COUNT) ? &dtype_table[t] : NULL;
}

const char *dp_dtype_name(dp_dtype t)
{
    const dp_dtype_info *i = dp_dtype_get(t);
    return i ? i->name : "?";
}

bool dp_dtype_from_name(const char *name, dp_dtype *out)
{
    for (int t = 0; t < DP_DTYPE_COUNT; t++) {
        if (strcasecmp(name, dtype_table[t].name) == 0) {
            *out = (dp_dtype)t;
            return true;
        }
    }
    return false;
}

size_t dp_dtype_bytes(dp_dtype t, uint64_t n, bool *ok)
{
    const dp_dtype_info *i = dp_dtype_get(t);
    bool good = i && n % i->block == 0;
    if (ok) *ok = good;
    return good ? (size_t)(n / i->block) * i->type_size : 0;
}

/* f16: 1 sign, 5 exponent, 10 mantissa bits. */
float dp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        float v = ldexpf((float)man, -24);               /* zero or subnormal */
        return sign ? -v : v;
    }
    if (exp == 31) bits = sign | 0x7f800000u | (man << 13);   /* inf / NaN */
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t dp_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));  /* inf / NaN */
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);                          /* overflow -> inf */
    if (e <= 0) {                                                          /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;   /* may carry into exp: correct */
    return (uint16_t)half;
}

float dp_bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t dp_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);  /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);                                          /* round to nearest even */
    return (uint16_t)(x >> 16);
}
