/*
** tests/unit/test_k_sample.c: the GPU sampler (shaders/sample/ kernels + argmax/argmax_final.comp) against
** core/sample.c on lavapipe. Both compute every float with the same correctly rounded operations, so the
** ids must be identical: greedy, temperature, top-k, top-p, min-p, repetition penalty and combinations, on
** rows of 262144 (Gemma's vocabulary) and small odd rows, several seeds and steps. Then a goodness-of-fit
** test: temperature sampling of a fixed 8-logit row follows softmax(z / T), for the CPU reference and the
** GPU kernel. The dispatch sequence here mirrors lua/lib/doppler/lower/sample.lua's rule for `sample`.
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "core/sample.h"
#include "k_gpu.h"

#define SORT_N 2048u
#define CHUNK 4096u
#define WG 256u

static dp_gtensor *new_tensor(kg_ctx *c, dp_dtype dt, uint64_t n)
{
    dp_gtensor *t = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {n ? n : 1};
    if (dp_gtensor_create(c->dev, dt, 1, shape, &t, &e) != DP_OK) fail_msg("create: %s", e.msg);
    return t;
}

static void record(kg_ctx *c, const dp_dispatch *d, uint32_t gx, uint32_t gy)
{
    dp_err e = {0};
    if (dp_recorder_dispatch(c->rec, d, gx, gy, 1, &e) != DP_OK) fail_msg("%s: %s", dp_kernel_name(d->kernel), e.msg);
}

/* Draws one id per row of x[rows, n] on the GPU. ctx[0..n_ctx) are the context ids (penalty), steps[r] the
** draw counter of row r. The sorting path (top-k / top-p) takes one row. */
static void gpu_sample(kg_ctx *c, const float *x, uint32_t rows, uint32_t n, const uint32_t *ctx, uint32_t n_ctx,
                       const uint32_t *steps, const dp_sample_params *sp, uint32_t *out)
{
    dp_sample_consts k;
    dp_sample_derive(sp, &k);
    dp_err e = {0};
    uint32_t cap = n_ctx ? n_ctx : 1, zero = 0;
    dp_gtensor *tx = kg_upload(c, DP_F32, x, (uint64_t)rows * n);
    dp_gtensor *tctx = kg_upload_u32(c, n_ctx ? ctx : &zero, cap);
    dp_gtensor *tcount = kg_upload_u32(c, &n_ctx, 1);
    dp_gtensor *tsteps = kg_upload_u32(c, steps, rows);
    dp_gtensor *tids = new_tensor(c, DP_I32, rows);
    dp_gtensor *owned[8] = {0};
    uint32_t n_owned = 0;
    const dp_gtensor *src = tx;
    if (dp_recorder_begin(c->rec, &e) != DP_OK) fail_msg("begin: %s", e.msg);

    if (sp->repeat_penalty != 1.0f) {
        assert_int_equal(rows, 1);
        dp_gtensor *tz = owned[n_owned++] = new_tensor(c, DP_F32, n);
        for (uint32_t mode = 0; mode < 2; mode++) {
            dp_dispatch d;
            uint32_t gx, gy;
            dp_dispatch_init(&d, kg_kernel(c, "sample/sample_penalty.comp", NULL, 0, WG));
            dp_dispatch_tensor(&d, "x", tx);
            dp_dispatch_tensor(&d, "z", tz);
            dp_dispatch_tensor(&d, "ctx", tctx);
            dp_dispatch_tensor(&d, "n_ctx", tcount);
            dp_dispatch_u32(&d, "n", n);
            dp_dispatch_u32(&d, "cap", cap);
            dp_dispatch_u32(&d, "mode", mode);
            dp_dispatch_f32(&d, "penalty", sp->repeat_penalty);
            dp_dispatch_f32(&d, "inv_penalty", k.inv_penalty);
            kg_groups_1d(mode ? cap : n, WG, &gx, &gy);
            record(c, &d, gx, gy);
        }
        src = tz;
    }

    if (k.greedy || k.k == 0) {
        uint32_t n_chunks = (n + CHUNK - 1) / CHUNK, n_max = 0;
        dp_gtensor *tmax = owned[n_owned++] = new_tensor(c, DP_F32, (uint64_t)rows * n_chunks);
        dp_gtensor *tpv = owned[n_owned++] = new_tensor(c, DP_F32, (uint64_t)rows * n_chunks);
        dp_gtensor *tpi = owned[n_owned++] = new_tensor(c, DP_I32, (uint64_t)rows * n_chunks);
        dp_dispatch d;
        if (!k.greedy && sp->min_p > 0.0f) {
            n_max = n_chunks;
            dp_dispatch_init(&d, kg_kernel(c, "sample/sample_max.comp", NULL, 0, WG));
            dp_dispatch_tensor(&d, "x", src);
            dp_dispatch_tensor(&d, "part_max", tmax);
            dp_dispatch_u32(&d, "n", n);
            dp_dispatch_u32(&d, "chunk", CHUNK);
            dp_dispatch_u32(&d, "n_chunks", n_chunks);
            record(c, &d, n_chunks, rows);
        }
        dp_dispatch_init(&d, kg_kernel(c, "sample/sample_gumbel.comp", NULL, 0, WG));
        dp_dispatch_tensor(&d, "x", src);
        dp_dispatch_tensor(&d, "part_max", tmax);
        dp_dispatch_tensor(&d, "part_val", tpv);
        dp_dispatch_tensor(&d, "part_idx", tpi);
        dp_dispatch_tensor(&d, "steps", tsteps);
        dp_dispatch_u32(&d, "n", n);
        dp_dispatch_u32(&d, "chunk", CHUNK);
        dp_dispatch_u32(&d, "n_chunks", n_chunks);
        dp_dispatch_u32(&d, "n_max", n_max);
        dp_dispatch_f32(&d, "temperature", k.greedy ? 0.0f : sp->temperature);
        dp_dispatch_f32(&d, "log_min_p", k.log_min_p);
        dp_dispatch_u32(&d, "seed_lo", (uint32_t)sp->seed);
        dp_dispatch_u32(&d, "seed_hi", (uint32_t)(sp->seed >> 32));
        record(c, &d, n_chunks, rows);
        dp_dispatch_init(&d, kg_kernel(c, "argmax/argmax_final.comp", NULL, 0, 64));
        dp_dispatch_tensor(&d, "part_val", tpv);
        dp_dispatch_tensor(&d, "part_idx", tpi);
        dp_dispatch_tensor(&d, "ids", tids);
        dp_dispatch_u32(&d, "n_chunks", n_chunks);
        record(c, &d, rows, 1);
    } else {
        assert_int_equal(rows, 1);
        uint32_t kp = 1;
        while (kp < k.k) kp *= 2;
        uint32_t f = SORT_N / kp, n_lists = (n + SORT_N - 1) / SORT_N;
        dp_gtensor *buf_v[2], *buf_i[2];
        for (int b = 0; b < 2; b++) {
            buf_v[b] = owned[n_owned++] = new_tensor(c, DP_F32, (uint64_t)n_lists * kp);
            buf_i[b] = owned[n_owned++] = new_tensor(c, DP_I32, (uint64_t)n_lists * kp);
        }
        uint32_t mode = 0, groups = n_lists, cur = 0, count = n;
        for (;;) {
            bool final = groups == 1;
            dp_dispatch d;
            dp_dispatch_init(&d, kg_kernel(c, "sample/sample_topk.comp", NULL, 0, WG));
            dp_dispatch_tensor(&d, "z", src);
            dp_dispatch_tensor(&d, "in_val", buf_v[cur]);
            dp_dispatch_tensor(&d, "in_id", buf_i[cur]);
            dp_dispatch_tensor(&d, "out_val", buf_v[cur ^ 1]);
            dp_dispatch_tensor(&d, "out_id", buf_i[cur ^ 1]);
            dp_dispatch_tensor(&d, "ids", tids);
            dp_dispatch_tensor(&d, "steps", tsteps);
            dp_dispatch_u32(&d, "n", count);
            dp_dispatch_u32(&d, "kp", kp);
            dp_dispatch_u32(&d, "k", k.k);
            dp_dispatch_u32(&d, "mode", mode);
            dp_dispatch_u32(&d, "final_stage", final);
            dp_dispatch_f32(&d, "temperature", sp->temperature);
            dp_dispatch_f32(&d, "top_p", sp->top_p);
            dp_dispatch_f32(&d, "log_min_p", k.log_min_p);
            dp_dispatch_u32(&d, "seed_lo", (uint32_t)sp->seed);
            dp_dispatch_u32(&d, "seed_hi", (uint32_t)(sp->seed >> 32));
            record(c, &d, groups, 1);
            if (final) break;
            cur ^= 1;
            count = groups;            /* lists written by this stage */
            groups = (groups + f - 1) / f;
            mode = 1;
        }
    }
    if (dp_recorder_submit(c->rec, &e) != DP_OK) fail_msg("submit: %s", e.msg);
    kg_download_u32(tids, out, rows);
    dp_gtensor_release(tx);
    dp_gtensor_release(tctx);
    dp_gtensor_release(tcount);
    dp_gtensor_release(tsteps);
    dp_gtensor_release(tids);
    for (uint32_t i = 0; i < n_owned; i++) dp_gtensor_release(owned[i]);
}

