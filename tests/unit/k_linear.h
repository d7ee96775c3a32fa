/*
** tests/unit/k_linear.h: what the matrix-kernel tests share: k_gpu.h's device + recorder context (as `ctx`, set up
** by lin_setup with these tests' own seed), and 1-D tensor upload/download in f32/f16/bf16 (values already
** rounded to the dtype on the host). Include after cmocka.h; test programs only.
*/
#ifndef DP_TEST_K_LINEAR_H
#define DP_TEST_K_LINEAR_H

#include "core/dtype.h"
#include "core/ref/ref.h"
#include "gpu/device.h"
#include "gpu/recorder.h"
#include "gpu/tensor.h"

#include "k_gpu.h"
#include "k_unroll.h"

typedef kg_ctx ctx;

/* kg_setup, with the generator at the seed these tests' cases were written against (pair with kg_teardown). */
static inline int lin_setup(void **state)
{
    if (kg_setup(state) != 0) return -1;
    ((ctx *)*state)->rng = 0x5eed1234u;
    return 0;
}

#define CHECK_OK(call)                                                                  \
    do {                                                                                \
        dp_err e_ = {0};                                                                \
        dp_err *err = &e_;                                                              \
        if ((call) != DP_OK) fail_msg("%s: %s", #call, e_.msg);                         \
        (void)err;                                                                      \
    } while (0)

static inline float rnd(ctx *c)   /* uniform in [-1, 1) */
{
    c->rng = c->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((c->rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Allocates a 1-D device tensor of n elements of dtype and uploads v (already rounded to dtype). */
static inline dp_gtensor *upload(ctx *c, dp_dtype dt, const float *v, uint64_t n)
{
    dp_gtensor *t = NULL;
    uint64_t shape[1] = {n};
    CHECK_OK(dp_gtensor_create(c->dev, dt, 1, shape, &t, err));
    if (dt == DP_F32) {
        CHECK_OK(dp_gtensor_upload(t, 0, v, n * 4, err));
        return t;
    }
    uint16_t *h = malloc(n * 2);
    assert_non_null(h);
    for (uint64_t i = 0; i < n; i++) h[i] = dt == DP_F16 ? dp_f32_to_f16(v[i]) : dp_f32_to_bf16(v[i]);
    CHECK_OK(dp_gtensor_upload(t, 0, h, n * 2, err));
    free(h);
    return t;
}

static inline void download(const dp_gtensor *t, float *out, uint64_t n)
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

#endif
