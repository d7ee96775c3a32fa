/*
** core/quantize.h: our quantiser, f32 rows -> ggml block formats (the inverse of core/quant.h).
** Every scale is chosen by searching candidates and keeping the one with the least squared error after a
** full round trip through the stored (f16 / 6-bit / int8) scales, as the K-quant formats intend: symmetric
** types (Q8_0, Q4_0, Q5_0, Q6_K) fit d for fixed codes by least squares, affine types (Q4_1, Q5_1, Q4_K,
** Q5_K) fit scale and min together. Results are deterministic and independent of the thread count.
** Accuracy (RMSE on Gaussian data) and the figures it is held to: docs/QUANTIZATION.md.
*/
#ifndef DP_CORE_QUANTIZE_H
#define DP_CORE_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

/* True for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K. */
bool dp_quantize_supported(dp_dtype t);

/* Quantises n elements of src (a row, or rows end to end; n a multiple of t's block) into dst
** (dp_dtype_bytes(t, n) bytes). Single-threaded. DP_EINVAL for an unsupported type or a bad n. */
dp_status dp_quantize_row(dp_dtype t, const float *src, void *dst, int64_t n, dp_err *err);

/* n_rows rows of row_len elements (row_len a multiple of t's block), split over n_threads threads
** (<= 0: one per online CPU, at most 64). dst receives the rows' blocks end to end. */
dp_status dp_quantize_rows(dp_dtype t, const float *src, void *dst, int64_t n_rows, int64_t row_len,
                           int n_threads, dp_err *err);

#endif
