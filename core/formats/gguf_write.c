/*
** core/formats/gguf_write.c: the GGUF writer (see gguf.h). It owns deep copies of the metadata
** and borrows tensor data. The layout is llama.cpp's (ggml/src/gguf.cpp gguf_write_to_buf):
** header, kv pairs, tensor infos, zeros to the alignment, then each tensor followed by zeros to
** the alignment, with offsets equal to the running padded sum. llama.cpp checks exactly that
** layout when it loads a file.
*/
#include "core/formats/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/json.h"   /* dp_utf8_valid */

typedef struct wkv {
    char         *key;
    dp_gguf_value value;   /* owns its strings, arrays and items */
} wkv;

typedef struct wtensor {
    char       *name;
    uint32_t    ggml_type, n_dims;
    uint64_t    ne[DP_GGUF_MAX_DIMS];
    const void *data;
    uint64_t    bytes;
} wtensor;

struct dp_gguf_writer {
    wkv     *kv;
    size_t   n_kv, cap_kv;
    wtensor *tensors;
    size_t   n_tensors, cap_tensors;
};

static void free_owned(dp_gguf_value *v)
{
    if (v->type == DP_GGUF_STRING) {
        free((char *)v->v.str.ptr);
    } else if (v->type == DP_GGUF_ARRAY) {
        dp_gguf_value *items = (dp_gguf_value *)v->v.arr.items;
        if (items)
            for (uint64_t i = 0; i < v->v.arr.n; i++) free_owned(&items[i]);
        free(items);
        free((void *)v->v.arr.data);
    }
    memset(v, 0, sizeof *v);
}

/* Deep copy; on failure dst holds what was copied so far (free_owned releases it). */
static bool copy_value(dp_gguf_value *dst, const dp_gguf_value *src, int depth)
{
    memset(dst, 0, sizeof *dst);
    dst->type = src->type;
    if (src->type == DP_GGUF_STRING) {
        char *s = malloc(src->v.str.len ? src->v.str.len : 1);
        if (!s) return false;
        if (src->v.str.len) memcpy(s, src->v.str.ptr, src->v.str.len);
        dst->v.str.ptr = s;
        dst->v.str.len = src->v.str.len;
        return true;
    }
    if (src->type != DP_GGUF_ARRAY) {
        dst->v = src->v;
        return true;
    }
    if (src->v.arr.type == DP_GGUF_ARRAY && depth >= DP_GGUF_MAX_ARRAY_DEPTH) return false;   /* as the reader */
    dst->v.arr.type = src->v.arr.type;
    uint64_t n = src->v.arr.n;
    uint32_t es = dp_gguf_type_size(src->v.arr.type);
    if (es) {
        void *d = malloc(n > 0 ? n * es : 1);
        if (!d) return false;
        if (n) memcpy(d, src->v.arr.data, n * es);
        dst->v.arr.data = d;
        dst->v.arr.n = n;
        return true;
    }
    dp_gguf_value *items = calloc(n ? n : 1, sizeof *items);
    if (!items) return false;
    dst->v.arr.items = items;
    for (uint64_t i = 0; i < n; i++) {
        dst->v.arr.n = i + 1;
        if (src->v.arr.items[i].type != src->v.arr.type || !copy_value(&items[i], &src->v.arr.items[i], depth + 1))
            return false;
    }
    dst->v.arr.n = n;
    return true;
}

dp_status dp_gguf_writer_create(dp_gguf_writer **out, dp_err *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? DP_OK : DP_FAIL(err, DP_ENOMEM, "gguf writer: out of host memory");
}

void dp_gguf_writer_destroy(dp_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free_owned(&w->kv[i].value);
    }
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->kv);
    free(w->tensors);
    free(w);
}

dp_status dp_gguf_writer_set(dp_gguf_writer *w, const char *key, const dp_gguf_value *v, dp_err *err)
{
    size_t klen = strlen(key);
    if (klen == 0 || klen > 65535 || !dp_utf8_valid(key, klen))
        return DP_FAIL(err, DP_EINVAL, "gguf writer: key \"%.64s\" is empty, too long or not valid UTF-8", key);
    if ((unsigned)v->type >= DP_GGUF_TYPE_COUNT)
        return DP_FAIL(err, DP_EINVAL, "gguf writer: key %s: invalid value type %d", key, (int)v->type);
    if (v->type == DP_GGUF_ARRAY && (unsigned)v->v.arr.type >= DP_GGUF_TYPE_COUNT)
        return DP_FAIL(err, DP_EINVAL, "gguf writer: key %s: invalid array element type", key);
    if (strcmp(key, "general.alignment") == 0 &&
        (v->type != DP_GGUF_UINT32 || v->v.u32 == 0 || (v->v.u32 & (v->v.u32 - 1)) != 0))
        return DP_FAIL(err, DP_EINVAL, "gguf writer: general.alignment must be a u32 power of two");
    dp_gguf_value copy;
    if (!copy_value(&copy, v, 0)) {
        free_owned(&copy);
        return DP_FAIL(err, DP_EINVAL, "gguf writer: key %s: out of memory, or arrays nested too deep or of mixed types",
                       key);
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free_owned(&w->kv[i].value);
            w->kv[i].value = copy;
            return DP_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t ncap = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *nk = realloc(w->kv, ncap * sizeof *nk);
        if (!nk) {
            free_owned(&copy);
            return DP_FAIL(err, DP_ENOMEM, "gguf writer: out of host memory");
        }
        w->kv = nk;
        w->cap_kv = ncap;
    }
    if (!(w->kv[w->n_kv].key = strdup(key))) {
        free_owned(&copy);
        return DP_FAIL(err, DP_ENOMEM, "gguf writer: out of host memory");
    }
    w->kv[w->n_kv++].value = copy;
    return DP_OK;
}

