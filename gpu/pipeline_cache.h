/*
** gpu/pipeline_cache.h: the driver's compiled pipelines kept across processes (a VkPipelineCache saved in the
** SPIR-V cache directory). A process compiles its plans on first use, and on the H100 making their kernels
** took ~220 of the ~325 ms a Gemma 3 1B session spent compiling plans, with the driver's own caches warm; with
** this file the plans compiled ~20 % faster (docs/BENCHMARKS.md, session 31, 38e and 38i). Every kernel is
** created through this cache, which is read when the device opens and written back when it closes if a kernel
** was added.
** The file (pipelines-VENDOR-DEVICE-UUID.bin) is 16 bytes of doppler's (a magic word, a format number, an xxh64
** of the rest) and the driver's data, which starts with Vulkan's pipeline cache header. A file whose hash does
** not match (changed since it was written), whose header does not name this device and driver (vendor, device,
** pipelineCacheUUID) or that is shorter than its headers is ignored, and so is one over 64 MiB (a cache cannot
** be pruned: the next close writes only what that process made). Writes go to a temporary file renamed over
** it, so that processes sharing the directory never read half a file. Without a usable directory the cache lives in memory only.
**
**   dp_pipeline_cache_open(dev, dir, err)   makes dev->pipeline_cache (dir "" or NULL: in memory)
**   dp_pipeline_cache_note_new(dev)         a kernel was created through it (the close writes it back)
**   dp_pipeline_cache_close(dev)            writes it back if new kernels were noted; destroys it
**   dp_pipeline_cache_loaded(dev)           bytes of the driver's data read from the file at open (0: none, or
**                                           ignored)
**   dp_pipeline_cache_file(dev)             its path
*/
#ifndef DP_GPU_PIPELINE_CACHE_H
#define DP_GPU_PIPELINE_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "core/status.h"
#include "gpu/device.h"

dp_status dp_pipeline_cache_open(dp_device *dev, const char *dir, dp_err *err);
void      dp_pipeline_cache_note_new(dp_device *dev);
void      dp_pipeline_cache_close(dp_device *dev);
uint64_t  dp_pipeline_cache_loaded(const dp_device *dev);
const char *dp_pipeline_cache_file(const dp_device *dev);   /* "" when it lives in memory only */

/* Whether `data` (n bytes) is a pipeline cache this device's driver made: its header names the vendor, device
** and pipelineCacheUUID given. Exposed for the tests. */
bool      dp_pipeline_cache_header_ok(const void *data, uint64_t n, uint32_t vendor, uint32_t device,
                                      const uint8_t uuid[VK_UUID_SIZE]);

#endif
