/*
** gpu/kernel.h: a kernel = a compute pipeline built from a shader (file or GLSL string), its
** defines and its specialisation constants, set BY NAME (reflected from the SPIR-V). The layout
** has push constants only (tensors are device addresses in the push block). Kernels are cached
** in the device by key (source identity + defines + constants + subgroup options) and owned by
** it: dp_kernel_get twice with the same description returns the same object.
** Workgroup size: the spec constant bound to local_size_x_id = 0 (named WG by convention).
*/
#ifndef DP_GPU_KERNEL_H
#define DP_GPU_KERNEL_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "core/status.h"
#include "gpu/device.h"
#include "gpu/reflect.h"

typedef struct dp_kernel dp_kernel;

typedef struct dp_kconst {
    const char *name;     /* spec constant name, e.g. "WG" */
    double      value;    /* converted to the constant's type (u32/i32 must be integral; bool: != 0) */
} dp_kconst;

typedef struct dp_kernel_desc {
    const char *file;            /* relative to the shaders dir, or absolute */
    const char *source;          /* GLSL text instead of file */
    const char *name;            /* for messages and the profiler; NULL: file's base name without ".comp" */
    const char *const *defines;  /* "NAME=VALUE" or "NAME" */
    uint32_t    n_defines;
    const dp_kconst *constants;
    uint32_t    n_constants;
    uint32_t    subgroup_size;   /* require this subgroup size (needs subgroup size control); 0: any */
    bool        full_subgroups;  /* VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT */
} dp_kernel_desc;

/* Compiles (or finds in the caches) and builds the pipeline. Unknown constant names, values that
** do not fit the type, or a push block larger than the device allows => DP_EINVAL naming the kernel. */
dp_status dp_kernel_get(dp_device *dev, const dp_kernel_desc *desc, dp_kernel **out, dp_err *err);

const char          *dp_kernel_name(const dp_kernel *k);
const dp_reflection *dp_kernel_reflection(const dp_kernel *k);
void                 dp_kernel_local_size(const dp_kernel *k, uint32_t out[3]);  /* after specialisation */
uint32_t             dp_kernel_wg(const dp_kernel *k);                            /* local_size[0] */
VkPipeline           dp_kernel_vk_pipeline(const dp_kernel *k);
VkPipelineLayout     dp_kernel_vk_layout(const dp_kernel *k);
uint32_t             dp_kernel_count(const dp_device *dev);   /* pipelines built on dev so far */

/* Where dp_kernel_get's time went on a device since it opened (seconds, monotonic clock): every call
** hashes its description and searches the cache (lookup_s); a miss then loads or compiles the SPIR-V
** (shader_s: gpu/shader.c's caches or shaderc), reflects it (reflect_s), creates the module and the
** pipeline layout (layout_s) and the pipeline (pipeline_s: the driver, served by the pipeline cache
** file where it can be). recipes/bench/compile.lua reports them per plan. */
typedef struct dp_kernel_times {
    uint64_t lookups;
    uint64_t built;
    double   lookup_s, shader_s, reflect_s, layout_s, pipeline_s;
} dp_kernel_times;

void dp_kernel_get_times(const dp_device *dev, dp_kernel_times *out);

/* Called by dp_device_close. */
void dp_kernel_cache_destroy(dp_device *dev);

#endif
