/*
** tests/unit/k_gpu.h: small helpers shared by the kernel tests of branch kattn (test_k_norm.c, test_k_rope.c,
** test_k_attention.c, test_k_act.c, test_k_argmax.c): a device + recorder per test program, seeded random
** numbers, upload/download with dtype conversion, one-shot dispatch. Header-only (static inline), so that a
** test that does not use a helper does not trip -Wunused-function.
** Include after <cmocka.h> and its prerequisites.
*/
#ifndef DP_TESTS_K_GPU_H
#define DP_TESTS_K_GPU_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/ref/ref.h"
#include "gpu/device.h"
#include "gpu/kernel.h"
#include "gpu/recorder.h"
#include "gpu/tensor.h"

#include "k_unroll.h"

typedef struct kg_ctx {
    dp_device   *dev;
    dp_recorder *rec;
    uint64_t     rng;
} kg_ctx;

static inline int kg_setup(void **state)
{
    kg_ctx *c = calloc(1, sizeof *c);
    dp_err e = {0};
    if (!c) return -1;
    c->rng = 0x9e3779b97f4a7c15ull;
    if (dp_device_open(NULL, &c->dev, &e) != DP_OK || dp_recorder_create(c->dev, &c->rec, &e) != DP_OK) {
        print_error("device: %s\n", e.msg);
        dp_recorder_destroy(c->rec);
        dp_device_close(c->dev);
        free(c);
        return -1;
    }
    *state = c;
    return 0;
}

/* Fails the program when the validation layer said anything. */
static inline int kg_teardown(void **state)
{
    kg_ctx *c = *state;
    uint64_t msgs = dp_device_validation_count(c->dev);
    dp_recorder_destroy(c->rec);
    dp_device_close(c->dev);
    free(c);
    if (msgs != 0) {
        print_error("validation layer reported %llu message(s)\n", (unsigned long long)msgs);
        return -1;
    }
    return 0;
}

