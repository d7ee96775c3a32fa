/*
** tests/unit/test_k_moe.c: the mixture-of-experts kernels (shaders/moe/: topk_softmax, expert_gemv,
** weighted_sum) against core/ref/moe.c on lavapipe: f32 and f16 activations, f32 / f16 / bf16 expert
** weights, odd sizes, shared and per-slot inputs. The experts no token chose hold NaN, so a kernel that reads
** an unselected expert's weights fails the comparison.
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "k_gpu.h"

/* |gpu - ref| bound: f32 accumulation-order and exp() error ~1e-6 relative (1e-4 leaves room, far below a
** wrong expert or weight, >= 1e-2); f16 outputs add one rounding, 2^-10 |y|. */
static double tol(bool f16, double y)
{
    double a = fabs(y);
    return 1e-4 * (a > 1.0 ? a : 1.0) + (f16 ? ldexp(a, -10) : 0.0);
}

static void compare(const char *what, const float *got, const float *ref, uint64_t n, bool f16)
{
    for (uint64_t i = 0; i < n; i++) {
        if (isnan(ref[i]) && isnan(got[i])) continue;
        if (!(fabs((double)got[i] - ref[i]) <= tol(f16, ref[i])))
            fail_msg("%s: element %llu: gpu %.9g, ref %.9g", what, (unsigned long long)i, got[i], ref[i]);
    }
}

static dp_gtensor *new_tensor(kg_ctx *c, dp_dtype dt, uint64_t n)
{
    dp_gtensor *t = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {n};
    if (dp_gtensor_create(c->dev, dt, 1, shape, &t, &e) != DP_OK) fail_msg("create: %s", e.msg);
    return t;
}

/* ---- routing -------------------------------------------------------------------------------------- */

static void run_topk(kg_ctx *c, bool f16, uint32_t T, uint32_t E, uint32_t k, float scale)
{
    float *logits = malloc((size_t)T * E * 4), *w = malloc((size_t)T * k * 4), *rw = malloc((size_t)T * k * 4);
    uint32_t *ids = malloc((size_t)T * k * 4), *rids = malloc((size_t)T * k * 4);
    assert_non_null(logits); assert_non_null(w); assert_non_null(rw); assert_non_null(ids); assert_non_null(rids);
    kg_fill(c, logits, (uint64_t)T * E, scale);
    kg_round(logits, f16 ? DP_F16 : DP_F32, (uint64_t)T * E);
    dp_ref_topk_softmax(logits, T, E, k, rids, rw);

    const char *defs[2];
    uint32_t nd = kg_defines(defs, f16, -1, false);
    dp_gtensor *tl = kg_upload(c, f16 ? DP_F16 : DP_F32, logits, (uint64_t)T * E);
    dp_gtensor *ti = new_tensor(c, DP_I32, (uint64_t)T * k), *tw = new_tensor(c, DP_F32, (uint64_t)T * k);
    dp_dispatch d;
    dp_dispatch_init(&d, kg_kernel(c, "moe/topk_softmax.comp", defs, nd, 16));
    dp_dispatch_tensor(&d, "logits", tl);
    dp_dispatch_tensor(&d, "ids", ti);
    dp_dispatch_tensor(&d, "w", tw);
    dp_dispatch_u32(&d, "n_tokens", T);
    dp_dispatch_u32(&d, "n_experts", E);
    dp_dispatch_u32(&d, "top_k", k);
    kg_run(c, &d, (T + 15) / 16, 1, 1);
    kg_download_u32(ti, ids, (uint64_t)T * k);
    kg_download(tw, w, (uint64_t)T * k);
    for (uint32_t i = 0; i < T * k; i++)
        if (ids[i] != rids[i]) fail_msg("topk E=%u k=%u: ids[%u] = %u, ref %u", E, k, i, ids[i], rids[i]);
    compare("topk weights", w, rw, (uint64_t)T * k, false);
    for (uint32_t t = 0; t < T; t++) {   /* the k weights sum to 1 and descend */
        double s = 0;
        for (uint32_t j = 0; j < k; j++) {
            s += w[t * k + j];
            if (j > 0) assert_true(w[t * k + j] <= w[t * k + j - 1]);
        }
        assert_true(fabs(s - 1.0) < 1e-5);
    }
    dp_gtensor_release(tl);
    dp_gtensor_release(ti);
    dp_gtensor_release(tw);
    free(logits); free(w); free(rw); free(ids); free(rids);
}

