/*
** tests/unit/test_gpu_kernels.c: casts (all six f32/f16/bf16 directions, bit-exact against
** core/dtype.c), two-stage sum and max reductions, and the copy kernel on a 160 MiB tensor (larger
** than lavapipe's 128 MiB binding limit: buffer device addresses make that work) and on unaligned
** views.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/gpu_fixture.h"

typedef struct fmt {
    const char *src, *dst;
    dp_dtype    st, dt;
} fmt;

/* Host value of element i of a buffer of type t, as f32. */
static float host_get(dp_dtype t, const void *buf, uint64_t i)
{
    if (t == DP_F32) return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    return t == DP_F16 ? dp_f16_to_f32(h) : dp_bf16_to_f32(h);
}

static uint32_t host_bits(dp_dtype t, float f)
{
    if (t == DP_F32) { uint32_t u; memcpy(&u, &f, 4); return u; }
    return t == DP_F16 ? dp_f32_to_f16(f) : dp_f32_to_bf16(f);
}

static uint32_t dev_bits(dp_dtype t, const void *buf, uint64_t i)
{
    return t == DP_F32 ? ((const uint32_t *)buf)[i] : ((const uint16_t *)buf)[i];
}

static void test_casts(void **state)
{
    (void)state;
    static const fmt F[] = {
        {"DP_SRC_F32", "DP_DST_F16", DP_F32, DP_F16},   {"DP_SRC_F32", "DP_DST_BF16", DP_F32, DP_BF16},
        {"DP_SRC_F16", "DP_DST_F32", DP_F16, DP_F32},   {"DP_SRC_BF16", "DP_DST_F32", DP_BF16, DP_F32},
        {"DP_SRC_F16", "DP_DST_BF16", DP_F16, DP_BF16}, {"DP_SRC_BF16", "DP_DST_F16", DP_BF16, DP_F16},
    };
    dp_device *dev = dp_test_device_open();
    dp_recorder *rec = NULL;
    dp_err err = {0};
    dp_test_rng rng = {99};
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    const uint64_t n = 20000 + 3;
    uint32_t *raw = malloc(n * 4);
    void *out = malloc(n * 4);
    for (size_t f = 0; f < DP_ARRAY_LEN(F); f++) {
        /* Random bit patterns cover subnormals, infinities, NaNs and ties; then some edge values. */
        for (uint64_t i = 0; i < n; i++) raw[i] = dp_test_u32(&rng);
        if (F[f].st == DP_F32) {
            float edge[] = {0.0f, -0.0f, 65504.0f, 65520.0f, 1e-8f, 5.9604645e-08f, 2.9802322e-08f, INFINITY, -INFINITY,
                            NAN, 1.0009765625f, 3.4e38f};
            memcpy(raw, edge, sizeof edge);
        } else {
            uint16_t *h = (uint16_t *)raw;   /* only the first n halves are used */
            for (uint64_t i = 0; i < n; i++) h[i] = (uint16_t)dp_test_u32(&rng);
        }
        const char *defs[] = {F[f].src, F[f].dst};
        dp_kernel *k = dp_test_kernel(dev, "elementwise/cast.comp", defs, 2, 128);
        dp_gtensor *x = dp_test_tensor(dev, F[f].st, n, NULL), *y = dp_test_tensor(dev, F[f].dt, n, NULL);
        DP_TEST_OK(dp_gtensor_upload(x, 0, raw, x->bytes, &err), &err);
        dp_dispatch d;
        dp_dispatch_init(&d, k);
        dp_dispatch_tensor(&d, "x", x);
        dp_dispatch_tensor(&d, "y", y);
        dp_dispatch_u32(&d, "n", (uint32_t)n);
        DP_TEST_OK(dp_recorder_dispatch(rec, &d, 40, 1, 1, &err), &err);
        DP_TEST_OK(dp_recorder_submit(rec, &err), &err);
        DP_TEST_OK(dp_gtensor_download(y, 0, out, y->bytes, &err), &err);
        for (uint64_t i = 0; i < n; i++) {
            float v = host_get(F[f].st, raw, i);
            uint32_t want = host_bits(F[f].dt, v), got = dev_bits(F[f].dt, out, i);
            bool nan_ok = isnan(v) && isnan(host_get(F[f].dt, out, i));   /* NaN payloads may differ */
            if (got != want && !nan_ok)
                fail_msg("%s -> %s i=%llu: input %a gave 0x%x, want 0x%x", F[f].src, F[f].dst, (unsigned long long)i,
                         (double)v, got, want);
        }
        dp_gtensor_release(x);
        dp_gtensor_release(y);
    }
    free(raw);
    free(out);
    dp_recorder_destroy(rec);
    dp_test_device_close(dev);
}

