/*
** tests/unit/test_k_quant_pad.c: the quantised-weight kernels on rows padded to whole blocks (doppler convert
** --pad-k), on lavapipe against core/quant.c. A weight W [N, K] is stored as [N, Kpad] blocks, Kpad =
** ceil(K / 256) * 256, and the kernels get the row stride in blocks (w_row_blocks / row_blocks = Kpad / QK,
** larger than K / QK). The padding here is random blocks, not zeros, so that a kernel reading any padding
** element (or addressing a row with the wrong stride) gives a wrong value.
** For Q4_K, Q5_K, Q6_K (what --pad-k keeps) and Q8_0 (a 32-element type padded the same way), each layout
** (row_wise, column_wise, flat), K = 1152 (Kpad 1280: 4.5 super-blocks a row) and K = 64 (one block, a
** quarter used):
** - quant/dequant.comp: the logical [N, K] matrix, f32 bit-exact and f16 equal to the CPU value rounded;
** - matmul/gemv_q.comp (T = 1, 3) and gemm_q.comp (T = 17): within 1e-4 relative of an f64 matmul over the
**   CPU-dequantised logical W (test_k_quant.c's bound);
** - embed/gather_q.comp: the gathered rows times the scale, bit-exact; an id past the table gives zeros.
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/quant.h"
#include "core/quant_layout.h"
#include "k_gpu.h"

static const dp_dtype TYPES[] = {DP_Q4_K, DP_Q5_K, DP_Q6_K, DP_Q8_0};
static const dp_qlayout LAYOUTS[] = {DP_QLAYOUT_ROW, DP_QLAYOUT_COL, DP_QLAYOUT_FLAT};
static const uint32_t KS[] = {1152, 64};

static const char *qdefine(dp_dtype t)
{
    switch (t) {
    case DP_Q8_0: return "DP_Q_Q8_0";
    case DP_Q4_K: return "DP_Q_Q4_K";
    case DP_Q5_K: return "DP_Q_Q5_K";
    case DP_Q6_K: return "DP_Q_Q6_K";
    default: fail_msg("no define for %s", dp_dtype_name(t));
    }
    return NULL;
}

/* The layout define, or NULL for row_wise (then left out of the define list). */
static const char *ldefine(dp_qlayout l)
{
    return l == DP_QLAYOUT_COL ? "DP_LAYOUT_COL" : l == DP_QLAYOUT_FLAT ? "DP_LAYOUT_FLAT" : NULL;
}

static uint32_t rnd_u32(kg_ctx *c)
{
    c->rng = c->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(c->rng >> 32);
}

/* The largest biased f16 exponent of a scale keeping |w| below about 1 (test_k_quant.c's unit_exp). */
static uint32_t unit_exp(dp_dtype t)
{
    switch (t) {
    case DP_Q8_0: return 7;
    case DP_Q4_K: return 4;
    case DP_Q5_K: return 3;
    default: return 2;   /* Q6_K */
    }
}

/* n random blocks: random codes, positive finite scales (biased exponent 1..unit_exp). */
static uint8_t *random_blocks(kg_ctx *c, dp_dtype t, uint64_t n)
{
    const uint32_t bs = dp_dtype_get(t)->type_size, max_exp = unit_exp(t);
    uint8_t *b = malloc(n * bs);
    assert_non_null(b);
    for (uint64_t i = 0; i < n * bs; i++) b[i] = (uint8_t)rnd_u32(c);
    const int fa = t == DP_Q6_K ? 208 : 0, fb = (t == DP_Q4_K || t == DP_Q5_K) ? 2 : -1;
    for (uint64_t i = 0; i < n; i++)
        for (int f = 0; f < 2; f++) {
            const int at = f ? fb : fa;
            if (at < 0) continue;
            const uint32_t r = rnd_u32(c);
            const uint16_t h = (uint16_t)(((1 + r % max_exp) << 10) | ((r >> 8) & 0x3ffu));
            b[i * bs + (uint32_t)at] = (uint8_t)h, b[i * bs + (uint32_t)at + 1] = (uint8_t)(h >> 8);
        }
    return b;
}

/* A padded weight: N rows of Kpad elements in row_wise blocks, and its logical values [N, K] (CPU). */
typedef struct padded {
    dp_dtype t;
    uint32_t N, K, Kpad, row_blocks;
    uint8_t *blocks;
    float   *w;
} padded;

