/*
** gpu/upload.c: see upload.h.
*/
#include "gpu/upload.h"

#include <stdlib.h>
#include <string.h>

#include "core/quant.h"

#define CHUNK_BYTES (8u << 20)   /* host conversion buffer; the staging copy is chunked too */

static bool plain_float(dp_dtype t) { return t == DP_F32 || t == DP_F16 || t == DP_BF16; }

static float load_elem(dp_dtype t, const void *src, uint64_t i)
{
    switch (t) {
    case DP_F16: return dp_f16_to_f32(((const uint16_t *)src)[i]);
    case DP_BF16: return dp_bf16_to_f32(((const uint16_t *)src)[i]);
    default: return ((const float *)src)[i];
    }
}

static void store_elem(dp_dtype t, void *dst, uint64_t i, float v)
{
    switch (t) {
    case DP_F16: ((uint16_t *)dst)[i] = dp_f32_to_f16(v); break;
    case DP_BF16: ((uint16_t *)dst)[i] = dp_f32_to_bf16(v); break;
    default: ((float *)dst)[i] = v; break;
    }
}

dp_status dp_upload_convert(dp_device *dev, const char *what, const void *src, dp_dtype src_type,
                            uint32_t ndim, const uint64_t *shape, dp_dtype dst_type,
                            dp_gtensor **out, dp_err *err)
{
    if (ndim < 1 || ndim > DP_GTENSOR_MAX_DIMS) {
        *out = NULL;
        return DP_FAIL(err, DP_EINVAL, "%s: %u dimensions cannot be uploaded", what, ndim);
    }
    return dp_upload_convert_rows(dev, what, src, src_type, ndim, shape, shape[ndim - 1], dst_type, out, err);
}

dp_status dp_upload_convert_rows(dp_device *dev, const char *what, const void *src, dp_dtype src_type,
                                 uint32_t ndim, const uint64_t *shape, uint64_t src_row, dp_dtype dst_type,
                                 dp_gtensor **out, dp_err *err)
{
    *out = NULL;
    if (ndim < 1 || ndim > DP_GTENSOR_MAX_DIMS)
        return DP_FAIL(err, DP_EINVAL, "%s: %u dimensions cannot be uploaded", what, ndim);
    bool quant = dp_dtype_get(src_type) && dp_dtype_get(src_type)->is_quant;
    /* quantised blocks kept as they are (GPU kernels decode them), or converted to a float type */
    bool keep_blocks = quant && dst_type == src_type;
    if ((!plain_float(dst_type) && !keep_blocks) ||
        (!plain_float(src_type) && !(quant && (keep_blocks || dp_quant_can_dequantize(src_type)))))
        return DP_FAIL(err, DP_EINVAL, "%s: cannot convert %s to %s on upload", what, dp_dtype_name(src_type),
                       dp_dtype_name(dst_type));
    uint64_t row = shape[ndim - 1], n = 1;
    for (uint32_t i = 0; i < ndim; i++) n *= shape[i];
    if (src_row < row || (src_row != row && src_type == dst_type))
        return DP_FAIL(err, DP_EINVAL, "%s: stored rows of %llu elements cannot be uploaded as rows of %llu %s", what,
                       (unsigned long long)src_row, (unsigned long long)row, dp_dtype_name(dst_type));
    if (quant && src_row % dp_dtype_get(src_type)->block)
        return DP_FAIL(err, DP_EFORMAT, "%s: rows of %llu elements are not whole %s blocks", what,
                       (unsigned long long)src_row, dp_dtype_name(src_type));
    dp_gtensor *t = NULL;
    dp_status st = dp_gtensor_create(dev, dst_type, ndim, shape, &t, err);
    if (st != DP_OK) return st;
    if (src_type == dst_type) {                       /* as stored: straight from the mapping */
        st = dp_gtensor_upload(t, 0, src, t->bytes, err);
        if (st != DP_OK) goto fail;
        *out = t;
        return DP_OK;
    }
    size_t dst_esz = dp_dtype_get(dst_type)->type_size;
    uint64_t rows_per_chunk = CHUNK_BYTES / (row * (dst_esz + 4));
    if (rows_per_chunk == 0) rows_per_chunk = 1;
    uint64_t n_rows = n / row;
    size_t src_row_bytes = dp_dtype_bytes(src_type, src_row, NULL);
    float *tmp = malloc(src_row * sizeof(float) * (quant ? 1 : 0) + 1);
    void *chunk = malloc(rows_per_chunk * row * dst_esz);
    if (!tmp || !chunk) {
        free(tmp);
        free(chunk);
        st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory converting for upload", what);
        goto fail;
    }
    for (uint64_t r0 = 0; r0 < n_rows && st == DP_OK; r0 += rows_per_chunk) {
        uint64_t rows = n_rows - r0 < rows_per_chunk ? n_rows - r0 : rows_per_chunk;
        for (uint64_t r = 0; r < rows && st == DP_OK; r++) {
            const uint8_t *srow = (const uint8_t *)src + (r0 + r) * src_row_bytes;
            void *drow = (uint8_t *)chunk + r * row * dst_esz;
            if (quant) {
                st = dp_quant_dequantize_row(src_type, srow, tmp, (int64_t)src_row);
                if (st != DP_OK) st = DP_FAIL(err, st, "%s: cannot dequantise %s", what, dp_dtype_name(src_type));
                for (uint64_t i = 0; i < row && st == DP_OK; i++) store_elem(dst_type, drow, i, tmp[i]);
            } else {
                for (uint64_t i = 0; i < row; i++) store_elem(dst_type, drow, i, load_elem(src_type, srow, i));
            }
        }
        if (st == DP_OK) st = dp_gtensor_upload(t, r0 * row * dst_esz, chunk, rows * row * dst_esz, err);
    }
    free(tmp);
    free(chunk);
    if (st != DP_OK) goto fail;
    *out = t;
    return DP_OK;
fail:
    dp_gtensor_release(t);
    return st;
}
