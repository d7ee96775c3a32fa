/*
** tests/unit/k_quant.h: what the quantised-weight kernel tests share (test_k_quant.c, test_quant_layout.c,
** test_k_quant_pad.c): random ggml blocks, the kernels' defines for a block type and a storage layout, a
** weight upload repacked into a layout, and the two checks every one of them makes: quant/dequant.comp
** against the CPU's dequantisation (bit for bit), and gemv_q / gemm_q against an f64 matmul over the
** CPU-dequantised weight (test_k_matmul.c's bound). Header-only (static inline) like k_gpu.h, so that a test
** leaving a helper unused does not trip -Wunused-function, and no build file changes.
** Include after <cmocka.h> and k_gpu.h.
*/
#ifndef DP_TESTS_K_QUANT_H
#define DP_TESTS_K_QUANT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"
#include "core/quant_layout.h"

/* 32 random bits from the test's generator (the LCG of kg_rnd, its high half). */
static inline uint32_t kq_u32(kg_ctx *c)
{
    c->rng = c->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(c->rng >> 32);
}

/* The kernels' define for a block type (shaders/include/dp_quant.glsl). */
static inline const char *kq_qdefine(dp_dtype t)
{
    switch (t) {
    case DP_Q8_0: return "DP_Q_Q8_0";
    case DP_Q4_0: return "DP_Q_Q4_0";
    case DP_Q4_1: return "DP_Q_Q4_1";
    case DP_Q5_0: return "DP_Q_Q5_0";
    case DP_Q5_1: return "DP_Q_Q5_1";
    case DP_Q4_K: return "DP_Q_Q4_K";
    case DP_Q5_K: return "DP_Q_Q5_K";
    case DP_Q6_K: return "DP_Q_Q6_K";
    default: fail_msg("no GPU kernel for %s", dp_dtype_name(t));
    }
    return NULL;
}

/* The layout define, or NULL for row_wise (then left out of the define list). */
static inline const char *kq_ldefine(dp_qlayout l)
{
    return l == DP_QLAYOUT_COL ? "DP_LAYOUT_COL" : l == DP_QLAYOUT_FLAT ? "DP_LAYOUT_FLAT" : NULL;
}

/* Offsets of the f16 fields in a block: *a always (d), *b the second (m or dmin) or -1. */
static inline void kq_f16_fields(dp_dtype t, int *a, int *b)
{
    *a = 0, *b = -1;
    if (t == DP_Q4_1 || t == DP_Q5_1 || t == DP_Q4_K || t == DP_Q5_K) *b = 2;
    if (t == DP_Q6_K) *a = 208;
}

/* Largest biased f16 exponent of a scale that keeps every dequantised |w| below about 1 (the largest code
** times sub-scale: Q8_0 128, Q4_0 8, Q5_0 16, Q4_1 15, Q5_1 31, Q4_K 63 * 15, Q5_K 63 * 31, Q6_K 128 * 32),
** so that matmul sums have |x w| <= 1 terms as in test_k_matmul.c and its tolerance means the same here. */
static inline uint32_t kq_unit_exp(dp_dtype t)
{
    switch (t) {
    case DP_Q8_0: return 7;
    case DP_Q4_0: return 11;
    case DP_Q4_1: return 10;
    case DP_Q5_0: return 10;
    case DP_Q5_1: return 9;
    case DP_Q4_K: return 4;
    case DP_Q5_K: return 3;
    default: return 2;   /* Q6_K */
    }
}

/* n random bytes (one kq_u32 each): block codes before their scales are set, or any packed data. */
static inline uint8_t *kq_random_bytes(kg_ctx *c, uint64_t n)
{
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (uint64_t i = 0; i < n; i++) b[i] = (uint8_t)kq_u32(c);
    return b;
}

/* n_blocks random blocks of type t: random code bytes, then per block its f16 fields replaced by positive
** finite scales (biased exponent 1..max_exp), so values and sums stay finite and of moderate size.
** test_k_quant.c makes its own with subnormal and signed scales. */
static inline uint8_t *kq_random_blocks(kg_ctx *c, dp_dtype t, uint64_t n_blocks, uint32_t max_exp)
{
    const uint32_t bs = dp_dtype_get(t)->type_size;
    uint8_t *b = kq_random_bytes(c, n_blocks * bs);
    int fa, fb;
    kq_f16_fields(t, &fa, &fb);
    for (uint64_t i = 0; i < n_blocks; i++)
        for (int f = 0; f < 2; f++) {
            const int at = f ? fb : fa;
            if (at < 0) continue;
            const uint32_t r = kq_u32(c);
            const uint16_t h = (uint16_t)(((1 + r % max_exp) << 10) | ((r >> 8) & 0x3ffu));
            b[i * bs + (uint32_t)at] = (uint8_t)h, b[i * bs + (uint32_t)at + 1] = (uint8_t)(h >> 8);
        }
    return b;
}

