/*
** core/formats/gguf.h: GGUF (versions 2 and 3), the llama.cpp model file. A reader over a
** memory-mapped file (metadata values and tensor data point into the mapping) and a writer that
** lays files out as llama.cpp's gguf writer does (tensors in order, each padded to the alignment),
** so that reading a llama.cpp file and writing it back gives the same bytes.
** Layout (MODEL_REFERENCE section 3): magic "GGUF", u32 version, u64 tensor count, u64 kv count,
** kv pairs, tensor infos, zero padding to general.alignment (default 32), tensor data.
** Not here: the ggml type table (gguf_types.h), arch keys -> config (model_file.h).
*/
#ifndef DP_FORMATS_GGUF_H
#define DP_FORMATS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/formats/gguf_types.h"
#include "core/status.h"

#define DP_GGUF_MAGIC 0x46554747u          /* "GGUF" read as a little-endian u32 */
#define DP_GGUF_DEFAULT_ALIGNMENT 32u
#define DP_GGUF_MAX_DIMS 4
#define DP_GGUF_MAX_NAME 63                /* ggml's GGML_MAX_NAME (64) counts the NUL */
#define DP_GGUF_MAX_ARRAY_DEPTH 4          /* nested arrays deeper than this are refused */

typedef struct dp_gguf_str {   /* not NUL-terminated: GGUF strings carry their length */
    const char *ptr;
    uint64_t    len;
} dp_gguf_str;

typedef struct dp_gguf_value dp_gguf_value;
struct dp_gguf_value {
    dp_gguf_type type;
    union {
        uint8_t u8;   int8_t i8;   uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        uint64_t u64; int64_t i64; float f32;    double f64;  bool b;
        dp_gguf_str str;
        struct {
            dp_gguf_type         type;   /* element type */
            uint64_t             n;
            const void          *data;   /* scalar elements: n packed little-endian values (any alignment) */
            const dp_gguf_value *items;  /* STRING and ARRAY elements: n values */
        } arr;
    } v;
};

typedef struct dp_gguf_tensor {
    const char *name;                  /* owned by the dp_gguf */
    uint32_t    n_dims;                /* 1..4 (0 in a file reads as 1) */
    uint64_t    ne[DP_GGUF_MAX_DIMS];  /* ggml order: ne[0] is contiguous; unused dims are 1 */
    uint32_t    ggml_type;
    dp_dtype    dtype;                 /* DP_DTYPE_COUNT for ggml types we do not compute with */
    uint64_t    offset;                /* from the start of the data section */
    uint64_t    bytes;
    const void *data;
} dp_gguf_tensor;

/* ---- reader ---- */
typedef struct dp_gguf dp_gguf;

dp_status dp_gguf_open(const char *path, dp_gguf **out, dp_err *err);
/* Parses a file image held by the caller (borrowed: it must outlive the result). name labels messages. */
dp_status dp_gguf_parse(const char *name, const void *data, size_t size, dp_gguf **out, dp_err *err);
void      dp_gguf_close(dp_gguf *g);   /* NULL-safe */

const char *dp_gguf_path(const dp_gguf *g);
uint32_t    dp_gguf_version(const dp_gguf *g);
uint32_t    dp_gguf_alignment(const dp_gguf *g);
uint64_t    dp_gguf_data_offset(const dp_gguf *g);   /* absolute offset of the data section */

size_t               dp_gguf_kv_count(const dp_gguf *g);
const char          *dp_gguf_kv_key(const dp_gguf *g, size_t i);    /* file order */
const dp_gguf_value *dp_gguf_kv_value(const dp_gguf *g, size_t i);
const dp_gguf_value *dp_gguf_find(const dp_gguf *g, const char *key);   /* NULL if absent */

/* Typed lookups: false when the key is absent or its value does not convert (any integer type
** to an integer in range, any number to double, STRING to a NUL-terminated copy in buf). */
bool dp_gguf_get_int(const dp_gguf *g, const char *key, int64_t *out);
bool dp_gguf_get_double(const dp_gguf *g, const char *key, double *out);
bool dp_gguf_get_bool(const dp_gguf *g, const char *key, bool *out);
bool dp_gguf_get_string(const dp_gguf *g, const char *key, char *buf, size_t bufsize);