#define SETTER(fn, ctype, tag, member)                                                   \
    dp_status fn(dp_gguf_writer *w, const char *key, ctype x, dp_err *err)               \
    {                                                                                    \
        dp_gguf_value v;                                                                 \
        memset(&v, 0, sizeof v);                                                         \
        v.type = tag;                                                                    \
        v.v.member = x;                                                                  \
        return dp_gguf_writer_set(w, key, &v, err);                                      \
    }
SETTER(dp_gguf_writer_set_u32, uint32_t, DP_GGUF_UINT32, u32)
SETTER(dp_gguf_writer_set_i32, int32_t, DP_GGUF_INT32, i32)
SETTER(dp_gguf_writer_set_f32, float, DP_GGUF_FLOAT32, f32)
SETTER(dp_gguf_writer_set_bool, bool, DP_GGUF_BOOL, b)
#undef SETTER

dp_status dp_gguf_writer_set_str(dp_gguf_writer *w, const char *key, const char *s, dp_err *err)
{
    dp_gguf_value v = {.type = DP_GGUF_STRING, .v.str = {s, strlen(s)}};
    return dp_gguf_writer_set(w, key, &v, err);
}

dp_status dp_gguf_writer_set_array(dp_gguf_writer *w, const char *key, dp_gguf_type elem, const void *data, uint64_t n,
                                   dp_err *err)
{
    if (!dp_gguf_type_size(elem))
        return DP_FAIL(err, DP_EINVAL, "gguf writer: key %s: set_array takes scalar elements only", key);
    dp_gguf_value v = {.type = DP_GGUF_ARRAY};
    v.v.arr.type = elem;
    v.v.arr.n = n;
    v.v.arr.data = data;
    return dp_gguf_writer_set(w, key, &v, err);
}

dp_status dp_gguf_writer_set_str_array(dp_gguf_writer *w, const char *key, const char *const *s, uint64_t n,
                                       dp_err *err)
{
    dp_gguf_value *items = calloc(n ? n : 1, sizeof *items);
    if (!items) return DP_FAIL(err, DP_ENOMEM, "gguf writer: out of host memory");
    for (uint64_t i = 0; i < n; i++) {
        items[i].type = DP_GGUF_STRING;
        items[i].v.str.ptr = s[i];
        items[i].v.str.len = strlen(s[i]);
    }
    dp_gguf_value v = {.type = DP_GGUF_ARRAY};
    v.v.arr.type = DP_GGUF_STRING;
    v.v.arr.n = n;
    v.v.arr.items = items;
    dp_status st = dp_gguf_writer_set(w, key, &v, err);
    free(items);
    return st;
}

dp_status dp_gguf_writer_add_tensor(dp_gguf_writer *w, const char *name, uint32_t ggml_type, uint32_t n_dims,
                                    const uint64_t *ne, const void *data, uint64_t bytes, dp_err *err)
{
    size_t nl = strlen(name);
    if (nl == 0 || nl > DP_GGUF_MAX_NAME || !dp_utf8_valid(name, nl))
        return DP_FAIL(err, DP_EINVAL, "gguf writer: tensor name \"%.80s\" is empty, longer than %d bytes or not UTF-8",
                       name, DP_GGUF_MAX_NAME);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return DP_FAIL(err, DP_EINVAL, "gguf writer: tensor %s added twice", name);
    const dp_ggml_type_info *ti = dp_ggml_type_get(ggml_type);
    if (!ti || !ti->type_size) return DP_FAIL(err, DP_EINVAL, "gguf writer: tensor %s: invalid ggml type %u", name, ggml_type);
    if (n_dims < 1 || n_dims > DP_GGUF_MAX_DIMS)
        return DP_FAIL(err, DP_EINVAL, "gguf writer: tensor %s: %u dimensions", name, n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] > INT64_MAX || __builtin_mul_overflow(numel, ne[d], &numel))
            return DP_FAIL(err, DP_EINVAL, "gguf writer: tensor %s: shape overflows", name);
    if (ne[0] % ti->block != 0 || numel / ti->block * ti->type_size != bytes)
        return DP_FAIL(err, DP_EINVAL, "gguf writer: tensor %s: %llu bytes do not match its %s shape", name,
                       (unsigned long long)bytes, ti->name);
    if (w->n_tensors == w->cap_tensors) {
        size_t ncap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        wtensor *nt = realloc(w->tensors, ncap * sizeof *nt);
        if (!nt) return DP_FAIL(err, DP_ENOMEM, "gguf writer: out of host memory");
        w->tensors = nt;
        w->cap_tensors = ncap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return DP_FAIL(err, DP_ENOMEM, "gguf writer: out of host memory");
    t->ggml_type = ggml_type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < n_dims; d++) t->ne[d] = ne[d];
    t->data = data;
    t->bytes = bytes;
    w->n_tensors++;
    return DP_OK;
}

