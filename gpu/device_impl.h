/*
** gpu/device_impl.h: the device context's fields, shared by the gpu/ sources only (everyone else uses
** the accessors in gpu/device.h).
*/
#ifndef DP_GPU_DEVICE_IMPL_H
#define DP_GPU_DEVICE_IMPL_H

#include "gpu/device.h"
#include "gpu/kernel.h"
#include "gpu/pool.h"

struct dp_kernel;

struct dp_device {
    VkInstance               instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice         phys;
    VkDevice                 device;
    VkQueue                  queue;
    VkQueue                  side_queue;         /* a second queue (gpu/prefetch.c), or VK_NULL_HANDLE */
    uint32_t                 side_family;        /* its family (may be qfamily), or UINT32_MAX */
    bool                     side_on_main;       /* dp_device_opts.side_on_main */
    uint32_t                 side_req_family;    /* DOPPLER_SIDE_QUEUE=F[.I]: the side queue asked for, or */
    uint32_t                 side_req_index;     /* UINT32_MAX (side_family's choice, queue 0) */
    VkCommandPool            side_cmd_pool;
    struct dp_prefetch      *side_active;        /* whose side kernel runs now (gpu/prefetch.c), or NULL */
    struct dp_warmup        *warmup;             /* the clock warm-up (gpu/warmup.c), made at its first start */
    uint64_t                 side_submits;       /* of the submits, those on the side queue */
    uint64_t                 pf_counts[3];       /* side kernels that have finished: stages, late, skipped (prefetch.c) */
    uint32_t                 qfamily;
    VkPhysicalDeviceMemoryProperties mem;
    dp_device_caps           caps;
    bool                     validation;
    uint64_t                 validation_count;   /* written by the messenger callback */
    uint32_t                 timeout_ms;
    uint64_t                 submits;
    bool                     host_query_reset;
    /* caps.pipeline_stats switched on (DOPPLER_KERNEL_STATS=1): gpu/kernel_stats.c prints each new pipeline's */
    bool                     kernel_stats;
    PFN_vkGetPipelineExecutablePropertiesKHR get_executables;
    PFN_vkGetPipelineExecutableStatisticsKHR get_statistics;
    /* caps.conditional_rendering switched on */
    PFN_vkCmdBeginConditionalRenderingEXT begin_conditional;
    PFN_vkCmdEndConditionalRenderingEXT end_conditional;

    dp_pool                 *pool;
    dp_shader_cache         *shaders;
    dp_profiler             *profiler;

    struct dp_kernel       **kernels;            /* kernel cache (gpu/kernel.c) */
    VkPipelineCache          pipeline_cache;     /* the driver's pipelines across processes (gpu/pipeline_cache.c) */
    char                     pipeline_file[4096];/* its file, or "" (in memory only) */
    uint64_t                 pipeline_loaded;    /* bytes read from it at open */
    uint32_t                 pipelines_new;      /* kernels created since: the close writes it back */
    uint32_t                 n_kernels, cap_kernels;
    dp_kernel_times          kernel_times;       /* where dp_kernel_get's time went (gpu/kernel.h) */

    VkCommandPool            cmd_pool;           /* for recorders and transfers (one thread) */
    VkCommandBuffer          xfer_cmd;           /* uploads / downloads */
    VkFence                  xfer_fence;
    dp_buffer                staging;            /* DP_MEM_HOST, DP_STAGING_CHUNK, acquired lazily */
};

/* Extension names the capabilities and the logical device both ask about. Header 1.3.239 predates
** VK_KHR_cooperative_matrix: the names are what matter for detection. */
#define EXT_COOPMAT_KHR "VK_KHR_cooperative_matrix"
#define EXT_COOPMAT_NV "VK_NV_cooperative_matrix"
#define EXT_BF16 "VK_KHR_shader_bfloat16"
#define EXT_SUBGROUP_SIZE "VK_EXT_subgroup_size_control"
#define EXT_EXEC_PROPS VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME

/* gpu/device_caps.c: physical device `index`'s capabilities into c; whether `name` is among e[0..n); its
** compute queue family (timestamp bits to ts_bits, if not NULL) and a compute family other than `main`, or
** UINT32_MAX. */
void     dp_device_read_caps(VkInstance inst, VkPhysicalDevice pd, uint32_t index, dp_device_caps *c);
bool     dp_device_has_ext(const VkExtensionProperties *e, uint32_t n, const char *name);
uint32_t dp_device_compute_family(VkPhysicalDevice pd, uint32_t *ts_bits);
uint32_t dp_device_side_family(VkPhysicalDevice pd, uint32_t main);

/* Submits one command buffer and waits for `fence` (then resets it). Timeout => DP_EGPU. */
dp_status dp_device_submit_wait(dp_device *dev, VkCommandBuffer cmd, VkFence fence, const char *what,
                                dp_err *err);

/* A full memory barrier between compute/transfer work (and towards indirect reads and the host). */
void dp_device_cmd_barrier(VkCommandBuffer cmd);
void dp_device_cmd_barrier_compute(VkCommandBuffer cmd);

#endif
