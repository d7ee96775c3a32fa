/*
** gpu/device_caps.c: what a physical device can do, read once (dp_device_caps): its properties, features,
** extensions, limits, queue families and memory heaps, as the kernels and the lowering rules branch on them.
** gpu/device.c asks for them when it lists devices and before it creates the logical device.
*/
#include <stdlib.h>
#include <string.h>

#include "gpu/device_impl.h"

bool dp_device_has_ext(const VkExtensionProperties *e, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(e[i].extensionName, name) == 0) return true;
    return false;
}

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

const char *dp_subgroup_op_name(VkSubgroupFeatureFlagBits bit)
{
    switch (bit) {
    case VK_SUBGROUP_FEATURE_BASIC_BIT: return "basic";
    case VK_SUBGROUP_FEATURE_VOTE_BIT: return "vote";
    case VK_SUBGROUP_FEATURE_ARITHMETIC_BIT: return "arithmetic";
    case VK_SUBGROUP_FEATURE_BALLOT_BIT: return "ballot";
    case VK_SUBGROUP_FEATURE_SHUFFLE_BIT: return "shuffle";
    case VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT: return "shuffle_relative";
    case VK_SUBGROUP_FEATURE_CLUSTERED_BIT: return "clustered";
    case VK_SUBGROUP_FEATURE_QUAD_BIT: return "quad";
    case VK_SUBGROUP_FEATURE_PARTITIONED_BIT_NV: return "partitioned_nv";
    default: return NULL;
    }
}

/* Compute-capable queue family, or UINT32_MAX. Prefers a compute-only family (async compute). */
uint32_t dp_device_compute_family(VkPhysicalDevice pd, uint32_t *ts_bits)
{
    uint32_t n = 0, best = UINT32_MAX;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = calloc(n ? n : 1, sizeof *q);
    if (!q) return UINT32_MAX;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        if (best == UINT32_MAX) best = i;
        /* The graphics+compute family is the most capable queue on every desktop driver; keep the
        ** first compute family unless it lacks timestamps and another has them. */
        if (q[best].timestampValidBits == 0 && q[i].timestampValidBits > 0) best = i;
    }
    if (ts_bits) *ts_bits = best == UINT32_MAX ? 0 : q[best].timestampValidBits;
    free(q);
    return best;
}

