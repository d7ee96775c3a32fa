/*
** gpu/device.c: instance, validation messenger, physical device choice, the logical device with the
** features doppler's kernels rely on, and the context objects that live with it (pool, shader cache,
** profiler, kernel cache, transfer command buffer). The capabilities it reads: gpu/device_caps.c.
*/
#include <dlfcn.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/device_impl.h"
#include "gpu/kernel.h"
#include "gpu/paths.h"
#include "gpu/pipeline_cache.h"
#include "gpu/pool.h"
#include "gpu/prefetch.h"
#include "gpu/profiler.h"
#include "gpu/shader.h"
#include "gpu/vkcheck.h"
#include "gpu/warmup.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"
#define INSTALL_HINT "install a Vulkan driver; for a CPU-only machine lavapipe: `apt-get install mesa-vulkan-drivers`"


void dp_device_opts_default(dp_device_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->index = -1;
}

static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                     VkDebugUtilsMessageTypeFlagsEXT type,
                                                     const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                     void *user)
{
    (void)type;
    uint64_t *count = user;
    if (sev & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
        if (count) (*count)++;
        fprintf(stderr, "doppler: vulkan validation %s: %s\n",
                (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning",
                data && data->pMessage ? data->pMessage : "(no message)");
    }
    return VK_FALSE;
}

static bool has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return false;
    VkLayerProperties *p = calloc(n, sizeof *p);
    bool found = false;
    if (p && vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(p[i].layerName, name) == 0;
    free(p);
    return found;
}

static void messenger_info(VkDebugUtilsMessengerCreateInfoEXT *mi, uint64_t *count)
{
    memset(mi, 0, sizeof *mi);
    mi->sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    mi->messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi->messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi->pfnUserCallback = on_debug_message;
    mi->pUserData = count;
}

/* validation: NULL count = no layer. */
/*
** Under AddressSanitizer, keep the Vulkan driver and layer libraries mapped after the loader
** unloads them: LeakSanitizer symbolises leaks at exit, and a leak inside a library that was
** already unloaded shows as "<unknown module>", which no suppression can name. With the library
** kept (RTLD_NODELETE), tests/lsan.supp can suppress the driver's own leaks by library name.
** Release builds never do this.
*/
#if defined(__SANITIZE_ADDRESS__)
static void keep_driver_libraries_mapped(void)
{
    static const char *const libs[] = {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) (void)dlopen(libs[i], RTLD_NOW | RTLD_NODELETE);
}
#else
static void keep_driver_libraries_mapped(void) {}
#endif

static dp_status create_instance(bool validation, uint64_t *count, VkInstance *out,
                                 VkDebugUtilsMessengerEXT *messenger, dp_err *err)
{
    *out = VK_NULL_HANDLE;
    if (messenger) *messenger = VK_NULL_HANDLE;
    uint32_t api = 0;
    if (vkEnumerateInstanceVersion(&api) != VK_SUCCESS || api < VK_API_VERSION_1_2)
        return DP_FAIL(err, DP_ENODEV, "the Vulkan loader is older than 1.2 (%u.%u); %s",
                       VK_API_VERSION_MAJOR(api), VK_API_VERSION_MINOR(api), INSTALL_HINT);
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "doppler",
        .applicationVersion = 1,
        .pEngineName = "doppler",
        .apiVersion = VK_API_VERSION_1_3 <= api ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2,
    };
    const char *layers[] = {VALIDATION_LAYER};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT mi;
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pApplicationInfo = &app,
    };
    if (validation) {
        if (!has_layer(VALIDATION_LAYER))
            return DP_FAIL(err, DP_EGPU, "validation was requested (DOPPLER_VALIDATION=1) but %s is not "
                           "installed: `apt-get install vulkan-validationlayers`", VALIDATION_LAYER);
        messenger_info(&mi, count);
        ci.pNext = &mi;   /* also covers vkCreateInstance / vkDestroyInstance themselves */
        ci.enabledLayerCount = 1;
        ci.ppEnabledLayerNames = layers;
        ci.enabledExtensionCount = 1;
        ci.ppEnabledExtensionNames = exts;
    }
    keep_driver_libraries_mapped();
    VkResult r = vkCreateInstance(&ci, NULL, out);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED) {
        *out = VK_NULL_HANDLE;
        return DP_FAIL(err, DP_ENODEV, "no Vulkan driver found (vkCreateInstance -> %s); %s",
                       dp_vk_result_name(r), INSTALL_HINT);
    }
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return dp_vk_fail(err, r, "vkCreateInstance", __FILE__, __LINE__);
    }
    if (validation && messenger) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(*out, "vkCreateDebugUtilsMessengerEXT");
        if (!create || create(*out, &mi, NULL, messenger) != VK_SUCCESS) {
            vkDestroyInstance(*out, NULL);
            *out = VK_NULL_HANDLE;
            return DP_FAIL(err, DP_EGPU, "could not create the validation debug messenger");
        }
    }
    return DP_OK;
}

