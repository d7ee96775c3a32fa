/*
** gpu/side_mem.h: small buffers that both the main and the side queue use (concurrent sharing), in memory
** that is device-local and host-visible: control words a side kernel polls at L2 speed while the host
** writes them through the mapping (gpu/prefetch.c, gpu/warmup.c). Not from the buffer pool: its blocks are
** device-local or host memory (256 MiB each, while memory both device-local and host-visible may be a
** 256 MiB window in all).
*/
#ifndef DP_GPU_SIDE_MEM_H
#define DP_GPU_SIDE_MEM_H

#include <stdint.h>
#include <vulkan/vulkan.h>

#include "core/status.h"
#include "gpu/device.h"

typedef struct dp_side_mem {
    VkBuffer       buf;
    VkDeviceMemory mem;
    void          *map;
    uint64_t       addr, size;   /* device address and bytes */
} dp_side_mem;

/* The memory type both device-local, host-visible and host-coherent, or UINT32_MAX where there is none. */
uint32_t  dp_side_mem_type(const dp_device *dev);
/* A mapped buffer of `size` bytes (storage, device address) that both queue families may use. */
dp_status dp_side_mem_alloc(dp_device *dev, uint64_t size, dp_side_mem *m, dp_err *err);
void      dp_side_mem_free(dp_device *dev, dp_side_mem *m);   /* zeroes *m; safe on a zeroed one */

#endif