static int32_t cpu_sample(const float *x, uint32_t n, const uint32_t *ctx, uint32_t n_ctx,
                          const dp_sample_params *sp)
{
    bool *seen = calloc(n, 1);
    void *scratch = malloc(dp_sample_scratch_bytes(n));
    assert_non_null(seen);
    assert_non_null(scratch);
    for (uint32_t j = 0; j < n_ctx; j++)
        if (ctx[j] < n) seen[ctx[j]] = true;
    dp_err e = {0};
    int32_t id = dp_sample(x, n, seen, sp, scratch, &e);
    free(seen);
    free(scratch);
    return id;
}

typedef struct config {
    const char *name;
    float t, top_p, min_p, penalty;
    int32_t top_k;
} config;

static const config CONFIGS[] = {
    {"greedy", 0.0f, 1.0f, 0.0f, 1.0f, 0},
    {"greedy+penalty", 0.0f, 1.0f, 0.0f, 1.5f, 0},
    {"temperature 0.7", 0.7f, 1.0f, 0.0f, 1.0f, 0},
    {"temperature 1.5", 1.5f, 1.0f, 0.0f, 1.0f, 0},
    {"top-k 1", 1.0f, 1.0f, 0.0f, 1.0f, 1},
    {"top-k 40", 1.0f, 1.0f, 0.0f, 1.0f, 40},
    {"top-k 1024", 0.8f, 1.0f, 0.0f, 1.0f, 1024},
    {"top-k 5000 (capped)", 0.8f, 1.0f, 0.0f, 1.0f, 5000},
    {"top-p 0.9", 1.0f, 0.9f, 0.0f, 1.0f, 0},
    {"top-p 0.3", 0.9f, 0.3f, 0.0f, 1.0f, 0},
    {"min-p 0.05", 1.0f, 1.0f, 0.05f, 1.0f, 0},
    {"min-p 0.5", 2.0f, 1.0f, 0.5f, 1.0f, 0},
    {"temperature+penalty", 0.8f, 1.0f, 0.0f, 1.3f, 0},
    {"top-k 40 top-p 0.95 min-p 0.05", 0.8f, 0.95f, 0.05f, 1.0f, 40},
    {"all", 0.8f, 0.95f, 0.05f, 1.3f, 40},
    {"top-p 0.8 min-p 0.1 penalty 0.8", 1.2f, 0.8f, 0.1f, 0.8f, 0},
};

