/*
** core/formats/gguf_read.c: the GGUF reader (see gguf.h). Every length and count read from the
** file is checked against the bytes that remain before anything is allocated, so that a corrupt
** or hostile file gives DP_EFORMAT naming the file, and never a crash or a huge allocation.
** Strings and scalar arrays stay in the mapping; only keys, tensor names and the item lists of
** string/nested arrays are allocated.
*/
#include "core/formats/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/json.h"   /* dp_utf8_valid */
#include "core/formats/mapped_file.h"

typedef struct gguf_kv {
    char         *key;
    dp_gguf_value value;
} gguf_kv;

struct dp_gguf {
    dp_mapped_file *file;        /* NULL for a borrowed image */
    char           *path;
    const uint8_t  *data;
    size_t          size;
    uint32_t        version, alignment;
    uint64_t        data_offset;
    gguf_kv        *kv;
    size_t          n_kv;
    dp_gguf_tensor *tensors;
    size_t          n_tensors;
};

typedef struct reader {
    const uint8_t *p;
    size_t         size, pos;
    const char    *path;
    const char    *what;   /* where we are, for messages: "the header", "key general.name", ... */
    dp_err        *err;
} reader;

static dp_status truncated(reader *r)
{
    return DP_FAIL(r->err, DP_EFORMAT, "%s: file ends inside %s (byte %zu of %zu; truncated?)", r->path, r->what,
                   r->pos, r->size);
}

static bool has(const reader *r, uint64_t n) { return n <= r->size - r->pos; }

static dp_status rd_bytes(reader *r, void *dst, size_t n)
{
    if (!has(r, n)) {
        memset(dst, 0, n);           /* callers never read it, but the optimiser cannot see that */
        return truncated(r);
    }
    memcpy(dst, r->p + r->pos, n);   /* little-endian host assumed (x86-64, aarch64) */
    r->pos += n;
    return DP_OK;
}

static dp_status rd_u32(reader *r, uint32_t *x) { return rd_bytes(r, x, 4); }
static dp_status rd_u64(reader *r, uint64_t *x) { return rd_bytes(r, x, 8); }

static dp_status rd_str(reader *r, dp_gguf_str *s)
{
    uint64_t len = 0;
    s->ptr = NULL;
    s->len = 0;
    dp_status st = rd_u64(r, &len);
    if (st != DP_OK) return st;
    if (!has(r, len)) return truncated(r);
    s->ptr = (const char *)r->p + r->pos;
    s->len = len;
    r->pos += len;
    return DP_OK;
}

static void free_value(dp_gguf_value *v)
{
    if (v->type != DP_GGUF_ARRAY || !v->v.arr.items) return;
    dp_gguf_value *items = (dp_gguf_value *)v->v.arr.items;
    if (v->v.arr.type == DP_GGUF_ARRAY)
        for (uint64_t i = 0; i < v->v.arr.n; i++) free_value(&items[i]);
    free(items);
    v->v.arr.items = NULL;
}

static dp_status rd_value(reader *r, dp_gguf_type type, dp_gguf_value *v, int depth);

