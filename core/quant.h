/*
** core/quant.h: ggml's block-quantised layouts and their CPU reference dequantisation.
** The formulas are ggml's (ggml/src/ggml-quants.c dequantize_row_*), written out again from
** docs MODEL_REFERENCE section 4; GPU kernels are tested against these functions.
** Blocks are packed little-endian structs without padding (the static asserts check the sizes).
** Several block sizes are odd or not multiples of 4, so the functions read blocks byte-wise and
** accept any src alignment.
** Not here: element sizes and names (core/dtype.h); quantisers (later).
*/
#ifndef DP_CORE_QUANT_H
#define DP_CORE_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define DP_QK 32      /* elements per block of the 32-element formats */
#define DP_QK_K 256   /* elements per K-quant super-block */

/* f16 fields are IEEE binary16 bit patterns (dp_f16_to_f32). */
typedef struct dp_block_q4_0 { uint16_t d; uint8_t qs[16]; } dp_block_q4_0;
typedef struct dp_block_q4_1 { uint16_t d, m; uint8_t qs[16]; } dp_block_q4_1;
typedef struct dp_block_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } dp_block_q5_0;
typedef struct dp_block_q5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } dp_block_q5_1;
typedef struct dp_block_q8_0 { uint16_t d; int8_t qs[32]; } dp_block_q8_0;
typedef struct dp_block_q4_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } dp_block_q4_k;
typedef struct dp_block_q5_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } dp_block_q5_k;
typedef struct dp_block_q6_k { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } dp_block_q6_k;
typedef struct dp_block_mxfp4 { uint8_t e; uint8_t qs[16]; } dp_block_mxfp4;

_Static_assert(sizeof(dp_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(dp_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(dp_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(dp_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(dp_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(dp_block_q4_k) == 144, "q4_k block");
_Static_assert(sizeof(dp_block_q5_k) == 176, "q5_k block");
_Static_assert(sizeof(dp_block_q6_k) == 210, "q6_k block");
_Static_assert(sizeof(dp_block_mxfp4) == 17, "mxfp4 block");

/* True for the types dp_quant_dequantize_row handles: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
** Q5_1, Q4_K, Q5_K, Q6_K, MXFP4. */
bool dp_quant_can_dequantize(dp_dtype t);

/* Dequantises n elements stored at src (n consecutive blocks' worth: a row, or several rows laid
** end to end) into dst. Returns DP_EINVAL for a type without dequantisation or an n that is
** not a multiple of the block size (dst is then untouched). */
dp_status dp_quant_dequantize_row(dp_dtype t, const void *src, float *dst, int64_t n);

/* Helpers shared with tests and kernels' reference code. */
void  dp_quant_q4k_scale_min(const uint8_t scales[12], int j, uint8_t *sc, uint8_t *m);  /* get_scale_min_k4 */
float dp_quant_e8m0_half(uint8_t e);   /* 2^(e-128), as ggml_e8m0_to_fp32_half */

#endif