static padded make_padded(kg_ctx *c, dp_dtype t, uint32_t N, uint32_t K)
{
    padded p = {.t = t, .N = N, .K = K, .Kpad = (K + 255) / 256 * 256};
    const uint32_t qk = dp_dtype_get(t)->block;
    p.row_blocks = p.Kpad / qk;
    assert_true(p.row_blocks > K / qk);   /* the point: a stride larger than K / QK */
    p.blocks = random_blocks(c, t, (uint64_t)N * p.row_blocks);
    p.w = malloc(sizeof(float) * N * K);
    float *row = malloc(sizeof(float) * p.Kpad);
    assert_true(p.w && row);
    const size_t row_bytes = (size_t)p.row_blocks * dp_dtype_get(t)->type_size;
    for (uint32_t n = 0; n < N; n++) {
        assert_int_equal(dp_quant_dequantize_row(t, p.blocks + n * row_bytes, row, p.Kpad), DP_OK);
        memcpy(p.w + (size_t)n * K, row, sizeof(float) * K);
    }
    free(row);
    return p;
}

static void free_padded(padded *p) { free(p->blocks); free(p->w); }

/* The device tensor [N, Kpad] holding p's blocks repacked into layout l. */
static dp_gtensor *upload_padded(kg_ctx *c, const padded *p, dp_qlayout l)
{
    const size_t bytes = (size_t)p->N * p->row_blocks * dp_dtype_get(p->t)->type_size;
    uint8_t *packed = malloc(bytes);
    assert_non_null(packed);
    dp_err e = {0};
    if (dp_qlayout_pack(p->t, p->N, p->Kpad, l, p->blocks, packed, &e) != DP_OK) fail_msg("pack: %s", e.msg);
    dp_gtensor *g = NULL;
    uint64_t shape[2] = {p->N, p->Kpad};
    if (dp_gtensor_create(c->dev, p->t, 2, shape, &g, &e) != DP_OK) fail_msg("create: %s", e.msg);
    if (dp_gtensor_upload(g, 0, packed, g->bytes, &e) != DP_OK) fail_msg("upload: %s", e.msg);
    free(packed);
    return g;
}

static uint32_t defines(const padded *p, dp_qlayout l, const char **defs, const char *extra)
{
    uint32_t n = 0;
    defs[n++] = qdefine(p->t);
    if (ldefine(l)) defs[n++] = ldefine(l);
    if (extra) defs[n++] = extra;
    return n;
}

static void check_dequant(kg_ctx *c, const padded *p, dp_qlayout l)
{
    const uint64_t n = (uint64_t)p->N * p->K;
    float *got = malloc(n * sizeof(float));
    uint16_t *got16 = malloc(n * 2);
    assert_true(got && got16);
    dp_gtensor *w = upload_padded(c, p, l);
    dp_err e = {0};
    for (int f32 = 0; f32 < 2; f32++) {
        const char *defs[3];
        const uint32_t nd = defines(p, l, defs, f32 ? "DP_DQ_F32" : NULL);
        dp_kernel *k = kg_kernel(c, "quant/dequant.comp", defs, nd, 64);
        dp_gtensor *y = NULL;
        uint64_t shape[1] = {n};
        if (dp_gtensor_create(c->dev, f32 ? DP_F32 : DP_F16, 1, shape, &y, &e) != DP_OK) fail_msg("%s", e.msg);
        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "w", w);
        dp_dispatch_tensor(&d, "y", y);
        dp_dispatch_u32(&d, "n", (uint32_t)n);
        dp_dispatch_u32(&d, "K", p->K);
        dp_dispatch_u32(&d, "row_blocks", p->row_blocks);
        uint32_t gx, gy;
        kg_groups_1d(n / 8, 64, &gx, &gy);
        kg_run(c, &d, gx, gy, 1);
        if (f32) {
            kg_download(y, got, n);
            for (uint64_t i = 0; i < n; i++)
                if (memcmp(&got[i], &p->w[i], 4) != 0 && !(got[i] == 0.0f && p->w[i] == 0.0f))
                    fail_msg("dequant %s %s K=%u f32: [%llu, %llu] = %.9g, CPU %.9g", dp_dtype_name(p->t),
                             dp_qlayout_name(l), p->K, (unsigned long long)(i / p->K), (unsigned long long)(i % p->K),
                             got[i], p->w[i]);
        } else {
            if (dp_gtensor_download(y, 0, got16, n * 2, &e) != DP_OK) fail_msg("%s", e.msg);
            for (uint64_t i = 0; i < n; i++) {
                const uint16_t want = dp_f32_to_f16(p->w[i]);
                if (got16[i] != want && ((got16[i] | want) & 0x7fffu) != 0)
                    fail_msg("dequant %s %s K=%u f16: element %llu = 0x%04x, CPU 0x%04x", dp_dtype_name(p->t),
                             dp_qlayout_name(l), p->K, (unsigned long long)i, got16[i], want);
            }
        }
        dp_gtensor_release(y);
    }
    dp_gtensor_release(w);
    free(got); free(got16);
}