static dp_status rd_array(reader *r, dp_gguf_value *v, int depth)
{
    uint32_t et;
    uint64_t n;
    dp_status st;
    if ((st = rd_u32(r, &et)) != DP_OK || (st = rd_u64(r, &n)) != DP_OK) return st;
    if (et >= DP_GGUF_TYPE_COUNT)
        return DP_FAIL(r->err, DP_EFORMAT, "%s: %s: unknown array element type %u", r->path, r->what, et);
    if (et == DP_GGUF_ARRAY && depth >= DP_GGUF_MAX_ARRAY_DEPTH)
        return DP_FAIL(r->err, DP_EFORMAT, "%s: %s: arrays nested deeper than %d", r->path, r->what,
                       DP_GGUF_MAX_ARRAY_DEPTH);
    v->v.arr.type = (dp_gguf_type)et;
    v->v.arr.n = n;
    uint32_t es = dp_gguf_type_size((dp_gguf_type)et);
    if (es) {   /* scalars: stay in the file */
        if (n > (r->size - r->pos) / es) return truncated(r);
        v->v.arr.data = r->p + r->pos;
        if (et == DP_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (r->p[r->pos + i] > 1)
                    return DP_FAIL(r->err, DP_EFORMAT, "%s: %s: bool element %llu is %u (must be 0 or 1)", r->path,
                                   r->what, (unsigned long long)i, r->p[r->pos + i]);
        r->pos += n * es;
        return DP_OK;
    }
    /* Strings take at least 8 bytes each, nested arrays 12: bound n before allocating. */
    uint64_t min = et == DP_GGUF_STRING ? 8 : 12;
    if (n > (r->size - r->pos) / min) return truncated(r);
    dp_gguf_value *items = calloc(n ? n : 1, sizeof *items);
    if (!items) return DP_FAIL(r->err, DP_ENOMEM, "%s: out of host memory", r->path);
    v->v.arr.items = items;
    for (uint64_t i = 0; i < n; i++) {
        items[i].type = (dp_gguf_type)et;
        dp_status st2 = rd_value(r, (dp_gguf_type)et, &items[i], depth + 1);
        if (st2 != DP_OK) {
            v->v.arr.n = i + 1;   /* so that free_value releases what was built */
            return st2;
        }
    }
    return DP_OK;
}

static dp_status rd_value(reader *r, dp_gguf_type type, dp_gguf_value *v, int depth)
{
    v->type = type;
    switch (type) {
    case DP_GGUF_STRING: return rd_str(r, &v->v.str);
    case DP_GGUF_ARRAY: return rd_array(r, v, depth);
    case DP_GGUF_BOOL: {
        uint8_t b;
        dp_status st = rd_bytes(r, &b, 1);
        if (st != DP_OK) return st;
        if (b > 1) return DP_FAIL(r->err, DP_EFORMAT, "%s: %s: bool value %u (must be 0 or 1)", r->path, r->what, b);
        v->v.b = b;
        return DP_OK;
    }
    default: {
        uint32_t sz = dp_gguf_type_size(type);
        if (!sz) return DP_FAIL(r->err, DP_EFORMAT, "%s: %s: unknown value type %u", r->path, r->what, (unsigned)type);
        return rd_bytes(r, &v->v, sz);   /* the union's members all start at its first byte */
    }
    }
}

static dp_status read_kvs(dp_gguf *g, reader *r, uint64_t n_kv)
{
    char what[160];
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    if (!g->kv) return DP_FAIL(r->err, DP_ENOMEM, "%s: out of host memory", r->path);
    for (uint64_t i = 0; i < n_kv; i++) {
        dp_gguf_str key;
        uint32_t type;
        dp_status st;
        snprintf(what, sizeof what, "metadata pair %llu", (unsigned long long)i);
        r->what = what;
        if ((st = rd_str(r, &key)) != DP_OK) return st;
        if (key.len == 0 || key.len > 65535 || !dp_utf8_valid(key.ptr, key.len))
            return DP_FAIL(r->err, DP_EFORMAT, "%s: metadata pair %llu: key is empty, too long or not valid UTF-8",
                           r->path, (unsigned long long)i);
        gguf_kv *kv = &g->kv[g->n_kv++];
        if (!(kv->key = strndup(key.ptr, key.len))) return DP_FAIL(r->err, DP_ENOMEM, "%s: out of host memory", r->path);
        snprintf(what, sizeof what, "the value of %.120s", kv->key);
        if ((st = rd_u32(r, &type)) != DP_OK) return st;
        if (type >= DP_GGUF_TYPE_COUNT)
            return DP_FAIL(r->err, DP_EFORMAT, "%s: key %s: unknown value type %u", r->path, kv->key, type);
        if ((st = rd_value(r, (dp_gguf_type)type, &kv->value, 0)) != DP_OK) return st;
        for (size_t j = 0; j + 1 < g->n_kv; j++)
            if (strcmp(g->kv[j].key, kv->key) == 0)
                return DP_FAIL(r->err, DP_EFORMAT, "%s: key %s appears twice", r->path, kv->key);
    }
    return DP_OK;
}

static dp_status read_tensor_info(dp_gguf *g, reader *r, dp_gguf_tensor *t, uint64_t index)
{
    char what[160];
    dp_gguf_str name;
    dp_status st;
    snprintf(what, sizeof what, "tensor info %llu", (unsigned long long)index);
    r->what = what;
    if ((st = rd_str(r, &name)) != DP_OK) return st;
    if (name.len == 0 || name.len > DP_GGUF_MAX_NAME || !dp_utf8_valid(name.ptr, name.len))
        return DP_FAIL(r->err, DP_EFORMAT, "%s: tensor %llu: name is empty, longer than %d bytes or not valid UTF-8",
                       r->path, (unsigned long long)index, DP_GGUF_MAX_NAME);
    if (!(t->name = strndup(name.ptr, name.len))) return DP_FAIL(r->err, DP_ENOMEM, "%s: out of host memory", r->path);
    snprintf(what, sizeof what, "the info of tensor %s", t->name);
    if ((st = rd_u32(r, &t->n_dims)) != DP_OK) return st;
    if (t->n_dims > DP_GGUF_MAX_DIMS)
        return DP_FAIL(r->err, DP_EFORMAT, "%s: tensor %s: %u dimensions (at most %d)", r->path, t->name, t->n_dims,
                       DP_GGUF_MAX_DIMS);
    for (int d = 0; d < DP_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if ((st = rd_u64(r, &t->ne[d])) != DP_OK) return st;
    if (t->n_dims == 0) t->n_dims = 1;
    uint64_t offset;
    if ((st = rd_u32(r, &t->ggml_type)) != DP_OK || (st = rd_u64(r, &offset)) != DP_OK) return st;
    t->offset = offset;
    const dp_ggml_type_info *ti = dp_ggml_type_get(t->ggml_type);
    if (!ti) return DP_FAIL(r->err, DP_EFORMAT, "%s: tensor %s: unknown ggml type id %u", r->path, t->name, t->ggml_type);
    if (!ti->type_size)
        return DP_FAIL(r->err, DP_EFORMAT, "%s: tensor %s: ggml type %s (id %u) is no longer supported by ggml", r->path,
                       t->name, ti->name, t->ggml_type);
    t->dtype = ti->dtype;
    /* ggml keeps ne as int64: each must fit, and so must the element count. */
    uint64_t numel = 1;
    for (int d = 0; d < DP_GGUF_MAX_DIMS; d++)
        if (t->ne[d] > INT64_MAX || __builtin_mul_overflow(numel, t->ne[d], &numel) || numel > INT64_MAX)
            return DP_FAIL(r->err, DP_EFORMAT, "%s: tensor %s: shape overflows", r->path, t->name);
    if (t->ne[0] % ti->block != 0)
        return DP_FAIL(r->err, DP_EFORMAT, "%s: tensor %s: ne[0] = %llu is not a multiple of the %s block size %u",
                       r->path, t->name, (unsigned long long)t->ne[0], ti->name, ti->block);
    if (__builtin_mul_overflow(numel / ti->block, (uint64_t)ti->type_size, &t->bytes))
        return DP_FAIL(r->err, DP_EFORMAT, "%s: tensor %s: byte count overflows", r->path, t->name);
    (void)g;
    return DP_OK;
}

static int cmp_offset(const void *a, const void *b)
{
    const dp_gguf_tensor *x = *(const dp_gguf_tensor *const *)a, *y = *(const dp_gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

/* Offsets aligned, inside the file, not overlapping; names unique. */
static dp_status check_layout(dp_gguf *g, dp_err *err)
{
    dp_status st = DP_OK;
    /* With tensors, the data section must start inside the file (found by fuzz_gguf: a huge alignment put
    ** it past the end, and zero-byte tensors then pointed outside the mapping). */
    if (g->n_tensors > 0 && g->data_offset > g->size)
        return DP_FAIL(err, DP_EFORMAT, "%s: the tensor data section starts at byte %llu, past the end of the file "
                       "(%zu bytes; alignment %u; truncated?)", g->path, (unsigned long long)g->data_offset, g->size,
                       g->alignment);
    uint64_t avail = g->size - (g->n_tensors > 0 ? g->data_offset : 0);
    for (size_t i = 0; i < g->n_tensors; i++) {
        dp_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: offset %llu is not a multiple of the alignment %u", g->path,
                           t->name, (unsigned long long)t->offset, g->alignment);
        if (t->offset > avail || t->bytes > avail - t->offset)
            return DP_FAIL(err, DP_EFORMAT,
                           "%s: tensor %s: data [%llu, +%llu) runs past the end of the file (data section %llu bytes; "
                           "truncated?)", g->path, t->name, (unsigned long long)t->offset,
                           (unsigned long long)t->bytes, (unsigned long long)avail);
        t->data = g->data + g->data_offset + t->offset;
    }
    if (g->n_tensors < 2) return DP_OK;
    dp_gguf_tensor **s = malloc(g->n_tensors * sizeof *s);
    if (!s) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", g->path);
    for (size_t i = 0; i < g->n_tensors; i++) s[i] = &g->tensors[i];
    qsort(s, g->n_tensors, sizeof *s, cmp_offset);
    for (size_t i = 1; i < g->n_tensors && st == DP_OK; i++)
        if (s[i]->offset < s[i - 1]->offset + s[i - 1]->bytes)
            st = DP_FAIL(err, DP_EFORMAT, "%s: tensors %s and %s overlap", g->path, s[i - 1]->name, s[i]->name);
    free(s);
    if (st != DP_OK) return st;
    /* Duplicate names: n is small (hundreds to a few thousand); a sort by name would also do. */
    for (size_t i = 0; i < g->n_tensors; i++)
        for (size_t j = i + 1; j < g->n_tensors; j++)
            if (strcmp(g->tensors[i].name, g->tensors[j].name) == 0)
                return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s appears twice", g->path, g->tensors[i].name);
    return DP_OK;
}

static dp_status parse(dp_gguf *g, dp_err *err)
{
    reader r = {g->data, g->size, 0, g->path, "the header", err};
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    dp_status st;
    if (g->size < 24)
        return DP_FAIL(err, DP_EFORMAT, "%s: %zu bytes, too short for a GGUF header (truncated?)", g->path, g->size);
    rd_u32(&r, &magic);
    if (magic != DP_GGUF_MAGIC) {
        if (magic == 0x47475546u)
            return DP_FAIL(err, DP_EFORMAT, "%s: big-endian GGUF files are not supported", g->path);
        return DP_FAIL(err, DP_EFORMAT, "%s: not a GGUF file (magic bytes %02x %02x %02x %02x, expected \"GGUF\")",
                       g->path, g->data[0], g->data[1], g->data[2], g->data[3]);
    }
    rd_u32(&r, &g->version);
    if (g->version != 2 && g->version != 3)
        return DP_FAIL(err, DP_EFORMAT, "%s: GGUF version %u is not supported (2 and 3 are)", g->path, g->version);
    rd_u64(&r, &n_tensors);
    rd_u64(&r, &n_kv);
    /* A kv pair takes at least 13 bytes, a tensor info 24. */
    if (n_kv > (g->size - r.pos) / 13 || n_tensors > (g->size - r.pos) / 24)
        return DP_FAIL(err, DP_EFORMAT, "%s: header claims %llu metadata pairs and %llu tensors, more than the file holds",
                       g->path, (unsigned long long)n_kv, (unsigned long long)n_tensors);
    if ((st = read_kvs(g, &r, n_kv)) != DP_OK) return st;
    g->alignment = DP_GGUF_DEFAULT_ALIGNMENT;
    const dp_gguf_value *al = dp_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != DP_GGUF_UINT32 || al->v.u32 == 0 || (al->v.u32 & (al->v.u32 - 1)) != 0)
            return DP_FAIL(err, DP_EFORMAT, "%s: general.alignment must be a u32 power of two", g->path);
        /* A power of two, and at most 1 MiB: files use 32 (llama.cpp's default) to 4096; a larger one only
        ** pads (the fuzzer's 1 GiB alignment made a rewrite of a 370-byte file allocate 1 GiB). */
        if (al->v.u32 > (1u << 20))
            return DP_FAIL(err, DP_EFORMAT, "%s: general.alignment %u is larger than the 1 MiB doppler supports",
                           g->path, al->v.u32);
        g->alignment = al->v.u32;
    }
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", g->path);
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors++;
        if ((st = read_tensor_info(g, &r, &g->tensors[i], i)) != DP_OK) return st;
    }
    g->data_offset = (r.pos + g->alignment - 1) / g->alignment * g->alignment;
    return check_layout(g, err);
}

