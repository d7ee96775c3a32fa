/*
** core/quant.c: CPU reference dequantisation (see quant.h). One function per block type,
** each a transcription of the layout table in MODEL_REFERENCE section 4. Products are formed
** in the same order as ggml's so that results match gguf-py / llama.cpp bit for bit.
*/
#include "core/quant.h"

#include <string.h>

static inline float rd_f16(const uint8_t *p) { return dp_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

static void deq_f32(const uint8_t *s, float *y, int64_t n) { memcpy(y, s, (size_t)n * 4); }

static void deq_f16(const uint8_t *s, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = rd_f16(s + 2 * i);
}

static void deq_bf16(const uint8_t *s, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = dp_bf16_to_f32((uint16_t)(s[2 * i] | (s[2 * i + 1] << 8)));
}

static void deq_q8_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
        float d = rd_f16(b);
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
    }
}

static void deq_q4_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        float d = rd_f16(b);
        const uint8_t *qs = b + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0x0f) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q4_1(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 20, y += 32) {
        float d = rd_f16(b), m = rd_f16(b + 2);
        const uint8_t *qs = b + 4;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 0x0f) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void deq_q5_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
        float d = rd_f16(b);
        uint32_t qh = rd_u32(b + 2);
        const uint8_t *qs = b + 6;
        for (int j = 0; j < 16; j++) {
            int q0 = (qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            int q1 = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)(q0 - 16) * d;
            y[j + 16] = (float)(q1 - 16) * d;
        }
    }
}

static void deq_q5_1(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 24, y += 32) {
        float d = rd_f16(b), m = rd_f16(b + 2);
        uint32_t qh = rd_u32(b + 4);
        const uint8_t *qs = b + 8;
        for (int j = 0; j < 16; j++) {
            int q0 = (qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            int q1 = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        }
    }
}

void dp_quant_q4k_scale_min(const uint8_t s[12], int j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* Q4_K and Q5_K share everything but the fifth bit (qh == NULL for Q4_K). ggml computes
** d1 = d * sc and m1 = dmin * m first, then y = d1 * q - m1: keep that order. */
static void deq_k45(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y)
{
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *scales = b + 4;
    for (int c = 0; c < 4; c++) {
        uint8_t sc, m;
        dp_quant_q4k_scale_min(scales, 2 * c, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        dp_quant_q4k_scale_min(scales, 2 * c + 1, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * c + l] & 0x0f, hi = qs[32 * c + l] >> 4;
            if (qh) {
                lo += ((qh[l] >> (2 * c)) & 1) << 4;
                hi += ((qh[l] >> (2 * c + 1)) & 1) << 4;
            }
            y[64 * c + l] = d1 * (float)lo - m1;
            y[64 * c + 32 + l] = d2 * (float)hi - m2;
        }
    }
}

static void deq_q4_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 144, y += 256) deq_k45(b, NULL, b + 16, y);
}

static void deq_q5_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 176, y += 256) deq_k45(b, b + 16, b + 48, y);
}

static void deq_q6_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 210, y += 256) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = rd_f16(b + 208);
        for (int h = 0; h < 2; h++) {
            const uint8_t *l0 = ql + 64 * h, *h0 = qh + 32 * h;
            const int8_t *s = sc + 8 * h;
            float *o = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((l0[l] & 0x0f) | (((h0[l] >> 0) & 3) << 4)) - 32;
                int q2 = (int)((l0[l + 32] & 0x0f) | (((h0[l] >> 2) & 3) << 4)) - 32;
                int q3 = (int)((l0[l] >> 4) | (((h0[l] >> 4) & 3) << 4)) - 32;
                int q4 = (int)((l0[l + 32] >> 4) | (((h0[l] >> 6) & 3) << 4)) - 32;
                o[l] = d * (float)s[is + 0] * (float)q1;
                o[l + 32] = d * (float)s[is + 2] * (float)q2;
                o[l + 64] = d * (float)s[is + 4] * (float)q3;
                o[l + 96] = d * (float)s[is + 6] * (float)q4;
            }
        }
    }
}

float dp_quant_e8m0_half(uint8_t e)
{
    /* Built from bits as ggml does: e < 2 gives the subnormals 2^-128 and 2^-127. */
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void deq_mxfp4(const uint8_t *b, float *y, int64_t nb)
{
    static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (int64_t i = 0; i < nb; i++, b += 17, y += 32) {
        float d = dp_quant_e8m0_half(b[0]);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)kv[b[1 + j] & 0x0f] * d;
            y[j + 16] = (float)kv[b[1 + j] >> 4] * d;
        }
    }
}

typedef void (*deq_fn)(const uint8_t *src, float *dst, int64_t count);   /* count: elements or blocks */

static deq_fn deq_for(dp_dtype t, bool *per_block)
{
    *per_block = true;
    switch (t) {
    case DP_Q8_0: return deq_q8_0;
    case DP_Q4_0: return deq_q4_0;
    case DP_Q4_1: return deq_q4_1;
    case DP_Q5_0: return deq_q5_0;
    case DP_Q5_1: return deq_q5_1;
    case DP_Q4_K: return deq_q4_k;
    case DP_Q5_K: return deq_q5_k;
    case DP_Q6_K: return deq_q6_k;
    case DP_MXFP4: return deq_mxfp4;
    default: break;
    }
    *per_block = false;
    switch (t) {
    case DP_F32: return deq_f32;
    case DP_F16: return deq_f16;
    case DP_BF16: return deq_bf16;
    default: return NULL;
    }
}

bool dp_quant_can_dequantize(dp_dtype t)
{
    bool pb;
    return deq_for(t, &pb) != NULL;
}

dp_status dp_quant_dequantize_row(dp_dtype t, const void *src, float *dst, int64_t n)
{
    bool per_block;
    deq_fn f = deq_for(t, &per_block);
    if (!f || n < 0) return DP_EINVAL;
    uint32_t block = dp_dtype_get(t)->block;
    if (n % block != 0) return DP_EINVAL;
    if (n > 0) f((const uint8_t *)src, dst, per_block ? n / block : n);
    return DP_OK;
}
