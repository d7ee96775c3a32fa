/*
** gpu/vkcheck.c: VkResult names and their mapping to dp_status (see vkcheck.h).
** Our own switch rather than vk_enum_string_helper.h, which is C++-only in some SDKs.
*/
#include "gpu/vkcheck.h"

const char *dp_vk_result_name(VkResult r)
{
    switch (r) {
#define N(x) case x: return #x;
    N(VK_SUCCESS)
    N(VK_NOT_READY)
    N(VK_TIMEOUT)
    N(VK_EVENT_SET)
    N(VK_EVENT_RESET)
    N(VK_INCOMPLETE)
    N(VK_ERROR_OUT_OF_HOST_MEMORY)
    N(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    N(VK_ERROR_INITIALIZATION_FAILED)
    N(VK_ERROR_DEVICE_LOST)
    N(VK_ERROR_MEMORY_MAP_FAILED)
    N(VK_ERROR_LAYER_NOT_PRESENT)
    N(VK_ERROR_EXTENSION_NOT_PRESENT)
    N(VK_ERROR_FEATURE_NOT_PRESENT)
    N(VK_ERROR_INCOMPATIBLE_DRIVER)
    N(VK_ERROR_TOO_MANY_OBJECTS)
    N(VK_ERROR_FORMAT_NOT_SUPPORTED)
    N(VK_ERROR_FRAGMENTED_POOL)
    N(VK_ERROR_UNKNOWN)
    N(VK_ERROR_OUT_OF_POOL_MEMORY)
    N(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    N(VK_ERROR_FRAGMENTATION)
    N(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    N(VK_PIPELINE_COMPILE_REQUIRED)
    N(VK_ERROR_SURFACE_LOST_KHR)
    N(VK_ERROR_NATIVE_WINDOW_IN_USE_KHR)
    N(VK_SUBOPTIMAL_KHR)
    N(VK_ERROR_OUT_OF_DATE_KHR)
    N(VK_ERROR_INCOMPATIBLE_DISPLAY_KHR)
    N(VK_ERROR_VALIDATION_FAILED_EXT)
    N(VK_ERROR_INVALID_SHADER_NV)
    N(VK_ERROR_NOT_PERMITTED_KHR)
    N(VK_THREAD_IDLE_KHR)
    N(VK_THREAD_DONE_KHR)
    N(VK_OPERATION_DEFERRED_KHR)
    N(VK_OPERATION_NOT_DEFERRED_KHR)
#undef N
    default: return "VK_RESULT_UNKNOWN";
    }
}

dp_status dp_vk_status(VkResult r)
{
    switch (r) {
    case VK_SUCCESS: return DP_OK;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return DP_EGPU_OOM;
    case VK_ERROR_OUT_OF_HOST_MEMORY: return DP_ENOMEM;
    case VK_ERROR_INCOMPATIBLE_DRIVER: return DP_ENODEV;
    default: return DP_EGPU;
    }
}

dp_status dp_vk_fail(dp_err *err, VkResult r, const char *call, const char *file, int line)
{
    /* Calls are long expressions: keep the function name, which is what a reader needs. */
    int n = 0;
    while (call[n] && call[n] != '(') n++;
    return dp_fail_at(err, dp_vk_status(r), file, line, "%.*s(...) -> %s (%d)", n, call,
                      dp_vk_result_name(r), (int)r);
}
