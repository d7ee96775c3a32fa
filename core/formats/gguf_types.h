/*
** core/formats/gguf_types.h: the numbers GGUF writes to disk: metadata value types and every
** ggml tensor type id (also those we cannot compute with, so that `doppler inspect` names them).
*/
#ifndef DP_FORMATS_GGUF_TYPES_H
#define DP_FORMATS_GGUF_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"

typedef enum dp_gguf_type {   /* on disk: never renumber */
    DP_GGUF_UINT8 = 0,
    DP_GGUF_INT8 = 1,
    DP_GGUF_UINT16 = 2,
    DP_GGUF_INT16 = 3,
    DP_GGUF_UINT32 = 4,
    DP_GGUF_INT32 = 5,
    DP_GGUF_FLOAT32 = 6,
    DP_GGUF_BOOL = 7,
    DP_GGUF_STRING = 8,
    DP_GGUF_ARRAY = 9,
    DP_GGUF_UINT64 = 10,
    DP_GGUF_INT64 = 11,
    DP_GGUF_FLOAT64 = 12,
    DP_GGUF_TYPE_COUNT
} dp_gguf_type;

const char *dp_gguf_type_name(dp_gguf_type t);   /* "u32", "str", "arr", ... ; "?" if out of range */
uint32_t    dp_gguf_type_size(dp_gguf_type t);   /* bytes of a scalar; 0 for STRING, ARRAY, invalid */

typedef struct dp_ggml_type_info {
    const char *name;       /* ggml_type_name: "q4_K", "iq2_xxs", ... */
    uint32_t    block;      /* elements per block */
    uint32_t    type_size;  /* bytes per block; 0 for ids ggml retired */
    dp_dtype    dtype;      /* ours, or DP_DTYPE_COUNT when we have none */
} dp_ggml_type_info;

#define DP_GGML_TYPE_COUNT 40u   /* ids 0..39 (39 = MXFP4) */

const dp_ggml_type_info *dp_ggml_type_get(uint32_t id);   /* NULL for ids beyond the table */
const char *dp_ggml_type_name(uint32_t id);              /* "type 57" style for unknown ids is the caller's */
bool        dp_ggml_type_from_dtype(dp_dtype t, uint32_t *id);

#endif
