/*
** gpu/warmup.c: the clock warm-up (see warmup.h). Its state hangs off the device (dev->warmup), made at the
** first start: the kernel, a command buffer of the side queue's pool that launches it, a fence, and two
** words both queues use (gpu/side_mem.h): the quit flag the host sets and the poll count the kernel leaves.
*/
#include <stdatomic.h>
#include <stdlib.h>

#include "gpu/device_impl.h"
#include "gpu/kernel.h"
#include "gpu/side_mem.h"
#include "gpu/vkcheck.h"
#include "gpu/warmup.h"

enum { CTL_QUIT = 0, CTL_POLLS = 1, CTL_WORDS = 2 };

struct dp_warmup {
    dp_kernel       *kernel;
    dp_side_mem      ctl;
    VkCommandBuffer  cmd;
    VkFence          fence;
    bool             running;
    uint64_t         starts;
    uint32_t         last_polls;
};

static dp_status create(dp_device *dev, dp_warmup **out, dp_err *err)
{
    dp_status st;
    dp_warmup *w = calloc(1, sizeof *w);
    if (!w) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating the clock warm-up");
    dev->warmup = w;   /* dp_warmup_destroy frees what was made if a step below fails */
    dp_kernel_desc kd = {.file = "loop/warmup.comp"};
    if ((st = dp_kernel_get(dev, &kd, &w->kernel, err)) != DP_OK) return st;
    if ((st = dp_side_mem_alloc(dev, CTL_WORDS * 4, &w->ctl, err)) != DP_OK) return st;
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = dev->side_cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    if ((st = DP_VK(err, vkAllocateCommandBuffers(dev->device, &ai, &w->cmd))) != DP_OK) { w->cmd = NULL; return st; }
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((st = DP_VK(err, vkCreateFence(dev->device, &fi, NULL, &w->fence))) != DP_OK) { w->fence = NULL; return st; }
    *out = w;
    return DP_OK;
}

/* Notes the end of a kernel whose fence has signalled. */
static dp_status ended(dp_device *dev, dp_warmup *w, dp_err *err)
{
    w->running = false;
    w->last_polls = ((volatile uint32_t *)w->ctl.map)[CTL_POLLS];
    return DP_VK(err, vkResetFences(dev->device, 1, &w->fence));
}

dp_status dp_warmup_start(dp_device *dev, uint32_t polls, bool *started, dp_err *err)
{
    dp_status st;
    *started = false;
    if (!dev->side_queue || dp_side_mem_type(dev) == UINT32_MAX || polls == 0) return DP_OK;
    dp_warmup *w = dev->warmup;
    if (!w && (st = create(dev, &w, err)) != DP_OK) {
        dp_warmup_destroy(dev);
        return st;
    }
    if (w->running) {   /* still there, or ended by itself (ran out of polls): then launch it again */
        VkResult r = vkGetFenceStatus(dev->device, w->fence);
        if (r == VK_NOT_READY) { *started = true; return DP_OK; }
        if ((st = DP_VK(err, r)) != DP_OK) return st;
        if ((st = ended(dev, w, err)) != DP_OK) return st;
    }
    if ((st = DP_VK(err, vkResetCommandBuffer(w->cmd, 0))) != DP_OK) return st;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if ((st = DP_VK(err, vkBeginCommandBuffer(w->cmd, &bi))) != DP_OK) return st;
    struct { uint64_t ctl; uint32_t limit, pad; } pc = {w->ctl.addr, polls, 0};
    vkCmdBindPipeline(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dp_kernel_vk_pipeline(w->kernel));
    vkCmdPushConstants(w->cmd, dp_kernel_vk_layout(w->kernel), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       dp_kernel_reflection(w->kernel)->push_size, &pc);
    vkCmdDispatch(w->cmd, 1, 1, 1);
    if ((st = DP_VK(err, vkEndCommandBuffer(w->cmd))) != DP_OK) return st;
    volatile uint32_t *ctl = w->ctl.map;
    ctl[CTL_QUIT] = 0;
    ctl[CTL_POLLS] = 0;
    atomic_thread_fence(memory_order_seq_cst);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &w->cmd};
    if ((st = DP_VK(err, vkQueueSubmit(dev->side_queue, 1, &si, w->fence))) != DP_OK) return st;
    w->running = true;
    w->starts++;
    dev->submits++;
    dev->side_submits++;
    *started = true;
    return DP_OK;
}

void dp_warmup_stop(dp_device *dev)
{
    dp_warmup *w = dev->warmup;
    if (!w || !w->running) return;
    ((volatile uint32_t *)w->ctl.map)[CTL_QUIT] = 1;
    /* The mapping may be write-combined: a fence sends the store on now rather than whenever the CPU's
    ** write-combining buffer drains (until then the kernel would spin on). */
    atomic_thread_fence(memory_order_seq_cst);
    dp_err ignored = {0};
    /* The kernel leaves at its next poll; should the wait fail (a lost device), the warm-up is dropped and
    ** the caller's own next Vulkan call reports the cause. */
    VkResult r = vkWaitForFences(dev->device, 1, &w->fence, VK_TRUE, (uint64_t)dev->timeout_ms * 1000000ull);
    if (r == VK_SUCCESS) ended(dev, w, &ignored);
    else w->running = false;
}

void dp_warmup_get_stats(dp_device *dev, dp_warmup_stats *out)
{
    dp_warmup *w = dev->warmup;
    *out = (dp_warmup_stats){0};
    if (!w) return;
    if (w->running && vkGetFenceStatus(dev->device, w->fence) == VK_SUCCESS) {
        dp_err ignored = {0};
        ended(dev, w, &ignored);
    }
    out->starts = w->starts;
    out->last_polls = w->last_polls;
    out->running = w->running;
}

void dp_warmup_destroy(dp_device *dev)
{
    dp_warmup *w = dev->warmup;
    if (!w) return;
    dp_warmup_stop(dev);
    if (w->fence) vkDestroyFence(dev->device, w->fence, NULL);
    if (w->cmd) vkFreeCommandBuffers(dev->device, dev->side_cmd_pool, 1, &w->cmd);
    dp_side_mem_free(dev, &w->ctl);
    free(w);
    dev->warmup = NULL;
}