/* Runs a two-stage reduction and returns the result. */
static float reduce(dp_device *dev, dp_recorder *rec, const char *file, dp_gtensor *x, uint64_t n, uint32_t groups)
{
    dp_err err = {0};
    dp_kernel *k = dp_test_kernel(dev, file, NULL, 0, 64);
    dp_gtensor *part = dp_test_tensor(dev, DP_F32, groups, NULL), *res = dp_test_tensor(dev, DP_F32, 1, NULL);
    dp_dispatch d;
    dp_dispatch_init(&d, k);
    dp_dispatch_tensor(&d, "x", x);
    dp_dispatch_tensor(&d, "y", part);
    dp_dispatch_u32(&d, "n", (uint32_t)n);
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, groups, 1, 1, &err), &err);
    dp_dispatch_init(&d, k);
    dp_dispatch_tensor(&d, "x", part);
    dp_dispatch_tensor(&d, "y", res);
    dp_dispatch_u32(&d, "n", groups);
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, 1, 1, 1, &err), &err);
    dp_recorder_stats st;
    dp_recorder_get_stats(rec, &st);
    assert_int_equal(st.barriers, 1);   /* stage 2 reads what stage 1 wrote */
    DP_TEST_OK(dp_recorder_submit(rec, &err), &err);
    float r = 0;
    DP_TEST_OK(dp_gtensor_download(res, 0, &r, 4, &err), &err);
    dp_gtensor_release(part);
    dp_gtensor_release(res);
    return r;
}

static void test_reductions(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, 63, 64, 65, 1000, 12345, 1 << 20};
    dp_device *dev = dp_test_device_open();
    dp_recorder *rec = NULL;
    dp_err err = {0};
    dp_test_rng rng = {5};
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    for (size_t s = 0; s < DP_ARRAY_LEN(sizes); s++) {
        uint64_t n = sizes[s];
        float *x = malloc(n * 4);
        dp_test_fill(&rng, x, n, -1, 1);
        x[n / 2] = 7.5f;   /* a unique maximum somewhere in the middle */
        double sum = 0, abs_sum = 0;
        float mx = -INFINITY;
        for (uint64_t i = 0; i < n; i++) {
            sum += x[i];
            abs_sum += fabs(x[i]);
            mx = fmaxf(mx, x[i]);
        }
        dp_gtensor *t = dp_test_tensor(dev, DP_F32, n, x);
        uint32_t groups = n < 64 * 37 ? 1 : 37;   /* 37: grid-stride shares of uneven length */
        float gs = reduce(dev, rec, "reduce/sum.comp", t, n, groups);
        float gm = reduce(dev, rec, "reduce/max.comp", t, n, groups);
        /* f32 accumulation in a tree: error bound ~ log2(n) ulps of the absolute sum. */
        if (fabs(gs - sum) > 1e-6 * abs_sum * 24 + 1e-6)
            fail_msg("sum n=%llu: got %.9g want %.9g", (unsigned long long)n, (double)gs, sum);
        assert_true(gm == mx);
        dp_gtensor_release(t);
        free(x);
    }
    dp_recorder_destroy(rec);
    dp_test_device_close(dev);
}

