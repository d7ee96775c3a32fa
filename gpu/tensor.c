/*
** gpu/tensor.c: device tensors, views, and host transfers through the device's staging buffer
** (see tensor.h). Transfers are synchronous: chunk -> staging -> copy command -> wait.
*/
#include <stdlib.h>
#include <string.h>

#include "gpu/device_impl.h"
#include "core/tensor.h"
#include "gpu/tensor.h"
#include "gpu/vkcheck.h"

/* The contiguous layout of a shape (core/tensor.h checks dims, blocks and overflow). */
static dp_status check_shape(const char *op, dp_dtype dtype, uint32_t ndim, const uint64_t *shape, dp_layout *l,
                             uint64_t *bytes, dp_err *err)
{
    dp_err e = {0};
    if (dp_layout_contiguous(l, dtype, ndim, shape, &e) != DP_OK) return DP_FAIL(err, e.status, "%s: %s", op, e.msg);
    *bytes = dp_layout_end(l);
    return DP_OK;
}

static void set_layout(dp_gtensor *t, const dp_layout *l)
{
    t->ndim = l->ndim;
    for (uint32_t i = 0; i < DP_GTENSOR_MAX_DIMS; i++) {
        t->shape[i] = l->shape[i];
        t->stride[i] = l->stride[i];
    }
    t->numel = dp_layout_numel(l);
}

bool dp_gtensor_is_contiguous(const dp_gtensor *t)
{
    dp_layout l = {.dtype = t->dtype, .ndim = t->ndim};
    for (uint32_t i = 0; i < DP_GTENSOR_MAX_DIMS; i++) l.shape[i] = t->shape[i], l.stride[i] = t->stride[i];
    return dp_layout_is_contiguous(&l);
}

dp_status dp_gtensor_create(dp_device *dev, dp_dtype dtype, uint32_t ndim, const uint64_t *shape, dp_gtensor **out,
                            dp_err *err)
{
    return dp_gtensor_create_in(dev, DP_MEM_DEVICE, dtype, ndim, shape, out, err);
}

dp_status dp_gtensor_create_in(dp_device *dev, dp_mem kind, dp_dtype dtype, uint32_t ndim, const uint64_t *shape,
                               dp_gtensor **out, dp_err *err)
{
    dp_status st;
    dp_layout l;
    uint64_t bytes = 0;
    *out = NULL;
    if ((st = check_shape("tensor", dtype, ndim, shape, &l, &bytes, err)) != DP_OK) return st;
    dp_gtensor *t = calloc(1, sizeof *t);
    if (!t) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating a tensor");
    char what[96];
    t->dtype = dtype;
    set_layout(t, &l);
    dp_gtensor_describe(t, what, sizeof what);
    if ((st = dp_pool_acquire(dev->pool, kind, bytes, what, &t->buf, err)) != DP_OK) {
        free(t);
        return st;
    }
    t->dev = dev;
    t->bytes = bytes;
    t->root = t;
    t->refs = 1;
    *out = t;
    return DP_OK;
}

dp_status dp_gtensor_view(dp_gtensor *parent, uint64_t off, dp_dtype dtype, uint32_t ndim, const uint64_t *shape,
                          dp_gtensor **out, dp_err *err)
{
    return dp_gtensor_view_strided(parent, off, dtype, ndim, shape, NULL, out, err);
}

dp_status dp_gtensor_view_strided(dp_gtensor *parent, uint64_t off, dp_dtype dtype, uint32_t ndim,
                                  const uint64_t *shape, const uint64_t *strides, dp_gtensor **out, dp_err *err)
{
    dp_status st;
    dp_layout l;
    uint64_t bytes = 0;
    *out = NULL;
    if ((st = check_shape("view", dtype, ndim, shape, &l, &bytes, err)) != DP_OK) return st;
    if (strides) {
        if (dp_dtype_get(dtype)->block > 1 && strides[ndim - 1] != 1)
            return DP_FAIL(err, DP_EINVAL, "view: %s rows must be contiguous", dp_dtype_name(dtype));
        for (uint32_t i = 0; i < ndim; i++) l.stride[i] = strides[i];
        bytes = dp_layout_end(&l);
    }
    if (off > parent->bytes || bytes > parent->bytes - off)
        return DP_FAIL(err, DP_EINVAL, "view: %llu bytes at offset %llu do not fit the parent's %llu bytes",
                       (unsigned long long)bytes, (unsigned long long)off, (unsigned long long)parent->bytes);
    dp_gtensor *t = calloc(1, sizeof *t);
    if (!t) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating a view");
    t->dev = parent->dev;
    t->dtype = dtype;
    set_layout(t, &l);
    t->bytes = bytes;
    t->buf = parent->buf;
    t->buf.offset += off;
    t->buf.addr += off;
    t->buf.size = bytes;
    if (t->buf.map) t->buf.map = (char *)t->buf.map + off;
    t->root = parent->root;
    t->root->refs++;
    *out = t;
    return DP_OK;
}