/* Row kinds: flat (uniform * scale: top-p cuts inside the 1024 candidates) or peaked (24 ids at 12 - 0.1 j
** above noise in [-3, 3), so that top-p and min-p cut inside the top handful), plus the context: ids with
** repeats, half of the peaks among them. */
static void fill_row(kg_ctx *c, float *x, uint32_t n, bool peaked)
{
    kg_fill(c, x, n, peaked ? 3.0f : 10.0f);
    if (peaked)
        for (uint32_t j = 0; j < 24 && j < n; j++) x[(j * 7919u + 13u) % n] = 12.0f - 0.1f * (float)j;
}

static void compare_configs(kg_ctx *c, uint32_t n)
{
    float *x = malloc((uint64_t)n * 4);
    assert_non_null(x);
    uint32_t ctx[64];
    for (int kind = 0; kind < 2; kind++) {
        fill_row(c, x, n, kind == 1);
        uint32_t n_ctx = 0;
        for (uint32_t j = 0; j < 40; j += 2) ctx[n_ctx++] = (j * 7919u + 13u) % n;  /* peaks (kind 1) */
        ctx[n_ctx++] = ctx[0];                                                      /* a repeat */
        ctx[n_ctx++] = n + 5;                                                       /* out of range: ignored */
        for (uint32_t j = 0; j < 10; j++) ctx[n_ctx++] = (uint32_t)((kg_rnd(c) + 1.0f) * 0.5f * (float)n) % n;
        for (size_t ci = 0; ci < sizeof CONFIGS / sizeof CONFIGS[0]; ci++) {
            const config *cf = &CONFIGS[ci];
            uint32_t changes = 0;
            int32_t last = -2;
            for (uint32_t trial = 0; trial < 3; trial++) {
                dp_sample_params sp = {.temperature = cf->t, .top_k = cf->top_k, .top_p = cf->top_p,
                                       .min_p = cf->min_p, .repeat_penalty = cf->penalty,
                                       .seed = trial < 2 ? 42 : 0x123456789abcull + trial, .step = 1 + trial * 977u};
                uint32_t step = (uint32_t)sp.step, got;
                int32_t ref = cpu_sample(x, n, ctx, n_ctx, &sp);
                gpu_sample(c, x, 1, n, ctx, n_ctx, &step, &sp, &got);
                if ((int64_t)got != ref)
                    fail_msg("%s n=%u row=%s seed=%llu step=%u: GPU %u (%g), CPU %d (%g)", cf->name, n,
                             kind ? "peaked" : "flat", (unsigned long long)sp.seed, step, got,
                             got < n ? (double)x[got] : NAN, ref, ref >= 0 ? (double)x[ref] : NAN);
                if (ref != last) changes++;
                last = ref;
            }
            print_message("  n=%u %-6s %-34s 3 draws identical (%u distinct runs)\n", n,
                          kind ? "peaked" : "flat", cf->name, changes);
        }
    }
    free(x);
}

