/*
** tests/unit/test_gpu_elementwise.c: add, mul, scale against the CPU on random data, at sizes that
** are and are not multiples of the workgroup, with grid-stride (fewer groups than needed) too.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/gpu_fixture.h"

static const uint64_t SIZES[] = {1, 7, 64, 255, 256, 257, 1000, 4099, 65536 + 13};

static void run_binary(const char *file, int op)
{
    dp_device *dev = dp_test_device_open();
    dp_kernel *k = dp_test_kernel(dev, file, NULL, 0, 64);
    dp_recorder *rec = NULL;
    dp_err err = {0};
    dp_test_rng rng = {42};
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    for (size_t s = 0; s < DP_ARRAY_LEN(SIZES); s++) {
        uint64_t n = SIZES[s];
        float *a = malloc(n * 4), *b = malloc(n * 4), *y = malloc(n * 4);
        dp_test_fill(&rng, a, n, -4, 4);
        dp_test_fill(&rng, b, n, -4, 4);
        dp_gtensor *ta = dp_test_tensor(dev, DP_F32, n, a), *tb = dp_test_tensor(dev, DP_F32, n, b);
        dp_gtensor *ty = dp_test_tensor(dev, DP_F32, n, NULL);
        /* Exact group count, then a third of it (the grid-stride loop must cover the rest). */
        for (int pass = 0; pass < 2; pass++) {
            uint32_t groups = (uint32_t)((n + 63) / 64);
            if (pass == 1) groups = groups / 3 ? groups / 3 : 1;
            dp_dispatch d;
            dp_dispatch_init(&d, k);
            dp_dispatch_tensor(&d, "a", ta);
            dp_dispatch_tensor(&d, "b", tb);
            dp_dispatch_tensor(&d, "y", ty);
            dp_dispatch_u32(&d, "n", (uint32_t)n);
            DP_TEST_OK(dp_recorder_dispatch(rec, &d, groups, 1, 1, &err), &err);
            DP_TEST_OK(dp_recorder_submit(rec, &err), &err);
            memset(y, 0, n * 4);
            DP_TEST_OK(dp_gtensor_download(ty, 0, y, n * 4, &err), &err);
            for (uint64_t i = 0; i < n; i++) {
                float want = op == 0 ? a[i] + b[i] : a[i] * b[i];
                if (y[i] != want) fail_msg("%s n=%llu i=%llu: got %g want %g", file, (unsigned long long)n,
                                           (unsigned long long)i, y[i], want);
            }
        }
        dp_gtensor_release(ta);
        dp_gtensor_release(tb);
        dp_gtensor_release(ty);
        free(a);
        free(b);
        free(y);
    }
    dp_recorder_destroy(rec);
    dp_test_device_close(dev);
}

static void test_add(void **state) { (void)state; run_binary("elementwise/add.comp", 0); }
static void test_mul(void **state) { (void)state; run_binary("elementwise/mul.comp", 1); }

static void test_scale_in_place(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_kernel *k = dp_test_kernel(dev, "elementwise/scale.comp", NULL, 0, 0);
    dp_recorder *rec = NULL;
    dp_err err = {0};
    dp_test_rng rng = {7};
    uint64_t n = 3001;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    dp_test_fill(&rng, x, n, -100, 100);
    dp_gtensor *t = dp_test_tensor(dev, DP_F32, n, x);
    DP_TEST_OK(dp_recorder_create(dev, &rec, &err), &err);
    dp_dispatch d;
    dp_dispatch_init(&d, k);
    dp_dispatch_tensor(&d, "x", t);
    dp_dispatch_tensor(&d, "y", t);
    dp_dispatch_u32(&d, "n", (uint32_t)n);
    dp_dispatch_f32(&d, "s", -0.375f);
    assert_int_equal(dp_kernel_wg(k), 256);
    DP_TEST_OK(dp_recorder_dispatch(rec, &d, (uint32_t)((n + 255) / 256), 1, 1, &err), &err);
    DP_TEST_OK(dp_recorder_submit(rec, &err), &err);
    DP_TEST_OK(dp_gtensor_download(t, 0, y, n * 4, &err), &err);
    for (uint64_t i = 0; i < n; i++) assert_true(y[i] == x[i] * -0.375f);
    dp_gtensor_release(t);
    dp_recorder_destroy(rec);
    free(x);
    free(y);
    dp_test_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_mul),
        cmocka_unit_test(test_scale_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