/* ---- serialisation ---- */

static void put(FILE *f, const void *p, size_t n) { if (n) fwrite(p, 1, n, f); }
static void put_u32(FILE *f, uint32_t x) { put(f, &x, 4); }
static void put_u64(FILE *f, uint64_t x) { put(f, &x, 8); }
static void put_str(FILE *f, const char *s, uint64_t len) { put_u64(f, len); put(f, s, (size_t)len); }

static void put_zeros(FILE *f, uint64_t n)
{
    static const uint8_t zeros[64];
    while (n > 0) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        put(f, zeros, k);
        n -= k;
    }
}

static void put_value(FILE *f, const dp_gguf_value *v)
{
    switch (v->type) {
    case DP_GGUF_STRING: put_str(f, v->v.str.ptr, v->v.str.len); break;
    case DP_GGUF_ARRAY:
        put_u32(f, (uint32_t)v->v.arr.type);
        put_u64(f, v->v.arr.n);
        if (v->v.arr.items)
            for (uint64_t i = 0; i < v->v.arr.n; i++) put_value(f, &v->v.arr.items[i]);
        else
            put(f, v->v.arr.data, (size_t)(v->v.arr.n * dp_gguf_type_size(v->v.arr.type)));
        break;
    case DP_GGUF_BOOL: {
        uint8_t b = v->v.b ? 1 : 0;
        put(f, &b, 1);
        break;
    }
    default: put(f, &v->v, dp_gguf_type_size(v->type)); break;
    }
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static dp_status write_stream(dp_gguf_writer *w, FILE *f, const char *path, dp_gguf_fill_fn fill, void *user,
                              dp_err *err)
{
    uint32_t align = DP_GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, "general.alignment") == 0) align = w->kv[i].value.v.u32;
    put_u32(f, DP_GGUF_MAGIC);
    put_u32(f, 3);
    put_u64(f, w->n_tensors);
    put_u64(f, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(f, w->kv[i].key, strlen(w->kv[i].key));
        put_u32(f, (uint32_t)w->kv[i].value.type);
        put_value(f, &w->kv[i].value);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        put_str(f, t->name, strlen(t->name));
        put_u32(f, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(f, t->ne[d]);
        put_u32(f, t->ggml_type);
        put_u64(f, offset);
        offset += pad_to(t->bytes, align);
    }
    long pos = ftell(f);
    if (pos < 0) return DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
    put_zeros(f, pad_to((uint64_t)pos, align) - (uint64_t)pos);
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        if (t->data) {
            put(f, t->data, (size_t)t->bytes);
        } else {
            if (!fill) return DP_FAIL(err, DP_EINVAL, "%s: tensor %s has no data", path, t->name);
            void *buf = malloc(t->bytes ? (size_t)t->bytes : 1);
            if (!buf) return DP_FAIL(err, DP_ENOMEM, "%s: tensor %s: out of host memory", path, t->name);
            dp_status st = fill(user, i, buf, t->bytes, err);
            if (st == DP_OK) put(f, buf, (size_t)t->bytes);
            free(buf);
            if (st != DP_OK) return st;
        }
        put_zeros(f, pad_to(t->bytes, align) - t->bytes);
    }
    if (ferror(f)) return DP_FAIL(err, DP_EIO, "%s: write error", path);
    return DP_OK;
}

dp_status dp_gguf_writer_write_file_fill(dp_gguf_writer *w, const char *path, dp_gguf_fill_fn fill, void *user,
                                         dp_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f) return DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
    dp_status st = write_stream(w, f, path, fill, user, err);
    if (fclose(f) != 0 && st == DP_OK) st = DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
    return st;
}

dp_status dp_gguf_writer_write_file(dp_gguf_writer *w, const char *path, dp_err *err)
{
    return dp_gguf_writer_write_file_fill(w, path, NULL, NULL, err);
}

dp_status dp_gguf_writer_write_mem(dp_gguf_writer *w, void **buf, size_t *size, dp_err *err)
{
    char *b = NULL;
    size_t n = 0;
    *buf = NULL;
    *size = 0;
    FILE *f = open_memstream(&b, &n);
    if (!f) return DP_FAIL(err, DP_ENOMEM, "gguf writer: out of host memory");
    dp_status st = write_stream(w, f, "<memory>", NULL, NULL, err);
    fclose(f);
    if (st != DP_OK) {
        free(b);
        return st;
    }
    *buf = b;
    *size = n;
    return DP_OK;
}