static void test_gemma_vocab(void **state) { compare_configs(*state, 262144); }

static void test_small_rows(void **state)
{
    compare_configs(*state, 3001);   /* two sorting chunks, the second partial */
    compare_configs(*state, 777);    /* one chunk: stage 0 is the final stage */
    compare_configs(*state, 5);
}

/* top-k = 1 is greedy; NaN / -inf never drawn; a row without candidates gives -1 / 0xffffffff. */
static void test_special(void **state)
{
    kg_ctx *c = *state;
    float x[9] = {1.0f, NAN, 3.0f, -INFINITY, 3.0f, 0.5f, NAN, 2.0f, -1.0f};
    uint32_t step = 7, got;
    for (int32_t top_k = 0; top_k <= 1; top_k++) {
        dp_sample_params sp = {.temperature = top_k ? 5.0f : 0.0f, .top_k = top_k, .top_p = 1.0f,
                               .repeat_penalty = 1.0f, .seed = 3, .step = step};
        assert_int_equal(cpu_sample(x, 9, NULL, 0, &sp), 2);       /* the tie goes to the lower id */
        gpu_sample(c, x, 1, 9, NULL, 0, &step, &sp, &got);
        assert_int_equal(got, 2);
    }
    for (uint32_t s = 1; s < 200; s++) {
        dp_sample_params sp = {.temperature = 3.0f, .top_k = 0, .top_p = s % 2 ? 1.0f : 0.99f,
                               .repeat_penalty = 1.0f, .seed = 9, .step = s};
        int32_t ref = cpu_sample(x, 9, NULL, 0, &sp);
        assert_true(ref != 1 && ref != 3 && ref != 6 && ref >= 0);
        gpu_sample(c, x, 1, 9, NULL, 0, &s, &sp, &got);
        assert_int_equal(got, ref);
    }
    float none[3] = {NAN, -INFINITY, NAN};
    for (int sorted = 0; sorted < 2; sorted++) {
        dp_sample_params sp = {.temperature = 1.0f, .top_k = sorted ? 10 : 0, .top_p = 1.0f,
                               .repeat_penalty = 1.0f, .step = 1};
        assert_int_equal(cpu_sample(none, 3, NULL, 0, &sp), -1);
        gpu_sample(c, none, 1, 3, NULL, 0, &step, &sp, &got);
        assert_int_equal(got, 0xffffffffu);
    }
}

