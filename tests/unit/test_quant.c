/*
** tests/unit/test_quant.c: CPU dequantisation of every supported block type against blocks
** built by hand with known scales and codes. Each test checks the whole block against the
** layout table of MODEL_REFERENCE section 4 (written out again here) and a few elements against
** values worked out on paper.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "core/quant.h"

/* Exact f16 bit patterns of the scales used below. */
#define H_0_25 0x3400
#define H_0_5 0x3800
#define H_1 0x3c00
#define H_2 0x4000
#define H_M1 0xbc00
#define H_M2 0xc000

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

static void deq(dp_dtype t, const void *src, float *dst, int64_t n)
{
    assert_int_equal(dp_quant_dequantize_row(t, src, dst, n), DP_OK);
}

static void test_q8_0(void **state)
{
    (void)state;
    uint8_t b[2 * 34];
    put16(b, H_0_25);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)(j - 16);
    put16(b + 34, H_M2);
    for (int j = 0; j < 32; j++) b[36 + j] = (uint8_t)(int8_t)(j % 2 ? 127 : -128);
    float y[64];
    deq(DP_Q8_0, b, y, 64);
    for (int j = 0; j < 32; j++) assert_true(y[j] == (float)(j - 16) * 0.25f);
    assert_true(y[0] == -4.0f && y[31] == 3.75f);
    assert_true(y[32] == 256.0f && y[33] == -254.0f);
}

static void test_q4_0(void **state)
{
    (void)state;
    uint8_t b[18];
    put16(b, H_0_5);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    deq(DP_Q4_0, b, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)(j - 8) * 0.5f);          /* low nibbles: first 16 */
        assert_true(y[j + 16] == (float)(7 - j) * 0.5f);     /* high nibbles: last 16 */
    }
    assert_true(y[0] == -4.0f && y[15] == 3.5f && y[16] == 3.5f && y[31] == -4.0f);
}

static void test_q4_1(void **state)
{
    (void)state;
    uint8_t b[20];
    put16(b, H_0_5);
    put16(b + 2, H_M1);
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    deq(DP_Q4_1, b, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)j * 0.5f - 1.0f);
        assert_true(y[j + 16] == (float)(15 - j) * 0.5f - 1.0f);
    }
    assert_true(y[0] == -1.0f && y[15] == 6.5f && y[16] == 6.5f);
}

/* Q5_0/Q5_1 codes: nibble j in both halves; fifth bit set for even j (low half) and j < 8 (high half). */
static void fill_q5(uint8_t *qh, uint8_t *qs)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)(j | (j << 4));
        if (j % 2 == 0) h |= 1u << j;
        if (j < 8) h |= 1u << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

static void test_q5_0(void **state)
{
    (void)state;
    uint8_t b[22];
    put16(b, H_1);
    fill_q5(b + 2, b + 6);
    float y[32];
    deq(DP_Q5_0, b, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)(j + (j % 2 == 0 ? 16 : 0) - 16));
        assert_true(y[j + 16] == (float)(j + (j < 8 ? 16 : 0) - 16));
    }
    assert_true(y[0] == 0.0f && y[1] == -15.0f && y[16] == 0.0f && y[24] == -8.0f && y[31] == -1.0f);
}

static void test_q5_1(void **state)
{
    (void)state;
    uint8_t b[24];
    put16(b, H_2);
    put16(b + 2, H_0_5);
    fill_q5(b + 4, b + 8);
    float y[32];
    deq(DP_Q5_1, b, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)(j + (j % 2 == 0 ? 16 : 0)) * 2.0f + 0.5f);
        assert_true(y[j + 16] == (float)(j + (j < 8 ? 16 : 0)) * 2.0f + 0.5f);
    }
    assert_true(y[0] == 32.5f && y[1] == 2.5f && y[31] == 30.5f);
}

/* The 6-bit scales and mins of the K-quant tests, and their 12-byte packing. */
static const uint8_t K_SC[8] = {1, 2, 3, 4, 33, 40, 50, 63};
static const uint8_t K_M[8] = {0, 1, 2, 3, 17, 20, 30, 63};

