/*
** gpu/prefetch.c: the side prefetcher (see prefetch.h).
** Two small allocations both queues use (gpu/side_mem.h): the control words (shaders/include/dp_prefetch.glsl),
** which the side kernel polls at L2 speed and the host resets or flags through the mapping, and the schedule:
** first[stages + 1] (u32: each stage's first range), lead[stages] (u32: how many stages before it each stage's
** reads may start), then the ranges as uvec4 (address lo, hi, bytes lo, hi).
** The host writes either only while no side kernel runs, except the quit flag.
*/
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/device_impl.h"
#include "gpu/kernel.h"
#include "gpu/prefetch.h"
#include "gpu/recorder.h"
#include "gpu/side_mem.h"
#include "gpu/vkcheck.h"
#include "gpu/warmup.h"

#define SECTOR 32u        /* what one load of the side kernel brings into L2 */
#define CTL_QUIT 4160u    /* as in dp_prefetch.glsl */
#define CTL_SINK 4224u
#define CTL_SEEN 4288u    /* the side kernel's counts: stages reached, late, skipped (dp_prefetch.glsl) */
#define CTL_WORDS (CTL_SEEN + 3u * 64u)
#define MAX_COPIES 64u
#define MAX_LEAD 8u         /* stages: a layer's worth on every recipe here */

typedef struct pf_range {
    uint64_t addr, size;
    uint32_t stage;
} pf_range;

typedef struct pf_list {
    pf_range *v;
    uint32_t  n, cap;
} pf_list;

struct dp_prefetch {
    dp_device       *dev;
    dp_prefetch_opts o;
    dp_kernel       *signal, *side;
    dp_side_mem      ctl, schedule;
    VkCommandBuffer  cmd;
    VkFence          fence;
    pf_list          reads, writes;
    uint32_t         stages;
    uint32_t         sched_stages, sched_ranges;   /* of the last finished recording */
    uint32_t         sched_led;                    /* its stages with lead > depth */
    bool             ready;     /* cmd launches the side kernel for the current recording */
    bool             running;   /* launched, not yet seen to finish */
};

void dp_prefetch_opts_default(dp_prefetch_opts *o)
{
    *o = (dp_prefetch_opts){.depth = 1, .light_lead = 0, .groups = 32, .wg = 256, .min_bytes = 256u << 10,
                            .max_bytes = 24u << 20, .copies = 32, .skip = DP_PREFETCH_SKIP_NONE};
}

static dp_status push(pf_list *l, uint64_t addr, uint64_t size, uint32_t stage, dp_err *err)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 256;
        pf_range *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return DP_FAIL(err, DP_ENOMEM, "out of host memory for the prefetch schedule");
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = (pf_range){addr, size, stage};
    return DP_OK;
}

dp_status dp_prefetch_create(dp_device *dev, const dp_prefetch_opts *o, dp_prefetch **out, dp_err *err)
{
    dp_status st;
    *out = NULL;
    if (o->depth == 0 || o->depth > MAX_LEAD || o->light_lead > MAX_LEAD || o->groups == 0 || o->wg == 0 ||
        o->wg > dev->caps.max_wg_invocations || o->copies == 0 || o->copies > MAX_COPIES || o->min_bytes > o->max_bytes ||
        o->skip > DP_PREFETCH_SKIP_BEGUN)
        return DP_FAIL(err, DP_EINVAL, "side prefetch: depth %u (1..%u), light_lead %u (0..%u), groups %u, wg %u, "
                       "copies %u (1..%u), skip %u (0..2), bytes %llu..%llu: out of range", o->depth, MAX_LEAD,
                       o->light_lead, MAX_LEAD, o->groups, o->wg, o->copies, MAX_COPIES, o->skip,
                       (unsigned long long)o->min_bytes, (unsigned long long)o->max_bytes);
    if (!dev->side_queue || dp_side_mem_type(dev) == UINT32_MAX) return DP_OK;
    dp_prefetch *pf = calloc(1, sizeof *pf);
    if (!pf) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating the side prefetcher");
    pf->dev = dev;
    pf->o = *o;
    dp_kconst sc[] = {{"WG", o->copies}};
    dp_kernel_desc sd = {.file = "loop/prefetch_signal.comp", .constants = sc, .n_constants = 1};
    dp_kconst kc[] = {{"WG", o->wg}, {"COPIES", o->copies}, {"SKIP", o->skip}};
    dp_kernel_desc kd = {.file = "loop/prefetch.comp", .constants = kc, .n_constants = 3};
    if ((st = dp_kernel_get(dev, &sd, &pf->signal, err)) != DP_OK) goto fail;
    if ((st = dp_kernel_get(dev, &kd, &pf->side, err)) != DP_OK) goto fail;
    if ((st = dp_side_mem_alloc(dev, CTL_WORDS * 4, &pf->ctl, err)) != DP_OK) goto fail;
    memset(pf->ctl.map, 0, CTL_WORDS * 4);
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = dev->side_cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    if ((st = DP_VK(err, vkAllocateCommandBuffers(dev->device, &ai, &pf->cmd))) != DP_OK) { pf->cmd = NULL; goto fail; }
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((st = DP_VK(err, vkCreateFence(dev->device, &fi, NULL, &pf->fence))) != DP_OK) { pf->fence = NULL; goto fail; }
    *out = pf;
    return DP_OK;
fail:
    dp_prefetch_destroy(pf);
    return st;
}

