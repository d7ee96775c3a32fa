/*
** core/tensor.c: see tensor.h.
*/
#include "core/tensor.h"

#include <string.h>

static uint64_t elt_bytes(dp_dtype t) { return dp_dtype_get(t)->type_size; }
static uint64_t block_of(dp_dtype t) { return dp_dtype_get(t)->block; }

dp_status dp_layout_contiguous(dp_layout *out, dp_dtype dtype, uint32_t ndim, const uint64_t *shape, dp_err *err)
{
    memset(out, 0, sizeof *out);
    if (!dp_dtype_get(dtype)) return DP_FAIL(err, DP_EINVAL, "unknown dtype %d", (int)dtype);
    if (ndim < 1 || ndim > DP_TENSOR_MAX_DIMS)
        return DP_FAIL(err, DP_EINVAL, "%u dimensions (1..%d allowed)", ndim, DP_TENSOR_MAX_DIMS);
    for (uint32_t i = 0; i < ndim; i++)
        if (shape[i] == 0) return DP_FAIL(err, DP_EINVAL, "dimension %u is 0", i);
    if (shape[ndim - 1] % block_of(dtype))
        return DP_FAIL(err, DP_EINVAL, "rows of %llu elements are not whole %s blocks of %u",
                       (unsigned long long)shape[ndim - 1], dp_dtype_name(dtype), block_of(dtype) ? (unsigned)block_of(dtype) : 0u);
    out->dtype = dtype;
    out->ndim = ndim;
    uint64_t stride = 1;
    for (int i = DP_TENSOR_MAX_DIMS - 1; i >= 0; i--) {
        uint64_t d = (uint32_t)i < ndim ? shape[i] : 1;
        out->shape[i] = d;
        out->stride[i] = stride;
        if (d && stride > UINT64_MAX / d) return DP_FAIL(err, DP_EINVAL, "shape overflows");
        stride *= d;
    }
    return DP_OK;
}

uint64_t dp_layout_numel(const dp_layout *l)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < l->ndim; i++) n *= l->shape[i];
    return n;
}

bool dp_layout_is_contiguous(const dp_layout *l)
{
    uint64_t stride = 1;
    for (int i = (int)l->ndim - 1; i >= 0; i--) {
        if (l->shape[i] != 1 && l->stride[i] != stride) return false;
        stride *= l->shape[i];
    }
    return true;
}

uint64_t dp_layout_end(const dp_layout *l)
{
    /* The last element is at sum((shape - 1) * stride); blocks are addressed as a whole. */
    uint64_t last = 0;
    for (uint32_t i = 0; i < l->ndim; i++) last += (l->shape[i] - 1) * l->stride[i];
    uint64_t block = block_of(l->dtype);
    return l->offset + (last / block + 1) * elt_bytes(l->dtype);
}

dp_status dp_layout_narrow(const dp_layout *in, uint32_t dim, uint64_t start, uint64_t len, dp_layout *out,
                           dp_err *err)
{
    if (dim >= in->ndim) return DP_FAIL(err, DP_EINVAL, "narrow: dimension %u of a %u-D tensor", dim, in->ndim);
    if (len == 0 || start > in->shape[dim] || len > in->shape[dim] - start)
        return DP_FAIL(err, DP_EINVAL, "narrow: [%llu, %llu) is outside dimension %u of size %llu",
                       (unsigned long long)start, (unsigned long long)(start + len), dim,
                       (unsigned long long)in->shape[dim]);
    uint64_t block = block_of(in->dtype);
    if (block > 1 && dim == in->ndim - 1 && (start % block || len % block))
        return DP_FAIL(err, DP_EINVAL, "narrow: %s rows can only be cut at whole blocks of %llu",
                       dp_dtype_name(in->dtype), (unsigned long long)block);
    *out = *in;
    out->shape[dim] = len;
    out->offset = in->offset + start * in->stride[dim] / block * elt_bytes(in->dtype);
    return DP_OK;
}

dp_status dp_layout_transpose(const dp_layout *in, uint32_t a, uint32_t b, dp_layout *out, dp_err *err)
{
    if (a >= in->ndim || b >= in->ndim)
        return DP_FAIL(err, DP_EINVAL, "transpose: dimensions %u and %u of a %u-D tensor", a, b, in->ndim);
    if (block_of(in->dtype) > 1) return DP_FAIL(err, DP_EINVAL, "transpose: %s is block-quantised", dp_dtype_name(in->dtype));
    *out = *in;
    out->shape[a] = in->shape[b], out->shape[b] = in->shape[a];
    out->stride[a] = in->stride[b], out->stride[b] = in->stride[a];
    return DP_OK;
}

uint64_t dp_layout_byte_offset(const dp_layout *l, const uint64_t *idx)
{
    uint64_t e = 0;
    for (uint32_t i = 0; i < l->ndim; i++) e += idx[i] * l->stride[i];
    return l->offset + e / block_of(l->dtype) * elt_bytes(l->dtype);
}