static void destroy_messenger(VkInstance inst, VkDebugUtilsMessengerEXT m)
{
    if (!m) return;
    PFN_vkDestroyDebugUtilsMessengerEXT destroy =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(inst, "vkDestroyDebugUtilsMessengerEXT");
    if (destroy) destroy(inst, m, NULL);
}

/* Queues asked of one family at most (DOPPLER_SIDE_QUEUE=F.I takes I < this). */
#define MAX_SIDE_INDEX 16u

/* DOPPLER_SIDE_QUEUE=F[.I] (dev->side_req_family, side_req_index) checked against the device's families. */
static dp_status check_side_request(VkPhysicalDevice pd, const dp_device *dev, dp_err *err)
{
    uint32_t n = 0, f = dev->side_req_family, i = dev->side_req_index;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = calloc(n ? n : 1, sizeof *q);
    if (!q) return DP_FAIL(err, DP_ENOMEM, "out of host memory reading the queue families");
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    dp_status st = DP_OK;
    if (f >= n)
        st = DP_FAIL(err, DP_EINVAL, "DOPPLER_SIDE_QUEUE=%u.%u: the device has %u queue families", f, i, n);
    else if (!(q[f].queueFlags & VK_QUEUE_COMPUTE_BIT))
        st = DP_FAIL(err, DP_EINVAL, "DOPPLER_SIDE_QUEUE=%u.%u: queue family %u does not compute", f, i, f);
    else if (f == dev->qfamily)   /* why: on the H200, with a second queue of the main family as the side queue,
                                  ** no decode finished within 60 s (docs/BENCHMARKS.md 46f) */
        st = DP_FAIL(err, DP_EINVAL, "DOPPLER_SIDE_QUEUE=%u.%u: family %u is the main queue's; the side queue must be "
                     "of another family (DOPPLER_SIDE_QUEUE=main runs the side work on the main queue)", f, i, f);
    else if (i >= q[f].queueCount || i >= MAX_SIDE_INDEX)
        st = DP_FAIL(err, DP_EINVAL, "DOPPLER_SIDE_QUEUE=%u.%u: queue family %u has %u queues (at most %u used)", f, i, f,
                     q[f].queueCount, MAX_SIDE_INDEX);
    free(q);
    return st;
}

/* DOPPLER_SIDE_QUEUE's value: "main", "F" or "F.I" (decimal); false for anything else. */
static bool parse_side_queue(const char *v, dp_device *dev)
{
    dev->side_req_family = dev->side_req_index = UINT32_MAX;
    if (!v || !*v) return true;
    if (strcmp(v, "main") == 0) { dev->side_on_main = true; return true; }
    char *end;
    unsigned long f = strtoul(v, &end, 10), i = 0;
    if (end == v || f > 255) return false;
    if (*end == '.') {
        const char *s = end + 1;
        i = strtoul(s, &end, 10);
        if (end == s || i > 255) return false;
    }
    if (*end) return false;
    dev->side_req_family = (uint32_t)f;
    dev->side_req_index = (uint32_t)i;
    return true;
}

