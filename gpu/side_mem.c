/*
** gpu/side_mem.c: buffers both queues use (see side_mem.h).
*/
#include <string.h>

#include "gpu/device_impl.h"
#include "gpu/side_mem.h"
#include "gpu/vkcheck.h"

uint32_t dp_side_mem_type(const dp_device *dev)
{
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < dev->mem.memoryTypeCount; i++)
        if ((dev->mem.memoryTypes[i].propertyFlags & want) == want) return i;
    return UINT32_MAX;
}

void dp_side_mem_free(dp_device *dev, dp_side_mem *m)
{
    if (m->buf) vkDestroyBuffer(dev->device, m->buf, NULL);
    if (m->mem) vkFreeMemory(dev->device, m->mem, NULL);   /* unmaps */
    memset(m, 0, sizeof *m);
}

dp_status dp_side_mem_alloc(dp_device *dev, uint64_t size, dp_side_mem *m, dp_err *err)
{
    dp_status st;
    VkDevice d = dev->device;
    uint32_t type = dp_side_mem_type(dev);
    uint32_t fams[2] = {dev->qfamily, dev->side_family};
    bool two = dev->side_family != UINT32_MAX && dev->side_family != dev->qfamily;
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
        .sharingMode = two ? VK_SHARING_MODE_CONCURRENT : VK_SHARING_MODE_EXCLUSIVE,
        .queueFamilyIndexCount = two ? 2 : 0,
        .pQueueFamilyIndices = two ? fams : NULL,
    };
    memset(m, 0, sizeof *m);
    if (type == UINT32_MAX)
        return DP_FAIL(err, DP_EGPU, "%s has no memory both device-local and host-visible", dev->caps.name);
    if ((st = DP_VK(err, vkCreateBuffer(d, &bi, NULL, &m->buf))) != DP_OK) { m->buf = VK_NULL_HANDLE; return st; }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d, m->buf, &req);
    if (!(req.memoryTypeBits & (1u << type))) {
        dp_side_mem_free(dev, m);
        return DP_FAIL(err, DP_EGPU, "a control buffer of both queues cannot live in memory type %u", type);
    }
    VkMemoryAllocateFlagsInfo fl = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fl, .allocationSize = req.size,
        .memoryTypeIndex = type};
    if ((st = DP_VK(err, vkAllocateMemory(d, &ai, NULL, &m->mem))) != DP_OK) { m->mem = VK_NULL_HANDLE; goto fail; }
    if ((st = DP_VK(err, vkBindBufferMemory(d, m->buf, m->mem, 0))) != DP_OK) goto fail;
    if ((st = DP_VK(err, vkMapMemory(d, m->mem, 0, VK_WHOLE_SIZE, 0, &m->map))) != DP_OK) goto fail;
    VkBufferDeviceAddressInfo bai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = m->buf};
    m->addr = vkGetBufferDeviceAddress(d, &bai);
    m->size = size;
    return DP_OK;
fail:
    dp_side_mem_free(dev, m);
    return st;
}
