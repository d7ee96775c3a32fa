/*
** core/tensor.h: the layout of a tensor in memory — dtype, shape and strides — with no memory of its
** own. Device tensors (gpu/tensor.h) and host views use it; views (a slice of a fused projection, one
** row of a batch, a transposed matrix) are new layouts over the same bytes.
** Strides count elements, outermost dimension first, as in PyTorch. A block-quantised dtype is
** addressed in whole blocks: its innermost dimension must be contiguous and a multiple of the block.
** Not here: device memory (gpu/pool.h), element types (core/dtype.h).
*/
#ifndef DP_CORE_TENSOR_H
#define DP_CORE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define DP_TENSOR_MAX_DIMS 4

typedef struct dp_layout {
    dp_dtype dtype;
    uint32_t ndim;
    uint64_t shape[DP_TENSOR_MAX_DIMS];    /* outermost first; dims past ndim are 1 */
    uint64_t stride[DP_TENSOR_MAX_DIMS];   /* elements between neighbours along each dim */
    uint64_t offset;                       /* bytes from the start of the memory to element 0 */
} dp_layout;

/* A row-major contiguous layout. Fails (DP_EINVAL) on 0 or more than 4 dims, a 0 dim, overflow, or an
** innermost dim that is not a whole number of blocks. */
dp_status dp_layout_contiguous(dp_layout *out, dp_dtype dtype, uint32_t ndim, const uint64_t *shape, dp_err *err);

uint64_t dp_layout_numel(const dp_layout *l);
bool     dp_layout_is_contiguous(const dp_layout *l);

/* Bytes from the memory's start to one past the last byte an element of the layout occupies
** (offset + the extent): what a kernel reading the view may touch, for bounds and hazard checks. */
uint64_t dp_layout_end(const dp_layout *l);

/* The sub-range [start, start + len) of dimension dim, same strides (a slice; no copy). */
dp_status dp_layout_narrow(const dp_layout *in, uint32_t dim, uint64_t start, uint64_t len, dp_layout *out,
                           dp_err *err);

/* Dimensions a and b exchanged (a transposed view). Not for block dtypes. */
dp_status dp_layout_transpose(const dp_layout *in, uint32_t a, uint32_t b, dp_layout *out, dp_err *err);

/* Byte offset of the element at index idx[0..ndim). */
uint64_t dp_layout_byte_offset(const dp_layout *l, const uint64_t *idx);

#endif