/* Allowed |gpu - ref| for an f64 reference y: 1e-4 relative, floored at 1 (test_k_quant.c's tol, f32 output). */
static double tol(double y)
{
    const double a = fabs(y);
    return 1e-4 * (a > 1.0 ? a : 1.0);
}

static void check_mm(kg_ctx *c, const padded *p, dp_qlayout l, bool gemm, uint32_t T)
{
    const uint32_t N = p->N, K = p->K;
    float *x = malloc(sizeof(float) * T * K), *got = malloc(sizeof(float) * T * N);
    double *ref = malloc(sizeof(double) * T * N);
    assert_true(x && got && ref);
    kg_fill(c, x, (uint64_t)T * K, 1.0f);
    for (uint32_t i = 0; i < T; i++)
        for (uint32_t n = 0; n < N; n++) {
            double s = 0.0;
            for (uint32_t k = 0; k < K; k++) s += (double)x[(size_t)i * K + k] * p->w[(size_t)n * K + k];
            ref[(size_t)i * N + n] = s;
        }
    dp_gtensor *tx = kg_upload(c, DP_F32, x, (uint64_t)T * K), *tw = upload_padded(c, p, l), *ty = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {(uint64_t)T * N};
    if (dp_gtensor_create(c->dev, DP_F32, 1, shape, &ty, &e) != DP_OK) fail_msg("%s", e.msg);
    const char *defs[2];
    const uint32_t nd = defines(p, l, defs, NULL), tt = T < 4 ? T : 4;
    dp_kconst gemv_c[3] = {{"WG", 128}, {"ROWS", 4}, {"TT", tt}};
    const char *file = gemm ? "matmul/gemm_q.comp" : "matmul/gemv_q.comp";
    dp_kernel_desc kd = {.file = file, .defines = defs, .n_defines = nd,
                         .constants = gemm ? NULL : gemv_c, .n_constants = gemm ? 0 : 3};
    dp_kernel *k = NULL;
    if (dp_kernel_get(c->dev, &kd, &k, &e) != DP_OK) fail_msg("kernel %s: %s", file, e.msg);
    dp_dispatch d;
    dp_dispatch_init(&d, k);
    dp_dispatch_tensor(&d, "x", tx);
    dp_dispatch_tensor(&d, "w", tw);
    dp_dispatch_tensor(&d, "y", ty);
    dp_dispatch_u32(&d, "T", T);
    dp_dispatch_u32(&d, "N", N);
    dp_dispatch_u32(&d, "K", K);
    dp_dispatch_u32(&d, "x_stride", 0);
    dp_dispatch_u32(&d, "y_stride", 0);
    dp_dispatch_u32(&d, "w_row_blocks", p->row_blocks);
    if (gemm) kg_run(c, &d, (N + 63) / 64, (T + 63) / 64, 1);
    else kg_run(c, &d, (N + 3) / 4, (T + tt - 1) / tt, 1);
    kg_download(ty, got, (uint64_t)T * N);
    double worst = 0.0;
    for (uint64_t i = 0; i < (uint64_t)T * N; i++) {
        const double diff = fabs((double)got[i] - ref[i]), tl = tol(ref[i]);
        if (!(diff <= tl))
            fail_msg("%s %s %s T=%u N=%u K=%u (rows of %u blocks): y[%llu, %llu] = %.7g, ref %.7g (diff %.3g > %.3g)",
                     file, dp_dtype_name(p->t), dp_qlayout_name(l), T, N, K, p->row_blocks,
                     (unsigned long long)(i / N), (unsigned long long)(i % N), got[i], ref[i], diff, tl);
        if (diff / tl > worst) worst = diff / tl;
    }
    print_message("  %-11s %-5s %-11s T=%-2u N=%-2u K=%-4u row_blocks=%-2u: worst err/tol %.3f\n", file + 7,
                  dp_dtype_name(p->t), dp_qlayout_name(l), T, N, K, p->row_blocks, worst);
    dp_gtensor_release(tx); dp_gtensor_release(tw); dp_gtensor_release(ty);
    free(x); free(got); free(ref);
}