/* The filters keep what they promise (checked on the draws of many steps, CPU and GPU alike):
** z = {3, 2.9, 2, 0, -1, -5}: top-k 2 -> {0, 1}; top-p 0.6 -> {0, 1} (p0 = 0.43 < 0.6 <= p0 + p1 = 0.81);
** min-p 0.3 -> p_i >= 0.3 p_0, i.e. z_i >= 3 + log 0.3 = 1.80 -> {0, 1, 2}; all off -> every id. */
static void test_filters(void **state)
{
    kg_ctx *c = *state;
    const float z[6] = {3.0f, 2.9f, 2.0f, 0.0f, -1.0f, -5.0f};
    const struct { int32_t top_k; float top_p, min_p; unsigned expect; } cases[] = {
        {2, 1.0f, 0.0f, 0x03}, {0, 0.6f, 0.0f, 0x03}, {0, 1.0f, 0.3f, 0x07}, {0, 1.0f, 0.0f, 0x3f},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        unsigned drawn = 0;
        for (uint32_t s = 1; s <= 400; s++) {
            dp_sample_params sp = {.temperature = 3.0f, .top_k = cases[ci].top_k, .top_p = cases[ci].top_p,
                                   .min_p = cases[ci].min_p, .repeat_penalty = 1.0f, .seed = 5, .step = s};
            int32_t ref = cpu_sample(z, 6, NULL, 0, &sp);
            assert_true(ref >= 0 && ref < 6);
            drawn |= 1u << ref;
            if (s % 40 == 0) {
                uint32_t got;
                gpu_sample(c, z, 1, 6, NULL, 0, &s, &sp, &got);
                assert_int_equal(got, ref);
            }
        }
        if (drawn != cases[ci].expect) fail_msg("case %zu: drew the set 0x%x, expected 0x%x", ci, drawn, cases[ci].expect);
    }
}

/* Temperature sampling follows softmax(z / T): V = 8, T = 0.7, 20000 draws at steps 1..20000, Pearson's
** chi-square against the expected counts. 7 degrees of freedom; P(chi2_7 > 41.0) = 8.1e-7, so a correct
** sampler fails this fixed-seed test with probability < 1e-6, while a sampler off by a few percent in one
** probability (or drawing at T = 1) lands far above it. The GPU draws all rows in one dispatch. */
static void test_softmax_fit(void **state)
{
    kg_ctx *c = *state;
    enum { V = 8, DRAWS = 20000 };
    const float z[V] = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, 1.7f, -1.2f, 0.9f}, t = 0.7f;
    const double critical = 41.0;
    double p[V], sum = 0;
    for (int i = 0; i < V; i++) sum += p[i] = exp((double)z[i] / t);
    for (int i = 0; i < V; i++) p[i] /= sum;
    float *rows = malloc(sizeof(float) * V * DRAWS);
    uint32_t *steps = malloc(4 * DRAWS), *got = malloc(4 * DRAWS);
    assert_true(rows && steps && got);
    for (uint32_t r = 0; r < DRAWS; r++) {
        memcpy(rows + (size_t)r * V, z, sizeof z);
        steps[r] = r + 1;
    }
    dp_sample_params sp = {.temperature = t, .top_p = 1.0f, .repeat_penalty = 1.0f, .seed = 2024};
    gpu_sample(c, rows, DRAWS, V, NULL, 0, steps, &sp, got);
    unsigned cpu_count[V] = {0}, gpu_count[V] = {0};
    for (uint32_t r = 0; r < DRAWS; r++) {
        sp.step = r + 1;
        int32_t id = cpu_sample(z, V, NULL, 0, &sp);
        assert_true(id >= 0 && id < V);
        assert_true(got[r] < V);
        cpu_count[id]++;
        gpu_count[got[r]]++;
    }
    double chi_cpu = 0, chi_gpu = 0;
    for (int i = 0; i < V; i++) {
        double e = p[i] * DRAWS;
        chi_cpu += (cpu_count[i] - e) * (cpu_count[i] - e) / e;
        chi_gpu += (gpu_count[i] - e) * (gpu_count[i] - e) / e;
    }
    print_message("  chi-square (7 dof): CPU %.2f, GPU %.2f, critical %.1f\n", chi_cpu, chi_gpu, critical);
    assert_true(chi_cpu < critical);
    assert_true(chi_gpu < critical);
    /* the same test must reject a wrong temperature: counts against softmax(z) (T = 1) */
    double chi_wrong = 0, s1 = 0;
    for (int i = 0; i < V; i++) s1 += exp((double)z[i]);
    for (int i = 0; i < V; i++) {
        double e = exp((double)z[i]) / s1 * DRAWS;
        chi_wrong += (cpu_count[i] - e) * (cpu_count[i] - e) / e;
    }
    print_message("  chi-square against softmax(z) (T = 1, must fail): %.1f\n", chi_wrong);
    assert_true(chi_wrong > critical);
    free(rows);
    free(steps);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_small_rows),
        cmocka_unit_test(test_gemma_vocab),
        cmocka_unit_test(test_softmax_fit),
    };
    return cmocka_run_group_tests(tests, kg_setup, kg_teardown);
}
