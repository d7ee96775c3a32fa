/*
** gpu/pool.c: the block suballocator behind dp_pool_acquire / dp_pool_release (see pool.h).
** Each block keeps its free ranges sorted by offset; acquire takes the best fit over all blocks
** of the kind, release coalesces with the neighbours. Dedicated blocks (requests larger than a
** block) go back to the driver as soon as their slice is released: keeping 1 GiB idle is costly.
*/
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/device_impl.h"
#include "gpu/pool.h"
#include "gpu/prefetch.h"
#include "gpu/vkcheck.h"

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

typedef struct range {
    uint64_t off, size;
} range;

typedef struct block {
    VkDeviceMemory mem;        /* VK_NULL_HANDLE: free slot */
    VkBuffer       buf;
    uint64_t       addr;
    uint64_t       size;
    uint64_t       high;       /* bytes below this were handed out at least once */
    void          *map;
    dp_mem         kind;
    bool           dedicated;
    uint64_t       live;       /* slices handed out */
    range         *free;
    uint32_t       n_free, cap_free;
} block;

struct dp_pool {
    dp_device    *dev;
    uint64_t      block_bytes;
    bool          grow[DP_MEM_COUNT];   /* this kind's first blocks are smaller (next_block_bytes) */
    block        *blocks;
    uint32_t      n_blocks;
    dp_pool_stats st;
};

static const VkBufferUsageFlags USAGE =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
    VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* a predicate of conditional rendering may live in any buffer (gpu/recorder.h) */
static VkBufferUsageFlags usage_of(const dp_device *dev)
{
    return USAGE | (dev->caps.conditional_rendering ? VK_BUFFER_USAGE_CONDITIONAL_RENDERING_BIT_EXT : 0);
}

uint64_t dp_pool_size_class(uint64_t bytes)
{
    if (bytes <= DP_POOL_ALIGN) return DP_POOL_ALIGN;
    /* 8 classes per power of two: at most 12.5% of a slice is padding. */
    uint64_t h = 1ull << (63 - __builtin_clzll(bytes - 1));
    uint64_t step = h / 8 < DP_POOL_ALIGN ? DP_POOL_ALIGN : h / 8;
    return align_up(bytes, step);
}

/* Memory type for `kind` among `bits`: device-local first for tensors; host-visible + coherent
** (cached if possible: downloads read it) for staging. UINT32_MAX if none. */
static uint32_t pick_type(const VkPhysicalDeviceMemoryProperties *m, uint32_t bits, dp_mem kind)
{
    static const VkMemoryPropertyFlags want[DP_MEM_COUNT][3] = {
        [DP_MEM_DEVICE] = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, 0},
        [DP_MEM_HOST] = {VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                             VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0},
    };
    for (int w = 0; w < 3; w++) {
        if (w > 0 && want[kind][w] == 0) break;
        for (uint32_t i = 0; i < m->memoryTypeCount; i++)
            if ((bits & (1u << i)) && (m->memoryTypes[i].propertyFlags & want[kind][w]) == want[kind][w])
                return i;
    }
    return UINT32_MAX;
}

/* Which kinds' blocks grow (next_block_bytes): those of memory the host can see, i.e. staging on every device and
** every block on a device whose memory is the host's (lavapipe, an integrated GPU), where the gain is measured
** (docs/BENCHMARKS.md, session 33). A discrete GPU's device-local memory keeps full blocks from the first: nothing
** measured asks for the change there, and decode speed on the H100 moves by ~1.5 % with where weights land from
** one process to the next (run 40f), which an A/B of block sizes could not tell apart (40a). Every buffer the
** pool makes has the same usage, so one probe buffer's memoryTypeBits stand for all (the Vulkan spec says so). */
static dp_status growing_kinds(dp_pool *p, dp_err *err)
{
    VkDevice d = p->dev->device;
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = DP_POOL_ALIGN,
        .usage = usage_of(p->dev),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkBuffer buf;
    dp_status st = DP_VK(err, vkCreateBuffer(d, &bi, NULL, &buf));
    if (st != DP_OK) return st;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d, buf, &req);
    vkDestroyBuffer(d, buf, NULL);
    for (int kind = 0; kind < DP_MEM_COUNT; kind++) {
        uint32_t type = pick_type(&p->dev->mem, req.memoryTypeBits, (dp_mem)kind);
        p->grow[kind] = type != UINT32_MAX &&
                        (p->dev->mem.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    }
    return DP_OK;
}

