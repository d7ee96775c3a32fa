/*
** gpu/vkcheck.h: every VkResult goes through DP_VK, in every build type.
** A failed call becomes a dp_status (OUT_OF_DEVICE_MEMORY -> DP_EGPU_OOM, OUT_OF_HOST_MEMORY ->
** DP_ENOMEM, anything else -> DP_EGPU) and a message "vkCall(...) -> VK_ERROR_NAME".
** Success codes other than VK_SUCCESS (VK_TIMEOUT, VK_NOT_READY, VK_INCOMPLETE) are failures
** here: call sites that expect them test the VkResult themselves.
*/
#ifndef DP_GPU_VKCHECK_H
#define DP_GPU_VKCHECK_H

#include <vulkan/vulkan.h>

#include "core/status.h"

const char *dp_vk_result_name(VkResult r);   /* VK_ERROR_DEVICE_LOST -> "VK_ERROR_DEVICE_LOST" */
dp_status   dp_vk_status(VkResult r);        /* the dp_status a failed r maps to */
dp_status   dp_vk_fail(dp_err *err, VkResult r, const char *call, const char *file, int line);

static inline dp_status dp_vk_check_(dp_err *err, VkResult r, const char *call, const char *file, int line)
{
    return r == VK_SUCCESS ? DP_OK : dp_vk_fail(err, r, call, file, line);
}
/* Use it as: if ((st = DP_VK(err, vkX(...))) != DP_OK) goto fail; */
#define DP_VK(err, call) dp_vk_check_((err), (call), #call, __FILE__, __LINE__)

#endif