/* The side kernel's counts, in memory the host sees: CTL_SEEN + 64 k for k = stages, late, skipped. */
static uint32_t ctl_count(const dp_prefetch *pf, uint32_t k)
{
    return ((const volatile uint32_t *)pf->ctl.map)[CTL_SEEN + 64u * k];
}

/* A side kernel has finished: its counts go to the device's (the next launch zeroes the control words). */
static void collect(dp_prefetch *pf)
{
    for (uint32_t k = 0; k < 3; k++) pf->dev->pf_counts[k] += ctl_count(pf, k);
}

void dp_prefetch_get_counts(const dp_device *dev, dp_prefetch_counts *out)
{
    uint64_t c[3] = {dev->pf_counts[0], dev->pf_counts[1], dev->pf_counts[2]};
    const dp_prefetch *pf = dev->side_active;
    if (pf && pf->running)   /* the running kernel's counts so far (read while it may add to them) */
        for (uint32_t k = 0; k < 3; k++) c[k] += ctl_count(pf, k);
    *out = (dp_prefetch_counts){.stages = c[0], .late = c[1], .skipped = c[2]};
}

/* Tells the side kernel to leave and waits for it. */
static dp_status stop(dp_prefetch *pf, dp_err *err)
{
    dp_device *dev = pf->dev;
    if (dev->side_active == pf) dev->side_active = NULL;
    if (!pf->running) return DP_OK;
    pf->running = false;
    ((volatile uint32_t *)pf->ctl.map)[CTL_QUIT] = 1;
    /* The mapping may be write-combined: a fence sends the store on now rather than whenever the CPU's
    ** write-combining buffer drains (until then the side kernel would spin to its limit). */
    atomic_thread_fence(memory_order_seq_cst);
    VkResult r = vkWaitForFences(dev->device, 1, &pf->fence, VK_TRUE, (uint64_t)dev->timeout_ms * 1000000ull);
    if (r == VK_TIMEOUT)
        return DP_FAIL(err, DP_EGPU, "side prefetch: the GPU did not finish within %u ms (DOPPLER_GPU_TIMEOUT_MS)",
                       dev->timeout_ms);
    dp_status st = DP_VK(err, r);
    if (st != DP_OK) return st;
    collect(pf);
    return DP_VK(err, vkResetFences(dev->device, 1, &pf->fence));
}

void dp_prefetch_destroy(dp_prefetch *pf)
{
    if (!pf) return;
    dp_err ignored = {0};
    stop(pf, &ignored);
    VkDevice d = pf->dev->device;
    if (pf->fence) vkDestroyFence(d, pf->fence, NULL);
    if (pf->cmd) vkFreeCommandBuffers(d, pf->dev->side_cmd_pool, 1, &pf->cmd);
    dp_side_mem_free(pf->dev, &pf->schedule);
    dp_side_mem_free(pf->dev, &pf->ctl);
    free(pf->reads.v);
    free(pf->writes.v);
    free(pf);
}

void dp_prefetch_begin(dp_prefetch *pf)
{
    pf->reads.n = pf->writes.n = 0;
    pf->stages = 0;
    pf->ready = false;
}

void dp_prefetch_stage(dp_prefetch *pf, VkCommandBuffer cmd)
{
    struct { uint64_t ctl; uint32_t stage, pad; } pc = {pf->ctl.addr, pf->stages, 0};
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dp_kernel_vk_pipeline(pf->signal));
    vkCmdPushConstants(cmd, dp_kernel_vk_layout(pf->signal), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       dp_kernel_reflection(pf->signal)->push_size, &pc);
    vkCmdDispatch(cmd, 1, 1, 1);
    pf->stages++;
}