static void check_gather(kg_ctx *c, const padded *p, dp_qlayout l)
{
    const uint32_t ids[] = {3, 0, p->N - 1, p->N + 5, 7 % p->N};   /* p->N + 5: past the table -> zeros */
    const uint32_t T = DP_ARRAY_LEN(ids), C = p->K;
    const float scale = 0.5f;   /* a power of two: the product is exact, so the comparison is bit for bit */
    dp_err e = {0};
    dp_gtensor *tid = NULL, *y = NULL, *tab = upload_padded(c, p, l);
    uint64_t s_ids[1] = {T}, s_y[1] = {(uint64_t)T * C};
    /* core/dtype.h has no u32: ids travel as i32-sized elements, the kernel reads them as uint */
    if (dp_gtensor_create(c->dev, DP_I32, 1, s_ids, &tid, &e) != DP_OK ||
        dp_gtensor_upload(tid, 0, ids, sizeof ids, &e) != DP_OK ||
        dp_gtensor_create(c->dev, DP_F32, 1, s_y, &y, &e) != DP_OK)
        fail_msg("%s", e.msg);
    const char *defs[2];
    const uint32_t nd = defines(p, l, defs, NULL);
    dp_kernel *k = kg_kernel(c, "embed/gather_q.comp", defs, nd, 64);
    dp_dispatch d;
    dp_dispatch_init(&d, k);
    dp_dispatch_tensor(&d, "ids", tid);
    dp_dispatch_tensor(&d, "table", tab);
    dp_dispatch_tensor(&d, "y", y);
    dp_dispatch_u32(&d, "T", T);
    dp_dispatch_u32(&d, "C", C);
    dp_dispatch_u32(&d, "rows", p->N);
    dp_dispatch_f32(&d, "scale", scale);
    dp_dispatch_u32(&d, "row_blocks", p->row_blocks);
    kg_run(c, &d, (C / 8 + 63) / 64, T, 1);
    float *got = malloc(sizeof(float) * T * C);
    assert_non_null(got);
    kg_download(y, got, (uint64_t)T * C);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t i = 0; i < C; i++) {
            const float want = ids[t] < p->N ? p->w[(size_t)ids[t] * C + i] * scale : 0.0f;
            const float g = got[(size_t)t * C + i];
            if (memcmp(&g, &want, 4) != 0 && !(g == 0.0f && want == 0.0f))
                fail_msg("gather_q %s %s C=%u: token %u (id %u) column %u = %.9g, CPU %.9g", dp_dtype_name(p->t),
                         dp_qlayout_name(l), C, t, ids[t], i, g, want);
        }
    free(got);
    dp_gtensor_release(tid); dp_gtensor_release(y); dp_gtensor_release(tab);
}

static void test_dequant_padded(void **state)
{
    kg_ctx *c = *state;
    for (size_t ti = 0; ti < DP_ARRAY_LEN(TYPES); ti++)
        for (size_t ki = 0; ki < DP_ARRAY_LEN(KS); ki++) {
            padded p = make_padded(c, TYPES[ti], 13, KS[ki]);
            for (size_t li = 0; li < DP_ARRAY_LEN(LAYOUTS); li++) check_dequant(c, &p, LAYOUTS[li]);
            print_message("  dequant %-5s K=%-4u (stored %u, %u blocks a row): every layout equals the CPU\n",
                          dp_dtype_name(p.t), p.K, p.Kpad, p.row_blocks);
            free_padded(&p);
        }
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

static void test_matmul_padded(void **state)
{
    kg_ctx *c = *state;
    for (size_t ti = 0; ti < DP_ARRAY_LEN(TYPES); ti++)
        for (size_t ki = 0; ki < DP_ARRAY_LEN(KS); ki++) {
            /* N = 37: not a multiple of gemv_q's 4 rows nor of gemm_q's 64 */
            padded p = make_padded(c, TYPES[ti], 37, KS[ki]);
            for (size_t li = 0; li < DP_ARRAY_LEN(LAYOUTS); li++) {
                check_mm(c, &p, LAYOUTS[li], false, 1);
                check_mm(c, &p, LAYOUTS[li], false, 3);
                check_mm(c, &p, LAYOUTS[li], true, 17);
            }
            free_padded(&p);
        }
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

static void test_gather_padded(void **state)
{
    kg_ctx *c = *state;
    for (size_t ti = 0; ti < DP_ARRAY_LEN(TYPES); ti++)
        for (size_t ki = 0; ki < DP_ARRAY_LEN(KS); ki++) {
            padded p = make_padded(c, TYPES[ti], 11, KS[ki]);
            for (size_t li = 0; li < DP_ARRAY_LEN(LAYOUTS); li++) check_gather(c, &p, LAYOUTS[li]);
            free_padded(&p);
        }
    print_message("  gather_q: every type, layout and K equals the CPU rows\n");
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dequant_padded),
        cmocka_unit_test(test_matmul_padded),
        cmocka_unit_test(test_gather_padded),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