static dp_status enumerate(VkInstance inst, VkPhysicalDevice **out, uint32_t *n, dp_err *err)
{
    *out = NULL;
    *n = 0;
    VkResult r = vkEnumeratePhysicalDevices(inst, n, NULL);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return dp_vk_fail(err, r, "vkEnumeratePhysicalDevices", __FILE__, __LINE__);
    if (*n == 0) return DP_FAIL(err, DP_ENODEV, "the Vulkan loader found no device; %s", INSTALL_HINT);
    *out = calloc(*n, sizeof **out);
    if (!*out) return DP_FAIL(err, DP_ENOMEM, "out of host memory listing Vulkan devices");
    r = vkEnumeratePhysicalDevices(inst, n, *out);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(*out);
        *out = NULL;
        return dp_vk_fail(err, r, "vkEnumeratePhysicalDevices", __FILE__, __LINE__);
    }
    return DP_OK;
}

dp_status dp_device_list(dp_device_caps **out, uint32_t *count, dp_err *err)
{
    VkInstance inst;
    VkPhysicalDevice *pds = NULL;
    uint32_t n = 0;
    dp_status st;
    *out = NULL;
    *count = 0;
    if ((st = create_instance(false, NULL, &inst, NULL, err)) != DP_OK) return st;
    if ((st = enumerate(inst, &pds, &n, err)) != DP_OK) goto done;
    *out = calloc(n, sizeof **out);
    if (!*out) { st = DP_FAIL(err, DP_ENOMEM, "out of host memory listing Vulkan devices"); goto done; }
    for (uint32_t i = 0; i < n; i++) dp_device_read_caps(inst, pds[i], i, &(*out)[i]);
    *count = n;
done:
    free(pds);
    vkDestroyInstance(inst, NULL);
    return st;
}

static dp_status pick_device(VkPhysicalDevice *pds, uint32_t n, int want, uint32_t *out, dp_err *err)
{
    const char *env = getenv("DOPPLER_DEVICE");
    if (want < 0 && env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end || v < 0) return DP_FAIL(err, DP_EINVAL, "DOPPLER_DEVICE=%s: expected a device index", env);
        want = (int)v;
    }
    if (want >= 0) {
        if ((uint32_t)want >= n)
            return DP_FAIL(err, DP_ENODEV, "device %d asked for, but only %u Vulkan device(s) exist (see `doppler devices`)",
                           want, n);
        *out = (uint32_t)want;
        return DP_OK;
    }
    *out = 0;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) { *out = i; break; }
    }
    return DP_OK;
}

static uint32_t device_extensions(VkPhysicalDevice pd, const char **names, bool coopmat_nv, bool exec_props,
                                  bool cond)
{
    uint32_t ne = 0, k = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &ne, NULL);
    VkExtensionProperties *ext = calloc(ne ? ne : 1, sizeof *ext);
    if (!ext) return 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &ne, ext);
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pd, &p);
    if (p.apiVersion < VK_API_VERSION_1_3 && dp_device_has_ext(ext, ne, EXT_SUBGROUP_SIZE)) names[k++] = EXT_SUBGROUP_SIZE;
    if (coopmat_nv) names[k++] = EXT_COOPMAT_NV;
    if (exec_props) names[k++] = EXT_EXEC_PROPS;
    if (cond) names[k++] = VK_EXT_CONDITIONAL_RENDERING_EXTENSION_NAME;
    free(ext);
    return k;
}

