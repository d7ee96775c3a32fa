/*
** gpu/pipeline_cache.c: a VkPipelineCache kept in a file (see pipeline_cache.h).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "gpu/device_impl.h"
#include "gpu/pipeline_cache.h"
#include "gpu/vkcheck.h"

/* doppler's own 16 bytes before the driver's data: a magic word, this format's number and an xxh64 of the data,
** so that a file changed after it was written (a disk error, a copy cut short) never reaches the driver. */
#define FILE_MAGIC 0x43507064u   /* "dpPC" */
#define FILE_FORMAT 1u
#define FILE_HEADER 16u
#define HEADER_BYTES 32u   /* VkPipelineCacheHeaderVersionOne: length, version, vendor, device, uuid[16] */
/* A larger file is dropped (the close writes this process's pipelines alone): Vulkan cannot prune a cache, and
** each kernel variant ever made would otherwise stay in it (one model's decode and prefill kernels: ~0.8 MB on
** the H100, 38i). */
#define MAX_FILE_BYTES (64u << 20)

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

bool dp_pipeline_cache_header_ok(const void *data, uint64_t n, uint32_t vendor, uint32_t device,
                                 const uint8_t uuid[VK_UUID_SIZE])
{
    const uint8_t *p = data;
    if (!p || n < HEADER_BYTES) return false;
    uint32_t length = le32(p), version = le32(p + 4);
    return length >= HEADER_BYTES && length <= n && version == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
           le32(p + 8) == vendor && le32(p + 12) == device && memcmp(p + 16, uuid, VK_UUID_SIZE) == 0;
}

/* The whole file, or NULL (missing, unreadable, empty or larger than MAX_FILE_BYTES). */
static void *read_all(const char *path, uint64_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    void *buf = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len > 0 && (unsigned long)len <= MAX_FILE_BYTES && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len))) {
        if (fread(buf, 1, (size_t)len, f) == (size_t)len) *n = (uint64_t)len;
        else { free(buf); buf = NULL; }
    }
    fclose(f);
    return buf;
}

dp_status dp_pipeline_cache_open(dp_device *dev, const char *dir, dp_err *err)
{
    VkPhysicalDeviceProperties pp;
    vkGetPhysicalDeviceProperties(dev->phys, &pp);
    dev->pipeline_file[0] = 0;
    if (dir && *dir) {
        int n = snprintf(dev->pipeline_file, sizeof dev->pipeline_file, "%s/pipelines-%04x-%04x-", dir,
                         pp.vendorID, pp.deviceID);
        for (int i = 0; i < (int)VK_UUID_SIZE && n > 0 && (size_t)n + 3 < sizeof dev->pipeline_file; i++)
            n += snprintf(dev->pipeline_file + n, sizeof dev->pipeline_file - (size_t)n, "%02x", pp.pipelineCacheUUID[i]);
        if (n < 0 || (size_t)n + 5 >= sizeof dev->pipeline_file) dev->pipeline_file[0] = 0;   /* path too long */
        else snprintf(dev->pipeline_file + n, sizeof dev->pipeline_file - (size_t)n, ".bin");
    }
    uint64_t file_size = 0, size = 0;
    uint8_t *file = dev->pipeline_file[0] ? read_all(dev->pipeline_file, &file_size) : NULL;
    const uint8_t *data = NULL;
    if (file && file_size >= FILE_HEADER && le32(file) == FILE_MAGIC && le32(file + 4) == FILE_FORMAT) {
        uint64_t hash = (uint64_t)le32(file + 8) | (uint64_t)le32(file + 12) << 32;
        data = file + FILE_HEADER;
        size = file_size - FILE_HEADER;
        if (XXH64(data, (size_t)size, 0) != hash ||
            !dp_pipeline_cache_header_ok(data, size, pp.vendorID, pp.deviceID, pp.pipelineCacheUUID))
            data = NULL;
    }
    if (!data) size = 0;   /* none, changed since written, another driver's, or not ours: start empty */
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = (size_t)size, .pInitialData = data};
    dp_status st = DP_VK(err, vkCreatePipelineCache(dev->device, &ci, NULL, &dev->pipeline_cache));
    if (st != DP_OK && data) {   /* the driver refused the data after all: an empty cache will do */
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        size = 0;
        st = DP_VK(err, vkCreatePipelineCache(dev->device, &ci, NULL, &dev->pipeline_cache));
    }
    free(file);
    if (st != DP_OK) dev->pipeline_cache = VK_NULL_HANDLE;
    dev->pipeline_loaded = st == DP_OK ? size : 0;
    dev->pipelines_new = 0;
    return st;
}

void dp_pipeline_cache_note_new(dp_device *dev) { dev->pipelines_new++; }

uint64_t dp_pipeline_cache_loaded(const dp_device *dev) { return dev->pipeline_loaded; }
const char *dp_pipeline_cache_file(const dp_device *dev) { return dev->pipeline_file; }

/* Writes the cache's data to the file (temporary file, then rename). Failures only cost the next process time. */
static void save(dp_device *dev)
{
    size_t n = 0;
    if (vkGetPipelineCacheData(dev->device, dev->pipeline_cache, &n, NULL) != VK_SUCCESS || n == 0) return;
    if (n == dev->pipeline_loaded) return;   /* every kernel came from the file: nothing new to keep */
    void *data = malloc(n);
    if (!data) return;
    if (vkGetPipelineCacheData(dev->device, dev->pipeline_cache, &n, data) == VK_SUCCESS) {
        char tmp[sizeof dev->pipeline_file + 32];
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", dev->pipeline_file, (long)getpid());
        uint64_t hash = XXH64(data, n, 0);
        uint8_t head[FILE_HEADER];
        put_le32(head, FILE_MAGIC);
        put_le32(head + 4, FILE_FORMAT);
        put_le32(head + 8, (uint32_t)hash);
        put_le32(head + 12, (uint32_t)(hash >> 32));
        FILE *f = fopen(tmp, "wb");
        bool ok = f && fwrite(head, 1, FILE_HEADER, f) == FILE_HEADER && fwrite(data, 1, n, f) == n;
        if (f && fclose(f) != 0) ok = false;
        if (!ok || rename(tmp, dev->pipeline_file) != 0) remove(tmp);
    }
    free(data);
}

void dp_pipeline_cache_close(dp_device *dev)
{
    if (!dev->pipeline_cache) return;
    if (dev->pipelines_new && dev->pipeline_file[0]) save(dev);
    vkDestroyPipelineCache(dev->device, dev->pipeline_cache, NULL);
    dev->pipeline_cache = VK_NULL_HANDLE;
}