static void pack_k_scales(uint8_t s[12])
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((K_SC[j] & 63) | ((K_SC[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((K_M[j] & 63) | ((K_M[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((K_SC[j + 4] & 0x0f) | ((K_M[j + 4] & 0x0f) << 4));
    }
}

static void test_q4k_scale_unpack(void **state)
{
    (void)state;
    uint8_t s[12];
    pack_k_scales(s);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        dp_quant_q4k_scale_min(s, j, &sc, &m);
        assert_int_equal(sc, K_SC[j]);
        assert_int_equal(m, K_M[j]);
    }
}

static void test_q4_k(void **state)
{
    (void)state;
    uint8_t b[144];
    put16(b, H_1);
    put16(b + 2, H_0_5);
    pack_k_scales(b + 4);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b[16 + 32 * c + l] = (uint8_t)((l & 15) | (((l + c) & 15) << 4));
    float y[256];
    deq(DP_Q4_K, b, y, 256);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            assert_true(y[64 * c + l] == (float)K_SC[2 * c] * (float)(l & 15) - 0.5f * K_M[2 * c]);
            assert_true(y[64 * c + 32 + l] == (float)K_SC[2 * c + 1] * (float)((l + c) & 15) - 0.5f * K_M[2 * c + 1]);
        }
    }
    assert_true(y[131] == 90.5f);   /* sub-block 4: 33 * 3 - 0.5 * 17 */
    assert_true(y[255] == 94.5f);   /* sub-block 7: 63 * ((31 + 3) & 15 = 2) - 0.5 * 63 */
}

static void test_q5_k(void **state)
{
    (void)state;
    uint8_t b[176];
    put16(b, H_1);
    put16(b + 2, H_0_5);
    pack_k_scales(b + 4);
    uint8_t *qh = b + 16, *qs = b + 48;
    for (int l = 0; l < 32; l++) qh[l] = l % 3 == 0 ? 0xaa : 0x55;   /* 0x55: low nibbles get bit 4; 0xaa: high */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)((l & 15) | (((l + c) & 15) << 4));
    float y[256];
    deq(DP_Q5_K, b, y, 256);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            int lo = (l & 15) + (l % 3 != 0 ? 16 : 0), hi = ((l + c) & 15) + (l % 3 == 0 ? 16 : 0);
            assert_true(y[64 * c + l] == (float)K_SC[2 * c] * (float)lo - 0.5f * K_M[2 * c]);
            assert_true(y[64 * c + 32 + l] == (float)K_SC[2 * c + 1] * (float)hi - 0.5f * K_M[2 * c + 1]);
        }
    }
    assert_true(y[0] == 0.0f && y[32] == 31.5f && y[1] == 17.0f && y[33] == 1.5f);
}

static void test_q6_k(void **state)
{
    (void)state;
    uint8_t b[210];
    for (int i = 0; i < 128; i++) b[i] = (uint8_t)i;                 /* ql */
    for (int i = 0; i < 64; i++) b[128 + i] = (uint8_t)(i * 7);      /* qh */
    for (int i = 0; i < 16; i++) b[192 + i] = (uint8_t)(int8_t)(i - 8);  /* scales */
    put16(b + 208, H_0_5);
    float y[256];
    deq(DP_Q6_K, b, y, 256);
    const uint8_t *ql = b, *qh = b + 128;
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            int q[4] = {
                (ql[64 * h + l] & 15) | ((qh[32 * h + l] >> 0 & 3) << 4),
                (ql[64 * h + l + 32] & 15) | ((qh[32 * h + l] >> 2 & 3) << 4),
                (ql[64 * h + l] >> 4) | ((qh[32 * h + l] >> 4 & 3) << 4),
                (ql[64 * h + l + 32] >> 4) | ((qh[32 * h + l] >> 6 & 3) << 4),
            };
            for (int k = 0; k < 4; k++) {
                int e = 128 * h + l + 32 * k;
                assert_true(y[e] == 0.5f * (float)(e / 16 - 8) * (float)(q[k] - 32));
            }
        }
    }
    assert_true(y[0] == 128.0f);    /* q = -32, scale -8 */
    assert_true(y[33] == 45.0f);    /* q = 17 - 32, scale -6 */
    assert_true(y[197] == -56.0f);  /* q = 4 - 32, scale 4 */
}