void dp_gtensor_release(dp_gtensor *t)
{
    if (!t) return;
    dp_gtensor *root = t->root;
    if (t != root) free(t);
    if (--root->refs == 0) {
        dp_pool_release(root->dev->pool, &root->buf);
        free(root);
    }
}

void dp_gtensor_describe(const dp_gtensor *t, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "%s[", dp_dtype_name(t->dtype));
    for (uint32_t i = 0; i < t->ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%llu", i ? "," : "", (unsigned long long)t->shape[i]);
    if (n < cap) snprintf(out + n, cap - n, "]");
}

static dp_status staging(dp_device *dev, dp_err *err)
{
    if (dev->staging.buffer) return DP_OK;
    return dp_pool_acquire(dev->pool, DP_MEM_HOST, DP_STAGING_CHUNK, "staging buffer", &dev->staging, err);
}

/* One copy between staging and `b`, submitted and waited for. */
static dp_status copy_chunk(dp_device *dev, const dp_buffer *b, uint64_t off, uint64_t n, bool up, dp_err *err)
{
    dp_status st;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    if ((st = DP_VK(err, vkBeginCommandBuffer(dev->xfer_cmd, &bi))) != DP_OK) return st;
    dp_device_cmd_barrier(dev->xfer_cmd);   /* earlier kernels' writes, and the host's, become visible */
    VkBufferCopy region = {
        .srcOffset = up ? dev->staging.offset : b->offset + off,
        .dstOffset = up ? b->offset + off : dev->staging.offset,
        .size = n,
    };
    if (up) vkCmdCopyBuffer(dev->xfer_cmd, dev->staging.buffer, b->buffer, 1, &region);
    else vkCmdCopyBuffer(dev->xfer_cmd, b->buffer, dev->staging.buffer, 1, &region);
    dp_device_cmd_barrier(dev->xfer_cmd);   /* the copy is visible to the host and to later work */
    if ((st = DP_VK(err, vkEndCommandBuffer(dev->xfer_cmd))) != DP_OK) return st;
    return dp_device_submit_wait(dev, dev->xfer_cmd, dev->xfer_fence, up ? "upload" : "download", err);
}

dp_status dp_buffer_upload(dp_device *dev, const dp_buffer *dst, uint64_t offset, const void *src, uint64_t bytes,
                           dp_err *err)
{
    dp_status st;
    if (offset > dst->size || bytes > dst->size - offset)
        return DP_FAIL(err, DP_EINVAL, "upload: %llu bytes at offset %llu exceed the %llu-byte buffer",
                       (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)dst->size);
    if (dst->map) {   /* host-visible: no copy command needed */
        memcpy((char *)dst->map + offset, src, bytes);
        return DP_OK;
    }
    if ((st = staging(dev, err)) != DP_OK) return st;
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = bytes - done < DP_STAGING_CHUNK ? bytes - done : DP_STAGING_CHUNK;
        memcpy(dev->staging.map, (const char *)src + done, n);
        if ((st = copy_chunk(dev, dst, offset + done, n, true, err)) != DP_OK) return st;
        done += n;
    }
    return DP_OK;
}

dp_status dp_buffer_download(dp_device *dev, const dp_buffer *src, uint64_t offset, void *dst, uint64_t bytes,
                             dp_err *err)
{
    dp_status st;
    if (offset > src->size || bytes > src->size - offset)
        return DP_FAIL(err, DP_EINVAL, "download: %llu bytes at offset %llu exceed the %llu-byte buffer",
                       (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)src->size);
    if (src->map) {   /* host-visible and coherent: recordings end with a barrier to the host */
        memcpy(dst, (const char *)src->map + offset, bytes);
        return DP_OK;
    }
    if ((st = staging(dev, err)) != DP_OK) return st;
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = bytes - done < DP_STAGING_CHUNK ? bytes - done : DP_STAGING_CHUNK;
        if ((st = copy_chunk(dev, src, offset + done, n, false, err)) != DP_OK) return st;
        memcpy((char *)dst + done, dev->staging.map, n);
        done += n;
    }
    return DP_OK;
}

dp_status dp_gtensor_upload(dp_gtensor *t, uint64_t offset, const void *src, uint64_t bytes, dp_err *err)
{
    return dp_buffer_upload(t->dev, &t->buf, offset, src, bytes, err);
}

dp_status dp_gtensor_download(const dp_gtensor *t, uint64_t offset, void *dst, uint64_t bytes, dp_err *err)
{
    return dp_buffer_download(t->dev, &t->buf, offset, dst, bytes, err);
}
