/*
** tests/unit/test_tensor_layout.c: shapes, strides and views (core/tensor.h), and strided device views
** spanning exactly the bytes their elements occupy (gpu/tensor.h).
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/tensor.h"
#include "helpers/gpu_fixture.h"

static void test_contiguous(void **state)
{
    (void)state;
    dp_layout l;
    dp_err err = {0};
    uint64_t shape[3] = {2, 3, 4};
    assert_int_equal(dp_layout_contiguous(&l, DP_F16, 3, shape, &err), DP_OK);
    assert_int_equal(l.stride[0], 12);
    assert_int_equal(l.stride[1], 4);
    assert_int_equal(l.stride[2], 1);
    assert_int_equal(dp_layout_numel(&l), 24);
    assert_int_equal(dp_layout_end(&l), 48);
    assert_true(dp_layout_is_contiguous(&l));
    uint64_t idx[3] = {1, 2, 3};
    assert_int_equal(dp_layout_byte_offset(&l, idx), (12 + 8 + 3) * 2);
    /* block types: a row is whole blocks; 512 q4_k elements = 2 blocks of 144 bytes */
    uint64_t q[2] = {3, 512};
    assert_int_equal(dp_layout_contiguous(&l, DP_Q4_K, 2, q, &err), DP_OK);
    assert_int_equal(dp_layout_end(&l), 3 * 2 * 144);
    uint64_t bad[2] = {3, 100};
    assert_int_equal(dp_layout_contiguous(&l, DP_Q4_K, 2, bad, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "whole q4_k blocks"));
    dp_err_clear(&err);
    uint64_t zero[2] = {3, 0};
    assert_int_equal(dp_layout_contiguous(&l, DP_F32, 2, zero, &err), DP_EINVAL);
}

static void test_narrow_and_transpose(void **state)
{
    (void)state;
    dp_layout l, s, t;
    dp_err err = {0};
    uint64_t shape[2] = {5, 96};   /* e.g. T = 5 rows of a fused q|k|v projection, 3 x 32 columns */
    assert_int_equal(dp_layout_contiguous(&l, DP_F32, 2, shape, &err), DP_OK);
    assert_int_equal(dp_layout_narrow(&l, 1, 32, 32, &s, &err), DP_OK);   /* the k slice */
    assert_int_equal(s.offset, 32 * 4);
    assert_int_equal(s.stride[0], 96);
    assert_false(dp_layout_is_contiguous(&s));
    /* last element: row 4, column 63 -> byte (4 * 96 + 63) * 4, end one past it */
    assert_int_equal(dp_layout_end(&s), (4 * 96 + 63 + 1) * 4);
    assert_int_equal(dp_layout_narrow(&l, 1, 90, 10, &s, &err), DP_EINVAL);
    dp_err_clear(&err);
    assert_int_equal(dp_layout_transpose(&l, 0, 1, &t, &err), DP_OK);
    assert_int_equal(t.shape[0], 96);
    assert_int_equal(t.stride[0], 1);
    assert_int_equal(t.stride[1], 96);
    assert_int_equal(dp_layout_end(&t), dp_layout_end(&l));
    uint64_t q[2] = {4, 512};
    assert_int_equal(dp_layout_contiguous(&l, DP_Q8_0, 2, q, &err), DP_OK);
    assert_int_equal(dp_layout_narrow(&l, 1, 16, 32, &s, &err), DP_EINVAL);   /* not at a block boundary */
    dp_err_clear(&err);
    assert_int_equal(dp_layout_narrow(&l, 1, 64, 64, &s, &err), DP_OK);
    assert_int_equal(s.offset, 2 * 34);
    assert_int_equal(dp_layout_transpose(&l, 0, 1, &t, &err), DP_EINVAL);
}

static void test_strided_device_view(void **state)
{
    (void)state;
    dp_device *dev = dp_test_device_open();
    dp_err err = {0};
    dp_gtensor *base = NULL, *view = NULL;
    uint64_t shape[2] = {5, 96};
    assert_int_equal(dp_gtensor_create(dev, DP_F32, 2, shape, &base, &err), DP_OK);
    float host[5 * 96];
    for (int i = 0; i < 5 * 96; i++) host[i] = (float)i;
    assert_int_equal(dp_gtensor_upload(base, 0, host, sizeof host, &err), DP_OK);
    uint64_t vshape[2] = {5, 32}, strides[2] = {96, 1};
    assert_int_equal(dp_gtensor_view_strided(base, 32 * 4, DP_F32, 2, vshape, strides, &view, &err), DP_OK);
    assert_false(dp_gtensor_is_contiguous(view));
    assert_true(dp_gtensor_is_contiguous(base));
    assert_int_equal(view->numel, 160);
    assert_int_equal(view->bytes, (4 * 96 + 31 + 1) * 4);   /* spans to its last element */
    float first;
    assert_int_equal(dp_gtensor_download(view, 0, &first, 4, &err), DP_OK);
    assert_true(first == 32.0f);
    dp_gtensor *too_far = NULL;
    assert_int_equal(dp_gtensor_view_strided(base, 80 * 4, DP_F32, 2, vshape, strides, &too_far, &err), DP_EINVAL);
    assert_null(too_far);
    dp_gtensor_release(view);
    dp_gtensor_release(base);
    dp_test_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contiguous),
        cmocka_unit_test(test_narrow_and_transpose),
        cmocka_unit_test(test_strided_device_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