static dp_status finish_open(dp_gguf *g, dp_gguf **out, dp_err *err)
{
    dp_status st = parse(g, err);
    if (st != DP_OK) {
        dp_gguf_close(g);
        return st;
    }
    *out = g;
    return DP_OK;
}

dp_status dp_gguf_parse(const char *name, const void *data, size_t size, dp_gguf **out, dp_err *err)
{
    *out = NULL;
    dp_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(name))) {
        free(g);
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    }
    g->data = data;
    g->size = size;
    return finish_open(g, out, err);
}

dp_status dp_gguf_open(const char *path, dp_gguf **out, dp_err *err)
{
    *out = NULL;
    dp_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    }
    dp_status st = dp_mapped_file_open(path, &g->file, err);
    if (st != DP_OK) {
        dp_gguf_close(g);
        return st;
    }
    g->data = g->file->data;
    g->size = g->file->size;
    return finish_open(g, out, err);
}

void dp_gguf_close(dp_gguf *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free_value(&g->kv[i].value);
    }
    for (size_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    dp_mapped_file_close(g->file);
    free(g->path);
    free(g);
}

const char *dp_gguf_path(const dp_gguf *g) { return g->path; }
uint32_t dp_gguf_version(const dp_gguf *g) { return g->version; }
uint32_t dp_gguf_alignment(const dp_gguf *g) { return g->alignment; }
uint64_t dp_gguf_data_offset(const dp_gguf *g) { return g->data_offset; }
size_t dp_gguf_kv_count(const dp_gguf *g) { return g->n_kv; }
const char *dp_gguf_kv_key(const dp_gguf *g, size_t i) { return i < g->n_kv ? g->kv[i].key : NULL; }
const dp_gguf_value *dp_gguf_kv_value(const dp_gguf *g, size_t i) { return i < g->n_kv ? &g->kv[i].value : NULL; }
size_t dp_gguf_tensor_count(const dp_gguf *g) { return g->n_tensors; }
const dp_gguf_tensor *dp_gguf_tensor_at(const dp_gguf *g, size_t i) { return i < g->n_tensors ? &g->tensors[i] : NULL; }