dp_status dp_pool_create(dp_device *dev, uint64_t block_bytes, dp_pool **out, dp_err *err)
{
    *out = NULL;
    dp_pool *p = calloc(1, sizeof *p);
    if (!p) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating the buffer pool");
    p->dev = dev;
    p->block_bytes = align_up(block_bytes ? block_bytes : DP_POOL_DEFAULT_BLOCK, DP_POOL_ALIGN);
    if (block_bytes == 0) {   /* a size given is kept for every block */
        dp_status st = growing_kinds(p, err);
        if (st != DP_OK) {
            free(p);
            return st;
        }
    }
    *out = p;
    return DP_OK;
}

static void free_block(dp_pool *p, block *b)
{
    VkDevice d = p->dev->device;
    dp_prefetch_quiesce(p->dev);   /* a side prefetch kernel may be reading this memory */
    if (b->map) vkUnmapMemory(d, b->mem);
    if (b->buf) vkDestroyBuffer(d, b->buf, NULL);
    if (b->mem) {
        vkFreeMemory(d, b->mem, NULL);
        p->st.block_bytes -= b->size;
        if (b->kind == DP_MEM_HOST) p->st.host_block_bytes -= b->size;
        else p->st.device_block_bytes -= b->size;
        p->st.blocks--;
    }
    free(b->free);
    memset(b, 0, sizeof *b);
}

void dp_pool_destroy(dp_pool *p)
{
    if (!p) return;
    if (p->st.live_slices)
        fprintf(stderr, "doppler: pool destroyed with %" PRIu64 " live slice(s), %.1f MiB (a tensor was not released)\n",
                p->st.live_slices, MIB(p->st.live_bytes));
    for (uint32_t i = 0; i < p->n_blocks; i++) free_block(p, &p->blocks[i]);
    free(p->blocks);
    free(p);
}

static dp_status oom(dp_pool *p, dp_mem kind, uint64_t bytes, const char *what, uint32_t heap, const char *why,
                     dp_err *err)
{
    const dp_device_caps *c = &p->dev->caps;
    uint64_t hs = heap < c->heap_count ? c->heaps[heap].size : 0;
    return DP_FAIL(err, DP_EGPU_OOM,
                   "out of %s memory: %s needs %.1f MiB (%s); heap %u has %.1f MiB, the pool holds %.1f MiB "
                   "of which %.1f MiB are live",
                   kind == DP_MEM_HOST ? "host-visible" : "device", what ? what : "a buffer", MIB(bytes), why,
                   heap, MIB(hs), MIB(p->st.block_bytes), MIB(p->st.live_bytes));
}

