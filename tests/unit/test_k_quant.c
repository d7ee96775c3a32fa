/*
** tests/unit/test_k_quant.c: the quantised-weight kernels on lavapipe against core/quant.c.
** - shaders/quant/dequant.comp: every type, random blocks (random codes, random finite f16 scales including
**   subnormals) and every quantised tensor of the llama.cpp-made fixture GGUFs: f32 output equal to the CPU
**   value, f16 output equal to the CPU value rounded to f16 (dp_f32_to_f16), element by element.
** - shaders/matmul/gemv_q.comp and gemm_q.comp: y = x · Wᵀ against an f64 matmul over the CPU-dequantised W
**   (gemv_q also with DP_GLU: act(x · Wgᵀ) * (x · Wuᵀ)),
**   K = 1152, 1120, 6912 for the 32-element types and 256, 6912 for the K-quants (their K must be a multiple
**   of 256), T = 1, 3 (gemv; 1, 2 with DP_GLU) and 3, 17, 64 (gemm), f32 and f16 activations, N not a
**   multiple of the row block or tile, bias and f32 output, plus a real fixture tensor.
**   gemv_q (DP_GLU too) also with every UN (units in flight per thread) a plan can set for its tokens per
**   workgroup (k_gemv_uns: 1, 2, 4 at T = 1, 1, 2 at T = 2, 1 at T = 3), on K whose units per thread are
**   not a multiple of UN (WG 128, ROWS 4: 32 threads per row; K = 1152 is 36 units, 6912 is 216, 256 is 8):
**   each within tolerance, and UN > 1 bit for bit the UN = 1 output.
**   gemm_q on the fixture tensors (T = 19, f32 activations) also with every tile lower.gemm_tile picks (a GPU's
**   64 x 64, a CPU device's 16, 32, 64 x 64): each within tolerance and bit for bit the first tile's output.
** x is rounded to the activation dtype on the host first, so the reference sees exactly what the GPU reads.
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

#include "core/formats/gguf.h"
#include "core/quant.h"
#include "core/ref/ref.h"
#include "k_gpu.h"
#include "k_quant.h"

static const dp_dtype TYPES[] = {DP_Q8_0, DP_Q4_0, DP_Q4_1, DP_Q5_0, DP_Q5_1, DP_Q4_K, DP_Q5_K, DP_Q6_K};
static const dp_dtype MATMUL_TYPES[] = {DP_Q8_0, DP_Q4_0, DP_Q5_0, DP_Q4_K, DP_Q5_K, DP_Q6_K};

/* A random finite f16 scale below 2^(max_exp - 15): one in eight subnormal, either sign unless positive. */
static uint16_t rnd_scale(kg_ctx *c, bool positive, uint32_t max_exp)
{
    uint32_t r = kq_u32(c);
    uint16_t sign = positive ? 0 : (uint16_t)((r & 1u) << 15);
    uint16_t man = (uint16_t)((r >> 1) & 0x3ffu);
    uint16_t exp = (r >> 11) % 8 == 0 ? 0 : (uint16_t)(1 + (r >> 14) % max_exp);   /* biased 1..max_exp */
    return (uint16_t)(sign | (exp << 10) | man);
}

/* n_blocks random blocks of type t: random code bytes, random finite scales with biased exponent <= max_exp
** (13 for the dequantisation tests: up to 2^-2; kq_unit_exp(t) for the matmul tests). Unlike kq_random_blocks,
** one scale in eight is subnormal and the 32-element types' scales take either sign. */
static uint8_t *random_blocks(kg_ctx *c, dp_dtype t, uint64_t n_blocks, uint32_t max_exp)
{
    const uint32_t bs = dp_dtype_get(t)->type_size;
    uint8_t *b = kq_random_bytes(c, n_blocks * bs);
    int fa, fb;
    kq_f16_fields(t, &fa, &fb);
    for (uint64_t i = 0; i < n_blocks; i++) {
        uint8_t *blk = b + i * bs;
        /* K-quant d and dmin are positive in practice (dmin multiplies a non-negative min); others any sign */
        uint16_t h = rnd_scale(c, t == DP_Q4_K || t == DP_Q5_K, max_exp);
        blk[fa] = (uint8_t)h, blk[fa + 1] = (uint8_t)(h >> 8);
        if (fb >= 0) {
            h = rnd_scale(c, t == DP_Q4_K || t == DP_Q5_K, max_exp);
            blk[fb] = (uint8_t)h, blk[fb + 1] = (uint8_t)(h >> 8);
        }
    }
    return b;
}

