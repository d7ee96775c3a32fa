/*
** core/formats/gguf_types.c: see gguf_types.h. Block sizes and byte counts follow ggml's
** type_traits (ggml/src/ggml.c) and the block structs of ggml-common.h.
*/
#include "core/formats/gguf_types.h"

#include <stddef.h>

static const char *const value_type_names[DP_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
};
static const uint32_t value_type_sizes[DP_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *dp_gguf_type_name(dp_gguf_type t)
{
    return (unsigned)t < DP_GGUF_TYPE_COUNT ? value_type_names[t] : "?";
}

uint32_t dp_gguf_type_size(dp_gguf_type t)
{
    return (unsigned)t < DP_GGUF_TYPE_COUNT ? value_type_sizes[t] : 0;
}

#define NONE DP_DTYPE_COUNT
static const dp_ggml_type_info ggml_types[DP_GGML_TYPE_COUNT] = {
    [0] = {"f32", 1, 4, DP_F32},          [1] = {"f16", 1, 2, DP_F16},
    [2] = {"q4_0", 32, 18, DP_Q4_0},      [3] = {"q4_1", 32, 20, DP_Q4_1},
    [4] = {"q4_2 (retired)", 32, 0, NONE}, [5] = {"q4_3 (retired)", 32, 0, NONE},
    [6] = {"q5_0", 32, 22, DP_Q5_0},      [7] = {"q5_1", 32, 24, DP_Q5_1},
    [8] = {"q8_0", 32, 34, DP_Q8_0},      [9] = {"q8_1", 32, 36, DP_Q8_1},
    [10] = {"q2_K", 256, 84, DP_Q2_K},    [11] = {"q3_K", 256, 110, DP_Q3_K},
    [12] = {"q4_K", 256, 144, DP_Q4_K},   [13] = {"q5_K", 256, 176, DP_Q5_K},
    [14] = {"q6_K", 256, 210, DP_Q6_K},   [15] = {"q8_K", 256, 292, DP_Q8_K},
    [16] = {"iq2_xxs", 256, 66, NONE},    [17] = {"iq2_xs", 256, 74, NONE},
    [18] = {"iq3_xxs", 256, 98, NONE},    [19] = {"iq1_s", 256, 50, NONE},
    [20] = {"iq4_nl", 32, 18, NONE},      [21] = {"iq3_s", 256, 110, NONE},
    [22] = {"iq2_s", 256, 82, NONE},      [23] = {"iq4_xs", 256, 136, NONE},
    [24] = {"i8", 1, 1, DP_I8},           [25] = {"i16", 1, 2, DP_I16},
    [26] = {"i32", 1, 4, DP_I32},         [27] = {"i64", 1, 8, DP_I64},
    [28] = {"f64", 1, 8, DP_F64},         [29] = {"iq1_m", 256, 56, NONE},
    [30] = {"bf16", 1, 2, DP_BF16},
    [31] = {"q4_0_4_4 (retired)", 32, 0, NONE}, [32] = {"q4_0_4_8 (retired)", 32, 0, NONE},
    [33] = {"q4_0_8_8 (retired)", 32, 0, NONE},
    [34] = {"tq1_0", 256, 54, NONE},      [35] = {"tq2_0", 256, 66, NONE},
    [36] = {"iq4_nl_4_4 (retired)", 32, 0, NONE}, [37] = {"iq4_nl_4_8 (retired)", 32, 0, NONE},
    [38] = {"iq4_nl_8_8 (retired)", 32, 0, NONE},
    [39] = {"mxfp4", 32, 17, DP_MXFP4},
};

const dp_ggml_type_info *dp_ggml_type_get(uint32_t id)
{
    return id < DP_GGML_TYPE_COUNT ? &ggml_types[id] : NULL;
}

const char *dp_ggml_type_name(uint32_t id)
{
    return id < DP_GGML_TYPE_COUNT ? ggml_types[id].name : "?";
}

bool dp_ggml_type_from_dtype(dp_dtype t, uint32_t *id)
{
    if (t == NONE) return false;
    for (uint32_t i = 0; i < DP_GGML_TYPE_COUNT; i++) {
        if (ggml_types[i].dtype == t && ggml_types[i].type_size != 0) {
            *id = i;
            return true;
        }
    }
    return false;
}