static dp_status new_block(dp_pool *p, dp_mem kind, uint64_t size, bool dedicated, const char *what,
                           uint32_t *out, dp_err *err)
{
    dp_device *dev = p->dev;
    VkDevice d = dev->device;
    block b = {.kind = kind, .dedicated = dedicated, .size = size};
    dp_status st;
    if (size > dev->caps.max_buffer_size && dev->caps.max_buffer_size)
        return oom(p, kind, size, what, 0, "larger than the device's maxBufferSize", err);
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage_of(dev),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    if ((st = DP_VK(err, vkCreateBuffer(d, &bi, NULL, &b.buf))) != DP_OK) return st;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d, b.buf, &req);
    uint32_t type = pick_type(&dev->mem, req.memoryTypeBits, kind);
    if (type == UINT32_MAX) {
        vkDestroyBuffer(d, b.buf, NULL);
        return DP_FAIL(err, DP_EGPU, "%s: no %s memory type fits a storage buffer", dev->caps.name,
                       kind == DP_MEM_HOST ? "host-visible" : "device-local");
    }
    uint32_t heap = dev->mem.memoryTypes[type].heapIndex;
    /* Ask the driver only for what can succeed: some drivers (lavapipe) otherwise overcommit. */
    if (req.size > dev->mem.memoryHeaps[heap].size) {
        vkDestroyBuffer(d, b.buf, NULL);
        return oom(p, kind, req.size, what, heap, "more than the whole heap", err);
    }
    if (dev->caps.max_allocation_size && req.size > dev->caps.max_allocation_size) {
        vkDestroyBuffer(d, b.buf, NULL);
        return oom(p, kind, req.size, what, heap, "more than maxMemoryAllocationSize", err);
    }
    VkMemoryAllocateFlagsInfo fl = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
        .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
    };
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .pNext = &fl,
        .allocationSize = req.size,
        .memoryTypeIndex = type,
    };
    VkResult r = vkAllocateMemory(d, &ai, NULL, &b.mem);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
        vkDestroyBuffer(d, b.buf, NULL);
        return oom(p, kind, req.size, what, heap, "vkAllocateMemory refused", err);
    }
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(d, b.buf, NULL);
        return dp_vk_fail(err, r, "vkAllocateMemory", __FILE__, __LINE__);
    }
    if ((st = DP_VK(err, vkBindBufferMemory(d, b.buf, b.mem, 0))) != DP_OK) goto fail;
    if (kind == DP_MEM_HOST && (st = DP_VK(err, vkMapMemory(d, b.mem, 0, VK_WHOLE_SIZE, 0, &b.map))) != DP_OK)
        goto fail;
    VkBufferDeviceAddressInfo bai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = b.buf};
    b.addr = vkGetBufferDeviceAddress(d, &bai);
    b.free = malloc(4 * sizeof *b.free);
    if (!b.free) { st = DP_FAIL(err, DP_ENOMEM, "out of host memory in the buffer pool"); goto fail; }
    b.cap_free = 4;
    b.n_free = 1;
    b.free[0] = (range){0, size};

    uint32_t slot = 0;
    while (slot < p->n_blocks && p->blocks[slot].mem) slot++;
    if (slot == p->n_blocks) {
        block *nb = realloc(p->blocks, (p->n_blocks + 1) * sizeof *nb);
        if (!nb) { free(b.free); st = DP_FAIL(err, DP_ENOMEM, "out of host memory in the buffer pool"); goto fail; }
        p->blocks = nb;
        p->n_blocks++;
    }
    p->blocks[slot] = b;
    p->st.blocks++;
    p->st.vk_allocations++;
    p->st.block_bytes += size;
    if (kind == DP_MEM_HOST) p->st.host_block_bytes += size;
    else p->st.device_block_bytes += size;
    *out = slot;
    return DP_OK;
fail:
    if (b.map) vkUnmapMemory(d, b.mem);
    vkDestroyBuffer(d, b.buf, NULL);
    vkFreeMemory(d, b.mem, NULL);
    return st;
}

/* Best fit among the blocks of `kind`: returns true and fills *bi, *ri. */
static bool find_fit(dp_pool *p, dp_mem kind, uint64_t size, uint32_t *bi, uint32_t *ri)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        block *b = &p->blocks[i];
        if (!b->mem || b->kind != kind || b->dedicated) continue;
        for (uint32_t j = 0; j < b->n_free; j++)
            if (b->free[j].size >= size && b->free[j].size < best) {
                best = b->free[j].size;
                *bi = i;
                *ri = j;
            }
    }
    return best != UINT64_MAX;
}

/* The size of a new shared block that must hold a slice of `need` bytes (<= block_bytes). Where the kind grows
** (growing_kinds) its first three blocks are 1/8, 1/4 and 1/2 of the default block, as Vulkan Memory Allocator
** sizes blocks when none is given: a small model (a test fixture, a tokenizer-only run) then holds 32 MiB of
** staging instead of 256, and on lavapipe 32 MiB of tensors too; a large one makes three smaller blocks on its
** way to the full size. Why it matters beyond memory: each block is host memory the process touches and the
** sanitizer build (scripts/test.sh) shadows page by page, in every process of the test suite. */
static uint64_t next_block_bytes(const dp_pool *p, dp_mem kind, uint64_t need)
{
    if (!p->grow[kind]) return p->block_bytes;
    uint32_t held = 0;
    for (uint32_t i = 0; i < p->n_blocks; i++)
        if (p->blocks[i].mem && !p->blocks[i].dedicated && p->blocks[i].kind == kind) held++;
    uint64_t size = held >= 3 ? p->block_bytes : align_up(p->block_bytes >> (3 - held), DP_POOL_ALIGN);
    return size < need ? need : size;
}

