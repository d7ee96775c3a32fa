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

static const dp_dtype TYPES[] = {DP_Q8_0, DP_Q4_0, DP_Q4_1, DP_Q5_0, DP_Q5_1, DP_Q4_K, DP_Q5_K, DP_Q6_K};
static const dp_dtype MATMUL_TYPES[] = {DP_Q8_0, DP_Q5_0, DP_Q4_K, DP_Q5_K, DP_Q6_K};
static const dp_qlayout LAYOUTS[] = {DP_QLAYOUT_COL, DP_QLAYOUT_FLAT};

static uint32_t rnd_u32(kg_ctx *c)
{
    c->rng = c->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(c->rng >> 32);
}

static uint8_t *random_bytes(kg_ctx *c, size_t n)
{
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)rnd_u32(c);
    return b;
}

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
                uint8_t *src = random_bytes(c, n), *mid = malloc(n), *back = malloc(n);
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
        uint8_t *src = random_bytes(c, n), *col = malloc(n);
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
        uint8_t *src = random_bytes(c, n), *flat = malloc(n);
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
        uint8_t *src = random_bytes(c, n), *flat = malloc(n);
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
    uint8_t *data = random_bytes(c, n), *got = malloc(n);
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

static const char *qdefine(dp_dtype t)
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

static const char *ldefine(dp_qlayout l) { return l == DP_QLAYOUT_COL ? "DP_LAYOUT_COL" : "DP_LAYOUT_FLAT"; }

/* Random blocks with finite scales (biased f16 exponent 1..max_exp, positive), so values and sums stay finite
** and of moderate size: test_k_quant.c covers subnormal and signed scales; here only the addressing varies. */
static uint8_t *random_blocks(kg_ctx *c, dp_dtype t, uint64_t n_blocks, uint32_t max_exp)
{
    const uint32_t bs = dp_dtype_get(t)->type_size;
    uint8_t *b = random_bytes(c, n_blocks * bs);
    int fa = t == DP_Q6_K ? 208 : 0, fb = (t == DP_Q4_1 || t == DP_Q5_1 || t == DP_Q4_K || t == DP_Q5_K) ? 2 : -1;
    for (uint64_t i = 0; i < n_blocks; i++) {
        uint8_t *blk = b + i * bs;
        for (int f = 0; f < 2; f++) {
            int at = f ? fb : fa;
            if (at < 0) continue;
            uint32_t r = rnd_u32(c);
            uint16_t h = (uint16_t)(((1 + r % max_exp) << 10) | ((r >> 8) & 0x3ffu));
            blk[at] = (uint8_t)h, blk[at + 1] = (uint8_t)(h >> 8);
        }
    }
    return b;
}

/* The largest biased exponent keeping |w| <= about 1 (test_k_quant.c's unit_exp). */
static uint32_t unit_exp(dp_dtype t)
{
    switch (t) {
    case DP_Q8_0: return 7;
    case DP_Q5_0: return 10;
    case DP_Q4_K: return 4;
    case DP_Q5_K: return 3;
    default: return 2;
    }
}

/* A device tensor [rows, cols] of type t holding row_wise blocks repacked into layout l. */
static dp_gtensor *upload_layout(kg_ctx *c, dp_dtype t, const uint8_t *rowwise, uint64_t rows, uint64_t cols,
                                 dp_qlayout l)
{
    const size_t n = qbytes(t, rows, cols);
    uint8_t *packed = malloc(n);
    assert_non_null(packed);
    dp_err e = {0};
    if (dp_qlayout_pack(t, rows, cols, l, rowwise, packed, &e) != DP_OK) fail_msg("pack: %s", e.msg);
    dp_gtensor *g = NULL;
    uint64_t shape[2] = {rows, cols};
    if (dp_gtensor_create(c->dev, t, 2, shape, &g, &e) != DP_OK) fail_msg("create: %s", e.msg);
    if (dp_gtensor_upload(g, 0, packed, g->bytes, &e) != DP_OK) fail_msg("upload: %s", e.msg);
    free(packed);
    return g;
}

/* dequant.comp on W (row_wise blocks, [N, K]) stored in layout l == the CPU's dequantisation, bit for bit. */
static void check_dequant(kg_ctx *c, dp_dtype t, const uint8_t *blocks, uint64_t N, uint64_t K, dp_qlayout l,
                          const char *what)
{
    const uint64_t n = N * K;
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    uint16_t *got16 = malloc(n * 2);
    assert_true(ref && got && got16);
    assert_int_equal(dp_quant_dequantize_row(t, blocks, ref, (int64_t)n), DP_OK);
    dp_gtensor *w = upload_layout(c, t, blocks, N, K, l);
    dp_err e = {0};
    for (int f32 = 0; f32 < 2; f32++) {
        const char *defs[3] = {qdefine(t), ldefine(l), "DP_DQ_F32"};
        dp_kernel *k = kg_kernel(c, "quant/dequant.comp", defs, f32 ? 3 : 2, 64);
        dp_gtensor *y = NULL;
        uint64_t shape[1] = {n};
        if (dp_gtensor_create(c->dev, f32 ? DP_F32 : DP_F16, 1, shape, &y, &e) != DP_OK) fail_msg("%s", e.msg);
        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "w", w);
        dp_dispatch_tensor(&d, "y", y);
        dp_dispatch_u32(&d, "n", (uint32_t)n);
        dp_dispatch_u32(&d, "K", (uint32_t)K);
        dp_dispatch_u32(&d, "row_blocks", 0);
        uint32_t gx, gy;
        kg_groups_1d(n / 8, 64, &gx, &gy);
        kg_run(c, &d, gx, gy, 1);
        if (f32) {
            kg_download(y, got, n);
            for (uint64_t i = 0; i < n; i++)
                if (memcmp(&got[i], &ref[i], 4) != 0 && !(got[i] == 0.0f && ref[i] == 0.0f))
                    fail_msg("%s %s %s f32: element %llu = %.9g, CPU %.9g", what, dp_dtype_name(t),
                             dp_qlayout_name(l), (unsigned long long)i, got[i], ref[i]);
        } else {
            if (dp_gtensor_download(y, 0, got16, n * 2, &e) != DP_OK) fail_msg("%s", e.msg);
            for (uint64_t i = 0; i < n; i++) {
                uint16_t want = dp_f32_to_f16(ref[i]);
                if (got16[i] != want && ((got16[i] | want) & 0x7fffu) != 0)
                    fail_msg("%s %s %s f16: element %llu = 0x%04x, CPU 0x%04x", what, dp_dtype_name(t),
                             dp_qlayout_name(l), (unsigned long long)i, got16[i], want);
            }
        }
        dp_gtensor_release(y);
    }
    dp_gtensor_release(w);
    free(ref); free(got); free(got16);
}

