/*
** gpu/device.h: one Vulkan device and what lives as long as it does: the buffer pool, the shader
** compiler + SPIR-V cache, the kernel (pipeline) cache and the profiler.
** Opening a device picks a physical device (opts->index, else $DOPPLER_DEVICE, else the first
** discrete GPU, else the first one), enables buffer device address and the small-type features
** every kernel relies on, and reads the capabilities that kernels branch on (dp_device_caps).
** Validation: opts->validation or DOPPLER_VALIDATION=1 enables VK_LAYER_KHRONOS_validation and a
** debug messenger that prints each warning/error to stderr and counts it; tests fail on any.
** Not here: memory (gpu/pool.h), kernels (gpu/kernel.h), command recording (gpu/recorder.h).
*/
#ifndef DP_GPU_DEVICE_H
#define DP_GPU_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <vulkan/vulkan.h>

#include "core/status.h"

typedef struct dp_device dp_device;          /* opaque: gpu/device_impl.h */
typedef struct dp_pool dp_pool;              /* gpu/pool.h */
typedef struct dp_shader_cache dp_shader_cache; /* gpu/shader.h */
typedef struct dp_profiler dp_profiler;      /* gpu/profiler.h */

#define DP_DEVICE_MAX_HEAPS 16

typedef struct dp_memory_heap {
    uint64_t size;            /* bytes */
    bool     device_local;
} dp_memory_heap;

typedef struct dp_device_caps {
    uint32_t index;                 /* position in vkEnumeratePhysicalDevices */
    char     name[256];             /* "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)" */
    char     driver_name[256];      /* VkPhysicalDeviceDriverProperties */
    char     driver_info[256];
    uint32_t vendor_id, device_id;
    uint32_t driver_version;        /* raw, vendor-encoded */
    uint32_t api_version;           /* VK_MAKE_API_VERSION */
    VkPhysicalDeviceType type;
    const char *type_name;          /* "discrete", "integrated", "virtual", "cpu", "other" */

    uint32_t subgroup_size;         /* default size: 8 on lavapipe, 32 on NVIDIA, 64 on AMD */
    uint32_t subgroup_min, subgroup_max; /* with subgroup size control; else both = subgroup_size */
    VkSubgroupFeatureFlags subgroup_ops; /* in compute: see dp_subgroup_op_name */
    bool     subgroup_size_control; /* VK_EXT_subgroup_size_control / 1.3 feature */
    bool     compute_full_subgroups;

    bool     fp16;                  /* shaderFloat16 arithmetic */
    bool     bf16;                  /* VK_KHR_shader_bfloat16 present (arithmetic on bf16) */
    bool     int8, int16, int64;    /* shaderInt8 / shaderInt16 / shaderInt64 */
    bool     int64_atomics;         /* shaderBufferInt64Atomics, switched on (the fused MLP's sums) */
    bool     storage8, storage16;   /* storageBuffer8BitAccess / storageBuffer16BitAccess */
    bool     integer_dot;           /* shaderIntegerDotProduct (Vulkan 1.3), switched on */
    bool     integer_dot_fast;      /* ... with packed 4 x 8-bit signed and mixed-sign dot products accelerated */
    bool     coopmat;               /* VK_KHR_cooperative_matrix present */
    bool     side_queue;            /* a second compute queue family, whose work runs beside the main one's */
    /* VK_NV_cooperative_matrix with a subgroup-scope f16 x f16 -> f32 shape (M x N x K below): what
    ** matmul/gemm_cm.comp needs. Debian 12's headers and glslang predate the KHR extension, so the NV one
    ** (NVIDIA drivers still expose it) is the one doppler enables and uses; 0 sizes: none. */
    bool     coopmat_nv;
    uint32_t coopmat_m, coopmat_n, coopmat_k;
    /* VK_KHR_pipeline_executable_properties with pipelineExecutableInfo: the driver reports statistics of
    ** each compiled kernel (NVIDIA: registers per invocation, ...); DOPPLER_KERNEL_STATS=1 prints them. */
    bool     pipeline_stats;
    bool     buffer_device_address;
    /* VK_EXT_conditional_rendering with conditionalRendering, switched on: a recording can skip a run of
    ** dispatches by a word in memory (dp_recorder_begin_conditional; the GPU decode loop's steps after a stop). */
    bool     conditional_rendering;

    uint32_t max_shared_memory;     /* maxComputeSharedMemorySize, bytes */
    uint32_t max_wg_size[3];        /* maxComputeWorkGroupSize */
    uint32_t max_wg_invocations;    /* maxComputeWorkGroupInvocations */
    uint32_t max_wg_count[3];       /* maxComputeWorkGroupCount */
    uint32_t max_storage_buffer_range; /* bytes per binding; irrelevant with BDA but reported */
    uint64_t max_buffer_size;       /* maxBufferSize (1.3) or maxMemoryAllocationSize */
    uint64_t max_allocation_size;   /* maxMemoryAllocationSize */
    uint32_t max_push_constants;    /* bytes; 128 on lavapipe */

    bool     timestamps;            /* compute queue has timestampValidBits > 0 */
    uint32_t timestamp_valid_bits;
    float    timestamp_period_ns;   /* ns per tick */

    uint32_t heap_count;
    dp_memory_heap heaps[DP_DEVICE_MAX_HEAPS];
} dp_device_caps;