dp_status dp_pool_acquire(dp_pool *p, dp_mem kind, uint64_t bytes, const char *what, dp_buffer *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    if (bytes == 0) return DP_FAIL(err, DP_EINVAL, "pool: %s asks for 0 bytes", what ? what : "a buffer");
    if (kind >= DP_MEM_COUNT) return DP_FAIL(err, DP_EINVAL, "pool: unknown memory kind %d", (int)kind);
    dp_status st;
    uint32_t bi = 0, ri = 0;
    uint64_t size;
    if (bytes > p->block_bytes) {
        size = align_up(bytes, DP_POOL_ALIGN);
        if ((st = new_block(p, kind, size, true, what, &bi, err)) != DP_OK) return st;
        ri = 0;
    } else {
        size = dp_pool_size_class(bytes);
        if (size > p->block_bytes) size = p->block_bytes;
        if (!find_fit(p, kind, size, &bi, &ri)) {
            if ((st = new_block(p, kind, next_block_bytes(p, kind, size), false, what, &bi, err)) != DP_OK) return st;
            ri = 0;
        }
    }
    block *b = &p->blocks[bi];
    range *r = &b->free[ri];
    uint64_t off = r->off;
    if (off < b->high) p->st.reuses++;
    if (off + size > b->high) b->high = off + size;
    r->off += size;
    r->size -= size;
    if (r->size == 0) {
        memmove(&b->free[ri], &b->free[ri + 1], (b->n_free - ri - 1) * sizeof *r);
        b->n_free--;
    }
    b->live++;
    out->buffer = b->buf;
    out->offset = off;
    out->size = bytes;
    out->addr = b->addr + off;
    out->map = b->map ? (char *)b->map + off : NULL;
    out->kind = kind;
    out->block = bi;
    out->slice = size;
    p->st.acquires++;
    p->st.live_slices++;
    p->st.live_bytes += size;
    if (p->st.live_bytes > p->st.peak_bytes) p->st.peak_bytes = p->st.live_bytes;
    return DP_OK;
}

void dp_pool_release(dp_pool *p, dp_buffer *buf)
{
    if (!p || !buf || !buf->buffer) return;
    DP_ASSERT(buf->block < p->n_blocks && p->blocks[buf->block].buf == buf->buffer);
    block *b = &p->blocks[buf->block];
    uint64_t off = buf->offset, size = buf->slice;
    p->st.releases++;
    p->st.live_slices--;
    p->st.live_bytes -= size;
    b->live--;
    memset(buf, 0, sizeof *buf);
    if (b->dedicated) {
        free_block(p, b);
        return;
    }
    /* Insert sorted, then merge with the neighbours. */
    uint32_t i = 0;
    while (i < b->n_free && b->free[i].off < off) i++;
    bool merge_prev = i > 0 && b->free[i - 1].off + b->free[i - 1].size == off;
    bool merge_next = i < b->n_free && off + size == b->free[i].off;
    if (merge_prev && merge_next) {
        b->free[i - 1].size += size + b->free[i].size;
        memmove(&b->free[i], &b->free[i + 1], (b->n_free - i - 1) * sizeof(range));
        b->n_free--;
    } else if (merge_prev) {
        b->free[i - 1].size += size;
    } else if (merge_next) {
        b->free[i].off = off;
        b->free[i].size += size;
    } else {
        if (b->n_free == b->cap_free) {
            range *nr = realloc(b->free, 2 * b->cap_free * sizeof *nr);
            if (!nr) return;   /* the range is lost to this block until trim; never a crash */
            b->free = nr;
            b->cap_free *= 2;
        }
        memmove(&b->free[i + 1], &b->free[i], (b->n_free - i) * sizeof(range));
        b->free[i] = (range){off, size};
        b->n_free++;
    }
}

void dp_pool_trim(dp_pool *p)
{
    for (uint32_t i = 0; i < p->n_blocks; i++)
        if (p->blocks[i].mem && p->blocks[i].live == 0) free_block(p, &p->blocks[i]);
}

void dp_pool_get_stats(const dp_pool *p, dp_pool_stats *out) { *out = p->st; }
