/*
** tests/unit/helpers/gpu_fixture.h: what GPU tests share: a device opened with validation (the
** message count must stay 0; off only where DOPPLER_VALIDATION=0), deterministic random data, and one-call kernel runs.
*/
#ifndef DP_TEST_GPU_FIXTURE_H
#define DP_TEST_GPU_FIXTURE_H

#include <stdint.h>

#include "gpu/device.h"
#include "gpu/kernel.h"
#include "gpu/recorder.h"
#include "gpu/tensor.h"

/* Opens the default device (validation on unless DOPPLER_VALIDATION=0) or fails the test with the message. */
dp_device *dp_test_device_open(void);
/* Asserts no validation message was seen, then closes. */
void       dp_test_device_close(dp_device *dev);

/* xorshift64*: the same sequence on every machine. */
typedef struct dp_test_rng { uint64_t s; } dp_test_rng;
uint32_t dp_test_u32(dp_test_rng *r);
float    dp_test_uniform(dp_test_rng *r, float lo, float hi);
void     dp_test_fill(dp_test_rng *r, float *x, uint64_t n, float lo, float hi);

/* A 1-D tensor of n elements, uploaded from host data (or left undefined if data is NULL). */
dp_gtensor *dp_test_tensor(dp_device *dev, dp_dtype dtype, uint64_t n, const void *data);
/* A kernel from a shader file with optional WG (0: default). Fails the test on error. */
dp_kernel  *dp_test_kernel(dp_device *dev, const char *file, const char *const *defines, uint32_t n_defines,
                           uint32_t wg);

/* cmocka assertion with the dp_err message printed on failure. */
#define DP_TEST_OK(call, err)                                                                    \
    do {                                                                                         \
        dp_status st_ = (call);                                                                  \
        if (st_ != DP_OK) fail_msg("%s -> %s: %s", #call, dp_status_name(st_), (err)->msg);     \
    } while (0)

#endif
