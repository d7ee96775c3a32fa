/*
** tests/unit/test_dtype.c: the dtype table and the f16/bf16 conversions.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"

static void test_block_sizes_match_ggml(void **state)
{
    (void)state;
    /* Byte sizes of one block as ggml defines them (ggml-common.h static_asserts). */
    assert_int_equal(dp_dtype_get(DP_Q8_0)->type_size, 34);
    assert_int_equal(dp_dtype_get(DP_Q4_0)->type_size, 18);
    assert_int_equal(dp_dtype_get(DP_Q5_0)->type_size, 22);
    assert_int_equal(dp_dtype_get(DP_Q4_K)->type_size, 144);
    assert_int_equal(dp_dtype_get(DP_Q5_K)->type_size, 176);
    assert_int_equal(dp_dtype_get(DP_Q6_K)->type_size, 210);
    assert_int_equal(dp_dtype_get(DP_MXFP4)->type_size, 17);
    bool ok;
    assert_int_equal(dp_dtype_bytes(DP_Q4_K, 512, &ok), 288);
    assert_true(ok);
    assert_int_equal(dp_dtype_bytes(DP_Q4_K, 100, &ok), 0);
    assert_false(ok);
    assert_null(dp_dtype_get((dp_dtype)99));
}

static void test_names_round_trip(void **state)
{
    (void)state;
    for (int t = 0; t < DP_DTYPE_COUNT; t++) {
        dp_dtype back;
        assert_true(dp_dtype_from_name(dp_dtype_name((dp_dtype)t), &back));
        assert_int_equal(back, t);
    }
    dp_dtype d;
    assert_true(dp_dtype_from_name("Q4_K", &d));
    assert_int_equal(d, DP_Q4_K);
    assert_false(dp_dtype_from_name("q9_z", &d));
}

static void test_f16_exact_values(void **state)
{
    (void)state;
    assert_int_equal(dp_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(dp_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(dp_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(dp_f32_to_f16(1e6f), 0x7c00);          /* overflow -> inf */
    assert_int_equal(dp_f32_to_f16(5.960464477539063e-08f), 0x0001); /* smallest subnormal */
    assert_true(dp_f16_to_f32(0x0001) == 5.960464477539063e-08f);
    assert_true(isnan(dp_f16_to_f32(dp_f32_to_f16(NAN))));
    /* 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10: ties to even -> 1.0 */
    assert_int_equal(dp_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(dp_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    /* every finite half round-trips */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;
        assert_int_equal(dp_f32_to_f16(dp_f16_to_f32((uint16_t)h)), h);
    }
}

static void test_bf16(void **state)
{
    (void)state;
    assert_int_equal(dp_f32_to_bf16(1.0f), 0x3f80);
    assert_true(dp_bf16_to_f32(0x3f80) == 1.0f);
    assert_int_equal(dp_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);   /* tie -> even */
    assert_int_equal(dp_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    assert_true(isnan(dp_bf16_to_f32(dp_f32_to_bf16(NAN))));
}

static void test_err_keeps_first(void **state)
{
    (void)state;
    dp_err err = {0};
    assert_int_equal(DP_FAIL(&err, DP_EIO, "first %d", 1), DP_EIO);
    assert_int_equal(DP_FAIL(&err, DP_EINVAL, "second"), DP_EINVAL);
    assert_int_equal(err.status, DP_EIO);
    assert_string_equal(err.msg, "first 1");
    dp_err_clear(&err);
    assert_int_equal(err.status, DP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_sizes_match_ggml),
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_f16_exact_values),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_err_keeps_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