/* A device tensor [rows, cols] of type t holding row_wise blocks repacked into layout l. */
static inline dp_gtensor *kq_upload_layout(kg_ctx *c, dp_dtype t, const uint8_t *rowwise, uint64_t rows,
                                           uint64_t cols, dp_qlayout l)
{
    const size_t n = rows * cols / dp_dtype_get(t)->block * dp_dtype_get(t)->type_size;
    uint8_t *packed = malloc(n);
    assert_non_null(packed);
    dp_err e = {0};
    if (dp_qlayout_pack(t, rows, cols, l, rowwise, packed, &e) != DP_OK) fail_msg("pack: %s", e.msg);
    dp_gtensor *g = NULL;
    uint64_t shape[2] = {rows, cols};
    if (dp_gtensor_create(c->dev, t, 2, shape, &g, &e) != DP_OK) fail_msg("create %s: %s", dp_dtype_name(t), e.msg);
    if (dp_gtensor_upload(g, 0, packed, g->bytes, &e) != DP_OK) fail_msg("upload: %s", e.msg);
    free(packed);
    return g;
}

/* quant/dequant.comp on w (type t in layout l, rows of K logical elements, row_blocks blocks apart; 0: K / QK)
** == ref (n = rows * K values, the CPU's dequantisation): f32 output equal value for value, f16 output equal
** to ref rounded to f16 (dp_f32_to_f16), +0 and -0 alike: the sign of a zero product is all that may differ. */
static inline void kq_check_dequant(kg_ctx *c, dp_dtype t, dp_qlayout l, const dp_gtensor *w, uint32_t K,
                                    uint32_t row_blocks, const float *ref, uint64_t n, const char *what)
{
    float *got = malloc(n * sizeof(float));
    uint16_t *got16 = malloc(n * 2);
    assert_true(got && got16);
    dp_err e = {0};
    for (int f32 = 0; f32 < 2; f32++) {
        const char *defs[3];
        uint32_t nd = 0;
        defs[nd++] = kq_qdefine(t);
        if (kq_ldefine(l)) defs[nd++] = kq_ldefine(l);
        if (f32) defs[nd++] = "DP_DQ_F32";
        dp_kernel *k = kg_kernel(c, "quant/dequant.comp", defs, nd, 64);
        dp_gtensor *y = NULL;
        uint64_t shape[1] = {n};
        if (dp_gtensor_create(c->dev, f32 ? DP_F32 : DP_F16, 1, shape, &y, &e) != DP_OK) fail_msg("%s", e.msg);
        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "w", w);
        dp_dispatch_tensor(&d, "y", y);
        dp_dispatch_u32(&d, "n", (uint32_t)n);
        dp_dispatch_u32(&d, "K", K);
        dp_dispatch_u32(&d, "row_blocks", row_blocks);
        uint32_t gx, gy;
        kg_groups_1d(n / 8, 64, &gx, &gy);
        kg_run(c, &d, gx, gy, 1);
        if (f32) {
            kg_download(y, got, n);
            for (uint64_t i = 0; i < n; i++)
                if (!(got[i] == ref[i]))
                    fail_msg("%s %s %s f32: [%llu, %llu] = %.9g, CPU %.9g", what, dp_dtype_name(t), dp_qlayout_name(l),
                             (unsigned long long)(i / K), (unsigned long long)(i % K), got[i], ref[i]);
        } else {
            if (dp_gtensor_download(y, 0, got16, n * 2, &e) != DP_OK) fail_msg("%s", e.msg);
            for (uint64_t i = 0; i < n; i++) {
                const uint16_t want = dp_f32_to_f16(ref[i]);
                if (got16[i] != want && ((got16[i] | want) & 0x7fffu) != 0)
                    fail_msg("%s %s %s f16: [%llu, %llu] = 0x%04x, CPU 0x%04x (%.9g)", what, dp_dtype_name(t),
                             dp_qlayout_name(l), (unsigned long long)(i / K), (unsigned long long)(i % K), got16[i],
                             want, ref[i]);
            }
        }
        dp_gtensor_release(y);
    }
    free(got); free(got16);
}