typedef struct dp_device_opts {
    int         index;        /* physical device; -1: $DOPPLER_DEVICE, else first discrete, else 0 */
    bool        validation;   /* force the validation layer (also: DOPPLER_VALIDATION=1) */
    bool        kernel_stats; /* print each new pipeline's driver statistics to stderr (also: DOPPLER_KERNEL_STATS=1;
                              ** devices without caps.pipeline_stats say so once and run without) */
    uint32_t    timeout_ms;   /* fence waits; 0: $DOPPLER_GPU_TIMEOUT_MS, else 120000 */
    uint64_t    block_bytes;  /* pool block size, fixed; 0: 256 MiB (host-visible memory: through 32, 64, 128) */
    const char *cache_dir;    /* SPIR-V cache; NULL: $DOPPLER_CACHE_DIR, $XDG_CACHE_HOME/doppler, ~/.cache/doppler */
    const char *shaders_dir;  /* NULL: dp_home_dir()/shaders */
    bool        side_on_main; /* the side queue's work (gpu/prefetch.c) on the main queue, one after the other: for
                              ** tests on devices with one queue (also: DOPPLER_SIDE_QUEUE=main). DOPPLER_SIDE_QUEUE=F
                              ** or F.I takes queue I (default 0) of queue family F, another than the main queue's,
                              ** as the side queue instead of the first other compute family's first queue: to
                              ** measure what the choice of queue does (docs/BENCHMARKS.md, 46f) */
} dp_device_opts;

/* Fills opts with the defaults above (index -1, everything else 0/NULL). */
void dp_device_opts_default(dp_device_opts *opts);

/* Capabilities of every physical device, without creating logical devices. *out is malloc'ed
** (free() it). No loader / no driver / no device => DP_ENODEV naming what was found. */
dp_status dp_device_list(dp_device_caps **out, uint32_t *count, dp_err *err);

/* opts may be NULL (defaults). On failure *out is NULL and nothing is leaked. */
dp_status dp_device_open(const dp_device_opts *opts, dp_device **out, dp_err *err);
void      dp_device_close(dp_device *dev);      /* NULL-safe; waits for the queue first */

const dp_device_caps *dp_device_get_caps(const dp_device *dev);
void      dp_device_print_caps(FILE *f, const dp_device_caps *caps);
void      dp_device_print_caps_json(FILE *f, const dp_device_caps *caps);
const char *dp_subgroup_op_name(VkSubgroupFeatureFlagBits bit);  /* "basic", "vote", "arithmetic", ...; NULL if unknown */

/* Warnings + errors the validation messenger has seen since open (0 when validation is off). */
uint64_t  dp_device_validation_count(const dp_device *dev);
bool      dp_device_validation_enabled(const dp_device *dev);

/* Queue submissions made on this device so far (recorders, uploads, downloads). */
uint64_t  dp_device_submit_count(const dp_device *dev);
/* Of those, the side queue's (gpu/prefetch.c): one per side kernel, which serves many replays. */
uint64_t  dp_device_side_submit_count(const dp_device *dev);
uint32_t  dp_device_timeout_ms(const dp_device *dev);

dp_status dp_device_wait_idle(dp_device *dev, dp_err *err);

/* What lives in the device context. */
dp_pool         *dp_device_pool(dp_device *dev);
dp_shader_cache *dp_device_shaders(dp_device *dev);
dp_profiler     *dp_device_profiler(dp_device *dev);

/* Raw handles for code that records Vulkan itself. */
VkInstance       dp_device_vk_instance(const dp_device *dev);
VkPhysicalDevice dp_device_vk_physical(const dp_device *dev);
VkDevice         dp_device_vk(const dp_device *dev);
VkQueue          dp_device_vk_queue(const dp_device *dev);
uint32_t         dp_device_vk_queue_family(const dp_device *dev);

#endif