static dp_status create_device(dp_device *dev, dp_err *err)
{
    VkPhysicalDevice pd = dev->phys;
    const dp_device_caps *c = &dev->caps;
    bool v13 = c->api_version >= VK_API_VERSION_1_3;
    if (c->api_version < VK_API_VERSION_1_2)
        return DP_FAIL(err, DP_ENODEV, "%s supports Vulkan %u.%u; doppler needs 1.2", c->name,
                       VK_API_VERSION_MAJOR(c->api_version), VK_API_VERSION_MINOR(c->api_version));
    if (!c->buffer_device_address || !c->int64)
        return DP_FAIL(err, DP_ENODEV, "%s lacks bufferDeviceAddress or shaderInt64, which every doppler kernel needs",
                       c->name);

    /* What the device supports, then switch on the subset we use. */
    VkPhysicalDeviceVulkan13Features s13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceVulkan12Features s12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features s11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceFeatures2 s2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s11};
    s11.pNext = &s12;
    if (v13) s12.pNext = &s13;
    vkGetPhysicalDeviceFeatures2(pd, &s2);

    VkPhysicalDeviceVulkan13Features e13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceVulkan12Features e12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features e11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceFeatures2 e2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &e11};
    VkPhysicalDeviceSubgroupSizeControlFeatures esg = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    e11.pNext = &e12;
    e2.features.shaderInt64 = s2.features.shaderInt64;
    e2.features.shaderInt16 = s2.features.shaderInt16;
    e2.features.shaderFloat64 = s2.features.shaderFloat64;
    e11.storageBuffer16BitAccess = s11.storageBuffer16BitAccess;
    e11.uniformAndStorageBuffer16BitAccess = s11.uniformAndStorageBuffer16BitAccess;
    e11.storagePushConstant16 = s11.storagePushConstant16;
    e12.bufferDeviceAddress = VK_TRUE;
    e12.shaderFloat16 = s12.shaderFloat16;
    e12.shaderInt8 = s12.shaderInt8;
    e12.storageBuffer8BitAccess = s12.storageBuffer8BitAccess;
    e12.uniformAndStorageBuffer8BitAccess = s12.uniformAndStorageBuffer8BitAccess;
    e12.storagePushConstant8 = s12.storagePushConstant8;
    e12.shaderBufferInt64Atomics = s12.shaderBufferInt64Atomics;
    e12.shaderSharedInt64Atomics = s12.shaderSharedInt64Atomics;
    e12.scalarBlockLayout = s12.scalarBlockLayout;
    e12.timelineSemaphore = s12.timelineSemaphore;
    e12.hostQueryReset = s12.hostQueryReset;
    e12.vulkanMemoryModel = s12.vulkanMemoryModel;
    e12.vulkanMemoryModelDeviceScope = s12.vulkanMemoryModelDeviceScope;
    e12.shaderSubgroupExtendedTypes = s12.shaderSubgroupExtendedTypes;
    if (v13) {
        e12.pNext = &e13;
        e13.subgroupSizeControl = s13.subgroupSizeControl;
        e13.computeFullSubgroups = s13.computeFullSubgroups;
        e13.shaderIntegerDotProduct = s13.shaderIntegerDotProduct;
        e13.maintenance4 = s13.maintenance4;
        e13.synchronization2 = s13.synchronization2;
    } else if (c->subgroup_size_control || c->compute_full_subgroups) {
        e12.pNext = &esg;
        esg.subgroupSizeControl = c->subgroup_size_control;
        esg.computeFullSubgroups = c->compute_full_subgroups;
    }
    dev->host_query_reset = s12.hostQueryReset;

    const char *exts[8];
    uint32_t n_ext = device_extensions(pd, exts, c->coopmat_nv, dev->kernel_stats, c->conditional_rendering);
    /* Cooperative matrices (gemm_cm.comp): the extension and its one feature, last in the chain. */
    VkPhysicalDeviceCooperativeMatrixFeaturesNV ecm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV, .cooperativeMatrix = VK_TRUE};
    if (c->coopmat_nv) {
        VkBaseOutStructure *t = (VkBaseOutStructure *)&e2;
        while (t->pNext) t = t->pNext;
        t->pNext = (VkBaseOutStructure *)&ecm;
    }
    /* Kernel statistics (DOPPLER_KERNEL_STATS=1 where caps.pipeline_stats): only when asked, since the
    ** driver may keep more of each compilation around. */
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR eex = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE};
    if (dev->kernel_stats) {
        VkBaseOutStructure *t = (VkBaseOutStructure *)&e2;
        while (t->pNext) t = t->pNext;
        t->pNext = (VkBaseOutStructure *)&eex;
    }

    /* Conditional rendering (dp_recorder_begin_conditional): the feature, where the device has it. */
    VkPhysicalDeviceConditionalRenderingFeaturesEXT ecr = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_CONDITIONAL_RENDERING_FEATURES_EXT, .conditionalRendering = VK_TRUE};
    if (c->conditional_rendering) {
        VkBaseOutStructure *t = (VkBaseOutStructure *)&e2;
        while (t->pNext) t = t->pNext;
        t->pNext = (VkBaseOutStructure *)&ecr;
    }

    /* A second queue, of another family, for work beside the main queue's recordings (gpu/prefetch.c): its
    ** barriers do not wait for the other queue's work. side_on_main puts that work on the main queue instead,
    ** one after the other (for tests on devices with one queue: it runs, it gains nothing).
    ** DOPPLER_SIDE_QUEUE=F[.I] names the queue (check_side_request: of another family). */
    uint32_t side_index = 0;
    if (dev->side_on_main) {
        dev->side_family = dev->qfamily;
    } else if (dev->side_req_family != UINT32_MAX) {
        dp_status st = check_side_request(pd, dev, err);
        if (st != DP_OK) return st;
        dev->side_family = dev->side_req_family;
        side_index = dev->side_req_index;
    } else {
        dev->side_family = dp_device_side_family(pd, dev->qfamily);
    }
    float prio[MAX_SIDE_INDEX];
    for (uint32_t i = 0; i < MAX_SIDE_INDEX; i++) prio[i] = 1.0f;
    bool side_apart = dev->side_family != UINT32_MAX && dev->side_family != dev->qfamily;
    VkDeviceQueueCreateInfo qis[2] = {{
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = dev->qfamily,
        .queueCount = 1,
        .pQueuePriorities = prio,
    }, {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = dev->side_family,
        .queueCount = side_index + 1,
        .pQueuePriorities = prio,
    }};
    uint32_t n_qi = side_apart ? 2 : 1;
    VkDeviceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &e2,
        .queueCreateInfoCount = n_qi,
        .pQueueCreateInfos = qis,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = n_ext ? exts : NULL,
    };
    dp_status st = DP_VK(err, vkCreateDevice(pd, &ci, NULL, &dev->device));
    if (st != DP_OK) { dev->device = VK_NULL_HANDLE; return st; }
    vkGetDeviceQueue(dev->device, dev->qfamily, 0, &dev->queue);
    if (dev->side_family != UINT32_MAX) vkGetDeviceQueue(dev->device, dev->side_family, side_index, &dev->side_queue);
    if (dev->kernel_stats) {
        dev->get_executables = (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(
            dev->device, "vkGetPipelineExecutablePropertiesKHR");
        dev->get_statistics = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
            dev->device, "vkGetPipelineExecutableStatisticsKHR");
        dev->kernel_stats = dev->get_executables && dev->get_statistics;
    }
    if (c->conditional_rendering) {
        dev->begin_conditional = (PFN_vkCmdBeginConditionalRenderingEXT)vkGetDeviceProcAddr(
            dev->device, "vkCmdBeginConditionalRenderingEXT");
        dev->end_conditional = (PFN_vkCmdEndConditionalRenderingEXT)vkGetDeviceProcAddr(
            dev->device, "vkCmdEndConditionalRenderingEXT");
        if (!dev->begin_conditional || !dev->end_conditional) dev->caps.conditional_rendering = false;
    }
    return DP_OK;
}

