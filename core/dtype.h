/*
** core/dtype.h: element types, including ggml's block-quantised types.
** A block type stores BLOCK elements in TYPE_SIZE bytes; plain types have BLOCK = 1.
** The numbers of this enum are ours (never written to disk); file formats map their own ids.
** Not here: (de)quantisation arithmetic (core/quant.h), GGUF type ids (core/formats/gguf.h).
*/
#ifndef DP_CORE_DTYPE_H
#define DP_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum dp_dtype {
    DP_F32 = 0,
    DP_F16,
    DP_BF16,
    DP_F64,
    DP_I8,
    DP_U8,
    DP_I16,
    DP_I32,
    DP_I64,
    DP_Q4_0,   /* ggml block types: 32 elements per block unless noted */
    DP_Q4_1,
    DP_Q5_0,
    DP_Q5_1,
    DP_Q8_0,
    DP_Q8_1,
    DP_Q2_K,   /* K-quants: 256 elements per super-block */
    DP_Q3_K,
    DP_Q4_K,
    DP_Q5_K,
    DP_Q6_K,
    DP_Q8_K,
    DP_MXFP4,  /* 32 elements: e8m0 scale + 16 bytes of e2m1 pairs */
    DP_DTYPE_COUNT
} dp_dtype;

typedef struct dp_dtype_info {
    const char *name;       /* "f32", "q4_k", ... (lower case, as in ggml_type_name) */
    uint32_t    block;      /* elements per block (1 for plain types) */
    uint32_t    type_size;  /* bytes per block */
    bool        is_float;   /* plain floating-point type */
    bool        is_quant;   /* block-quantised */
} dp_dtype_info;

const dp_dtype_info *dp_dtype_get(dp_dtype t);          /* NULL for an out-of-range value */
const char *dp_dtype_name(dp_dtype t);                  /* "?" for an out-of-range value */
bool        dp_dtype_from_name(const char *name, dp_dtype *out); /* case-insensitive */

/* Bytes for n elements; n must be a multiple of the block size (returns 0 and *ok=false otherwise). */
size_t dp_dtype_bytes(dp_dtype t, uint64_t n, bool *ok);

/* IEEE half and bfloat16 conversions (round to nearest even; NaN kept NaN). */
float    dp_f16_to_f32(uint16_t h);
uint16_t dp_f32_to_f16(float f);
float    dp_bf16_to_f32(uint16_t b);
uint16_t dp_f32_to_bf16(float f);

#endif