const dp_gguf_value *dp_gguf_find(const dp_gguf *g, const char *key)
{
    for (size_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i].value;
    return NULL;
}

const dp_gguf_tensor *dp_gguf_find_tensor(const dp_gguf *g, const char *name)
{
    for (size_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

bool dp_gguf_value_int(const dp_gguf_value *v, int64_t *out)
{
    switch (v->type) {
    case DP_GGUF_UINT8: *out = v->v.u8; return true;
    case DP_GGUF_INT8: *out = v->v.i8; return true;
    case DP_GGUF_UINT16: *out = v->v.u16; return true;
    case DP_GGUF_INT16: *out = v->v.i16; return true;
    case DP_GGUF_UINT32: *out = v->v.u32; return true;
    case DP_GGUF_INT32: *out = v->v.i32; return true;
    case DP_GGUF_INT64: *out = v->v.i64; return true;
    case DP_GGUF_UINT64:
        if (v->v.u64 > INT64_MAX) return false;
        *out = (int64_t)v->v.u64;
        return true;
    case DP_GGUF_BOOL: *out = v->v.b; return true;
    default: return false;
    }
}

bool dp_gguf_value_double(const dp_gguf_value *v, double *out)
{
    int64_t i;
    if (v->type == DP_GGUF_FLOAT32) { *out = v->v.f32; return true; }
    if (v->type == DP_GGUF_FLOAT64) { *out = v->v.f64; return true; }
    if (v->type == DP_GGUF_BOOL || !dp_gguf_value_int(v, &i)) return false;
    *out = (double)i;
    return true;
}

bool dp_gguf_array_elem(const dp_gguf_value *arr, uint64_t i, dp_gguf_value *out)
{
    if (arr->type != DP_GGUF_ARRAY || i >= arr->v.arr.n) return false;
    if (arr->v.arr.items) {
        *out = arr->v.arr.items[i];
        return true;
    }
    uint32_t es = dp_gguf_type_size(arr->v.arr.type);
    memset(out, 0, sizeof *out);
    out->type = arr->v.arr.type;
    memcpy(&out->v, (const uint8_t *)arr->v.arr.data + i * es, es);
    return true;
}

bool dp_gguf_array_int(const dp_gguf_value *arr, uint64_t i, int64_t *out)
{
    dp_gguf_value e;
    return dp_gguf_array_elem(arr, i, &e) && dp_gguf_value_int(&e, out);
}

bool dp_gguf_array_double(const dp_gguf_value *arr, uint64_t i, double *out)
{
    dp_gguf_value e;
    return dp_gguf_array_elem(arr, i, &e) && dp_gguf_value_double(&e, out);
}

bool dp_gguf_array_str(const dp_gguf_value *arr, uint64_t i, dp_gguf_str *out)
{
    dp_gguf_value e;
    if (!dp_gguf_array_elem(arr, i, &e) || e.type != DP_GGUF_STRING) return false;
    *out = e.v.str;
    return true;
}

bool dp_gguf_get_int(const dp_gguf *g, const char *key, int64_t *out)
{
    const dp_gguf_value *v = dp_gguf_find(g, key);
    return v && dp_gguf_value_int(v, out);
}

bool dp_gguf_get_double(const dp_gguf *g, const char *key, double *out)
{
    const dp_gguf_value *v = dp_gguf_find(g, key);
    return v && dp_gguf_value_double(v, out);
}

bool dp_gguf_get_bool(const dp_gguf *g, const char *key, bool *out)
{
    const dp_gguf_value *v = dp_gguf_find(g, key);
    if (!v || v->type != DP_GGUF_BOOL) return false;
    *out = v->v.b;
    return true;
}

bool dp_gguf_get_string(const dp_gguf *g, const char *key, char *buf, size_t bufsize)
{
    const dp_gguf_value *v = dp_gguf_find(g, key);
    if (!v || v->type != DP_GGUF_STRING || bufsize == 0) return false;
    size_t n = v->v.str.len < bufsize - 1 ? (size_t)v->v.str.len : bufsize - 1;
    memcpy(buf, v->v.str.ptr, n);
    buf[n] = 0;
    return true;
}