static dp_status create_context(dp_device *dev, const dp_device_opts *o, dp_err *err)
{
    dp_status st;
    VkCommandPoolCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = dev->qfamily,
    };
    if ((st = DP_VK(err, vkCreateCommandPool(dev->device, &pi, NULL, &dev->cmd_pool))) != DP_OK) return st;
    if (dev->side_queue) {
        pi.queueFamilyIndex = dev->side_family;
        if ((st = DP_VK(err, vkCreateCommandPool(dev->device, &pi, NULL, &dev->side_cmd_pool))) != DP_OK) return st;
    }
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = dev->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    if ((st = DP_VK(err, vkAllocateCommandBuffers(dev->device, &ai, &dev->xfer_cmd))) != DP_OK) return st;
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((st = DP_VK(err, vkCreateFence(dev->device, &fi, NULL, &dev->xfer_fence))) != DP_OK) return st;

    if ((st = dp_pool_create(dev, o->block_bytes, &dev->pool, err)) != DP_OK) return st;
    if ((st = dp_profiler_create(dev->caps.timestamp_period_ns, dev->caps.timestamp_valid_bits, &dev->profiler, err)) != DP_OK)
        return st;

    char shaders[4096];
    const char *sdir = o->shaders_dir;
    if (!sdir) {
        if ((st = dp_shaders_dir(shaders, sizeof shaders, err)) != DP_OK) return st;
        sdir = shaders;
    }
    char key[1024];
    snprintf(key, sizeof key, "%04x:%04x:%u:%s:%s:%s", dev->caps.vendor_id, dev->caps.device_id,
             dev->caps.driver_version, dev->caps.name, dev->caps.driver_name, dev->caps.driver_info);
    /* A CPU device (lavapipe) compiles each kernel with LLVM when it is first dispatched: DP_DEVICE_CPU lets
    ** the shaders leave their loops rolled there (dp_common.glsl, DP_UNROLL). */
    const char *define = dev->caps.type == VK_PHYSICAL_DEVICE_TYPE_CPU ? "DP_DEVICE_CPU" : NULL;
    if ((st = dp_shader_cache_create(o->cache_dir, sdir, key, define, &dev->shaders, err)) != DP_OK) return st;
    return dp_pipeline_cache_open(dev, dp_shader_cache_dir(dev->shaders), err);
}

