/*
** tests/unit/test_quant_layout.c: quantised weight layouts (core/quant_layout.h, docs/QUANTIZATION.md "Weight
** layouts").
** - CPU: row_wise -> X -> row_wise is the identity for every type and layout; column_wise and flat put the bytes
**   where the documentation says (checked against formulas written out here, not the library's tables); bad
**   input is refused with a message; names parse.
** - Cache: an entry stored is loaded back; a changed model file, another tensor or layout, a truncated entry or a
**   missing directory is a miss; an unwritable directory makes store return false without failing.
** - GPU (lavapipe): for each layout, dequant.comp's output equals the row_wise blocks' CPU dequantisation bit for
**   bit (f32 and f16 outputs), and gemv_q / gemm_q agree with an f64 matmul over the CPU-dequantised W within
**   test_k_quant.c's bound, on random blocks (K = 2304, 6912; N not a multiple of the row block or tile) and
**   on a real Q4_K / Q6_K tensor of llama.cpp's Q4_K_M fixture.
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/formats/gguf.h"
#include "core/quant.h"
#include "core/quant_layout.h"
#include "k_gpu.h"
#include "k_quant.h"

static const dp_dtype TYPES[] = {DP_Q8_0, DP_Q4_0, DP_Q4_1, DP_Q5_0, DP_Q5_1, DP_Q4_K, DP_Q5_K, DP_Q6_K};
static const dp_dtype MATMUL_TYPES[] = {DP_Q8_0, DP_Q5_0, DP_Q4_K, DP_Q5_K, DP_Q6_K};
static const dp_qlayout LAYOUTS[] = {DP_QLAYOUT_COL, DP_QLAYOUT_FLAT};

static size_t qbytes(dp_dtype t, uint64_t rows, uint64_t cols)
{
    return rows * cols / dp_dtype_get(t)->block * dp_dtype_get(t)->type_size;
}

/* ---- CPU repacking ------------------------------------------------------------------------------------------ */

static void test_round_trip(void **state)
{
    kg_ctx *c = *state;
    static const uint64_t shapes[][2] = {{1, 256}, {7, 2304}, {37, 6912}, {3, 1152}};
    for (size_t ti = 0; ti < DP_ARRAY_LEN(TYPES); ti++)
        for (size_t si = 0; si < DP_ARRAY_LEN(shapes); si++)
            for (int l = 0; l < DP_QLAYOUT_COUNT; l++) {
                const dp_dtype t = TYPES[ti];
                const uint64_t rows = shapes[si][0], cols = shapes[si][1];
                if (cols % dp_dtype_get(t)->block) continue;
                const size_t n = qbytes(t, rows, cols);
                uint8_t *src = kq_random_bytes(c, n), *mid = malloc(n), *back = malloc(n);
                assert_true(mid && back);
                dp_err e = {0};
                assert_int_equal(dp_qlayout_pack(t, rows, cols, (dp_qlayout)l, src, mid, &e), DP_OK);
                assert_int_equal(dp_qlayout_unpack(t, rows, cols, (dp_qlayout)l, mid, back, &e), DP_OK);
                if (memcmp(src, back, n) != 0)
                    fail_msg("%s %llux%llu %s: round trip differs", dp_dtype_name(t), (unsigned long long)rows,
                             (unsigned long long)cols, dp_qlayout_name((dp_qlayout)l));
                /* a real permutation (more than one block, so every layout moves something) */
                const bool moves = l != DP_QLAYOUT_ROW && rows * cols / dp_dtype_get(t)->block > 1 &&
                                   (l == DP_QLAYOUT_FLAT || (rows > 1 && cols > dp_dtype_get(t)->block));
                if (moves) assert_true(memcmp(src, mid, n) != 0);
                if (l == DP_QLAYOUT_ROW) assert_memory_equal(src, mid, n);
                free(src); free(mid); free(back);
            }
}