static void test_mxfp4(void **state)
{
    (void)state;
    static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    uint8_t b[3 * 17];
    const uint8_t es[3] = {127, 130, 0};
    for (int k = 0; k < 3; k++) {
        b[17 * k] = es[k];
        for (int j = 0; j < 16; j++) b[17 * k + 1 + j] = (uint8_t)(j | ((15 - j) << 4));
    }
    float y[96];
    deq(DP_MXFP4, b, y, 96);
    for (int k = 0; k < 3; k++) {
        float scale = ldexpf(1.0f, es[k] - 127);   /* the OCP meaning: E2M1 x 2^(e-127) */
        for (int j = 0; j < 16; j++) {
            assert_true(y[32 * k + j] == e2m1[j] * scale);
            assert_true(y[32 * k + j + 16] == e2m1[15 - j] * scale);
        }
    }
    assert_true(y[1] == 0.5f && y[7] == 6.0f && y[32 + 7] == 48.0f);
    assert_true(y[64 + 7] == 0x1.8p-125f);   /* 6 x 2^-127: a subnormal scale still exact */
    assert_true(dp_quant_e8m0_half(255) == 0x1p127f && dp_quant_e8m0_half(1) == 0x1p-127f);
}

static void test_plain_types(void **state)
{
    (void)state;
    const float want[4] = {1.0f, -2.5f, 65504.0f, 0x1p-24f};
    uint8_t f16[8], bf16[8], f32[16];
    for (int i = 0; i < 4; i++) {
        put16(f16 + 2 * i, dp_f32_to_f16(want[i]));
        put16(bf16 + 2 * i, dp_f32_to_bf16(want[i]));
    }
    memcpy(f32, want, sizeof want);
    float y[4];
    deq(DP_F16, f16, y, 4);
    assert_memory_equal(y, want, sizeof want);
    deq(DP_F32, f32, y, 4);
    assert_memory_equal(y, want, sizeof want);
    deq(DP_BF16, bf16, y, 2);
    assert_true(y[0] == 1.0f && y[1] == -2.5f);
}

static void test_rejects(void **state)
{
    (void)state;
    uint8_t b[256] = {0};
    float y[64] = {0};
    assert_int_equal(dp_quant_dequantize_row(DP_Q8_0, b, y, 33), DP_EINVAL);   /* not whole blocks */
    assert_int_equal(dp_quant_dequantize_row(DP_Q4_K, b, y, 32), DP_EINVAL);
    assert_int_equal(dp_quant_dequantize_row(DP_Q2_K, b, y, 256), DP_EINVAL);  /* no reference yet */
    assert_int_equal(dp_quant_dequantize_row(DP_I32, b, y, 4), DP_EINVAL);
    assert_int_equal(dp_quant_dequantize_row((dp_dtype)99, b, y, 4), DP_EINVAL);
    assert_int_equal(dp_quant_dequantize_row(DP_Q8_0, b, y, 0), DP_OK);
    assert_true(dp_quant_can_dequantize(DP_MXFP4) && !dp_quant_can_dequantize(DP_Q3_K));
}

/* Any alignment: the same block at an odd address gives the same values. */
static void test_unaligned_source(void **state)
{
    (void)state;
    uint8_t raw[1 + 210];
    for (int i = 0; i < 210; i++) raw[1 + i] = (uint8_t)(i * 31 + 7);
    put16(raw + 1 + 208, H_0_25);
    uint8_t aligned[210];
    memcpy(aligned, raw + 1, 210);
    float a[256], u[256];
    deq(DP_Q6_K, aligned, a, 256);
    deq(DP_Q6_K, raw + 1, u, 256);
    assert_memory_equal(a, u, sizeof a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0),         cmocka_unit_test(test_q4_0),   cmocka_unit_test(test_q4_1),
        cmocka_unit_test(test_q5_0),         cmocka_unit_test(test_q5_1),   cmocka_unit_test(test_q4k_scale_unpack),
        cmocka_unit_test(test_q4_k),         cmocka_unit_test(test_q5_k),   cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_mxfp4),        cmocka_unit_test(test_plain_types), cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_unaligned_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
