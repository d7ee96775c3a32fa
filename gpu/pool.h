/*
** gpu/pool.h: device memory, suballocated. Large VkDeviceMemory blocks (256 MiB by default; for memory the host
** can see, the first three of a kind 32, 64 and 128 MiB: pool.c, next_block_bytes), each bound to one VkBuffer
** with SHADER_DEVICE_ADDRESS | STORAGE | TRANSFER_SRC/DST | INDIRECT usage, are carved into slices; a request
** larger than a block gets a dedicated block of its own.
** Sizes are rounded to a size class (8 per power of two, at least 256 bytes) so that a released
** slice fits the next request of the same class; freed ranges coalesce. Alignment: 256 bytes.
** Two kinds of memory: DP_MEM_DEVICE (device-local: tensors) and DP_MEM_HOST (host-visible,
** coherent, mapped: staging for uploads and downloads).
** Not here: shapes and dtypes (gpu/tensor.h).
*/
#ifndef DP_GPU_POOL_H
#define DP_GPU_POOL_H

#include <stdint.h>
#include <vulkan/vulkan.h>

#include "core/status.h"
#include "gpu/device.h"

#define DP_POOL_ALIGN 256u
#define DP_POOL_DEFAULT_BLOCK (256ull << 20)

typedef enum dp_mem {
    DP_MEM_DEVICE = 0,    /* device-local */
    DP_MEM_HOST,          /* host-visible + coherent, persistently mapped */
    DP_MEM_COUNT
} dp_mem;

/* A slice of a block. addr = device address of byte 0 of the slice; a view is a dp_buffer with
** offset/addr/size moved inside it (it must not be released). */
typedef struct dp_buffer {
    VkBuffer     buffer;   /* the block's buffer (shared by all slices of the block) */
    VkDeviceSize offset;   /* bytes into buffer */
    VkDeviceSize size;     /* bytes asked for (the slice itself may be larger: its size class) */
    uint64_t     addr;     /* VkDeviceAddress of offset */
    void        *map;      /* host pointer to offset (DP_MEM_HOST), else NULL */
    dp_mem       kind;
    uint32_t     block;    /* pool-internal: block id */
    VkDeviceSize slice;    /* pool-internal: bytes reserved (size class) */
} dp_buffer;

typedef struct dp_pool_stats {
    uint64_t live_bytes;       /* bytes in slices handed out (size-class rounded) */
    uint64_t peak_bytes;       /* maximum of live_bytes */
    uint64_t block_bytes;      /* bytes of VkDeviceMemory held, both kinds */
    uint64_t device_block_bytes, host_block_bytes;
    uint64_t acquires;         /* dp_pool_acquire calls that succeeded */
    uint64_t releases;
    uint64_t reuses;           /* acquires served from a range released earlier */
    uint64_t blocks;           /* blocks held now */
    uint64_t vk_allocations;   /* vkAllocateMemory calls that succeeded, ever */
    uint64_t live_slices;
} dp_pool_stats;

dp_status dp_pool_create(dp_device *dev, uint64_t block_bytes, dp_pool **out, dp_err *err);
void      dp_pool_destroy(dp_pool *pool);   /* NULL-safe; the caller has idled the queue */

/* A slice of at least `bytes` (> 0). Out of memory => DP_EGPU_OOM naming the request and the
** heap; nothing is leaked and the pool stays usable. `what` names the request in messages (may be NULL). */
dp_status dp_pool_acquire(dp_pool *pool, dp_mem kind, uint64_t bytes, const char *what,
                          dp_buffer *out, dp_err *err);
void      dp_pool_release(dp_pool *pool, dp_buffer *buf);   /* zeroes *buf; NULL/zeroed buf is a no-op */

/* Frees blocks that hold no live slice. */
void      dp_pool_trim(dp_pool *pool);
void      dp_pool_get_stats(const dp_pool *pool, dp_pool_stats *out);

/* Size class of a request: what a slice of `bytes` really reserves. */
uint64_t  dp_pool_size_class(uint64_t bytes);

#endif
