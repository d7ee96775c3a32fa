/*
** gpu/tensor.h: device tensors. A tensor is a dtype, a shape (up to 4 dims, outermost first), a
** byte size and a device address into a pool slice. A view shares its parent's memory (byte offset +
** its own shape/dtype) and keeps the root alive (reference count; single-threaded).
** Upload/download go through a host-visible staging buffer in chunks (16 MiB), so moving a 1 GiB
** tensor needs no 1 GiB staging buffer.
*/
#ifndef DP_GPU_TENSOR_H
#define DP_GPU_TENSOR_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "gpu/device.h"
#include "gpu/pool.h"

#define DP_GTENSOR_MAX_DIMS 4
#define DP_STAGING_CHUNK (16ull << 20)

typedef struct dp_gtensor {
    dp_device  *dev;
    dp_dtype    dtype;
    uint32_t    ndim;
    uint64_t    shape[DP_GTENSOR_MAX_DIMS];   /* outermost first; unused dims are 1 */
    uint64_t    stride[DP_GTENSOR_MAX_DIMS];  /* elements between neighbours per dim (core/tensor.h) */
    uint64_t    numel;
    uint64_t    bytes;        /* bytes the tensor spans: numel x size when contiguous, more when strided */
    dp_buffer   buf;          /* buf.addr: device address of element 0; buf.size == bytes */
    struct dp_gtensor *root;  /* the tensor owning the slice (itself when not a view) */
    uint32_t    refs;         /* root only: the tensor itself + its views */
} dp_gtensor;

/* A new tensor from the device pool (contents undefined). ndim 1..4; every dim >= 1. */
dp_status dp_gtensor_create(dp_device *dev, dp_dtype dtype, uint32_t ndim, const uint64_t *shape,
                            dp_gtensor **out, dp_err *err);
/* The same in the given kind of memory. DP_MEM_HOST tensors are mapped: uploads and downloads are
** plain memory copies (no submit), which is what per-token inputs (ids, positions) and the sampled
** id want; kernels read and write them through their device address like any tensor. */
dp_status dp_gtensor_create_in(dp_device *dev, dp_mem kind, dp_dtype dtype, uint32_t ndim, const uint64_t *shape,
                               dp_gtensor **out, dp_err *err);
/* A view of `parent` at byte_offset with its own dtype and shape; must lie inside the parent. */
dp_status dp_gtensor_view(dp_gtensor *parent, uint64_t byte_offset, dp_dtype dtype, uint32_t ndim,
                          const uint64_t *shape, dp_gtensor **out, dp_err *err);
/* A strided view: element (i0, i1, ...) at byte_offset + sum(i_k * strides[k]) elements. It spans
** the bytes up to its last element (so barriers cover every byte a kernel may read), which must lie
** inside the parent. Contiguous strides make it the same as dp_gtensor_view. */
dp_status dp_gtensor_view_strided(dp_gtensor *parent, uint64_t byte_offset, dp_dtype dtype, uint32_t ndim,
                                  const uint64_t *shape, const uint64_t *strides, dp_gtensor **out, dp_err *err);
bool      dp_gtensor_is_contiguous(const dp_gtensor *t);
/* Drops this handle; the memory goes back to the pool when the root and all its views are released. */
void      dp_gtensor_release(dp_gtensor *t);   /* NULL-safe */

/* Host <-> device, synchronous. offset + bytes must lie inside the tensor. */
dp_status dp_gtensor_upload(dp_gtensor *t, uint64_t offset, const void *src, uint64_t bytes, dp_err *err);
dp_status dp_gtensor_download(const dp_gtensor *t, uint64_t offset, void *dst, uint64_t bytes, dp_err *err);

/* Raw regions (also used by the tensor functions). */
dp_status dp_buffer_upload(dp_device *dev, const dp_buffer *dst, uint64_t offset, const void *src,
                           uint64_t bytes, dp_err *err);
dp_status dp_buffer_download(dp_device *dev, const dp_buffer *src, uint64_t offset, void *dst,
                             uint64_t bytes, dp_err *err);

/* "f32[2,3]" */
void      dp_gtensor_describe(const dp_gtensor *t, char *out, size_t cap);

#endif
