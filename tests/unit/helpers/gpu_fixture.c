/*
** tests/unit/helpers/gpu_fixture.c: see gpu_fixture.h.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "helpers/gpu_fixture.h"

/* On unless DOPPLER_VALIDATION=0 (the sanitizer stage: tests/tests.cmake says why). */
static bool validation_wanted(void)
{
    const char *v = getenv("DOPPLER_VALIDATION");
    return !(v && strcmp(v, "0") == 0);
}

dp_device *dp_test_device_open(void)
{
    dp_device_opts o;
    dp_device_opts_default(&o);
    o.validation = validation_wanted();
    dp_device *dev = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_device_open(&o, &dev, &err), &err);
    assert_true(dp_device_validation_enabled(dev) == o.validation);
    return dev;
}

void dp_test_device_close(dp_device *dev)
{
    uint64_t n = dp_device_validation_count(dev);
    dp_device_close(dev);
    assert_int_equal(n, 0);
}

uint32_t dp_test_u32(dp_test_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (uint32_t)((r->s * 0x2545F4914F6CDD1Dull) >> 32);
}

float dp_test_uniform(dp_test_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)(dp_test_u32(r) >> 8) / 16777216.0f;
}

void dp_test_fill(dp_test_rng *r, float *x, uint64_t n, float lo, float hi)
{
    for (uint64_t i = 0; i < n; i++) x[i] = dp_test_uniform(r, lo, hi);
}

dp_gtensor *dp_test_tensor(dp_device *dev, dp_dtype dtype, uint64_t n, const void *data)
{
    dp_gtensor *t = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_gtensor_create(dev, dtype, 1, &n, &t, &err), &err);
    if (data) DP_TEST_OK(dp_gtensor_upload(t, 0, data, t->bytes, &err), &err);
    return t;
}

dp_kernel *dp_test_kernel(dp_device *dev, const char *file, const char *const *defines, uint32_t n_defines,
                          uint32_t wg)
{
    dp_kconst c = {"WG", wg};
    dp_kernel_desc d = {.file = file, .defines = defines, .n_defines = n_defines, .constants = &c,
                        .n_constants = wg ? 1 : 0};
    dp_kernel *k = NULL;
    dp_err err = {0};
    DP_TEST_OK(dp_kernel_get(dev, &d, &k, &err), &err);
    return k;
}
