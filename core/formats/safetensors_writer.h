/*
** core/formats/safetensors_writer.h: writing a .safetensors file tensor by tensor.
** Used by `doppler synth` (seeded random weights at a real model's shapes) and by tests that
** need model files. The header is written first, so every tensor's dtype and shape is declared
** up front; data then streams through a fill callback, in order, without holding the model in memory.
** Not here: reading (safetensors.h).
*/
#ifndef DP_FORMATS_SAFETENSORS_WRITER_H
#define DP_FORMATS_SAFETENSORS_WRITER_H

#include <stdint.h>
#include <stdio.h>

#include "core/dtype.h"
#include "core/status.h"

typedef struct dp_st_out_tensor {
    const char *name;
    dp_dtype    dtype;        /* F32, F16, BF16, I32, I8, U8 */
    int         ndim;
    int64_t     shape[4];
} dp_st_out_tensor;

/* Fills `bytes` bytes of tensor `index` starting at byte `offset` of that tensor. */
typedef dp_status (*dp_st_fill_fn)(void *user, int index, uint64_t offset, void *dst, size_t bytes, dp_err *err);

/* Writes path atomically (path.tmp then rename). metadata_json may be NULL or a JSON object text
** of string values for "__metadata__". */
dp_status dp_st_write(const char *path, const dp_st_out_tensor *tensors, int count,
                      const char *metadata_json, dp_st_fill_fn fill, void *user, dp_err *err);

#endif