/* The documented placements, written out independently of the library's segment table. */
static void test_placement(void **state)
{
    kg_ctx *c = *state;
    dp_err e = {0};
    /* column_wise Q8_0 [5, 96]: block (n, b) at b * 5 + n, whole 34-byte blocks */
    {
        const uint64_t N = 5, K = 96, nb = 3, qb = 34;
        const size_t n = qbytes(DP_Q8_0, N, K);
        uint8_t *src = kq_random_bytes(c, n), *col = malloc(n);
        assert_non_null(col);
        assert_int_equal(dp_qlayout_pack(DP_Q8_0, N, K, DP_QLAYOUT_COL, src, col, &e), DP_OK);
        for (uint64_t r = 0; r < N; r++)
            for (uint64_t b = 0; b < nb; b++) assert_memory_equal(col + (b * N + r) * qb, src + (r * nb + b) * qb, qb);
        free(src); free(col);
    }
    /* flat Q4_K [3, 512] (6 blocks): qs[128] of block i at 128 i, then d, dmin, scales[12] at 768 + 16 i */
    {
        const uint64_t blocks = 6;
        const size_t n = qbytes(DP_Q4_K, 3, 512);
        uint8_t *src = kq_random_bytes(c, n), *flat = malloc(n);
        assert_non_null(flat);
        assert_int_equal(dp_qlayout_pack(DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, src, flat, &e), DP_OK);
        for (uint64_t i = 0; i < blocks; i++) {
            assert_memory_equal(flat + 128 * i, src + 144 * i + 16, 128);
            assert_memory_equal(flat + 128 * blocks + 16 * i, src + 144 * i, 16);
        }
        free(src); free(flat);
    }
    /* flat Q6_K [2, 256]: ql planes, qh planes, scales planes, d planes */
    {
        const uint64_t blocks = 2;
        const size_t n = qbytes(DP_Q6_K, 2, 256);
        uint8_t *src = kq_random_bytes(c, n), *flat = malloc(n);
        assert_non_null(flat);
        assert_int_equal(dp_qlayout_pack(DP_Q6_K, 2, 256, DP_QLAYOUT_FLAT, src, flat, &e), DP_OK);
        for (uint64_t i = 0; i < blocks; i++) {
            assert_memory_equal(flat + 128 * i, src + 210 * i, 128);
            assert_memory_equal(flat + 128 * blocks + 64 * i, src + 210 * i + 128, 64);
            assert_memory_equal(flat + 192 * blocks + 16 * i, src + 210 * i + 192, 16);
            assert_memory_equal(flat + 208 * blocks + 2 * i, src + 210 * i + 208, 2);
        }
        free(src); free(flat);
    }
    /* every type's segments tile its block exactly once */
    for (size_t ti = 0; ti < DP_ARRAY_LEN(TYPES); ti++) {
        dp_qlayout_seg s[DP_QLAYOUT_MAX_SEGS];
        uint32_t ns = dp_qlayout_segments(TYPES[ti], s), qb = dp_dtype_get(TYPES[ti])->type_size;
        assert_true(ns >= 2);
        uint8_t seen[256] = {0};
        for (uint32_t i = 0; i < ns; i++)
            for (uint32_t b = s[i].off; b < s[i].off + s[i].size; b++) {
                assert_true(b < qb);
                seen[b]++;
            }
        for (uint32_t b = 0; b < qb; b++) assert_int_equal(seen[b], 1);
    }
}

static void test_errors_and_names(void **state)
{
    (void)state;
    uint8_t buf[512] = {0}, out[512];
    dp_err e = {0};
    assert_int_equal(dp_qlayout_pack(DP_Q2_K, 1, 256, DP_QLAYOUT_COL, buf, out, &e), DP_EINVAL);
    assert_non_null(strstr(e.msg, "q2_k"));
    dp_err_clear(&e);
    assert_int_equal(dp_qlayout_pack(DP_F16, 1, 64, DP_QLAYOUT_FLAT, buf, out, &e), DP_EINVAL);
    dp_err_clear(&e);
    assert_int_equal(dp_qlayout_unpack(DP_Q4_K, 1, 200, DP_QLAYOUT_FLAT, buf, out, &e), DP_EINVAL);
    assert_non_null(strstr(e.msg, "200"));
    assert_int_equal(dp_qlayout_pack(DP_Q8_0, 1, 32, (dp_qlayout)7, buf, out, &e), DP_EINVAL);
    assert_false(dp_qlayout_supports(DP_Q8_K));
    assert_true(dp_qlayout_supports(DP_Q4_K));
    dp_qlayout l;
    assert_true(dp_qlayout_from_name("column_wise", &l) && l == DP_QLAYOUT_COL);
    assert_true(dp_qlayout_from_name("flat", &l) && l == DP_QLAYOUT_FLAT);
    assert_true(dp_qlayout_from_name("row_wise", &l) && l == DP_QLAYOUT_ROW);
    assert_false(dp_qlayout_from_name("columns", &l));
    assert_false(dp_qlayout_from_name(NULL, &l));
    assert_string_equal(dp_qlayout_name(DP_QLAYOUT_FLAT), "flat");
    assert_string_equal(dp_qlayout_name((dp_qlayout)9), "?");
}