static inline float kg_rnd(kg_ctx *c)   /* uniform in [-1, 1) */
{
    c->rng = c->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((c->rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static inline void kg_fill(kg_ctx *c, float *v, uint64_t n, float scale)
{
    for (uint64_t i = 0; i < n; i++) v[i] = kg_rnd(c) * scale;
}

/* Rounds v in place to what a dtype tensor stores (f32: unchanged). */
static inline void kg_round(float *v, dp_dtype dt, uint64_t n)
{
    dp_err e = {0};
    if (dp_ref_round(v, dt, n, &e) != DP_OK) fail_msg("round: %s", e.msg);
}

/* A 1-D tensor of n elements of dt holding v (converted: round to nearest even). */
static inline dp_gtensor *kg_upload(kg_ctx *c, dp_dtype dt, const float *v, uint64_t n)
{
    dp_gtensor *t = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {n};
    if (dp_gtensor_create(c->dev, dt, 1, shape, &t, &e) != DP_OK) fail_msg("create: %s", e.msg);
    if (dt == DP_F32) {
        if (dp_gtensor_upload(t, 0, v, n * 4, &e) != DP_OK) fail_msg("upload: %s", e.msg);
        return t;
    }
    uint16_t *h = malloc(n * 2);
    assert_non_null(h);
    for (uint64_t i = 0; i < n; i++) h[i] = dt == DP_F16 ? dp_f32_to_f16(v[i]) : dp_f32_to_bf16(v[i]);
    if (dp_gtensor_upload(t, 0, h, n * 2, &e) != DP_OK) fail_msg("upload: %s", e.msg);
    free(h);
    return t;
}

static inline dp_gtensor *kg_upload_u32(kg_ctx *c, const uint32_t *v, uint64_t n)
{
    dp_gtensor *t = NULL;
    dp_err e = {0};
    uint64_t shape[1] = {n};
    if (dp_gtensor_create(c->dev, DP_I32, 1, shape, &t, &e) != DP_OK) fail_msg("create: %s", e.msg);
    if (dp_gtensor_upload(t, 0, v, n * 4, &e) != DP_OK) fail_msg("upload: %s", e.msg);
    return t;
}

static inline void kg_download(const dp_gtensor *t, float *out, uint64_t n)
{
    dp_err e = {0};
    if (t->dtype == DP_F32) {
        if (dp_gtensor_download(t, 0, out, n * 4, &e) != DP_OK) fail_msg("download: %s", e.msg);
        return;
    }
    uint16_t *h = malloc(n * 2);
    assert_non_null(h);
    if (dp_gtensor_download(t, 0, h, n * 2, &e) != DP_OK) fail_msg("download: %s", e.msg);
    if (dp_ref_to_f32(h, t->dtype, out, n, &e) != DP_OK) fail_msg("to_f32: %s", e.msg);
    free(h);
}

static inline void kg_download_u32(const dp_gtensor *t, uint32_t *out, uint64_t n)
{
    dp_err e = {0};
    if (dp_gtensor_download(t, 0, out, n * 4, &e) != DP_OK) fail_msg("download: %s", e.msg);
}

/* Runs of one kernel that must agree bit for bit (e.g. UN only moves loads): the first call keeps t's bytes
** in *first; a later call returns whether t's bytes equal them. The caller frees *first. */
static inline bool kg_same_bits(const dp_gtensor *t, void **first)
{
    dp_err e = {0};
    void *bits = malloc(t->bytes);
    assert_non_null(bits);
    if (dp_gtensor_download(t, 0, bits, t->bytes, &e) != DP_OK) fail_msg("download: %s", e.msg);
    if (!*first) { *first = bits; return true; }
    const bool same = memcmp(bits, *first, t->bytes) == 0;
    free(bits);
    return same;
}

/* Defines for an activation dtype (and optionally weight / KV dtypes): fills defs, returns the count. */
static inline uint32_t kg_defines(const char **defs, bool act_f16, int w_dtype, bool kv_f16)
{
    uint32_t n = 0;
    if (act_f16) defs[n++] = "DP_ACT_F16";
    if (w_dtype == DP_F16) defs[n++] = "DP_W_F16";
    else if (w_dtype == DP_BF16) defs[n++] = "DP_W_BF16";
    else if (w_dtype == DP_F32) defs[n++] = "DP_W_F32";
    if (kv_f16) defs[n++] = "DP_KV_F16";
    return n;
}

static inline dp_kernel *kg_kernel(kg_ctx *c, const char *file, const char **defs, uint32_t n_defs, uint32_t wg)
{
    dp_kconst wgc = {"WG", wg};
    dp_kernel_desc kd = {.file = file, .defines = defs, .n_defines = n_defs,
                         .constants = wg ? &wgc : NULL, .n_constants = wg ? 1 : 0};
    dp_kernel *k = NULL;
    dp_err e = {0};
    if (dp_kernel_get(c->dev, &kd, &k, &e) != DP_OK) fail_msg("kernel %s: %s", file, e.msg);
    return k;
}

/* Records d alone, submits and waits. */
static inline void kg_run(kg_ctx *c, const dp_dispatch *d, uint32_t gx, uint32_t gy, uint32_t gz)
{
    dp_err e = {0};
    if (dp_recorder_begin(c->rec, &e) != DP_OK || dp_recorder_dispatch(c->rec, d, gx, gy, gz, &e) != DP_OK ||
        dp_recorder_submit(c->rec, &e) != DP_OK)
        fail_msg("%s: %s", dp_kernel_name(d->kernel), e.msg);
}

/* Groups for the element-wise kernels: ceil(count / wg) groups folded as (65535, rows) past 65535. */
static inline void kg_groups_1d(uint64_t count, uint32_t wg, uint32_t *gx, uint32_t *gy)
{
    uint64_t g = (count + wg - 1) / wg;
    *gx = g > 65535 ? 65535 : (uint32_t)g;
    *gy = (uint32_t)((g + 65534) / 65535);
    if (*gy == 0) *gy = 1;
}

/* Same folding for one workgroup per row. */
static inline void kg_groups_rows(uint32_t rows, uint32_t *gx, uint32_t *gy)
{
    *gx = rows > 65535 ? 65535 : rows;
    *gy = (rows + 65534) / 65535;
}

#endif
