/*
** core/formats/safetensors.c: see safetensors.h. Layout: u64 header length N, N bytes of JSON,
** then the data section; "data_offsets" are [begin, end) relative to the data section.
** Sharded checkpoints: the index's weight_map names each tensor's shard; every listed tensor
** must be in its shard and every shard tensor listed, so a stale index is caught at load.
*/
#include "core/formats/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json.h>

#include "core/formats/json.h"
#include "core/formats/mapped_file.h"

typedef struct st_meta { char *key, *value; } st_meta;

struct dp_safetensors {
    dp_mapped_file **files;    /* one per shard; NULL entries for a borrowed image */
    char           **paths;    /* shard paths (names) */
    int              n_shards;
    dp_st_tensor    *tensors;
    size_t           n_tensors, cap_tensors;
    st_meta         *meta;
    size_t           n_meta;
};

static const struct { const char *name; dp_dtype dtype; } st_dtypes[] = {
    {"F32", DP_F32}, {"F16", DP_F16}, {"BF16", DP_BF16}, {"F64", DP_F64}, {"I8", DP_I8},
    {"U8", DP_U8},   {"I16", DP_I16}, {"I32", DP_I32},   {"I64", DP_I64},
};
/* Valid in safetensors, but with no dp_dtype: named so that the error says "unsupported", not "unknown". */
static const char *const st_unsupported[] = {"BOOL", "U16", "U32", "U64", "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                             "F4", "F6_E2M3", "F6_E3M2", "C64"};

const char *dp_safetensors_dtype_name(dp_dtype t)
{
    for (size_t i = 0; i < DP_ARRAY_LEN(st_dtypes); i++)
        if (st_dtypes[i].dtype == t) return st_dtypes[i].name;
    return NULL;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const dp_st_tensor *)a)->name, ((const dp_st_tensor *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const dp_st_tensor *x = *(const dp_st_tensor *const *)a, *y = *(const dp_st_tensor *const *)b;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static dp_status push_tensor(dp_safetensors *st, const char *path, dp_st_tensor **out, dp_err *err)
{
    if (st->n_tensors == st->cap_tensors) {
        size_t ncap = st->cap_tensors ? st->cap_tensors * 2 : 64;
        dp_st_tensor *nt = realloc(st->tensors, ncap * sizeof *nt);
        if (!nt) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
        st->tensors = nt;
        st->cap_tensors = ncap;
    }
    *out = &st->tensors[st->n_tensors++];
    memset(*out, 0, sizeof **out);
    return DP_OK;
}

static dp_status read_metadata(dp_safetensors *st, const char *path, struct json_object *md, dp_err *err)
{
    if (!json_object_is_type(md, json_type_object))
        return DP_FAIL(err, DP_EFORMAT, "%s: \"__metadata__\" is not an object", path);
    if (st->meta) return DP_OK;   /* shards repeat it; the first one speaks */
    size_t n = (size_t)json_object_object_length(md);
    st->meta = calloc(n ? n : 1, sizeof *st->meta);
    if (!st->meta) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    json_object_object_foreach(md, k, v) {
        if (!json_object_is_type(v, json_type_string))
            return DP_FAIL(err, DP_EFORMAT, "%s: \"__metadata__\" value of \"%s\" is not a string", path, k);
        st_meta *m = &st->meta[st->n_meta++];
        m->key = strdup(k);
        m->value = strdup(json_object_get_string(v));
        if (!m->key || !m->value) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    }
    return DP_OK;
}

/* One header entry -> one tensor; data_size is the size of the data section. */
static dp_status read_tensor(dp_safetensors *st, const char *path, const char *name, struct json_object *v,
                             const unsigned char *data_start, uint64_t data_base, uint64_t data_size,
                             int shard, dp_err *err)
{
    size_t name_len = strlen(name);
    if (name_len == 0) return DP_FAIL(err, DP_EFORMAT, "%s: tensor with an empty name", path);
    if (!dp_utf8_valid(name, name_len)) return DP_FAIL(err, DP_EFORMAT, "%s: tensor name is not valid UTF-8", path);
    if (!json_object_is_type(v, json_type_object))
        return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: entry is not an object", path, name);
    const char *dt = dp_json_get_string(v, "dtype", NULL);
    struct json_object *shape = dp_json_get(v, "shape"), *offs = dp_json_get(v, "data_offsets");
    if (!dt) return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: missing \"dtype\" string", path, name);
    if (!shape || !json_object_is_type(shape, json_type_array))
        return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: missing \"shape\" array", path, name);
    if (!offs || !json_object_is_type(offs, json_type_array) || json_object_array_length(offs) != 2)
        return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: \"data_offsets\" must be an array [begin, end]", path, name);

    dp_st_tensor *t = NULL;
    dp_status s = push_tensor(st, path, &t, err);
    if (s != DP_OK) return s;
    t->shard = shard;
    if (!(t->name = strdup(name))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    bool known = false;
    for (size_t i = 0; i < DP_ARRAY_LEN(st_dtypes); i++)
        if (strcmp(dt, st_dtypes[i].name) == 0) { t->dtype = st_dtypes[i].dtype; known = true; }
    if (!known) {
        for (size_t i = 0; i < DP_ARRAY_LEN(st_unsupported); i++)
            if (strcmp(dt, st_unsupported[i]) == 0)
                return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: dtype %s is not supported", path, name, dt);
        return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: unknown dtype \"%.32s\"", path, name, dt);
    }
    size_t nd = json_object_array_length(shape);
    if (nd > DP_ST_MAX_DIMS)
        return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: %zu dimensions (at most %d)", path, name, nd, DP_ST_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        int64_t d = 0;
        struct json_object *e = json_object_array_get_idx(shape, i);
        if (!json_object_is_type(e, json_type_int) || !dp_json_as_int(e, &d) || d < 0)
            return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: shape[%zu] is not a non-negative integer", path, name, i);
        t->shape[i] = d;
        if (__builtin_mul_overflow(numel, (uint64_t)d, &numel))
            return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: element count overflows", path, name);
    }
    t->numel = numel;
    size_t esize = dp_dtype_get(t->dtype)->type_size;
    if (__builtin_mul_overflow(numel, (uint64_t)esize, &t->bytes))
        return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: byte count overflows", path, name);
    int64_t begin, end;
    struct json_object *b = json_object_array_get_idx(offs, 0), *e = json_object_array_get_idx(offs, 1);
    if (!json_object_is_type(b, json_type_int) || !json_object_is_type(e, json_type_int) ||
        !dp_json_as_int(b, &begin) || !dp_json_as_int(e, &end) || begin < 0 || end < 0)
        return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: data_offsets are not non-negative integers", path, name);
    if (end < begin)
        return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s: data_offsets end %lld is before begin %lld", path, name,
                       (long long)end, (long long)begin);
    if ((uint64_t)end > data_size)
        return DP_FAIL(err, DP_EFORMAT,
                       "%s: tensor %s: data_offsets [%lld, %lld) run past the end of the data section (%llu bytes)",
                       path, name, (long long)begin, (long long)end, (unsigned long long)data_size);
    if ((uint64_t)(end - begin) != t->bytes)
        return DP_FAIL(err, DP_EFORMAT,
                       "%s: tensor %s: %lld bytes stored but shape x %s needs %llu", path, name,
                       (long long)(end - begin), dt, (unsigned long long)t->bytes);
    t->file_offset = data_base + (uint64_t)begin;
    t->data = data_start ? data_start + begin : NULL;
    return DP_OK;
}