/* ---- cache --------------------------------------------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_cache(void **state)
{
    kg_ctx *c = *state;
    char dir[] = "/tmp/dp_qlayout_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char model[256], cdir[300], entry[600];
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    snprintf(cdir, sizeof cdir, "%s.doppler-cache", model);
    write_file(model, "pretend model");
    const size_t n = qbytes(DP_Q4_K, 3, 512);
    uint8_t *data = kq_random_bytes(c, n), *got = malloc(n);
    assert_non_null(got);

    assert_false(dp_qlayout_cache_load(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, got, n));   /* empty */
    assert_true(dp_qlayout_cache_store(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, data, n));
    memset(got, 0, n);
    assert_true(dp_qlayout_cache_load(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, got, n));
    assert_memory_equal(got, data, n);
    /* other keys miss */
    assert_false(dp_qlayout_cache_load(model, NULL, "w2", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, got, n));
    assert_false(dp_qlayout_cache_load(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_COL, got, n));
    assert_false(dp_qlayout_cache_load(model, NULL, "w", DP_Q4_K, 6, 256, DP_QLAYOUT_FLAT, got, n));
    assert_false(dp_qlayout_cache_load(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, got, n - 1));
    /* a truncated entry misses (find it: the only .bin in the directory) */
    {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "ls %s/*-flat.bin", cdir);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        assert_non_null(fgets(entry, sizeof entry, p));
        pclose(p);
        entry[strcspn(entry, "\n")] = '\0';
        assert_int_equal(truncate(entry, 100), 0);
        assert_false(dp_qlayout_cache_load(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, got, n));
        assert_true(dp_qlayout_cache_store(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, data, n));
        assert_true(dp_qlayout_cache_load(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, got, n));
    }
    /* the model file changes (size): the entry is stale */
    write_file(model, "pretend model, rewritten");
    assert_false(dp_qlayout_cache_load(model, NULL, "w", DP_Q4_K, 3, 512, DP_QLAYOUT_FLAT, got, n));
    /* an explicit directory; a directory that cannot be made (its parent is a file): store says no, no crash */
    char other[320], bad[320];
    snprintf(other, sizeof other, "%s/elsewhere", dir);
    snprintf(bad, sizeof bad, "%s/sub", model);
    assert_true(dp_qlayout_cache_store(model, other, "w", DP_Q8_0, 1, 32, DP_QLAYOUT_COL, data, 34));
    assert_true(dp_qlayout_cache_load(model, other, "w", DP_Q8_0, 1, 32, DP_QLAYOUT_COL, got, 34));
    assert_false(dp_qlayout_cache_store(model, bad, "w", DP_Q8_0, 1, 32, DP_QLAYOUT_COL, data, 34));
    assert_false(dp_qlayout_cache_load(model, bad, "w", DP_Q8_0, 1, 32, DP_QLAYOUT_COL, got, 34));
    /* a missing model file: no key, no entry */
    assert_false(dp_qlayout_cache_store("/nonexistent/m.gguf", NULL, "w", DP_Q8_0, 1, 32, DP_QLAYOUT_COL, data, 34));

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    free(data); free(got);
}

/* ---- GPU ---------------------------------------------------------------------------------------------------- */

/* dequant.comp on W (row_wise blocks, [N, K]) stored in layout l == the CPU's dequantisation, bit for bit. */
static void check_dequant(kg_ctx *c, dp_dtype t, const uint8_t *blocks, uint64_t N, uint64_t K, dp_qlayout l,
                          const char *what)
{
    const uint64_t n = N * K;
    float *ref = malloc(n * sizeof(float));
    assert_non_null(ref);
    assert_int_equal(dp_quant_dequantize_row(t, blocks, ref, (int64_t)n), DP_OK);
    dp_gtensor *w = kq_upload_layout(c, t, blocks, N, K, l);
    kq_check_dequant(c, t, l, w, (uint32_t)K, 0, ref, n, what);
    dp_gtensor_release(w);
    free(ref);
}