static void test_topk_softmax(void **state)
{
    kg_ctx *c = *state;
    run_topk(c, false, 37, 8, 2, 4.0f);    /* Mixtral: 8 experts, top 2 */
    run_topk(c, true, 37, 8, 2, 4.0f);
    run_topk(c, false, 5, 60, 8, 3.0f);    /* many experts, k at its limit */
    run_topk(c, false, 3, 3, 3, 1.0f);     /* k = E: every expert, weights = the softmax */
}

/* By hand: logits (0, 1, 2, 3), k = 2 -> experts 3, 2 with e^3 / (e^3 + e^2) = sigmoid(1) = 0.7310585786 and
** 0.2689414214 (the softmax's denominator cancels). Ties: the lower index first. A NaN poisons its row. */
static void test_ref_by_hand(void **state)
{
    (void)state;
    const float l[4] = {0, 1, 2, 3};
    uint32_t ids[2];
    float w[2];
    dp_ref_topk_softmax(l, 1, 4, 2, ids, w);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 2);
    assert_true(fabs(w[0] - 0.7310585786) < 1e-7 && fabs(w[1] - 0.2689414214) < 1e-7);
    const float tie[3] = {1, 0, 1};
    dp_ref_topk_softmax(tie, 1, 3, 2, ids, w);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 2);
    assert_true(fabs(w[0] - 0.5) < 1e-7 && fabs(w[1] - 0.5) < 1e-7);
    const float bad[3] = {1, NAN, 0};
    dp_ref_topk_softmax(bad, 1, 3, 1, ids, w);
    assert_true(isnan(w[0]));
    /* expert products and combine: W[e] = e * I (2x2), x = (1, 2); slots pick experts 3 and 1, weights
    ** 0.25 / 0.75 -> y = 0.25 * 3 x + 0.75 * 1 x = 1.5 x = (1.5, 3) */
    float W[4 * 4] = {0};
    for (int e = 0; e < 4; e++) W[e * 4 + 0] = W[e * 4 + 3] = (float)e;
    const float x[2] = {1, 2}, wt[2] = {0.25f, 0.75f};
    const uint32_t pick[2] = {3, 1};
    float ys[4], y[2];
    dp_ref_expert_matmul(x, W, pick, 1, 2, 4, 2, 2, false, ys);
    dp_ref_weighted_sum(ys, wt, 1, 2, 2, y);
    assert_true(fabs(y[0] - 1.5) < 1e-7 && fabs(y[1] - 3.0) < 1e-7);
}

/* ---- expert products and combine ------------------------------------------------------------------ */

typedef struct moe_case {
    uint32_t T, k, E, N, K;
    bool     per_slot, act_f16;
    dp_dtype w_dtype;
} moe_case;

