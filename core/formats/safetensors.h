/*
** core/formats/safetensors.h: Hugging Face safetensors files, single or sharded
** (model.safetensors.index.json). Files are memory-mapped and every tensor's data pointer
** points into the mapping, so a tensor uploaded as stored is never copied on the host.
** Validation is strict: header length within the file, dtype known, byte count equal to
** shape x element size, offsets inside the data section and not overlapping, names valid UTF-8.
** Not here: which tensors a model needs (core/formats/model_file.h).
*/
#ifndef DP_FORMATS_SAFETENSORS_H
#define DP_FORMATS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define DP_ST_MAX_DIMS 8
#define DP_ST_MAX_HEADER 100000000u   /* the reference implementation's limit on the JSON header */

typedef struct dp_st_tensor {
    const char *name;                   /* owned by the dp_safetensors */
    dp_dtype    dtype;                  /* F32, F16, BF16, F64, I8, U8, I16, I32 or I64 */
    int         ndim;                   /* 0 = scalar */
    int64_t     shape[DP_ST_MAX_DIMS];  /* row-major: shape[ndim-1] is contiguous */
    uint64_t    numel;
    uint64_t    bytes;                  /* numel x element size */
    const void *data;                   /* into the mapping of its shard */
    uint64_t    file_offset;            /* absolute byte offset of data in its shard */
    int         shard;                  /* index for dp_safetensors_shard_path */
} dp_st_tensor;

typedef struct dp_safetensors dp_safetensors;

/* path is a .safetensors file, a model.safetensors.index.json, or a directory holding either
** (the index wins; else model.safetensors; else the only *.safetensors file). */
dp_status dp_safetensors_open(const char *path, dp_safetensors **out, dp_err *err);
/* Parses one file image held by the caller (kept borrowed: it must outlive the result).
** name labels messages. For fuzzing and tests. */
dp_status dp_safetensors_parse(const char *name, const void *data, size_t size, dp_safetensors **out,
                               dp_err *err);
void dp_safetensors_close(dp_safetensors *st);   /* NULL-safe */

size_t              dp_safetensors_count(const dp_safetensors *st);
const dp_st_tensor *dp_safetensors_at(const dp_safetensors *st, size_t i);            /* sorted by name */
const dp_st_tensor *dp_safetensors_find(const dp_safetensors *st, const char *name);  /* NULL if absent */
size_t              dp_safetensors_shard_count(const dp_safetensors *st);
const char         *dp_safetensors_shard_path(const dp_safetensors *st, int shard);

/* The string-to-string "__metadata__" object (of the first shard that has one). */
size_t      dp_safetensors_metadata_count(const dp_safetensors *st);
void        dp_safetensors_metadata_at(const dp_safetensors *st, size_t i, const char **key, const char **value);
const char *dp_safetensors_metadata_get(const dp_safetensors *st, const char *key);   /* NULL if absent */

/* The safetensors dtype string ("F32", "BF16", ...) of one of our dtypes, NULL if it has none. */
const char *dp_safetensors_dtype_name(dp_dtype t);

#endif