dp_status dp_prefetch_note(dp_prefetch *pf, const dp_range *rs, uint32_t n, bool dispatch, dp_err *err)
{
    dp_status st = DP_OK;
    for (uint32_t i = 0; i < n && st == DP_OK; i++) {
        if (rs[i].size == 0) continue;
        if (rs[i].access & DP_ACCESS_WRITE) st = push(&pf->writes, rs[i].addr, rs[i].size, 0, err);
        else if (dispatch && pf->stages && rs[i].size >= pf->o.min_bytes && rs[i].size <= pf->o.max_bytes)
            st = push(&pf->reads, rs[i].addr, rs[i].size, pf->stages - 1, err);
    }
    return st;
}

static int by_addr(const void *a, const void *b)
{
    const pf_range *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Does [addr, addr + size) meet any of the merged, sorted intervals w[0..n)? */
static bool written(const pf_range *w, uint32_t n, uint64_t addr, uint64_t size)
{
    uint32_t lo = 0, hi = n;   /* the first interval ending after addr */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (w[mid].addr + w[mid].size <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && w[lo].addr < addr + size;
}

/* The writes as disjoint intervals sorted by address; returns how many. */
static uint32_t merge_writes(pf_list *w)
{
    qsort(w->v, w->n, sizeof *w->v, by_addr);
    uint32_t m = 0;
    for (uint32_t i = 0; i < w->n; i++) {
        pf_range *last = m ? &w->v[m - 1] : NULL;
        if (last && w->v[i].addr <= last->addr + last->size) {
            uint64_t end = w->v[i].addr + w->v[i].size;
            if (end > last->addr + last->size) last->size = end - last->addr;
        } else {
            w->v[m++] = w->v[i];
        }
    }
    return m;
}

void dp_prefetch_leads(const uint64_t *stage_bytes, uint32_t stages, const dp_prefetch_opts *o, uint32_t *lead)
{
    for (uint32_t s = 0; s < stages; s++) {
        lead[s] = o->depth;
        uint64_t bytes = stage_bytes[s];
        for (uint32_t d = 1; d <= o->light_lead && d < stages && bytes <= o->max_bytes; d++) {
            uint32_t k = (s + stages - d) % stages;
            if (stage_bytes[k] == 0) {
                if (d > lead[s]) lead[s] = d;
                break;
            }
            bytes += stage_bytes[k];
        }
    }
}

/* lead[] for the schedule: each stage's bytes from its ranges. */
static dp_status set_leads(const uint32_t *first, const uint32_t (*ranges)[4], uint32_t *lead, uint32_t stages,
                           const dp_prefetch_opts *o, dp_err *err)
{
    uint64_t *bytes = calloc(stages ? stages : 1, sizeof *bytes);
    if (!bytes) return DP_FAIL(err, DP_ENOMEM, "out of host memory for the prefetch schedule");
    for (uint32_t s = 0; s < stages; s++)
        for (uint32_t r = first[s]; r < first[s + 1]; r++)
            bytes[s] += (uint64_t)ranges[r][2] | (uint64_t)ranges[r][3] << 32;
    dp_prefetch_leads(bytes, stages, o, lead);
    free(bytes);
    return DP_OK;
}

dp_status dp_prefetch_finish(dp_prefetch *pf, dp_err *err)
{
    dp_status st;
    if ((st = stop(pf, err)) != DP_OK) return st;   /* it may be reading the schedule rewritten below */
    pf->ready = false;
    uint32_t m = merge_writes(&pf->writes), stages = pf->stages;
    uint64_t first_bytes = ((uint64_t)(2 * stages + 1) * 4 + 15) & ~15ull;   /* first[], lead[] */
    uint64_t bytes = first_bytes + (uint64_t)(pf->reads.n ? pf->reads.n : 1) * 16;
    if (pf->schedule.size < bytes) {
        dp_side_mem_free(pf->dev, &pf->schedule);
        if ((st = dp_side_mem_alloc(pf->dev, bytes, &pf->schedule, err)) != DP_OK) return st;
    }
    uint32_t *first = pf->schedule.map;
    uint32_t (*ranges)[4] = (void *)((uint8_t *)pf->schedule.map + first_bytes);
    uint32_t n = 0, r = 0;   /* reads are in stage order (noted as recorded) */
    for (uint32_t s = 0; s < stages; s++) {
        first[s] = n;
        for (; r < pf->reads.n && pf->reads.v[r].stage == s; r++) {
            const pf_range *x = &pf->reads.v[r];
            if (written(pf->writes.v, m, x->addr, x->size)) continue;
            uint64_t a = (x->addr + SECTOR - 1) & ~(uint64_t)(SECTOR - 1);
            if (a >= x->addr + x->size) continue;
            uint64_t size = x->addr + x->size - a;
            bool dup = false;
            for (uint32_t k = first[s]; k < n && !dup; k++)
                dup = ranges[k][0] == (uint32_t)a && ranges[k][1] == (uint32_t)(a >> 32);
            if (dup) continue;
            ranges[n][0] = (uint32_t)a;
            ranges[n][1] = (uint32_t)(a >> 32);
            ranges[n][2] = (uint32_t)size;
            ranges[n][3] = (uint32_t)(size >> 32);
            n++;
        }
    }
    first[stages] = n;
    if ((st = set_leads(first, (const uint32_t (*)[4])ranges, first + stages + 1, stages, &pf->o, err)) != DP_OK)
        return st;
    pf->sched_led = 0;
    for (uint32_t s = 0; s < stages; s++)   /* stages with weights whose reads moved ahead of depth */
        pf->sched_led += first[s] < first[s + 1] && first[stages + 1 + s] > pf->o.depth;
    pf->sched_stages = stages;
    pf->sched_ranges = n;
    if (n == 0) return DP_OK;   /* nothing worth reading ahead: no side kernel */

    if ((st = DP_VK(err, vkResetCommandBuffer(pf->cmd, 0))) != DP_OK) return st;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if ((st = DP_VK(err, vkBeginCommandBuffer(pf->cmd, &bi))) != DP_OK) return st;
    struct {
        uint64_t first, lead, ranges, ctl;
        uint32_t stages, pad;
    } pc = {pf->schedule.addr, pf->schedule.addr + (uint64_t)(stages + 1) * 4, pf->schedule.addr + first_bytes,
            pf->ctl.addr, stages, 0};
    vkCmdBindPipeline(pf->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dp_kernel_vk_pipeline(pf->side));
    vkCmdPushConstants(pf->cmd, dp_kernel_vk_layout(pf->side), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       dp_kernel_reflection(pf->side)->push_size, &pc);
    vkCmdDispatch(pf->cmd, pf->o.groups, 1, 1);
    if ((st = DP_VK(err, vkEndCommandBuffer(pf->cmd))) != DP_OK) return st;
    pf->ready = true;
    return DP_OK;
}

/* The side kernel left by itself (replays stopped for a while)? */
static dp_status reap(dp_prefetch *pf, dp_err *err)
{
    if (!pf->running) return DP_OK;
    VkResult r = vkGetFenceStatus(pf->dev->device, pf->fence);
    if (r == VK_NOT_READY) return DP_OK;
    dp_status st = DP_VK(err, r);
    if (st != DP_OK) return st;
    pf->running = false;
    if (pf->dev->side_active == pf) pf->dev->side_active = NULL;
    collect(pf);
    return DP_VK(err, vkResetFences(pf->dev->device, 1, &pf->fence));
}

dp_status dp_prefetch_before_run(dp_device *dev, dp_prefetch *pf, bool replay, dp_err *err)
{
    dp_status st;
    bool mine = pf && replay && pf->ready;
    if (dev->side_active && (!mine || dev->side_active != pf) && (st = stop(dev->side_active, err)) != DP_OK)
        return st;
    if (!mine) return DP_OK;
    if ((st = reap(pf, err)) != DP_OK) return st;
    if (pf->running) return DP_OK;
    dp_warmup_stop(dev);   /* the side queue is the prefetcher's now */
    /* Neither queue runs pf's work now: the count restarts at 0 for the side kernel's run 0. */
    memset(pf->ctl.map, 0, CTL_WORDS * 4);
    atomic_thread_fence(memory_order_seq_cst);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &pf->cmd};
    if ((st = DP_VK(err, vkQueueSubmit(dev->side_queue, 1, &si, pf->fence))) != DP_OK) return st;
    pf->running = true;
    dev->side_active = pf;
    dev->submits++;
    dev->side_submits++;
    return DP_OK;
}

void dp_prefetch_quiesce(dp_device *dev)
{
    dp_err ignored = {0};
    if (dev->side_active) stop(dev->side_active, &ignored);
}

void dp_prefetch_restart(dp_device *dev, dp_prefetch *pf)
{
    dp_err ignored = {0};
    if (pf && dev->side_active == pf) stop(pf, &ignored);
}

void dp_prefetch_schedule_size(const dp_prefetch *pf, uint64_t *stages, uint64_t *ranges, uint64_t *led)
{
    *stages = pf->sched_stages;
    *ranges = pf->sched_ranges;
    *led = pf->sched_led;
}
