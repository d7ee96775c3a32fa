/*
** gpu/upload.h: weights from host memory (usually a model file's mapping) onto the device, in
** the dtype the plan wants. Conversion happens on the CPU in chunks, so a 600 MB embedding needs
** no 600 MB temporary; a tensor already in the wanted type is uploaded straight from the mapping.
** Not here: file formats (core/formats/), repacked quantised layouts (later, per hint).
*/
#ifndef DP_GPU_UPLOAD_H
#define DP_GPU_UPLOAD_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "gpu/device.h"
#include "gpu/tensor.h"

/* A new device tensor of dst_type holding src (src_type, row-major `shape`). Plain float types
** convert among f32/f16/bf16; a quantised src_type is dequantised (core/quant.h) row by row,
** a row being the innermost dimension. `what` names the tensor in messages. */
dp_status dp_upload_convert(dp_device *dev, const char *what, const void *src, dp_dtype src_type,
                            uint32_t ndim, const uint64_t *shape, dp_dtype dst_type,
                            dp_gtensor **out, dp_err *err);

/* The same for a src whose rows are stored src_row >= shape[ndim - 1] elements long (a GGUF that pads rows to
** whole blocks, doppler convert --pad-k): each row is read src_row wide and only its first shape[ndim - 1]
** elements are kept, so the device tensor is the logical `shape`. dst_type must be a float type unless
** src_row == shape[ndim - 1] (blocks cannot be cut inside a block). */
dp_status dp_upload_convert_rows(dp_device *dev, const char *what, const void *src, dp_dtype src_type,
                                 uint32_t ndim, const uint64_t *shape, uint64_t src_row, dp_dtype dst_type,
                                 dp_gtensor **out, dp_err *err);

#endif
