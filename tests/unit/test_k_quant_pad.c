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
**   CPU-dequantised logical W (test_k_quant.c's bound); gemv_q at T = 1 with UN = 1, 2, 4, bit for bit alike;
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
#include "k_quant.h"

static const dp_dtype TYPES[] = {DP_Q4_K, DP_Q5_K, DP_Q6_K, DP_Q8_0};
static const dp_qlayout LAYOUTS[] = {DP_QLAYOUT_ROW, DP_QLAYOUT_COL, DP_QLAYOUT_FLAT};
static const uint32_t KS[] = {1152, 64};

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
    p.blocks = kq_random_blocks(c, t, (uint64_t)N * p.row_blocks, kq_unit_exp(t));
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
    return kq_upload_layout(c, p->t, p->blocks, p->N, p->Kpad, l);
}

static void check_dequant(kg_ctx *c, const padded *p, dp_qlayout l)
{
    char what[64];
    snprintf(what, sizeof what, "dequant K=%u", p->K);
    dp_gtensor *w = upload_padded(c, p, l);
    kq_check_dequant(c, p->t, l, w, p->K, p->row_blocks, p->w, (uint64_t)p->N * p->K, what);
    dp_gtensor_release(w);
}

static void check_mm(kg_ctx *c, const padded *p, dp_qlayout l, bool gemm, uint32_t T)
{
    const uint32_t N = p->N, K = p->K;
    float *x = malloc(sizeof(float) * T * K);
    assert_non_null(x);
    kg_fill(c, x, (uint64_t)T * K, 1.0f);
    dp_gtensor *tw = upload_padded(c, p, l);
    /* gemv_q at T = 1 also with UN = 2, 4 (bit for bit UN = 1): the units in flight skip x past K */
    const kq_mm m = {.gemm = gemm, .T = T, .N = N, .K = K, .layout = l, .w_row_blocks = p->row_blocks,
                     .unroll = !gemm && T == 1};
    const double worst = kq_check_mm(c, p->t, &m, x, p->w, tw, "padded");
    print_message("  %-11s %-5s %-11s T=%-2u N=%-2u K=%-4u row_blocks=%-2u: worst err/tol %.3f\n",
                  gemm ? "gemm_q.comp" : "gemv_q.comp", dp_dtype_name(p->t), dp_qlayout_name(l), T, N, K,
                  p->row_blocks, worst);
    dp_gtensor_release(tw);
    free(x);
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
    const char *defs[2] = {kq_qdefine(p->t), kq_ldefine(l)};
    dp_kernel *k = kg_kernel(c, "embed/gather_q.comp", defs, defs[1] ? 2 : 1, 64);
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