dp_status dp_device_open(const dp_device_opts *opts, dp_device **out, dp_err *err)
{
    dp_device_opts o;
    VkPhysicalDevice *pds = NULL;
    uint32_t n = 0, idx = 0;
    dp_status st;
    *out = NULL;
    if (opts) o = *opts;
    else dp_device_opts_default(&o);

    dp_device *dev = calloc(1, sizeof *dev);
    if (!dev) return DP_FAIL(err, DP_ENOMEM, "out of host memory opening a Vulkan device");
    dev->validation = o.validation || env_flag("DOPPLER_VALIDATION");
    const char *side = getenv("DOPPLER_SIDE_QUEUE");
    if (!parse_side_queue(side, dev)) {
        free(dev);
        return DP_FAIL(err, DP_EINVAL, "DOPPLER_SIDE_QUEUE=%s: expected main, FAMILY or FAMILY.INDEX (e.g. 2 or 2.1)", side);
    }
    dev->side_on_main = dev->side_on_main || o.side_on_main;
    dev->timeout_ms = o.timeout_ms;
    if (!dev->timeout_ms) {
        const char *t = getenv("DOPPLER_GPU_TIMEOUT_MS");
        dev->timeout_ms = t && atoi(t) > 0 ? (uint32_t)atoi(t) : 120000;
    }
    if ((st = create_instance(dev->validation, &dev->validation_count, &dev->instance, &dev->messenger, err)) != DP_OK)
        goto fail;
    if ((st = enumerate(dev->instance, &pds, &n, err)) != DP_OK) goto fail;
    if ((st = pick_device(pds, n, o.index, &idx, err)) != DP_OK) goto fail;
    dev->phys = pds[idx];
    dp_device_read_caps(dev->instance, dev->phys, idx, &dev->caps);
    if (o.kernel_stats || env_flag("DOPPLER_KERNEL_STATS")) {
        dev->kernel_stats = dev->caps.pipeline_stats;
        if (!dev->kernel_stats)   /* asked for, not available: say so rather than print nothing */
            fprintf(stderr, "doppler: DOPPLER_KERNEL_STATS: %s has no VK_KHR_pipeline_executable_properties; "
                            "no kernel statistics\n", dev->caps.name);
    }
    vkGetPhysicalDeviceMemoryProperties(dev->phys, &dev->mem);
    dev->qfamily = dp_device_compute_family(dev->phys, NULL);
    if (dev->qfamily == UINT32_MAX) {
        st = DP_FAIL(err, DP_ENODEV, "%s has no compute queue", dev->caps.name);
        goto fail;
    }
    if ((st = create_device(dev, err)) != DP_OK) goto fail;
    if ((st = create_context(dev, &o, err)) != DP_OK) goto fail;
    free(pds);
    *out = dev;
    return DP_OK;
fail:
    free(pds);
    dp_device_close(dev);
    return st;
}