/* A compute-capable family other than `main` (NVIDIA's compute-only family runs its work beside the graphics
** family's: gpu/prefetch.c), or UINT32_MAX. */
uint32_t dp_device_side_family(VkPhysicalDevice pd, uint32_t main)
{
    uint32_t n = 0, side = UINT32_MAX;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = calloc(n ? n : 1, sizeof *q);
    if (!q) return UINT32_MAX;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    for (uint32_t i = 0; i < n && side == UINT32_MAX; i++)
        if (i != main && (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) side = i;
    free(q);
    return side;
}

/* The f16 x f16 -> f32 subgroup shape of VK_NV_cooperative_matrix, preferring 16 x 16 x 16 (fewer, larger
** tiles per warp) over 16 x 8 x 16; false if the extension or such a shape is missing. The query is an
** instance-level extension command, so it goes through vkGetInstanceProcAddr. */
static bool coopmat_nv_shape(VkInstance inst, VkPhysicalDevice pd, uint32_t sz[3])
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get = (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)
        vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &fcm};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    uint32_t n = 0;
    if (!fcm.cooperativeMatrix || !get || get(pd, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
    if (!p) return false;
    for (uint32_t i = 0; i < n; i++) p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    bool found = false;
    if (get(pd, &n, p) == VK_SUCCESS) {
        for (uint32_t i = 0; i < n; i++) {
            const VkCooperativeMatrixPropertiesNV *q = &p[i];
            if (q->scope != VK_SCOPE_SUBGROUP_NV || q->AType != VK_COMPONENT_TYPE_FLOAT16_NV ||
                q->BType != VK_COMPONENT_TYPE_FLOAT16_NV || q->CType != VK_COMPONENT_TYPE_FLOAT32_NV ||
                q->DType != VK_COMPONENT_TYPE_FLOAT32_NV || q->MSize != 16 || q->KSize != 16)
                continue;
            if (q->NSize == 16 || (q->NSize == 8 && !found)) {
                sz[0] = q->MSize, sz[1] = q->NSize, sz[2] = q->KSize;
                found = true;
            }
        }
    }
    free(p);
    return found;
}

void dp_device_read_caps(VkInstance inst, VkPhysicalDevice pd, uint32_t index, dp_device_caps *c)
{
    memset(c, 0, sizeof *c);
    c->index = index;
    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);

    uint32_t ne = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &ne, NULL);
    VkExtensionProperties *ext = calloc(ne ? ne : 1, sizeof *ext);
    if (ext) vkEnumerateDeviceExtensionProperties(pd, NULL, &ne, ext);
    else ne = 0;
    bool v13 = base.apiVersion >= VK_API_VERSION_1_3;
    bool sg_ext = dp_device_has_ext(ext, ne, EXT_SUBGROUP_SIZE);

    VkPhysicalDeviceSubgroupSizeControlProperties sgc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
    VkPhysicalDeviceMaintenance4Properties m4 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceShaderIntegerDotProductProperties idp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    sg.pNext = &drv;
    drv.pNext = &m3;
    p2.pNext = &sg;
    if (v13) { m3.pNext = &m4; m4.pNext = &sgc; sgc.pNext = &idp; }
    else if (sg_ext) m3.pNext = &sgc;
    vkGetPhysicalDeviceProperties2(pd, &p2);

    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceSubgroupSizeControlFeatures sgf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    f11.pNext = &f12;
    if (v13) f12.pNext = &f13;
    else if (sg_ext) f12.pNext = &sgf;
    vkGetPhysicalDeviceFeatures2(pd, &f2);

    snprintf(c->name, sizeof c->name, "%s", base.deviceName);
    snprintf(c->driver_name, sizeof c->driver_name, "%s", drv.driverName);
    snprintf(c->driver_info, sizeof c->driver_info, "%s", drv.driverInfo);
    c->vendor_id = base.vendorID;
    c->device_id = base.deviceID;
    c->driver_version = base.driverVersion;
    c->api_version = base.apiVersion;
    c->type = base.deviceType;
    c->type_name = type_name(base.deviceType);
    c->subgroup_size = sg.subgroupSize;
    c->subgroup_ops = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ? sg.supportedOperations : 0;
    c->subgroup_min = c->subgroup_max = sg.subgroupSize;
    if (v13 || sg_ext) {
        bool ctl = v13 ? f13.subgroupSizeControl : sgf.subgroupSizeControl;
        bool full = v13 ? f13.computeFullSubgroups : sgf.computeFullSubgroups;
        c->subgroup_size_control = ctl && (sgc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
        c->compute_full_subgroups = full;
        if (sgc.minSubgroupSize) { c->subgroup_min = sgc.minSubgroupSize; c->subgroup_max = sgc.maxSubgroupSize; }
    }
    c->fp16 = f12.shaderFloat16;
    c->bf16 = dp_device_has_ext(ext, ne, EXT_BF16);
    c->int8 = f12.shaderInt8;
    c->int16 = f2.features.shaderInt16;
    c->int64 = f2.features.shaderInt64;
    c->int64_atomics = f12.shaderBufferInt64Atomics;
    c->storage8 = f12.storageBuffer8BitAccess;
    c->storage16 = f11.storageBuffer16BitAccess;
    /* Only through Vulkan 1.3, whose feature create_device switches on (gemv_q's DP_XQ8 needs it). */
    c->integer_dot = v13 && f13.shaderIntegerDotProduct;
    c->integer_dot_fast = c->integer_dot && idp.integerDotProduct4x8BitPackedSignedAccelerated &&
                          idp.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
    c->coopmat = dp_device_has_ext(ext, ne, EXT_COOPMAT_KHR);
    uint32_t cm[3] = {0, 0, 0};
    c->coopmat_nv = dp_device_has_ext(ext, ne, EXT_COOPMAT_NV) && f12.shaderFloat16 && f11.storageBuffer16BitAccess &&
                    coopmat_nv_shape(inst, pd, cm);
    c->coopmat_m = cm[0], c->coopmat_n = cm[1], c->coopmat_k = cm[2];
    c->buffer_device_address = f12.bufferDeviceAddress;
    if (dp_device_has_ext(ext, ne, EXT_EXEC_PROPS)) {
        VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fx = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
        VkPhysicalDeviceFeatures2 fx2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &fx};
        vkGetPhysicalDeviceFeatures2(pd, &fx2);
        c->pipeline_stats = fx.pipelineExecutableInfo;
    }
    if (dp_device_has_ext(ext, ne, VK_EXT_CONDITIONAL_RENDERING_EXTENSION_NAME)) {
        VkPhysicalDeviceConditionalRenderingFeaturesEXT fc = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_CONDITIONAL_RENDERING_FEATURES_EXT};
        VkPhysicalDeviceFeatures2 fc2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &fc};
        vkGetPhysicalDeviceFeatures2(pd, &fc2);
        c->conditional_rendering = fc.conditionalRendering;
    }

    const VkPhysicalDeviceLimits *l = &base.limits;
    c->max_shared_memory = l->maxComputeSharedMemorySize;
    for (int i = 0; i < 3; i++) {
        c->max_wg_size[i] = l->maxComputeWorkGroupSize[i];
        c->max_wg_count[i] = l->maxComputeWorkGroupCount[i];
    }
    c->max_wg_invocations = l->maxComputeWorkGroupInvocations;
    c->max_storage_buffer_range = l->maxStorageBufferRange;
    c->max_allocation_size = m3.maxMemoryAllocationSize;
    c->max_buffer_size = v13 ? m4.maxBufferSize : m3.maxMemoryAllocationSize;
    c->max_push_constants = l->maxPushConstantsSize;

    uint32_t ts_bits = 0;
    c->side_queue = dp_device_side_family(pd, dp_device_compute_family(pd, &ts_bits)) != UINT32_MAX;
    c->timestamp_valid_bits = ts_bits;
    c->timestamps = ts_bits > 0 && l->timestampPeriod > 0;
    c->timestamp_period_ns = l->timestampPeriod;

    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    c->heap_count = mp.memoryHeapCount < DP_DEVICE_MAX_HEAPS ? mp.memoryHeapCount : DP_DEVICE_MAX_HEAPS;
    for (uint32_t i = 0; i < c->heap_count; i++) {
        c->heaps[i].size = mp.memoryHeaps[i].size;
        c->heaps[i].device_local = mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    }
    free(ext);
}
