/*
** core/quant_layout.h: storage layouts of a quantised weight W[N, K] on the device, and the repacking between them.
** A GGUF file stores W row by row (row_wise); the GPU kernels read two other orders too (docs/QUANTIZATION.md,
** "Weight layouts"): column_wise puts block (n, b) at b * N + n, so that kernels reading neighbouring rows at the
** same K position read neighbouring blocks; flat splits every block into its fields ("segments": codes, high
** bits, scales) and stores each segment of all blocks as one plane, so that code bytes and scale headers are read
** with aligned 8- and 16-byte loads. Every layout holds exactly the bytes of the row_wise form, permuted (same
** size, no padding), so a device tensor of the usual byte size holds any of them.
** Also here: the on-disk cache of repacked tensors next to the model file (best effort: it never fails a load).
** Pure functions over byte buffers; the GPU side is shaders/include/dp_quant.glsl (dq_block).
*/
#ifndef DP_CORE_QUANT_LAYOUT_H
#define DP_CORE_QUANT_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

typedef enum dp_qlayout {
    DP_QLAYOUT_ROW = 0,   /* "row_wise": GGUF order, block (n, b) at n * (K / QK) + b */
    DP_QLAYOUT_COL,       /* "column_wise": block (n, b) at b * N + n */
    DP_QLAYOUT_FLAT,      /* "flat": one plane per block segment, blocks in row_wise order within a plane */
    DP_QLAYOUT_COUNT
} dp_qlayout;

#define DP_QLAYOUT_MAX_SEGS 4

/* One segment of a block: bytes [off, off + size) of the ggml block. */
typedef struct dp_qlayout_seg {
    uint32_t off, size;
} dp_qlayout_seg;

const char *dp_qlayout_name(dp_qlayout l);                        /* "row_wise" ...; "?" out of range */
bool        dp_qlayout_from_name(const char *name, dp_qlayout *out);

/* Whether dtype t has layouts besides row_wise (the types with GPU kernels: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
** Q5_K, Q6_K). */
bool dp_qlayout_supports(dp_dtype t);

/* The segments of t's block in flat plane order (largest first, so every plane starts 16-byte aligned when the
** tensor does); returns their count, 0 for an unsupported type. */
uint32_t dp_qlayout_segments(dp_dtype t, dp_qlayout_seg segs[DP_QLAYOUT_MAX_SEGS]);

/* dst = W (rows x cols of type t, row_wise in src) in layout l. src and dst do not overlap; both hold
** rows * cols / QK blocks. Errors: unsupported type or layout, cols not whole blocks. */
dp_status dp_qlayout_pack(dp_dtype t, uint64_t rows, uint64_t cols, dp_qlayout l, const void *src, void *dst,
                          dp_err *err);
/* The inverse: dst = the row_wise form of src (layout l). */
dp_status dp_qlayout_unpack(dp_dtype t, uint64_t rows, uint64_t cols, dp_qlayout l, const void *src, void *dst,
                            dp_err *err);

/* ---- on-disk cache: MODEL.doppler-cache/<key hash>-<layout>.bin next to the model file ------------------- */
/* A cache entry is keyed by the model file's size and mtime, the tensor name, its dtype and shape, and the
** layout; its header repeats the key, so a stale or colliding file is ignored. Writes are atomic (a temporary
** file renamed into place). dir overrides the directory (NULL: model_path + ".doppler-cache"). */

/* Fills dst (bytes long) from the cache; false on any miss (absent, stale, short, unreadable). */
bool dp_qlayout_cache_load(const char *model_path, const char *dir, const char *tensor, dp_dtype t, uint64_t rows,
                           uint64_t cols, dp_qlayout l, void *dst, size_t bytes);
/* Stores src; false when it could not (directory not writable, disk full...), which callers ignore. */
bool dp_qlayout_cache_store(const char *model_path, const char *dir, const char *tensor, dp_dtype t, uint64_t rows,
                            uint64_t cols, dp_qlayout l, const void *src, size_t bytes);

#endif