/* Allowed |gpu - ref| for an output whose f64 reference is y (see test_k_matmul.c's tol()): 1e-4 relative
** (floored at 1) covers any f32 summation order over these K; an f16 output adds its rounding, one f16 ulp
** (2^-10 relative, allowing round-toward-zero conversion). */
static inline double kq_tol(bool out_f16, double y)
{
    const double a = fabs(y), b = 1e-4 * (a > 1.0 ? a : 1.0);
    return out_f16 ? b + 1e-3 * a : b;
}

/* One gemv_q / gemm_q product y = x · Wᵀ (+ bias) for kq_check_mm. */
typedef struct kq_mm {
    bool        gemm;          /* gemm_q.comp, else gemv_q.comp (ROWS 4, TT min(T, 4)) */
    uint32_t    T, N, K;
    bool        act_f16;       /* x (and y unless out_f32) in f16: x must hold f16 values already */
    bool        out_f32;       /* DP_OUT_F32 */
    const float *bias;         /* [N] (DP_BIAS), or NULL */
    dp_qlayout  layout;        /* of tw */
    uint32_t    w_row_blocks;  /* blocks from one row of tw to the next; 0: K / QK */
    bool        unroll;        /* gemv_q: run with every UN a plan can give TT tokens per workgroup (k_gemv_uns:
                                  1, 2, 4 at T = 1), each checked, and bit for bit equal to UN = 1; else once
                                  with the shader's default UN */
    bool        tiles;         /* gemm_q: run with every tile lower.gemm_tile picks (KQ_TILES), each checked, and
                                  bit for bit equal to the first's; else once with the shader's default tile */
} kq_mm;

/* gemm_q's tiles (WG, BM, BN, TM, TN): the shader's default (lower.gemm_tile's on a GPU), then lower.gemm_tile's
** on a CPU device for T <= 16, <= 32 and beyond. Each output sums over k in the same order in all of them. */
static const uint32_t KQ_TILES[][5] = {{256, 64, 64, 4, 4}, {64, 16, 64, 2, 8}, {64, 32, 64, 4, 8}, {64, 64, 64, 8, 8}};