void dp_device_close(dp_device *dev)
{
    if (!dev) return;
    if (dev->device) {
        dp_prefetch_quiesce(dev);   /* a side kernel would otherwise run on until its spin limit */
        dp_warmup_destroy(dev);
        vkDeviceWaitIdle(dev->device);
        dp_pipeline_cache_close(dev);   /* written back first: the kernels' pipelines came through it */
        dp_kernel_cache_destroy(dev);
        if (dev->pool) dp_pool_release(dev->pool, &dev->staging);
        dp_pool_destroy(dev->pool);
        if (dev->xfer_fence) vkDestroyFence(dev->device, dev->xfer_fence, NULL);
        if (dev->cmd_pool) vkDestroyCommandPool(dev->device, dev->cmd_pool, NULL);
        if (dev->side_cmd_pool) vkDestroyCommandPool(dev->device, dev->side_cmd_pool, NULL);
        vkDestroyDevice(dev->device, NULL);
    }
    dp_shader_cache_destroy(dev->shaders);
    dp_profiler_destroy(dev->profiler);
    if (dev->instance) {
        destroy_messenger(dev->instance, dev->messenger);
        vkDestroyInstance(dev->instance, NULL);
    }
    free(dev);
}

dp_status dp_device_submit_wait(dp_device *dev, VkCommandBuffer cmd, VkFence fence, const char *what, dp_err *err)
{
    dp_status st;
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    /* a warm-up on this very queue would hold the submit back until it ran out of polls */
    if (dev->side_on_main) dp_warmup_stop(dev);
    if ((st = DP_VK(err, vkQueueSubmit(dev->queue, 1, &si, fence))) != DP_OK) return st;
    dev->submits++;
    VkResult r = vkWaitForFences(dev->device, 1, &fence, VK_TRUE, (uint64_t)dev->timeout_ms * 1000000ull);
    if (r == VK_TIMEOUT)
        return DP_FAIL(err, DP_EGPU, "%s: the GPU did not finish within %u ms (DOPPLER_GPU_TIMEOUT_MS)",
                       what ? what : "submit", dev->timeout_ms);
    if ((st = DP_VK(err, r)) != DP_OK) return st;
    return DP_VK(err, vkResetFences(dev->device, 1, &fence));
}

void dp_device_cmd_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT | VK_ACCESS_HOST_READ_BIT,
    };
    vkCmdPipelineBarrier(cmd,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                         VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                         0, 1, &mb, 0, NULL, 0, NULL);
}

/* Compute -> compute only: what separates two dependent dispatches. Leaving the indirect, transfer and host
   stages out lets the GPU's front end run ahead (fetch the next dispatch's indirect arguments, set it up)
   while the previous one drains; the full barrier above waits for everything. */
void dp_device_cmd_barrier_compute(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                         0, NULL, 0, NULL);
}

const dp_device_caps *dp_device_get_caps(const dp_device *dev) { return &dev->caps; }
uint64_t dp_device_validation_count(const dp_device *dev) { return dev ? dev->validation_count : 0; }
bool dp_device_validation_enabled(const dp_device *dev) { return dev->validation; }
uint64_t dp_device_submit_count(const dp_device *dev) { return dev->submits; }
uint64_t dp_device_side_submit_count(const dp_device *dev) { return dev->side_submits; }
uint32_t dp_device_timeout_ms(const dp_device *dev) { return dev->timeout_ms; }
dp_pool *dp_device_pool(dp_device *dev) { return dev->pool; }
dp_shader_cache *dp_device_shaders(dp_device *dev) { return dev->shaders; }
dp_profiler *dp_device_profiler(dp_device *dev) { return dev->profiler; }
VkInstance dp_device_vk_instance(const dp_device *dev) { return dev->instance; }
VkPhysicalDevice dp_device_vk_physical(const dp_device *dev) { return dev->phys; }
VkDevice dp_device_vk(const dp_device *dev) { return dev->device; }
VkQueue dp_device_vk_queue(const dp_device *dev) { return dev->queue; }
uint32_t dp_device_vk_queue_family(const dp_device *dev) { return dev->qfamily; }

dp_status dp_device_wait_idle(dp_device *dev, dp_err *err)
{
    return DP_VK(err, vkDeviceWaitIdle(dev->device));
}