/* Parses one shard image: data/size, labelled path. */
static dp_status parse_shard(dp_safetensors *st, const char *path, const unsigned char *data, size_t size, int shard,
                             dp_err *err)
{
    if (size < 8)
        return DP_FAIL(err, DP_EFORMAT, "%s: %zu bytes, too short for a safetensors header (truncated?)", path, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | data[i];
    if (n > DP_ST_MAX_HEADER)
        return DP_FAIL(err, DP_EFORMAT, "%s: header length %llu exceeds the %u-byte limit (not a safetensors file?)",
                       path, (unsigned long long)n, DP_ST_MAX_HEADER);
    if (n > size - 8)
        return DP_FAIL(err, DP_EFORMAT, "%s: header length %llu runs past the end of the file (%zu bytes; truncated?)",
                       path, (unsigned long long)n, size);
    char label[1100];
    snprintf(label, sizeof label, "%s: header", path);
    struct json_object *hdr;
    dp_status s = dp_json_parse_object(label, (const char *)data + 8, (size_t)n, &hdr, err);
    if (s != DP_OK) return s;
    size_t first = st->n_tensors;
    uint64_t data_base = 8 + n, data_size = size - data_base;
    json_object_object_foreach(hdr, k, v) {
        if (strcmp(k, "__metadata__") == 0) s = read_metadata(st, path, v, err);
        else s = read_tensor(st, path, k, v, data + data_base, data_base, data_size, shard, err);
        if (s != DP_OK) break;
    }
    json_object_put(hdr);
    if (s != DP_OK) return s;

    /* Overlap check: sort this shard's tensors by offset; each must start at or after the previous end. */
    size_t cnt = st->n_tensors - first;
    if (cnt < 2) return DP_OK;
    dp_st_tensor **by_off = malloc(cnt * sizeof *by_off);
    if (!by_off) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    for (size_t i = 0; i < cnt; i++) by_off[i] = &st->tensors[first + i];
    qsort(by_off, cnt, sizeof *by_off, cmp_tensor_offset);
    for (size_t i = 1; i < cnt && s == DP_OK; i++) {
        const dp_st_tensor *a = by_off[i - 1], *b = by_off[i];
        if (b->file_offset < a->file_offset + a->bytes)
            s = DP_FAIL(err, DP_EFORMAT, "%s: tensors %s and %s overlap in the data section", path, a->name, b->name);
    }
    free(by_off);
    return s;
}

static dp_safetensors *st_new(int n_shards)
{
    dp_safetensors *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->files = calloc((size_t)n_shards, sizeof *st->files);
    st->paths = calloc((size_t)n_shards, sizeof *st->paths);
    st->n_shards = n_shards;
    if (!st->files || !st->paths) {
        free(st->files);
        free(st->paths);
        free(st);
        return NULL;
    }
    return st;
}

/* Sorts by name and rejects duplicates (across shards, or from a header repeating a key). */
static dp_status finish(dp_safetensors *st, const char *path, dp_err *err)
{
    if (st->n_tensors > 1) qsort(st->tensors, st->n_tensors, sizeof *st->tensors, cmp_tensor_name);
    for (size_t i = 1; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0)
            return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s appears twice", path, st->tensors[i].name);
    return DP_OK;
}

dp_status dp_safetensors_parse(const char *name, const void *data, size_t size, dp_safetensors **out, dp_err *err)
{
    *out = NULL;
    dp_safetensors *st = st_new(1);
    if (!st || !(st->paths[0] = strdup(name))) {
        dp_safetensors_close(st);
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    }
    dp_status s = parse_shard(st, name, data, size, 0, err);
    if (s == DP_OK) s = finish(st, name, err);
    if (s != DP_OK) {
        dp_safetensors_close(st);
        return s;
    }
    *out = st;
    return DP_OK;
}

static dp_status open_shard(dp_safetensors *st, int shard, const char *path, dp_err *err)
{
    if (!(st->paths[shard] = strdup(path))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    dp_status s = dp_mapped_file_open(path, &st->files[shard], err);
    if (s != DP_OK) return s;
    return parse_shard(st, path, st->files[shard]->data, st->files[shard]->size, shard, err);
}

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* dir/name into buf; false if it does not fit. */
static bool join(char *buf, size_t n, const char *dir, const char *name)
{
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    return snprintf(buf, n, "%.*s/%s", (int)dl, dir, name) < (int)n;
}

static dp_status open_index(const char *index_path, dp_safetensors **out, dp_err *err)
{
    struct json_object *idx = NULL;
    dp_safetensors *st = NULL;
    const char **files = NULL;
    dp_status s = dp_json_read_object_file(index_path, &idx, err);
    if (s != DP_OK) return s;
    struct json_object *wm = dp_json_get(idx, "weight_map");
    if (!wm || !json_object_is_type(wm, json_type_object)) {
        s = DP_FAIL(err, DP_EFORMAT, "%s: no \"weight_map\" object", index_path);
        goto fail;
    }
    /* Distinct shard names in order of first appearance. */
    size_t n_entries = (size_t)json_object_object_length(wm), n_files = 0;
    files = calloc(n_entries ? n_entries : 1, sizeof *files);
    if (!files) { s = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", index_path); goto fail; }
    json_object_object_foreach(wm, tname, fobj) {
        const char *f = json_object_is_type(fobj, json_type_string) ? json_object_get_string(fobj) : NULL;
        if (!f || !*f || strchr(f, '/')) {
            s = DP_FAIL(err, DP_EFORMAT, "%s: weight_map entry of %s is not a plain file name", index_path, tname);
            goto fail;
        }
        size_t j = 0;
        while (j < n_files && strcmp(files[j], f) != 0) j++;
        if (j == n_files) files[n_files++] = f;
    }
    if (n_files == 0) { s = DP_FAIL(err, DP_EFORMAT, "%s: weight_map is empty", index_path); goto fail; }
    if (!(st = st_new((int)n_files))) { s = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", index_path); goto fail; }
    const char *slash = strrchr(index_path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - index_path) : 1, slash ? index_path : ".");
    for (size_t i = 0; i < n_files; i++) {
        char p[4096];
        if (!join(p, sizeof p, dir, files[i])) { s = DP_FAIL(err, DP_EINVAL, "%s: path too long", index_path); goto fail; }
        if ((s = open_shard(st, (int)i, p, err)) != DP_OK) goto fail;
    }
    if ((s = finish(st, index_path, err)) != DP_OK) goto fail;
    /* The index and the shards must agree both ways. */
    json_object_object_foreach(wm, tn, fo) {
        const dp_st_tensor *t = dp_safetensors_find(st, tn);
        const char *fname = json_object_get_string(fo);
        if (!t || !ends_with(st->paths[t->shard], fname)) {
            s = DP_FAIL(err, DP_EFORMAT, "%s: tensor %s is listed in shard %s but not stored there", index_path, tn,
                        fname);
            goto fail;
        }
    }
    if (st->n_tensors != n_entries) {
        for (size_t i = 0; i < st->n_tensors; i++)
            if (!dp_json_get(wm, st->tensors[i].name)) {
                s = DP_FAIL(err, DP_EFORMAT, "%s: tensor %s is not listed in %s", st->paths[st->tensors[i].shard],
                            st->tensors[i].name, index_path);
                goto fail;
            }
    }
    free(files);
    json_object_put(idx);
    *out = st;
    return DP_OK;
fail:
    free(files);
    json_object_put(idx);
    dp_safetensors_close(st);
    return s;
}

dp_status dp_safetensors_open(const char *path, dp_safetensors **out, dp_err *err)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        char p[4096];
        if (!join(p, sizeof p, path, "model.safetensors.index.json")) return DP_FAIL(err, DP_EINVAL, "%s: path too long", path);
        if (is_file(p)) return open_index(p, out, err);
        join(p, sizeof p, path, "model.safetensors");
        if (!is_file(p)) {
            /* Any single *.safetensors file will do; two or more is ambiguous. */
            DIR *d = opendir(path);
            if (!d) return DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
            int found = 0;
            struct dirent *de;
            while ((de = readdir(d)) != NULL)
                if (ends_with(de->d_name, ".safetensors") && found++ == 0) join(p, sizeof p, path, de->d_name);
            closedir(d);
            if (found != 1)
                return DP_FAIL(err, DP_EFORMAT, "%s: %s", path,
                               found ? "several .safetensors files and no model.safetensors.index.json"
                                     : "no model.safetensors or model.safetensors.index.json");
        }
        return dp_safetensors_open(p, out, err);
    }
    if (ends_with(path, ".index.json")) return open_index(path, out, err);
    dp_safetensors *st = st_new(1);
    if (!st) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    dp_status s = open_shard(st, 0, path, err);
    if (s == DP_OK) s = finish(st, path, err);
    if (s != DP_OK) {
        dp_safetensors_close(st);
        return s;
    }
    *out = st;
    return DP_OK;
}

void dp_safetensors_close(dp_safetensors *st)
{
    if (!st) return;
    for (int i = 0; i < st->n_shards; i++) {
        dp_mapped_file_close(st->files[i]);
        free(st->paths[i]);
    }
    for (size_t i = 0; i < st->n_tensors; i++) free((char *)st->tensors[i].name);
    for (size_t i = 0; i < st->n_meta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->meta);
    free(st->files);
    free(st->paths);
    free(st->tensors);
    free(st);
}

size_t dp_safetensors_count(const dp_safetensors *st) { return st->n_tensors; }

const dp_st_tensor *dp_safetensors_at(const dp_safetensors *st, size_t i)
{
    return i < st->n_tensors ? &st->tensors[i] : NULL;
}

const dp_st_tensor *dp_safetensors_find(const dp_safetensors *st, const char *name)
{
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->tensors[mid].name);
        if (c == 0) return &st->tensors[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

size_t dp_safetensors_shard_count(const dp_safetensors *st) { return (size_t)st->n_shards; }

const char *dp_safetensors_shard_path(const dp_safetensors *st, int shard)
{
    return shard >= 0 && shard < st->n_shards ? st->paths[shard] : NULL;
}

size_t dp_safetensors_metadata_count(const dp_safetensors *st) { return st->n_meta; }

void dp_safetensors_metadata_at(const dp_safetensors *st, size_t i, const char **key, const char **value)
{
    *key = i < st->n_meta ? st->meta[i].key : NULL;
    *value = i < st->n_meta ? st->meta[i].value : NULL;
}

const char *dp_safetensors_metadata_get(const dp_safetensors *st, const char *key)
{
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
    return NULL;
}