size_t                dp_gguf_tensor_count(const dp_gguf *g);
const dp_gguf_tensor *dp_gguf_tensor_at(const dp_gguf *g, size_t i);              /* file order */
const dp_gguf_tensor *dp_gguf_find_tensor(const dp_gguf *g, const char *name);    /* NULL if absent */

/* Value helpers. Scalars and array elements convert like the typed lookups above. */
bool dp_gguf_value_int(const dp_gguf_value *v, int64_t *out);
bool dp_gguf_value_double(const dp_gguf_value *v, double *out);
bool dp_gguf_array_int(const dp_gguf_value *arr, uint64_t i, int64_t *out);
bool dp_gguf_array_double(const dp_gguf_value *arr, uint64_t i, double *out);
bool dp_gguf_array_str(const dp_gguf_value *arr, uint64_t i, dp_gguf_str *out);
/* The element at index i of a scalar array, as a value. */
bool dp_gguf_array_elem(const dp_gguf_value *arr, uint64_t i, dp_gguf_value *out);

/* ---- writer ---- */
typedef struct dp_gguf_writer dp_gguf_writer;

dp_status dp_gguf_writer_create(dp_gguf_writer **out, dp_err *err);
void      dp_gguf_writer_destroy(dp_gguf_writer *w);   /* NULL-safe */

/* Sets key to a deep copy of v (replacing an earlier value of the same key, keeping its place). */
dp_status dp_gguf_writer_set(dp_gguf_writer *w, const char *key, const dp_gguf_value *v, dp_err *err);
dp_status dp_gguf_writer_set_u32(dp_gguf_writer *w, const char *key, uint32_t x, dp_err *err);
dp_status dp_gguf_writer_set_i32(dp_gguf_writer *w, const char *key, int32_t x, dp_err *err);
dp_status dp_gguf_writer_set_f32(dp_gguf_writer *w, const char *key, float x, dp_err *err);
dp_status dp_gguf_writer_set_bool(dp_gguf_writer *w, const char *key, bool x, dp_err *err);
dp_status dp_gguf_writer_set_str(dp_gguf_writer *w, const char *key, const char *s, dp_err *err);
/* Array of n scalars of type elem, packed little-endian at data. */
dp_status dp_gguf_writer_set_array(dp_gguf_writer *w, const char *key, dp_gguf_type elem, const void *data,
                                   uint64_t n, dp_err *err);
dp_status dp_gguf_writer_set_str_array(dp_gguf_writer *w, const char *key, const char *const *s, uint64_t n,
                                       dp_err *err);

/* Adds a tensor (ggml ne order). data is borrowed until the file is written; bytes must equal
** the size ne and the type give. Tensors are written in the order added. */
dp_status dp_gguf_writer_add_tensor(dp_gguf_writer *w, const char *name, uint32_t ggml_type, uint32_t n_dims,
                                    const uint64_t *ne, const void *data, uint64_t bytes, dp_err *err);

/* Alignment comes from a general.alignment (u32) value if one was set, else 32. */
dp_status dp_gguf_writer_write_file(dp_gguf_writer *w, const char *path, dp_err *err);
dp_status dp_gguf_writer_write_mem(dp_gguf_writer *w, void **buf, size_t *size, dp_err *err);  /* free(*buf) */

/* Streaming: tensors added with data == NULL are produced at write time, one at a time in file
** order, by fill(user, index, dst, bytes) (index = the order added), so that a converter holds one
** tensor in memory rather than the whole model. Tensors with data are copied as usual. */
typedef dp_status (*dp_gguf_fill_fn)(void *user, size_t index, void *dst, uint64_t bytes, dp_err *err);
dp_status dp_gguf_writer_write_file_fill(dp_gguf_writer *w, const char *path, dp_gguf_fill_fn fill, void *user,
                                         dp_err *err);

#endif
