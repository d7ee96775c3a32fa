/*
** core/quant_layout.c: see quant_layout.h. The layouts are permutations of a weight's bytes; each is described
** by where the bytes of segment s of the row_wise block i go (dst_offset), so that packing and unpacking are the
** same loop in opposite directions and the round trip is exact by construction.
*/
#include "core/quant_layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

static const char *const NAMES[DP_QLAYOUT_COUNT] = {"row_wise", "column_wise", "flat"};

const char *dp_qlayout_name(dp_qlayout l) { return (unsigned)l < DP_QLAYOUT_COUNT ? NAMES[l] : "?"; }

bool dp_qlayout_from_name(const char *name, dp_qlayout *out)
{
    for (int i = 0; i < DP_QLAYOUT_COUNT; i++)
        if (name && strcmp(name, NAMES[i]) == 0) {
            *out = (dp_qlayout)i;
            return true;
        }
    return false;
}

/* Segments in plane order: largest first (code bytes, then high bits, then scales), so that each plane starts at a
** multiple of 16 (or of its own size) bytes and the kernels' 8-byte code loads and the K-quants' 16-byte header
** load are aligned. The offsets are ggml's block layouts (core/quant.h, MODEL_REFERENCE §4). */
uint32_t dp_qlayout_segments(dp_dtype t, dp_qlayout_seg segs[DP_QLAYOUT_MAX_SEGS])
{
    static const struct {
        dp_dtype t;
        uint32_t n;
        dp_qlayout_seg s[DP_QLAYOUT_MAX_SEGS];
    } TABLE[] = {
        {DP_Q8_0, 2, {{2, 32}, {0, 2}}},                      /* qs[32] | d */
        {DP_Q4_0, 2, {{2, 16}, {0, 2}}},                      /* qs[16] | d */
        {DP_Q4_1, 2, {{4, 16}, {0, 4}}},                      /* qs[16] | d, m */
        {DP_Q5_0, 3, {{6, 16}, {2, 4}, {0, 2}}},              /* qs[16] | qh[4] | d */
        {DP_Q5_1, 3, {{8, 16}, {4, 4}, {0, 4}}},              /* qs[16] | qh[4] | d, m */
        {DP_Q4_K, 2, {{16, 128}, {0, 16}}},                   /* qs[128] | d, dmin, scales[12] */
        {DP_Q5_K, 3, {{48, 128}, {16, 32}, {0, 16}}},         /* qs[128] | qh[32] | d, dmin, scales[12] */
        {DP_Q6_K, 4, {{0, 128}, {128, 64}, {192, 16}, {208, 2}}},   /* ql | qh | scales[16] | d */
    };
    for (size_t i = 0; i < DP_ARRAY_LEN(TABLE); i++)
        if (TABLE[i].t == t) {
            memcpy(segs, TABLE[i].s, sizeof TABLE[i].s);
            return TABLE[i].n;
        }
    return 0;
}

bool dp_qlayout_supports(dp_dtype t)
{
    dp_qlayout_seg s[DP_QLAYOUT_MAX_SEGS];
    return dp_qlayout_segments(t, s) > 0;
}

typedef struct geometry {
    uint64_t rows, nb, total;      /* rows, blocks per row, blocks */
    uint32_t qb, n_segs;           /* bytes per block, segments */
    dp_qlayout_seg segs[DP_QLAYOUT_MAX_SEGS];
    uint64_t plane[DP_QLAYOUT_MAX_SEGS];   /* flat: byte offset of each segment's plane */
} geometry;

static dp_status geometry_of(dp_dtype t, uint64_t rows, uint64_t cols, dp_qlayout l, geometry *g, dp_err *err)
{
    memset(g, 0, sizeof *g);
    g->n_segs = dp_qlayout_segments(t, g->segs);
    if (g->n_segs == 0)
        return DP_FAIL(err, DP_EINVAL, "quant layout: %s has no layouts besides row_wise", dp_dtype_name(t));
    if ((unsigned)l >= DP_QLAYOUT_COUNT) return DP_FAIL(err, DP_EINVAL, "quant layout: unknown layout %d", (int)l);
    const dp_dtype_info *info = dp_dtype_get(t);
    if (cols == 0 || cols % info->block)
        return DP_FAIL(err, DP_EINVAL, "quant layout: rows of %llu elements are not whole %s blocks",
                       (unsigned long long)cols, info->name);
    g->rows = rows, g->nb = cols / info->block, g->total = rows * g->nb, g->qb = info->type_size;
    uint64_t at = 0;
    for (uint32_t s = 0; s < g->n_segs; s++) {
        g->plane[s] = at;
        at += (uint64_t)g->segs[s].size * g->total;
    }
    DP_ASSERT(at == g->total * g->qb);
    return DP_OK;
}