static void copy_run(dp_device *dev, dp_recorder *rec, dp_kernel *k, const dp_gtensor *src, const dp_gtensor *dst,
                     uint64_t bytes, uint32_t groups)
{
    dp_err err = {0};
    dp_dispatch d;
    dp_dispatch_init(&d, k);
    dp_dispatch_tensor(&d, "src", src);
    dp_dispatch_tensor(&d, "dst", dst);
    dp_dispatch_u64(&d, "bytes", bytes);
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, groups, 1, 1, &err), &err);
    DP_TEST_OK(dp_recorder_submit(rec, &err), &err);
    (void)dev;
}

static void test_copy_large(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_recorder *rec = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    dp_kernel *k = dp_test_kernel(dev, "copy/copy.comp", NULL, 0, 256);
    const uint64_t n = 40ull << 20;   /* 40 Mi floats = 160 MiB */
    uint32_t *h = malloc(n * 4);
    for (uint64_t i = 0; i < n; i++) h[i] = (uint32_t)(i * 2654435761u);
    dp_gtensor *src = dp_test_tensor(dev, DP_U8, n * 4, h), *dst = dp_test_tensor(dev, DP_U8, n * 4, NULL);
    copy_run(dev, rec, k, src, dst, n * 4, 1024);
    /* Spot checks, the last bytes included: they lie beyond 128 MiB. */
    memset(h, 0, n * 4);
    DP_TEST_OK(dp_gtensor_download(dst, 0, h, n * 4, &err), &err);
    for (uint64_t i = 0; i < n; i += 4099) assert_int_equal(h[i], (uint32_t)(i * 2654435761u));
    for (uint64_t i = n - 1000; i < n; i++) assert_int_equal(h[i], (uint32_t)(i * 2654435761u));
    free(h);
    dp_gtensor_release(src);
    dp_gtensor_release(dst);
    dp_recorder_destroy(rec);
    dp_test_device_close(dev);
}

static void test_copy_tails_and_unaligned(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_recorder *rec = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    dp_kernel *k = dp_test_kernel(dev, "copy/copy.comp", NULL, 0, 64);
    const uint64_t n = 100003;
    uint8_t *a = malloc(n), *b = malloc(n);
    for (uint64_t i = 0; i < n; i++) a[i] = (uint8_t)(i * 31 + 7);
    dp_gtensor *src = dp_test_tensor(dev, DP_U8, n, a), *dst = dp_test_tensor(dev, DP_U8, n, NULL);
    static const uint64_t offs[][2] = {{0, 0}, {16, 32}, {3, 5}, {1, 0}};
    for (size_t c = 0; c < DP_ARRAY_LEN(offs); c++) {
        uint64_t len = n - 40 - c;
        dp_gtensor *vs = NULL, *vd = NULL;
        DP_TEST_OK(dp_gtensor_view(src, offs[c][0], DP_U8, 1, &len, &vs, &err), &err);
        DP_TEST_OK(dp_gtensor_view(dst, offs[c][1], DP_U8, 1, &len, &vd, &err), &err);
        DP_TEST_OK(dp_recorder_fill(rec, &dst->buf, 0, n - n % 4, 0, &err), &err);
        copy_run(dev, rec, k, vs, vd, len, 7);
        DP_TEST_OK(dp_gtensor_download(vd, 0, b, len, &err), &err);
        for (uint64_t i = 0; i < len; i++)
            if (b[i] != a[offs[c][0] + i]) fail_msg("case %zu: byte %llu differs", c, (unsigned long long)i);
        dp_gtensor_release(vs);
        dp_gtensor_release(vd);
    }
    free(a);
    free(b);
    dp_gtensor_release(src);
    dp_gtensor_release(dst);
    dp_recorder_destroy(rec);
    dp_test_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_casts),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_copy_large),
        cmocka_unit_test(test_copy_tails_and_unaligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