static void test_dequant_layouts(void **state)
{
    kg_ctx *c = *state;
    for (size_t ti = 0; ti < DP_ARRAY_LEN(TYPES); ti++)
        for (size_t li = 0; li < DP_ARRAY_LEN(LAYOUTS); li++) {
            const dp_dtype t = TYPES[ti];
            const uint64_t N = 13, K = 2304;
            uint8_t *b = kq_random_blocks(c, t, N * K / dp_dtype_get(t)->block, 13);
            check_dequant(c, t, b, N, K, LAYOUTS[li], "random");
            free(b);
        }
    print_message("  dequant: every type x {column_wise, flat} equals the CPU, [13, 2304]\n");
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

/* y = x · Wᵀ (f32 activations and output) with W in layout l, gemv_q or gemm_q, against f64 on the CPU's W. */
static void run_mm(kg_ctx *c, dp_dtype t, const uint8_t *blocks, bool gemm, uint32_t T, uint32_t N, uint32_t K,
                   dp_qlayout l, const char *what)
{
    float *x = malloc(sizeof(float) * T * K), *w = malloc(sizeof(float) * N * K);
    assert_true(x && w);
    assert_int_equal(dp_quant_dequantize_row(t, blocks, w, (int64_t)N * K), DP_OK);
    kg_fill(c, x, (uint64_t)T * K, 1.0f);
    dp_gtensor *tw = kq_upload_layout(c, t, blocks, N, K, l);
    const kq_mm m = {.gemm = gemm, .T = T, .N = N, .K = K, .layout = l};
    const double worst = kq_check_mm(c, t, &m, x, w, tw, what);
    print_message("  %-6s %-11s %-5s %-11s T=%-2u N=%-3u K=%-4u: worst err/tol %.3f\n", what,
                  gemm ? "gemm_q.comp" : "gemv_q.comp", dp_dtype_name(t), dp_qlayout_name(l), T, N, K, worst);
    dp_gtensor_release(tw);
    free(x); free(w);
}

static void test_matmul_layouts(void **state)
{
    kg_ctx *c = *state;
    /* N = 37: not a multiple of gemv_q's 4 rows; N = 70: not a multiple of gemm_q's 64 */
    static const struct { bool gemm; uint32_t T, N, K; } cases[] = {
        {false, 1, 37, 2304}, {false, 3, 13, 6912}, {true, 17, 70, 2304}, {true, 5, 9, 6912},
    };
    for (size_t ti = 0; ti < DP_ARRAY_LEN(MATMUL_TYPES); ti++)
        for (size_t ci = 0; ci < DP_ARRAY_LEN(cases); ci++) {
            const dp_dtype t = MATMUL_TYPES[ti];
            const uint64_t nb = (uint64_t)cases[ci].N * cases[ci].K / dp_dtype_get(t)->block;
            uint8_t *b = kq_random_blocks(c, t, nb, kq_unit_exp(t));
            for (size_t li = 0; li < DP_ARRAY_LEN(LAYOUTS); li++)
                run_mm(c, t, b, cases[ci].gemm, cases[ci].T, cases[ci].N, cases[ci].K, LAYOUTS[li], "random");
            free(b);
        }
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

/* Real llama.cpp blocks: a Q4_K and a Q6_K tensor of the Q4_K_M fixture, each layout, every kernel. */
static void test_fixture_layouts(void **state)
{
    kg_ctx *c = *state;
    const char *root = getenv("DOPPLER_FIXTURES");
    assert_non_null(root);
    char path[1024];
    snprintf(path, sizeof path, "%s/gguf/gemma3-q/model-Q4_K_M.gguf", root);
    dp_gguf *g = NULL;
    dp_err e = {0};
    if (dp_gguf_open(path, &g, &e) != DP_OK) fail_msg("%s: %s", path, e.msg);
    static const char *names[] = {"blk.0.ffn_gate.weight", "blk.2.ffn_down.weight"};
    bool seen_q4k = false;
    for (size_t i = 0; i < DP_ARRAY_LEN(names); i++) {
        const dp_gguf_tensor *t = dp_gguf_find_tensor(g, names[i]);
        assert_non_null(t);
        assert_true(dp_qlayout_supports(t->dtype));
        seen_q4k = seen_q4k || t->dtype == DP_Q4_K;
        const uint32_t N = (uint32_t)t->ne[1], K = (uint32_t)t->ne[0];
        for (size_t li = 0; li < DP_ARRAY_LEN(LAYOUTS); li++) {
            check_dequant(c, t->dtype, t->data, N, K, LAYOUTS[li], t->name);
            run_mm(c, t->dtype, t->data, false, 2, N, K, LAYOUTS[li], "gguf");
            run_mm(c, t->dtype, t->data, true, 19, N, K, LAYOUTS[li], "gguf");
        }
    }
    assert_true(seen_q4k);
    dp_gguf_close(g);
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_errors_and_names),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_dequant_layouts),
        cmocka_unit_test(test_matmul_layouts),
        cmocka_unit_test(test_fixture_layouts),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
