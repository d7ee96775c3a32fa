/*
** core/formats/safetensors_writer.c: see safetensors_writer.h.
** Layout (huggingface/safetensors): u64 little-endian header length N, N bytes of JSON
** {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...}, then the data; offsets are
** relative to the end of the header. We pad the header with spaces to a multiple of 8 so that
** every tensor of an aligned dtype stays aligned in a memory map.
*/
#include "core/formats/safetensors_writer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *st_dtype_name(dp_dtype t)
{
    switch (t) {
    case DP_F32: return "F32";
    case DP_F16: return "F16";
    case DP_BF16: return "BF16";
    case DP_I32: return "I32";
    case DP_I8: return "I8";
    case DP_U8: return "U8";
    case DP_I64: return "I64";
    case DP_F64: return "F64";
    default: return NULL;
    }
}

typedef struct strbuf {
    char  *p;
    size_t len, cap;
} strbuf;

static int sb_add(strbuf *b, const char *fmt, ...) DP_PRINTF(2, 3);
static int sb_add(strbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return -1;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return 0;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *q = realloc(b->p, cap);
        if (!q) return -1;
        b->p = q;
        b->cap = cap;
    }
}

static uint64_t tensor_bytes(const dp_st_out_tensor *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n * dp_dtype_get(t->dtype)->type_size;
}

static dp_status build_header(const char *path, const dp_st_out_tensor *ts, int count, const char *meta,
                              strbuf *h, dp_err *err)
{
    uint64_t off = 0;
    int bad = sb_add(h, "{");
    if (meta) bad |= sb_add(h, "\"__metadata__\":%s%s", meta, count ? "," : "");
    for (int i = 0; i < count && !bad; i++) {
        const dp_st_out_tensor *t = &ts[i];
        const char *dt = st_dtype_name(t->dtype);
        if (!dt || t->ndim < 0 || t->ndim > 4)
            return DP_FAIL(err, DP_EINVAL, "%s: tensor '%s': dtype %s or rank %d cannot be written", path,
                           t->name, dp_dtype_name(t->dtype), t->ndim);
        for (const char *c = t->name; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                return DP_FAIL(err, DP_EINVAL, "%s: tensor name '%s' needs JSON escaping", path, t->name);
        uint64_t n = tensor_bytes(t);
        bad |= sb_add(h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t->name, dt);
        for (int d = 0; d < t->ndim; d++) bad |= sb_add(h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        bad |= sb_add(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + n));
        off += n;
    }
    bad |= sb_add(h, "}");
    while (!bad && h->len % 8) bad |= sb_add(h, " ");
    return bad ? DP_FAIL(err, DP_ENOMEM, "%s: out of memory building the header", path) : DP_OK;
}

dp_status dp_st_write(const char *path, const dp_st_out_tensor *ts, int count, const char *meta,
                      dp_st_fill_fn fill, void *user, dp_err *err)
{
    strbuf h = {0};
    char tmp[4096];
    FILE *f = NULL;
    void *chunk = NULL;
    const size_t chunk_bytes = 8u << 20;
    dp_status st = build_header(path, ts, count, meta, &h, err);
    if (st != DP_OK) goto fail;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) {
        st = DP_FAIL(err, DP_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        goto fail;
    }
    if (!(chunk = malloc(chunk_bytes))) {
        st = DP_FAIL(err, DP_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    int bad = fwrite(len8, 1, 8, f) != 8 || fwrite(h.p, 1, h.len, f) != h.len;
    for (int i = 0; i < count && !bad; i++) {
        uint64_t n = tensor_bytes(&ts[i]);
        for (uint64_t off = 0; off < n && !bad; off += chunk_bytes) {
            size_t part = (size_t)(n - off < chunk_bytes ? n - off : chunk_bytes);
            if ((st = fill(user, i, off, chunk, part, err)) != DP_OK) goto fail;
            bad = fwrite(chunk, 1, part, f) != part;
        }
    }
    if (bad || fclose(f) != 0) {
        f = NULL;
        st = DP_FAIL(err, DP_EIO, "%s: write failed: %s", tmp, strerror(errno));
        goto fail;
    }
    f = NULL;
    if (rename(tmp, path) != 0) {
        st = DP_FAIL(err, DP_EIO, "%s: cannot rename from %s: %s", path, tmp, strerror(errno));
        goto fail;
    }
    free(chunk);
    free(h.p);
    return DP_OK;
fail:
    if (f) {
        fclose(f);
        remove(tmp);
    }
    free(chunk);
    free(h.p);
    return st;
}