/* A device tensor [rows, cols] of quant type t holding the raw (row_wise) blocks. */
static dp_gtensor *upload_blocks(kg_ctx *c, dp_dtype t, const void *blocks, uint64_t rows, uint64_t cols)
{
    return kq_upload_layout(c, t, blocks, rows, cols, DP_QLAYOUT_ROW);
}

/* GPU dequantisation of n elements of blocks (type t) vs the CPU's, f32 and f16 outputs. */
static void check_dequant(kg_ctx *c, dp_dtype t, const void *blocks, uint64_t n, const char *what)
{
    const uint32_t qk = dp_dtype_get(t)->block;
    float *ref = malloc(n * sizeof(float));
    assert_non_null(ref);
    assert_int_equal(dp_quant_dequantize_row(t, blocks, ref, (int64_t)n), DP_OK);
    dp_gtensor *w = upload_blocks(c, t, blocks, n / qk, qk);
    kq_check_dequant(c, t, DP_QLAYOUT_ROW, w, (uint32_t)n, 0, ref, n, what);   /* one row: blocks end to end */
    dp_gtensor_release(w);
    free(ref);
}

static void test_dequant_random(void **state)
{
    kg_ctx *c = *state;
    for (size_t i = 0; i < DP_ARRAY_LEN(TYPES); i++) {
        const dp_dtype t = TYPES[i];
        const uint64_t nb = dp_dtype_get(t)->block == 256 ? 77 : 601;   /* odd counts: partial last workgroup */
        uint8_t *b = random_blocks(c, t, nb, 13);
        check_dequant(c, t, b, nb * dp_dtype_get(t)->block, "random");
        print_message("  dequant %-5s random: %llu blocks equal\n", dp_dtype_name(t), (unsigned long long)nb);
        free(b);
    }
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

static dp_gguf *open_fixture(const char *rel)
{
    const char *root = getenv("DOPPLER_FIXTURES");
    assert_non_null(root);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    dp_gguf *g = NULL;
    dp_err e = {0};
    if (dp_gguf_open(path, &g, &e) != DP_OK) fail_msg("%s: %s", path, e.msg);
    return g;
}

static bool gpu_type(dp_dtype t)
{
    for (size_t i = 0; i < DP_ARRAY_LEN(TYPES); i++)
        if (TYPES[i] == t) return true;
    return false;
}

/* Every quantised tensor of llama.cpp's files: real scales, real codes. */
static void test_dequant_fixtures(void **state)
{
    kg_ctx *c = *state;
    static const char *files[] = {
        "gguf/gemma3-q/model-Q8_0.gguf", "gguf/gemma3-q/model-Q4_0.gguf", "gguf/gemma3-q/model-Q5_0.gguf",
        "gguf/gemma3-q/model-Q4_K_M.gguf", "gguf/gemma3-q/model-Q5_K_M.gguf",
    };
    for (size_t f = 0; f < DP_ARRAY_LEN(files); f++) {
        dp_gguf *g = open_fixture(files[f]);
        uint32_t seen[DP_DTYPE_COUNT] = {0};
        for (size_t i = 0; i < dp_gguf_tensor_count(g); i++) {
            const dp_gguf_tensor *t = dp_gguf_tensor_at(g, i);
            if (!gpu_type(t->dtype)) continue;
            uint64_t n = 1;
            for (uint32_t d = 0; d < t->n_dims; d++) n *= t->ne[d];
            check_dequant(c, t->dtype, t->data, n, t->name);
            seen[t->dtype]++;
        }
        for (int t = 0; t < DP_DTYPE_COUNT; t++)
            if (seen[t]) print_message("  dequant %-5s %s: %u tensors equal\n", dp_dtype_name((dp_dtype)t), files[f], seen[t]);
        dp_gguf_close(g);
    }
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

/* ---- fused matrix kernels ---------------------------------------------------------------------------- */

typedef struct mm_case {
    bool gemm;
    uint32_t T, N, K;
    bool bias, out_f32;
    bool unroll;   /* gemv_q: every UN a plan can set (kq_mm.unroll) */
    bool tiles;    /* gemm_q: every tile of KQ_TILES (kq_mm.tiles) */
} mm_case;

/* y = x · Wᵀ with W = blocks (type t, [N, K]) on the GPU vs f64 on the CPU-dequantised W. */
static void run_mm(kg_ctx *c, dp_dtype t, const uint8_t *blocks, const mm_case *mc, bool act_f16, const char *what)
{
    const uint32_t T = mc->T, N = mc->N, K = mc->K;
    const dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    float *x = malloc(sizeof(float) * T * K), *w = malloc(sizeof(float) * N * K), *b = malloc(sizeof(float) * N);
    assert_true(x && w && b);
    assert_int_equal(dp_quant_dequantize_row(t, blocks, w, (int64_t)N * K), DP_OK);
    kg_fill(c, x, (uint64_t)T * K, 1.0f);
    kg_fill(c, b, N, 1.0f);
    kg_round(x, adt, (uint64_t)T * K);
    dp_gtensor *tw = upload_blocks(c, t, blocks, N, K);
    const kq_mm m = {.gemm = mc->gemm, .T = T, .N = N, .K = K, .act_f16 = act_f16, .out_f32 = mc->out_f32,
                     .bias = mc->bias ? b : NULL, .layout = DP_QLAYOUT_ROW, .unroll = mc->unroll,
                     .tiles = mc->tiles};
    const double worst = kq_check_mm(c, t, &m, x, w, tw, what);
    print_message("  %-5s %-18s %-5s act=%s T=%-2u N=%-3u K=%-4u bias=%d out_f32=%d: worst err/tol %.3f%s%s%s\n",
                  what, mc->gemm ? "gemm_q.comp" : "gemv_q.comp", dp_dtype_name(t), dp_dtype_name(adt), T, N, K,
                  mc->bias, mc->out_f32, worst, mc->unroll ? " (" : "", mc->unroll ? k_uns_text(T < 4 ? T : 4) : "",
                  mc->unroll ? ")" : mc->tiles ? " (4 tiles: same bits)" : "");
    dp_gtensor_release(tw);
    free(x); free(w); free(b);
}

static void run_random_mm(kg_ctx *c, const mm_case *cases, size_t n_cases)
{
    for (size_t ti = 0; ti < DP_ARRAY_LEN(MATMUL_TYPES); ti++) {
        const dp_dtype t = MATMUL_TYPES[ti];
        const bool kq = dp_dtype_get(t)->block == 256;
        for (size_t i = 0; i < n_cases; i++) {
            mm_case mc = cases[i];
            /* K-quant rows are whole 256-blocks: 1152 and 1120 become 256 and 2304 */
            if (kq && mc.K % 256) mc.K = mc.K == 1152 ? 2304 : 256;
            const uint64_t nb = (uint64_t)mc.N * mc.K / dp_dtype_get(t)->block;
            uint8_t *blocks = random_blocks(c, t, nb, kq_unit_exp(t));
            for (int a = 0; a < 2; a++) run_mm(c, t, blocks, &mc, a != 0, "random");
            free(blocks);
        }
    }
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

static void test_gemv_q(void **state)
{
    const mm_case cases[] = {
        {false, 1, 37, 1152, false, false, true, false},
        {false, 3, 13, 6912, true, false, true, false},
        {false, 1, 10, 1120, false, true, true, false},
    };
    run_random_mm(*state, cases, DP_ARRAY_LEN(cases));
}

/* gemv_q.comp with DP_GLU: y = act(x · Wgᵀ) * (x · Wuᵀ) with Wg, Wu blocks of type t, against f64 sums over
** the CPU-dequantised weights. Each f32 sum is within e(v) = 1e-4 max(1, |v|) (kq_tol); then
** |dy| <= |act'(g)| e(g) |u| + |act(g)| e(u), |act'| <= 1.2 for gelu_tanh and silu, plus a few ulps of the
** activation's f32 evaluation (1e-5 |y|); an f16 output adds one f16 rounding (1e-3 |y|). */
static void run_glu_q(kg_ctx *c, dp_dtype t, uint32_t T, uint32_t N, uint32_t K, dp_glu_kind kind, bool act_f16)
{
    const dp_dtype adt = act_f16 ? DP_F16 : DP_F32;
    const uint64_t nb = (uint64_t)N * K / dp_dtype_get(t)->block;
    uint8_t *bg = random_blocks(c, t, nb, kq_unit_exp(t)), *bu = random_blocks(c, t, nb, kq_unit_exp(t));
    float *x = malloc(sizeof(float) * T * K), *wg = malloc(sizeof(float) * N * K), *wu = malloc(sizeof(float) * N * K);
    float *got = malloc(sizeof(float) * T * N);
    assert_true(bg && bu && x && wg && wu && got);
    assert_int_equal(dp_quant_dequantize_row(t, bg, wg, (int64_t)N * K), DP_OK);
    assert_int_equal(dp_quant_dequantize_row(t, bu, wu, (int64_t)N * K), DP_OK);
    kg_fill(c, x, (uint64_t)T * K, 1.0f);
    kg_round(x, adt, (uint64_t)T * K);

    dp_gtensor *tx = kg_upload(c, adt, x, (uint64_t)T * K);
    dp_gtensor *tg = upload_blocks(c, t, bg, N, K), *tu = upload_blocks(c, t, bu, N, K), *ty = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {(uint64_t)T * N};
    if (dp_gtensor_create(c->dev, adt, 1, shape, &ty, &e) != DP_OK) fail_msg("%s", e.msg);
    const char *defs[3] = {kq_qdefine(t), "DP_GLU", "DP_ACT_F16"};
    const uint32_t tt = T < 4 ? T : 4;
    uint32_t uns[3];   /* units in flight, as a plan can set them (k_gemv_uns); UN > 1 must give UN = 1's bits */
    const uint32_t n_uns = k_gemv_uns(tt, uns);
    double worst = 0.0;
    void *bits1 = NULL;
    for (uint32_t run = 0; run < n_uns; run++) {
        const uint32_t un = uns[run];
        dp_kconst kc[4] = {{"WG", 128}, {"ROWS", 4}, {"TT", tt}, {"UN", un}};
        dp_kernel_desc kd = {.file = "matmul/gemv_q.comp", .defines = defs, .n_defines = act_f16 ? 3 : 2,
                             .constants = kc, .n_constants = 4};
        dp_kernel *k = NULL;
        if (dp_kernel_get(c->dev, &kd, &k, &e) != DP_OK) fail_msg("kernel gemv_q (DP_GLU): %s", e.msg);
        if (run > 0) {   /* garbage for this run to overwrite */
            for (uint64_t i = 0; i < (uint64_t)T * N; i++) got[i] = 7.0f;
            dp_gtensor_release(ty);
            ty = kg_upload(c, adt, got, (uint64_t)T * N);
        }
        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "x", tx);
        dp_dispatch_tensor(&d, "w", tg);
        dp_dispatch_tensor(&d, "wu", tu);
        dp_dispatch_tensor(&d, "y", ty);
        dp_dispatch_u32(&d, "T", T);
        dp_dispatch_u32(&d, "N", N);
        dp_dispatch_u32(&d, "K", K);
        dp_dispatch_u32(&d, "x_stride", 0);
        dp_dispatch_u32(&d, "y_stride", 0);
        dp_dispatch_u32(&d, "w_row_blocks", 0);
        dp_dispatch_u32(&d, "kind", kind == DP_GLU_SILU ? 1u : 0u);
        kg_run(c, &d, (N + 3) / 4, (T + tt - 1) / tt, 1);
        kg_download(ty, got, (uint64_t)T * N);

        for (uint32_t i = 0; i < T; i++)
            for (uint32_t n = 0; n < N; n++) {
                double g = 0.0, u = 0.0;
                for (uint32_t kk = 0; kk < K; kk++) {
                    g += (double)x[(uint64_t)i * K + kk] * wg[(uint64_t)n * K + kk];
                    u += (double)x[(uint64_t)i * K + kk] * wu[(uint64_t)n * K + kk];
                }
                const double ag = kind == DP_GLU_SILU ? g / (1.0 + exp(-g)) : 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
                const double y = ag * u;
                const double eg = 1e-4 * (fabs(g) > 1.0 ? fabs(g) : 1.0), eu = 1e-4 * (fabs(u) > 1.0 ? fabs(u) : 1.0);
                double tl = 1.2 * eg * fabs(u) + fabs(ag) * eu + 1e-5 * fabs(y) + 1e-7;
                if (act_f16) tl += 1e-3 * fabs(y);
                const double diff = fabs((double)got[(uint64_t)i * N + n] - y);
                if (!(diff <= tl))
                    fail_msg("gemv_q DP_GLU %s %s act=%s T=%u N=%u K=%u UN=%u: y[%u, %u] = %.7g, ref %.7g (diff %.3g > %.3g)",
                             kind == DP_GLU_SILU ? "silu" : "gelu_tanh", dp_dtype_name(t), dp_dtype_name(adt), T, N, K,
                             un, i, n, got[(uint64_t)i * N + n], y, diff, tl);
                if (diff / tl > worst) worst = diff / tl;
            }
        if (!kg_same_bits(ty, &bits1))
            fail_msg("gemv_q DP_GLU %s act=%s T=%u N=%u K=%u: UN=%u output differs from UN=1 (bits)",
                     dp_dtype_name(t), dp_dtype_name(adt), T, N, K, un);
    }
    free(bits1);
    print_message("  glu   gemv_q.comp %-9s %-5s act=%s T=%-2u N=%-3u K=%-4u: worst err/tol %.3f (%s)\n",
                  kind == DP_GLU_SILU ? "silu" : "gelu_tanh", dp_dtype_name(t), dp_dtype_name(adt), T, N, K, worst,
                  k_uns_text(tt));
    dp_gtensor_release(tx); dp_gtensor_release(tg); dp_gtensor_release(tu); dp_gtensor_release(ty);
    free(bg); free(bu); free(x); free(wg); free(wu); free(got);
}

static void test_gemv_q_glu(void **state)
{
    kg_ctx *c = *state;
    for (size_t ti = 0; ti < DP_ARRAY_LEN(MATMUL_TYPES); ti++) {
        const dp_dtype t = MATMUL_TYPES[ti];
        const uint32_t K = dp_dtype_get(t)->block == 256 ? 2304 : 1152;
        for (int a = 0; a < 2; a++) {
            run_glu_q(c, t, 1, 37, K, DP_GLU_GELU_TANH, a != 0);
            run_glu_q(c, t, 2, 13, K, DP_GLU_SILU, a != 0);   /* TT = 2: UN 1, 2 (T = 3 runs without DP_GLU) */
        }
    }
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

static void test_gemm_q(void **state)
{
    const mm_case cases[] = {
        {true, 64, 70, 1152, false, false, false, false},
        {true, 17, 9, 6912, true, false, false, false},
        {true, 3, 65, 1120, false, true, false, false},
    };
    run_random_mm(*state, cases, DP_ARRAY_LEN(cases));
}

/* A real Q4_K and Q6_K tensor of the Q4_K_M fixture through both kernels. */
static void test_mm_fixture(void **state)
{
    kg_ctx *c = *state;
    dp_gguf *g = open_fixture("gguf/gemma3-q/model-Q4_K_M.gguf");
    static const char *names[] = {"blk.0.ffn_gate.weight", "blk.2.ffn_down.weight", "blk.0.attn_q.weight"};
    for (size_t i = 0; i < DP_ARRAY_LEN(names); i++) {
        const dp_gguf_tensor *t = dp_gguf_find_tensor(g, names[i]);
        assert_non_null(t);
        assert_true(gpu_type(t->dtype));
        /* with a bias, as test_gemv_q's 3-token case: the same kernel variants, which lavapipe then compiles
        ** once (a 3-token gemv_q variant takes it 2 to 5 s, docs/BENCHMARKS.md session 17) */
        mm_case v = {false, 3, (uint32_t)t->ne[1], (uint32_t)t->ne[0], true, false, true, false};
        mm_case m = {true, 19, (uint32_t)t->ne[1], (uint32_t)t->ne[0], true, false, false, false};
        for (int a = 0; a < 2; a++) {
            run_mm(c, t->dtype, t->data, &v, a != 0, "gguf");
            m.tiles = a == 0;   /* every gemm_q tile once: the tile does not touch the activations' loads */
            run_mm(c, t->dtype, t->data, &m, a != 0, "gguf");
        }
    }
    dp_gguf_close(g);
    assert_int_equal(dp_device_validation_count(c->dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dequant_random),
        cmocka_unit_test(test_dequant_fixtures),
        cmocka_unit_test(test_gemv_q),
        cmocka_unit_test(test_gemv_q_glu),
        cmocka_unit_test(test_gemm_q),
        cmocka_unit_test(test_mm_fixture),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