/* Where the bytes of segment s of row_wise block i (row n = i / nb, block b = i % nb) lie in layout l. */
static uint64_t dst_offset(const geometry *g, dp_qlayout l, uint64_t i, uint32_t s)
{
    switch (l) {
    case DP_QLAYOUT_COL: {
        const uint64_t n = i / g->nb, b = i % g->nb;
        return (b * g->rows + n) * g->qb + g->segs[s].off;
    }
    case DP_QLAYOUT_FLAT: return g->plane[s] + i * g->segs[s].size;
    default: return i * g->qb + g->segs[s].off;
    }
}

static dp_status permute(dp_dtype t, uint64_t rows, uint64_t cols, dp_qlayout l, const void *src, void *dst,
                         bool pack, dp_err *err)
{
    geometry g;
    dp_status st = geometry_of(t, rows, cols, l, &g, err);
    if (st != DP_OK) return st;
    const uint8_t *in = src;
    uint8_t *out = dst;
    if (l == DP_QLAYOUT_ROW) {
        memcpy(out, in, g.total * g.qb);
        return DP_OK;
    }
    for (uint64_t i = 0; i < g.total; i++)
        for (uint32_t s = 0; s < g.n_segs; s++) {
            const uint64_t row_at = i * g.qb + g.segs[s].off, l_at = dst_offset(&g, l, i, s);
            if (pack) memcpy(out + l_at, in + row_at, g.segs[s].size);
            else memcpy(out + row_at, in + l_at, g.segs[s].size);
        }
    return DP_OK;
}

dp_status dp_qlayout_pack(dp_dtype t, uint64_t rows, uint64_t cols, dp_qlayout l, const void *src, void *dst,
                          dp_err *err)
{
    return permute(t, rows, cols, l, src, dst, true, err);
}

dp_status dp_qlayout_unpack(dp_dtype t, uint64_t rows, uint64_t cols, dp_qlayout l, const void *src, void *dst,
                            dp_err *err)
{
    return permute(t, rows, cols, l, src, dst, false, err);
}

/* ---- cache ------------------------------------------------------------------------------------------------ */

/* The key line (the first bytes of an entry) and the entry's path; false when the model file cannot be stat'ed
** or a name does not fit. */
static bool cache_names(const char *model_path, const char *dir, const char *tensor, dp_dtype t, uint64_t rows,
                        uint64_t cols, dp_qlayout l, char *key, size_t key_cap, char *path, size_t path_cap)
{
    struct stat st;
    if (!model_path || !tensor || stat(model_path, &st) != 0) return false;
    int n = snprintf(key, key_cap, "doppler quant layout cache v1\nsize %llu\nmtime %lld.%09ld\ntensor %s\n"
                     "dtype %s\nshape %llu %llu\nlayout %s\n\n",
                     (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, tensor,
                     dp_dtype_name(t), (unsigned long long)rows, (unsigned long long)cols, dp_qlayout_name(l));
    if (n < 0 || (size_t)n >= key_cap) return false;
    unsigned long long h = (unsigned long long)XXH3_64bits(key, (size_t)n);
    if (dir) n = snprintf(path, path_cap, "%s/%016llx-%s.bin", dir, h, dp_qlayout_name(l));
    else n = snprintf(path, path_cap, "%s.doppler-cache/%016llx-%s.bin", model_path, h, dp_qlayout_name(l));
    return n > 0 && (size_t)n < path_cap;
}

bool dp_qlayout_cache_load(const char *model_path, const char *dir, const char *tensor, dp_dtype t, uint64_t rows,
                           uint64_t cols, dp_qlayout l, void *dst, size_t bytes)
{
    char key[1536], path[4096], got[1536];
    if (!cache_names(model_path, dir, tensor, t, rows, cols, l, key, sizeof key, path, sizeof path)) return false;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    const size_t klen = strlen(key);
    struct stat st;
    bool ok = fstat(fileno(f), &st) == 0 && (uint64_t)st.st_size == klen + (uint64_t)bytes &&
              fread(got, 1, klen, f) == klen && memcmp(got, key, klen) == 0 && fread(dst, 1, bytes, f) == bytes;
    fclose(f);
    return ok;
}

bool dp_qlayout_cache_store(const char *model_path, const char *dir, const char *tensor, dp_dtype t, uint64_t rows,
                            uint64_t cols, dp_qlayout l, const void *src, size_t bytes)
{
    char key[1536], path[4096], tmp[4200];
    if (!cache_names(model_path, dir, tensor, t, rows, cols, l, key, sizeof key, path, sizeof path)) return false;
    char *slash = strrchr(path, '/');
    *slash = '\0';                                   /* the directory: one level, next to the model */
    bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
    *slash = '/';
    if (!ok) return false;
    if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof tmp) return false;
    FILE *f = fopen(tmp, "wb");
    if (!f) return false;
    const size_t klen = strlen(key);
    ok = fwrite(key, 1, klen, f) == klen && fwrite(src, 1, bytes, f) == bytes;
    ok = (fclose(f) == 0) && ok;
    /* rename is atomic: a reader sees the old entry, no entry, or the whole new one */
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) remove(tmp);
    return ok;
}