static void test_dequant_layouts(void **state)
{
    kg_ctx *c = *state;
    for (size_t ti = 0; ti < DP_ARRAY_LEN(TYPES); ti++)
        for (size_t li = 0; li < DP_ARRAY_LEN(LAYOUTS); li++) {
            const dp_dtype t = TYPES[ti];
            const uint64_t N = 13, K = 2304;
            uint8_t *b = random_blocks(c, t, N * K / dp_dtype_get(t)->block, 13);
            check_dequant(c, t, b, N, K, LAYOUTS[li], "random");
            free(b);
        }
    print_message("  dequant: every type x {column_wise, flat} equals the CPU, [13, 2304]\n");
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

/* Allowed |gpu - ref| for an f64 reference y (test_k_quant.c's tol for f32 outputs). */
static double tol(double y)
{
    double a = fabs(y);
    return 1e-4 * (a > 1.0 ? a : 1.0);
}

/* y = x · Wᵀ (f32 activations and output) with W in layout l, gemv_q or gemm_q, against f64 on the CPU's W. */
static void run_mm(kg_ctx *c, dp_dtype t, const uint8_t *blocks, bool gemm, uint32_t T, uint32_t N, uint32_t K,
                   dp_qlayout l, const char *what)
{
    float *x = malloc(sizeof(float) * T * K), *w = malloc(sizeof(float) * N * K), *got = malloc(sizeof(float) * T * N);
    double *ref = malloc(sizeof(double) * T * N);
    assert_true(x && w && got && ref);
    assert_int_equal(dp_quant_dequantize_row(t, blocks, w, (int64_t)N * K), DP_OK);
    kg_fill(c, x, (uint64_t)T * K, 1.0f);
    for (uint32_t i = 0; i < T; i++)
        for (uint32_t n = 0; n < N; n++) {
            double s = 0.0;
            for (uint32_t k = 0; k < K; k++) s += (double)x[(uint64_t)i * K + k] * w[(uint64_t)n * K + k];
            ref[(uint64_t)i * N + n] = s;
        }
    dp_gtensor *tx = kg_upload(c, DP_F32, x, (uint64_t)T * K), *tw = upload_layout(c, t, blocks, N, K, l);
    dp_gtensor *ty = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {(uint64_t)T * N};
    if (dp_gtensor_create(c->dev, DP_F32, 1, shape, &ty, &e) != DP_OK) fail_msg("%s", e.msg);
    const char *defs[2] = {qdefine(t), ldefine(l)};
    const uint32_t tt = T < 4 ? T : 4;
    dp_kconst gemv_c[3] = {{"WG", 128}, {"ROWS", 4}, {"TT", tt}};
    const char *file = gemm ? "matmul/gemm_q.comp" : "matmul/gemv_q.comp";
    dp_kernel_desc kd = {.file = file, .defines = defs, .n_defines = 2,
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
    dp_dispatch_u32(&d, "w_row_blocks", 0);
    if (gemm) kg_run(c, &d, (N + 63) / 64, (T + 63) / 64, 1);
    else kg_run(c, &d, (N + 3) / 4, (T + tt - 1) / tt, 1);
    kg_download(ty, got, (uint64_t)T * N);
    double worst = 0.0;
    for (uint64_t i = 0; i < (uint64_t)T * N; i++) {
        const double diff = fabs((double)got[i] - ref[i]), tl = tol(ref[i]);
        if (!(diff <= tl))
            fail_msg("%s %s %s %s T=%u N=%u K=%u: y[%llu, %llu] = %.7g, ref %.7g (diff %.3g > %.3g)", what, file,
                     dp_dtype_name(t), dp_qlayout_name(l), T, N, K, (unsigned long long)(i / N),
                     (unsigned long long)(i % N), got[i], ref[i], diff, tl);
        if (diff / tl > worst) worst = diff / tl;
    }
    print_message("  %-6s %-11s %-5s %-11s T=%-2u N=%-3u K=%-4u: worst err/tol %.3f\n", what, file + 7,
                  dp_dtype_name(t), dp_qlayout_name(l), T, N, K, worst);
    dp_gtensor_release(tx); dp_gtensor_release(tw); dp_gtensor_release(ty);
    free(x); free(w); free(got); free(ref);
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
            uint8_t *b = random_blocks(c, t, nb, unit_exp(t));
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