static void run_expert(kg_ctx *c, const moe_case *mc)
{
    const uint32_t T = mc->T, k = mc->k, E = mc->E, N = mc->N, K = mc->K, S = T * k;
    const uint64_t nx = (uint64_t)(mc->per_slot ? S : T) * K, nw = (uint64_t)E * N * K;
    float *x = malloc(nx * 4), *W = malloc(nw * 4), *y = malloc((uint64_t)S * N * 4), *ry = malloc((uint64_t)S * N * 4);
    uint32_t *ids = malloc((uint64_t)S * 4);
    assert_non_null(x); assert_non_null(W); assert_non_null(y); assert_non_null(ry); assert_non_null(ids);
    kg_fill(c, x, nx, 1.0f);
    kg_fill(c, W, nw, 0.5f);
    kg_round(x, mc->act_f16 ? DP_F16 : DP_F32, nx);
    kg_round(W, mc->w_dtype, nw);
    /* slots use the odd experts only (never twice per token); the even ones are NaN: never read */
    assert_true(k <= E / 2);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t j = 0; j < k; j++) ids[t * k + j] = 2u * ((t + j) % (E / 2)) + 1u;
    for (uint32_t e = 0; e < E; e += 2)
        for (uint64_t i = 0; i < (uint64_t)N * K; i++) W[(uint64_t)e * N * K + i] = NAN;
    ids[S - 1] = E + 3;   /* an out-of-range id: a NaN row, no read out of bounds */
    dp_ref_expert_matmul(x, W, ids, T, k, E, N, K, mc->per_slot, ry);

    const char *defs[3];
    uint32_t nd = kg_defines(defs, mc->act_f16, (int)mc->w_dtype, false);
    dp_dtype act = mc->act_f16 ? DP_F16 : DP_F32;
    dp_gtensor *tx = kg_upload(c, act, x, nx), *tw = kg_upload(c, mc->w_dtype, W, nw);
    dp_gtensor *ti = kg_upload_u32(c, ids, S), *ty = new_tensor(c, act, (uint64_t)S * N);
    dp_kconst kc[2] = {{"WG", 32}, {"ROWS", 3}};
    dp_kernel_desc kd = {.file = "moe/expert_gemv.comp", .defines = defs, .n_defines = nd, .constants = kc, .n_constants = 2};
    dp_kernel *kern = NULL;
    dp_err e = {0};
    if (dp_kernel_get(c->dev, &kd, &kern, &e) != DP_OK) fail_msg("kernel: %s", e.msg);
    dp_dispatch d;
    dp_dispatch_init(&d, kern);
    dp_dispatch_tensor(&d, "x", tx);
    dp_dispatch_tensor(&d, "w", tw);
    dp_dispatch_tensor(&d, "ids", ti);
    dp_dispatch_tensor(&d, "y", ty);
    dp_dispatch_u32(&d, "n_slots", S);
    dp_dispatch_u32(&d, "N", N);
    dp_dispatch_u32(&d, "K", K);
    dp_dispatch_u32(&d, "top_k", k);
    dp_dispatch_u32(&d, "x_per_slot", mc->per_slot);
    dp_dispatch_u32(&d, "n_experts", E);
    kg_run(c, &d, (N + 2) / 3, S, 1);
    kg_download(ty, y, (uint64_t)S * N);
    for (uint64_t i = 0; i < (uint64_t)(S - 1) * N; i++)   /* no NaN expert was read */
        if (isnan(y[i])) fail_msg("E=%u N=%u K=%u: y[%llu] is NaN (slot %llu, expert %u)", E, N, K,
                                  (unsigned long long)i, (unsigned long long)(i / N), ids[i / N]);
    for (uint32_t n = 0; n < N; n++)
        if (!isnan(y[(uint64_t)(S - 1) * N + n])) fail_msg("bad id: y[%u] = %g, expected NaN", n, y[(uint64_t)(S - 1) * N + n]);
    compare("expert_gemv", y, ry, (uint64_t)S * N, mc->act_f16);

    /* the combine of those outputs (the NaN slot excluded: its token's weights are taken from the rest) */
    float *wts = malloc((uint64_t)S * 4), *out = malloc((uint64_t)T * N * 4), *rout = malloc((uint64_t)T * N * 4);
    assert_non_null(wts); assert_non_null(out); assert_non_null(rout);
    kg_fill(c, wts, S, 1.0f);
    for (uint32_t i = 0; i < N; i++) y[(uint64_t)(S - 1) * N + i] = 0.5f;
    kg_round(y, act, (uint64_t)S * N);
    dp_ref_weighted_sum(y, wts, T, k, N, rout);
    dp_gtensor *tys = kg_upload(c, act, y, (uint64_t)S * N), *twt = kg_upload(c, DP_F32, wts, S);
    dp_gtensor *to = new_tensor(c, act, (uint64_t)T * N);
    const char *adefs[1];
    uint32_t and_ = kg_defines(adefs, mc->act_f16, -1, false);
    dp_dispatch_init(&d, kg_kernel(c, "moe/weighted_sum.comp", adefs, and_, 64));
    dp_dispatch_tensor(&d, "x", tys);
    dp_dispatch_tensor(&d, "w", twt);
    dp_dispatch_tensor(&d, "y", to);
    dp_dispatch_u32(&d, "n_tokens", T);
    dp_dispatch_u32(&d, "N", N);
    dp_dispatch_u32(&d, "top_k", k);
    uint32_t gx, gy;
    kg_groups_1d((uint64_t)T * N, 64, &gx, &gy);
    kg_run(c, &d, gx, gy, 1);
    kg_download(to, out, (uint64_t)T * N);
    compare("weighted_sum", out, rout, (uint64_t)T * N, mc->act_f16);

    dp_gtensor_release(tx); dp_gtensor_release(tw); dp_gtensor_release(ti); dp_gtensor_release(ty);
    dp_gtensor_release(tys); dp_gtensor_release(twt); dp_gtensor_release(to);
    free(x); free(W); free(y); free(ry); free(ids); free(wts); free(out); free(rout);
}

static void test_expert_gemv(void **state)
{
    kg_ctx *c = *state;
    const moe_case cases[] = {
        {5, 2, 8, 67, 96, false, false, DP_F32},   /* gate / up: x shared by a token's experts */
        {5, 2, 8, 67, 96, true, false, DP_F32},    /* down: each slot its own x */
        {3, 2, 8, 40, 131, false, true, DP_F16},   /* f16 activations and weights, odd K */
        {4, 3, 7, 33, 64, true, false, DP_BF16},   /* bf16 weights, E odd */
        {1, 2, 8, 70, 50, false, true, DP_F32},    /* decode: one token */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_expert(c, &cases[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_by_hand),
        cmocka_unit_test(test_topk_softmax),
        cmocka_unit_test(test_expert_gemv),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