/* Runs m on x [T, K] and tw (type t, the device copy of w) and checks every output against an f64 matmul
** over w [N, K] (the CPU-dequantised logical weight) within kq_tol; fails naming what, the kernel and the
** element (and, with m->unroll, an UN whose output bits differ from UN = 1's). Returns the worst error /
** tolerance, for the caller's summary line. */
static inline double kq_check_mm(kg_ctx *c, dp_dtype t, const kq_mm *m, const float *x, const float *w,
                                 const dp_gtensor *tw, const char *what)
{
    const uint32_t T = m->T, N = m->N, K = m->K;
    const bool out_f16 = m->act_f16 && !m->out_f32;
    const dp_dtype adt = m->act_f16 ? DP_F16 : DP_F32;
    float *got = malloc(sizeof(float) * T * N);
    double *ref = malloc(sizeof(double) * T * N);
    assert_true(got && ref);
    for (uint32_t i = 0; i < T; i++)
        for (uint32_t n = 0; n < N; n++) {
            double s = m->bias ? m->bias[n] : 0.0;
            for (uint32_t k = 0; k < K; k++) s += (double)x[(uint64_t)i * K + k] * w[(uint64_t)n * K + k];
            ref[(uint64_t)i * N + n] = s;
        }
    dp_gtensor *tx = kg_upload(c, adt, x, (uint64_t)T * K), *tb = m->bias ? kg_upload(c, DP_F32, m->bias, N) : NULL;
    dp_gtensor *ty = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {(uint64_t)T * N};
    if (dp_gtensor_create(c->dev, out_f16 ? DP_F16 : DP_F32, 1, shape, &ty, &e) != DP_OK) fail_msg("%s", e.msg);

    const char *defs[5];
    uint32_t nd = 0;
    defs[nd++] = kq_qdefine(t);
    if (kq_ldefine(m->layout)) defs[nd++] = kq_ldefine(m->layout);
    if (m->act_f16) defs[nd++] = "DP_ACT_F16";
    if (m->bias) defs[nd++] = "DP_BIAS";
    if (m->out_f32) defs[nd++] = "DP_OUT_F32";
    const uint32_t tt = T < 4 ? T : 4;
    const char *file = m->gemm ? "matmul/gemm_q.comp" : "matmul/gemv_q.comp";
    uint32_t uns[3];
    const uint32_t n_uns = k_case_uns(m->unroll && !m->gemm, tt, uns);
    const uint32_t n_runs = m->gemm ? (m->tiles ? 4 : 1) : n_uns;
    double worst = 0.0;
    void *bits1 = NULL;
    for (uint32_t run = 0; run < n_runs; run++) {
        const uint32_t un = m->gemm ? 0 : uns[run];
        const uint32_t *tile = KQ_TILES[m->gemm ? run : 0];
        dp_kconst gemv_c[4] = {{"WG", 128}, {"ROWS", 4}, {"TT", tt}, {"UN", un}};
        dp_kconst gemm_c[5] = {{"WG", tile[0]}, {"BM", tile[1]}, {"BN", tile[2]}, {"TM", tile[3]}, {"TN", tile[4]}};
        dp_kernel_desc kd = {.file = file, .defines = defs, .n_defines = nd,
                             .constants = m->gemm ? gemm_c : gemv_c, .n_constants = m->gemm ? 5 : un ? 4 : 3};
        dp_kernel *k = NULL;
        if (dp_kernel_get(c->dev, &kd, &k, &e) != DP_OK) fail_msg("kernel %s: %s", file, e.msg);
        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "x", tx);
        dp_dispatch_tensor(&d, "w", tw);
        dp_dispatch_tensor(&d, "y", ty);
        if (tb) dp_dispatch_tensor(&d, "bias", tb);
        dp_dispatch_u32(&d, "T", T);
        dp_dispatch_u32(&d, "N", N);
        dp_dispatch_u32(&d, "K", K);
        dp_dispatch_u32(&d, "x_stride", 0);
        dp_dispatch_u32(&d, "y_stride", 0);
        dp_dispatch_u32(&d, "w_row_blocks", m->w_row_blocks);
        if (m->gemm) kg_run(c, &d, (N + tile[2] - 1) / tile[2], (T + tile[1] - 1) / tile[1], 1);
        else kg_run(c, &d, (N + 3) / 4, (T + tt - 1) / tt, 1);
        kg_download(ty, got, (uint64_t)T * N);

        for (uint64_t i = 0; i < (uint64_t)T * N; i++) {
            const double r = ref[i], diff = fabs((double)got[i] - r), tl = kq_tol(out_f16, r);
            if (!(diff <= tl))
                fail_msg("%s %s %s %s act=%s T=%u N=%u K=%u (w_row_blocks %u) UN=%u tile %ux%u/%ux%u: y[%llu, %llu] = "
                         "%.7g, ref %.7g (diff %.3g > %.3g)", what, file, dp_dtype_name(t), dp_qlayout_name(m->layout),
                         dp_dtype_name(adt), T, N, K, m->w_row_blocks, un, tile[1], tile[2], tile[3], tile[4],
                         (unsigned long long)(i / N),
                         (unsigned long long)(i % N), got[i], r, diff, tl);
            if (diff / tl > worst) worst = diff / tl;
        }
        if (n_runs > 1) {   /* UN only moves loads, a tile only splits the outputs: the sums must be the first run's */
            if (!kg_same_bits(ty, &bits1))
                fail_msg("%s %s %s %s act=%s T=%u N=%u K=%u (w_row_blocks %u): UN=%u tile %ux%u/%ux%u output differs "
                         "from the first run's (bits)", what, file, dp_dtype_name(t), dp_qlayout_name(m->layout),
                         dp_dtype_name(adt), T, N, K, m->w_row_blocks, un, tile[1], tile[2], tile[3], tile[4]);
            /* garbage for the next run to overwrite: an output it leaves unwritten then fails */
            float *junk = malloc(sizeof(float) * T * N);
            assert_non_null(junk);
            for (uint64_t i = 0; i < (uint64_t)T * N; i++) junk[i] = 7.0f;
            dp_gtensor_release(ty);
            ty = kg_upload(c, out_f16 ? DP_F16 : DP_F32, junk, (uint64_t)T * N);
            free(junk);
        }
    }
    free(bits1);
    dp_gtensor_release(tx); dp_gtensor_release(tb); dp_gtensor_release(ty);
    free(got); free(ref);
    return worst;
}

#endif
