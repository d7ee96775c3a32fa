/*
** gpu/recorder.c: command recording with data-driven barriers (see recorder.h).
** Hazard tracking: the ranges read and written since the last barrier are kept in two lists; a new
** command that reads a written range, or writes a read or written range, gets one full barrier
** first and the lists restart. A command may read and write the same range itself (in place).
** Each command buffer also starts with a full barrier so that work from earlier submissions (and
** host writes) is visible without relying on fence semantics alone; it is not counted in stats.
*/
#include <stdlib.h>
#include <string.h>

#include "gpu/device_impl.h"
#include "gpu/prefetch.h"
#include "gpu/profiler.h"
#include "gpu/recorder.h"
#include "gpu/vkcheck.h"
#include "gpu/warmup.h"

#define QUERY_CHUNK 512   /* timestamps per query pool: 256 dispatches */

typedef enum rec_state { REC_IDLE, REC_RECORDING, REC_DONE } rec_state;

typedef struct range_list {
    dp_range *r;
    uint32_t  n, cap;
} range_list;

struct dp_recorder {
    dp_device        *dev;
    VkCommandBuffer   cmd;
    VkFence           fence;
    rec_state         state;
    VkPipeline        bound;
    range_list        reads, writes;  /* accesses since the last barrier of either kind */
    range_list        unfenced;       /* accesses since the last full barrier (see track) */
    bool              xfer_pending;   /* a transfer command since the last full barrier */
    dp_recorder_stats st;
    dp_prefetch      *pf;             /* the side prefetcher (dp_recorder_prefetch), or NULL */
    bool              stage_open;     /* a dispatch was recorded since the last barrier */
    bool              cond_open;      /* inside dp_recorder_begin_conditional .. end */
    /* profiling of the current recording */
    bool              profiling;
    VkQueryPool      *pools;
    uint32_t          n_pools;        /* created */
    uint32_t          used;           /* timestamps written in this recording */
    const char      **names;          /* per profiled dispatch: the kernel's name (kernels live as long as dev) */
    uint32_t          cap_names;
};

/* Ends a recording that will not be submitted (a conditional block left open is closed first: Vulkan
** forbids ending a command buffer inside one). */
static void abandon(dp_recorder *r)
{
    if (r->cond_open) r->dev->end_conditional(r->cmd);
    r->cond_open = false;
    vkEndCommandBuffer(r->cmd);
}

/* ---- the dispatch builder ----------------------------------------------------------------------- */

void dp_dispatch_init(dp_dispatch *d, dp_kernel *k)
{
    memset(d, 0, sizeof *d);
    d->kernel = k;
}

static const dp_refl_push *member(dp_dispatch *d, const char *name, uint32_t *index)
{
    if (d->err.status != DP_OK) return NULL;
    if (!d->kernel) {
        DP_FAIL(&d->err, DP_EINVAL, "dispatch: no kernel");
        return NULL;
    }
    const dp_reflection *r = dp_kernel_reflection(d->kernel);
    for (uint32_t i = 0; i < r->n_push; i++)
        if (strcmp(r->push[i].name, name) == 0) {
            *index = i;
            return &r->push[i];
        }
    char names[400] = "";
    size_t n = 0;
    for (uint32_t i = 0; i < r->n_push && n + 2 < sizeof names; i++)
        n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", r->push[i].name);
    DP_FAIL(&d->err, DP_EINVAL, "kernel %s has no push member '%s' (it has: %s)", dp_kernel_name(d->kernel), name,
            r->n_push ? names : "none");
    return NULL;
}

static void put(dp_dispatch *d, uint32_t index, const dp_refl_push *m, const void *v, uint32_t size)
{
    if (m->offset + size > DP_PUSH_MAX) {
        DP_FAIL(&d->err, DP_EINVAL, "kernel %s: push member %s lies outside the push block", dp_kernel_name(d->kernel),
                m->name);
        return;
    }
    memcpy(d->push + m->offset, v, size);
    d->set_mask |= 1ull << index;
}

static void wrong_kind(dp_dispatch *d, const dp_refl_push *m, const char *given)
{
    DP_FAIL(&d->err, DP_EINVAL, "kernel %s: push member %s is %s, not %s", dp_kernel_name(d->kernel), m->name,
            dp_refl_kind_name(m->kind), given);
}

void dp_dispatch_u32(dp_dispatch *d, const char *name, uint32_t v)
{
    uint32_t i;
    const dp_refl_push *m = member(d, name, &i);
    if (!m) return;
    if (m->kind != DP_REFL_U32 && m->kind != DP_REFL_BOOL) { wrong_kind(d, m, "u32"); return; }
    put(d, i, m, &v, 4);
}

void dp_dispatch_i32(dp_dispatch *d, const char *name, int32_t v)
{
    uint32_t i;
    const dp_refl_push *m = member(d, name, &i);
    if (!m) return;
    if (m->kind != DP_REFL_I32) { wrong_kind(d, m, "i32"); return; }
    put(d, i, m, &v, 4);
}

void dp_dispatch_f32(dp_dispatch *d, const char *name, float v)
{
    uint32_t i;
    const dp_refl_push *m = member(d, name, &i);
    if (!m) return;
    if (m->kind != DP_REFL_F32) { wrong_kind(d, m, "f32"); return; }
    put(d, i, m, &v, 4);
}

void dp_dispatch_u64(dp_dispatch *d, const char *name, uint64_t v)
{
    uint32_t i;
    const dp_refl_push *m = member(d, name, &i);
    if (!m) return;
    if (m->kind != DP_REFL_U64 && m->kind != DP_REFL_I64) { wrong_kind(d, m, "u64"); return; }
    put(d, i, m, &v, 8);
}

void dp_dispatch_number(dp_dispatch *d, const char *name, double v)
{
    uint32_t i;
    const dp_refl_push *m = member(d, name, &i);
    if (!m) return;
    union { uint32_t u; int32_t i; float f; uint16_t h; uint64_t u64; int64_t i64; double d; } x = {0};
    uint32_t size = 4;
    bool integral = v == (double)(int64_t)v;
    switch (m->kind) {
    case DP_REFL_BOOL: x.u = v != 0.0; break;
    case DP_REFL_U32:
        if (!integral || v < 0 || v > 4294967295.0) goto range;
        x.u = (uint32_t)v;
        break;
    case DP_REFL_I32:
        if (!integral || v < -2147483648.0 || v > 2147483647.0) goto range;
        x.i = (int32_t)v;
        break;
    case DP_REFL_F32: x.f = (float)v; break;
    case DP_REFL_F16: x.h = dp_f32_to_f16((float)v); size = 2; break;
    case DP_REFL_U64:
        if (!integral || v < 0) goto range;
        x.u64 = (uint64_t)v;
        size = 8;
        break;
    case DP_REFL_I64:
        if (!integral) goto range;
        x.i64 = (int64_t)v;
        size = 8;
        break;
    case DP_REFL_F64: x.d = v; size = 8; break;
    default: wrong_kind(d, m, "a number"); return;
    }
    put(d, i, m, &x, size);
    return;
range:
    DP_FAIL(&d->err, DP_EINVAL, "kernel %s: push member %s (%s) cannot hold %g", dp_kernel_name(d->kernel), m->name,
            dp_refl_kind_name(m->kind), v);
}

void dp_dispatch_addr(dp_dispatch *d, const char *name, uint64_t addr, uint64_t bytes)
{
    uint32_t i;
    const dp_refl_push *m = member(d, name, &i);
    if (!m) return;
    if (m->kind != DP_REFL_PTR) { wrong_kind(d, m, "a tensor"); return; }
    if (d->n_ranges == DP_DISPATCH_MAX_RANGES) {
        DP_FAIL(&d->err, DP_EINVAL, "kernel %s: more than %d tensors", dp_kernel_name(d->kernel), DP_DISPATCH_MAX_RANGES);
        return;
    }
    put(d, i, m, &addr, 8);
    if (bytes && m->access != DP_ACCESS_NONE) d->ranges[d->n_ranges++] = (dp_range){addr, bytes, m->access};
}

void dp_dispatch_tensor(dp_dispatch *d, const char *name, const dp_gtensor *t)
{
    if (!t) {
        if (d->err.status == DP_OK)
            DP_FAIL(&d->err, DP_EINVAL, "kernel %s: tensor %s is NULL", d->kernel ? dp_kernel_name(d->kernel) : "?", name);
        return;
    }
    dp_dispatch_addr(d, name, t->buf.addr, t->bytes);
}

/* ---- recorder ------------------------------------------------------------------------------------ */

dp_status dp_recorder_create(dp_device *dev, dp_recorder **out, dp_err *err)
{
    dp_status st;
    *out = NULL;
    dp_recorder *r = calloc(1, sizeof *r);
    if (!r) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating a recorder");
    r->dev = dev;
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = dev->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    if ((st = DP_VK(err, vkAllocateCommandBuffers(dev->device, &ai, &r->cmd))) != DP_OK) { r->cmd = NULL; goto fail; }
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((st = DP_VK(err, vkCreateFence(dev->device, &fi, NULL, &r->fence))) != DP_OK) { r->fence = NULL; goto fail; }
    *out = r;
    return DP_OK;
fail:
    dp_recorder_destroy(r);
    return st;
}

void dp_recorder_destroy(dp_recorder *r)
{
    if (!r) return;
    VkDevice d = r->dev->device;
    if (r->state == REC_RECORDING) abandon(r);
    dp_prefetch_destroy(r->pf);
    if (r->fence) vkDestroyFence(d, r->fence, NULL);
    if (r->cmd) vkFreeCommandBuffers(d, r->dev->cmd_pool, 1, &r->cmd);
    for (uint32_t i = 0; i < r->n_pools; i++) vkDestroyQueryPool(d, r->pools[i], NULL);
    free(r->pools);
    free(r->names);
    free(r->reads.r);
    free(r->writes.r);
    free(r->unfenced.r);
    free(r);
}

dp_status dp_recorder_prefetch(dp_recorder *r, const dp_prefetch_opts *o, dp_err *err)
{
    dp_prefetch_destroy(r->pf);
    r->pf = NULL;
    if (r->state == REC_RECORDING) abandon(r);
    r->state = REC_IDLE;   /* a recording made without signals cannot be replayed with the prefetcher */
    return o ? dp_prefetch_create(r->dev, o, &r->pf, err) : DP_OK;
}

dp_status dp_recorder_begin(dp_recorder *r, dp_err *err)
{
    dp_status st;
    if (r->state == REC_RECORDING) abandon(r);
    r->state = REC_IDLE;
    if ((st = DP_VK(err, vkResetCommandBuffer(r->cmd, 0))) != DP_OK) return st;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if ((st = DP_VK(err, vkBeginCommandBuffer(r->cmd, &bi))) != DP_OK) return st;
    r->state = REC_RECORDING;
    r->bound = VK_NULL_HANDLE;
    r->reads.n = r->writes.n = r->unfenced.n = 0;
    r->xfer_pending = false;
    r->st.dispatches = r->st.barriers = r->st.transfers = r->st.conditionals = 0;
    r->used = 0;
    r->profiling = dp_profiler_enabled(r->dev->profiler) && r->dev->caps.timestamps;
    r->stage_open = false;
    r->cond_open = false;
    if (r->pf) dp_prefetch_begin(r->pf);
    dp_device_cmd_barrier(r->cmd);
    return DP_OK;
}

static dp_status ensure_recording(dp_recorder *r, dp_err *err)
{
    return r->state == REC_RECORDING ? DP_OK : dp_recorder_begin(r, err);
}

static bool overlaps(const dp_range *a, const dp_range *b)
{
    return a->addr < b->addr + b->size && b->addr < a->addr + a->size;
}

static bool hits(const range_list *l, const dp_range *x)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (overlaps(&l->r[i], x)) return true;
    return false;
}

static dp_status push_range(range_list *l, const dp_range *x, dp_err *err)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 64;
        dp_range *nr = realloc(l->r, cap * sizeof *nr);
        if (!nr) return DP_FAIL(err, DP_ENOMEM, "out of host memory tracking recorder hazards");
        l->r = nr;
        l->cap = cap;
    }
    l->r[l->n++] = *x;
    return DP_OK;
}

static bool conflicts(const range_list *reads, const range_list *writes, const dp_range *x)
{
    if ((x->access & DP_ACCESS_READ) && hits(writes, x)) return true;                           /* RAW */
    return (x->access & DP_ACCESS_WRITE) && (hits(writes, x) || hits(reads, x));                /* WAW, WAR */
}

static void full_barrier(dp_recorder *r)
{
    dp_device_cmd_barrier(r->cmd);
    r->st.barriers++;
    r->reads.n = r->writes.n = r->unfenced.n = 0;
    r->xfer_pending = false;
    r->stage_open = false;
}

static dp_status note_ranges(dp_recorder *r, const dp_range *rs, uint32_t n, dp_err *err);

/* Barrier if the command touching `rs` conflicts with what came since the last one; then note rs.
   Two kinds (gpu/device.c). Between compute dispatches a compute -> compute barrier suffices, and it is the
   cheap one: on the H100 the full barrier also stalls the front end that fetches indirect arguments. The full
   barrier is used when the consumer is an indirect-argument read or a transfer (`other_stage`), or when a
   transfer wrote since the last full barrier. A compute -> compute barrier does not make writes visible to
   those stages, so `unfenced` keeps every access since the last full barrier for them to check. */
static dp_status track_stage(dp_recorder *r, const dp_range *rs, uint32_t n, bool other_stage, bool is_xfer,
                             dp_err *err)
{
    bool hazard = false, full = false;
    for (uint32_t i = 0; i < n && !full; i++) {
        if (rs[i].size == 0) continue;
        if (conflicts(&r->reads, &r->writes, &rs[i])) hazard = true;
        if (other_stage && conflicts(&r->unfenced, &r->unfenced, &rs[i])) hazard = full = true;
    }
    if (full || (hazard && r->xfer_pending)) {
        full_barrier(r);
    } else if (hazard) {
        dp_device_cmd_barrier_compute(r->cmd);
        r->st.barriers++;
        r->reads.n = r->writes.n = 0;
        r->stage_open = false;
    }
    if (is_xfer) r->xfer_pending = true;
    dp_status st = DP_OK;
    if (r->pf && is_xfer) st = dp_prefetch_note(r->pf, rs, n, false, err);
    return st == DP_OK ? note_ranges(r, rs, n, err) : st;
}

/* rs joins the accesses since the last barrier (later commands check against them). */
static dp_status note_ranges(dp_recorder *r, const dp_range *rs, uint32_t n, dp_err *err)
{
    dp_status st = DP_OK;
    for (uint32_t i = 0; i < n && st == DP_OK; i++) {
        if (rs[i].size == 0) continue;
        if (rs[i].access & DP_ACCESS_READ) st = push_range(&r->reads, &rs[i], err);
        if (st == DP_OK && (rs[i].access & DP_ACCESS_WRITE)) st = push_range(&r->writes, &rs[i], err);
        if (st == DP_OK) st = push_range(&r->unfenced, &rs[i], err);
    }
    return st;
}

static dp_status track(dp_recorder *r, const dp_range *rs, uint32_t n, dp_err *err)
{
    return track_stage(r, rs, n, false, false, err);
}

static dp_status track_xfer(dp_recorder *r, const dp_range *rs, uint32_t n, dp_err *err)
{
    return track_stage(r, rs, n, true, true, err);
}

dp_status dp_recorder_begin_conditional(dp_recorder *r, const dp_buffer *pred, uint64_t offset, bool run_if_zero,
                                        dp_err *err)
{
    dp_device *dev = r->dev;
    if (!dev->caps.conditional_rendering)
        return DP_FAIL(err, DP_EINVAL, "conditional rendering: %s has no VK_EXT_conditional_rendering", dev->caps.name);
    if (!pred || !pred->buffer || offset % 4 || offset + 4 > pred->size)
        return DP_FAIL(err, DP_EINVAL, "conditional rendering: the predicate word at offset %llu is unaligned or "
                       "outside its buffer", (unsigned long long)offset);
    dp_status st = ensure_recording(r, err);
    if (st != DP_OK) return st;
    if (r->cond_open) return DP_FAIL(err, DP_EINVAL, "conditional rendering: blocks do not nest");
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_CONDITIONAL_RENDERING_READ_BIT_EXT,
    };
    vkCmdPipelineBarrier(r->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                         VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_CONDITIONAL_RENDERING_BIT_EXT, 0, 1, &mb,
                         0, NULL, 0, NULL);
    r->st.barriers++;
    VkConditionalRenderingBeginInfoEXT ci = {
        .sType = VK_STRUCTURE_TYPE_CONDITIONAL_RENDERING_BEGIN_INFO_EXT,
        .buffer = pred->buffer,
        .offset = pred->offset + offset,
        .flags = run_if_zero ? VK_CONDITIONAL_RENDERING_INVERTED_BIT_EXT : 0,
    };
    dev->begin_conditional(r->cmd, &ci);
    r->cond_open = true;
    r->st.conditionals++;
    return DP_OK;
}

dp_status dp_recorder_end_conditional(dp_recorder *r, dp_err *err)
{
    if (r->state != REC_RECORDING || !r->cond_open)
        return DP_FAIL(err, DP_EINVAL, "conditional rendering: end without begin");
    r->dev->end_conditional(r->cmd);
    r->cond_open = false;
    /* the predicate read happens before any later command may write the word */
    vkCmdPipelineBarrier(r->cmd, VK_PIPELINE_STAGE_CONDITIONAL_RENDERING_BIT_EXT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, NULL, 0, NULL, 0, NULL);
    return DP_OK;
}

void dp_recorder_side_restart(dp_recorder *r)
{
    if (r->pf) dp_prefetch_restart(r->dev, r->pf);
}

dp_status dp_recorder_barrier(dp_recorder *r, dp_err *err)
{
    dp_status st = ensure_recording(r, err);
    if (st != DP_OK) return st;
    full_barrier(r);
    return DP_OK;
}

/* Two timestamps around a dispatch: returns the first query's index in *q, or UINT32_MAX. */
static dp_status timestamp_slot(dp_recorder *r, const char *name, uint32_t *q, dp_err *err)
{
    *q = UINT32_MAX;
    if (!r->profiling) return DP_OK;
    uint32_t pool = r->used / QUERY_CHUNK;
    if (pool == r->n_pools) {
        VkQueryPool *np = realloc(r->pools, (r->n_pools + 1) * sizeof *np);
        if (!np) return DP_FAIL(err, DP_ENOMEM, "out of host memory for profiler queries");
        r->pools = np;
        VkQueryPoolCreateInfo qi = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = QUERY_CHUNK,
        };
        dp_status st = DP_VK(err, vkCreateQueryPool(r->dev->device, &qi, NULL, &r->pools[r->n_pools]));
        if (st != DP_OK) return st;
        r->n_pools++;
    }
    if (r->used % QUERY_CHUNK == 0) vkCmdResetQueryPool(r->cmd, r->pools[pool], 0, QUERY_CHUNK);
    uint32_t idx = r->used / 2;
    if (idx >= r->cap_names) {
        uint32_t cap = r->cap_names ? 2 * r->cap_names : 256;
        const char **nn = realloc(r->names, cap * sizeof *nn);
        if (!nn) return DP_FAIL(err, DP_ENOMEM, "out of host memory for profiler names");
        r->names = nn;
        r->cap_names = cap;
    }
    r->names[idx] = name;
    *q = r->used;
    r->used += 2;
    return DP_OK;
}

static dp_status record_dispatch(dp_recorder *r, dp_kernel *k, const void *push, uint32_t push_bytes,
                                 const dp_range *ranges, uint32_t n_ranges, uint32_t g[3],
                                 const dp_buffer *indirect, uint64_t ind_off, bool self_ordered, dp_err *err)
{
    dp_status st;
    const dp_reflection *refl = dp_kernel_reflection(k);
    const dp_device_caps *c = &r->dev->caps;
    if (push_bytes < refl->push_size)
        return DP_FAIL(err, DP_EINVAL, "kernel %s: %u push bytes given, the block has %u", dp_kernel_name(k), push_bytes,
                       refl->push_size);
    if (!indirect)
        for (int i = 0; i < 3; i++)
            if (g[i] > c->max_wg_count[i])
                return DP_FAIL(err, DP_EINVAL, "kernel %s: %u workgroups in dimension %d exceed the device's %u",
                               dp_kernel_name(k), g[i], i, c->max_wg_count[i]);
    if ((st = ensure_recording(r, err)) != DP_OK) return st;
    if (indirect) {
        if (ind_off % 4 || ind_off + 12 > indirect->size)
            return DP_FAIL(err, DP_EINVAL, "kernel %s: indirect offset %llu is unaligned or outside the %llu-byte buffer",
                           dp_kernel_name(k), (unsigned long long)ind_off, (unsigned long long)indirect->size);
        dp_range ir = {indirect->addr + ind_off, 12, DP_ACCESS_READ};
        if ((st = track_stage(r, &ir, 1, true, false, err)) != DP_OK) return st;   /* read by the front end */
    }
    st = self_ordered ? note_ranges(r, ranges, n_ranges, err) : track(r, ranges, n_ranges, err);
    if (st != DP_OK) return st;
    if (r->pf) {
        if (!r->stage_open) {
            dp_prefetch_stage(r->pf, r->cmd);
            r->bound = VK_NULL_HANDLE;
            r->stage_open = true;
        }
        if ((st = dp_prefetch_note(r->pf, ranges, n_ranges, true, err)) != DP_OK) return st;
    }
    uint32_t q;
    if ((st = timestamp_slot(r, dp_kernel_name(k), &q, err)) != DP_OK) return st;
    VkPipeline p = dp_kernel_vk_pipeline(k);
    if (p != r->bound) {
        vkCmdBindPipeline(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        r->bound = p;
    }
    if (refl->push_size)
        vkCmdPushConstants(r->cmd, dp_kernel_vk_layout(k), VK_SHADER_STAGE_COMPUTE_BIT, 0, refl->push_size, push);
    if (q != UINT32_MAX)
        vkCmdWriteTimestamp(r->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->pools[q / QUERY_CHUNK], q % QUERY_CHUNK);
    if (indirect) vkCmdDispatchIndirect(r->cmd, indirect->buffer, indirect->offset + ind_off);
    else vkCmdDispatch(r->cmd, g[0], g[1], g[2]);
    if (q != UINT32_MAX)
        vkCmdWriteTimestamp(r->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->pools[q / QUERY_CHUNK],
                            q % QUERY_CHUNK + 1);
    r->st.dispatches++;
    return DP_OK;
}

static dp_status check_dispatch(const dp_dispatch *d, dp_err *err)
{
    if (d->err.status != DP_OK) return dp_fail_at(err, d->err.status, d->err.file, d->err.line, "%s", d->err.msg);
    if (!d->kernel) return DP_FAIL(err, DP_EINVAL, "dispatch: no kernel");
    const dp_reflection *refl = dp_kernel_reflection(d->kernel);
    for (uint32_t i = 0; i < refl->n_push; i++)
        if (!(d->set_mask & (1ull << i)))
            return DP_FAIL(err, DP_EINVAL, "kernel %s: push member '%s' (%s) was not set", dp_kernel_name(d->kernel),
                           refl->push[i].name, dp_refl_kind_name(refl->push[i].kind));
    return DP_OK;
}

dp_status dp_recorder_dispatch(dp_recorder *r, const dp_dispatch *d, uint32_t gx, uint32_t gy, uint32_t gz, dp_err *err)
{
    dp_status st = check_dispatch(d, err);
    if (st != DP_OK) return st;
    uint32_t g[3] = {gx, gy, gz};
    return record_dispatch(r, d->kernel, d->push, DP_PUSH_MAX, d->ranges, d->n_ranges, g, NULL, 0, d->self_ordered,
                           err);
}

dp_status dp_recorder_dispatch_raw(dp_recorder *r, dp_kernel *k, const void *push, uint32_t push_bytes,
                                   const dp_range *ranges, uint32_t n_ranges, uint32_t gx, uint32_t gy, uint32_t gz,
                                   dp_err *err)
{
    uint32_t g[3] = {gx, gy, gz};
    return record_dispatch(r, k, push, push_bytes, ranges, n_ranges, g, NULL, 0, false, err);
}

dp_status dp_recorder_dispatch_indirect(dp_recorder *r, const dp_dispatch *d, const dp_buffer *groups, uint64_t offset,
                                        dp_err *err)
{
    dp_status st = check_dispatch(d, err);
    if (st != DP_OK) return st;
    uint32_t g[3] = {0, 0, 0};
    return record_dispatch(r, d->kernel, d->push, DP_PUSH_MAX, d->ranges, d->n_ranges, g, groups, offset, false, err);
}

static dp_status check_region(const char *op, const dp_buffer *b, uint64_t off, uint64_t bytes, bool align4,
                              dp_err *err)
{
    if (!b || !b->buffer) return DP_FAIL(err, DP_EINVAL, "%s: no buffer", op);
    if (off > b->size || bytes > b->size - off)
        return DP_FAIL(err, DP_EINVAL, "%s: %llu bytes at offset %llu exceed the %llu-byte buffer", op,
                       (unsigned long long)bytes, (unsigned long long)off, (unsigned long long)b->size);
    if (align4 && ((b->offset + off) % 4 || bytes % 4))
        return DP_FAIL(err, DP_EINVAL, "%s: offset %llu and size %llu must be multiples of 4", op,
                       (unsigned long long)off, (unsigned long long)bytes);
    return DP_OK;
}

dp_status dp_recorder_copy(dp_recorder *r, const dp_buffer *dst, uint64_t dst_off, const dp_buffer *src,
                           uint64_t src_off, uint64_t bytes, dp_err *err)
{
    dp_status st;
    if ((st = check_region("copy (source)", src, src_off, bytes, false, err)) != DP_OK) return st;
    if ((st = check_region("copy (destination)", dst, dst_off, bytes, false, err)) != DP_OK) return st;
    if (bytes == 0) return DP_OK;
    if (src->buffer == dst->buffer && src->offset + src_off < dst->offset + dst_off + bytes &&
        dst->offset + dst_off < src->offset + src_off + bytes)
        return DP_FAIL(err, DP_EINVAL, "copy: source and destination overlap");
    if ((st = ensure_recording(r, err)) != DP_OK) return st;
    dp_range rs[2] = {{src->addr + src_off, bytes, DP_ACCESS_READ}, {dst->addr + dst_off, bytes, DP_ACCESS_WRITE}};
    if ((st = track_xfer(r, rs, 2, err)) != DP_OK) return st;
    VkBufferCopy region = {.srcOffset = src->offset + src_off, .dstOffset = dst->offset + dst_off, .size = bytes};
    vkCmdCopyBuffer(r->cmd, src->buffer, dst->buffer, 1, &region);
    r->st.transfers++;
    return DP_OK;
}

dp_status dp_recorder_fill(dp_recorder *r, const dp_buffer *dst, uint64_t offset, uint64_t bytes, uint32_t value,
                           dp_err *err)
{
    dp_status st;
    if ((st = check_region("fill", dst, offset, bytes, true, err)) != DP_OK) return st;
    if (bytes == 0) return DP_OK;
    if ((st = ensure_recording(r, err)) != DP_OK) return st;
    dp_range rg = {dst->addr + offset, bytes, DP_ACCESS_WRITE};
    if ((st = track_xfer(r, &rg, 1, err)) != DP_OK) return st;
    vkCmdFillBuffer(r->cmd, dst->buffer, dst->offset + offset, bytes, value);
    r->st.transfers++;
    return DP_OK;
}

dp_status dp_recorder_update(dp_recorder *r, const dp_buffer *dst, uint64_t offset, const void *data, uint64_t bytes,
                             dp_err *err)
{
    dp_status st;
    if ((st = check_region("update", dst, offset, bytes, true, err)) != DP_OK) return st;
    if (bytes > 65536) return DP_FAIL(err, DP_EINVAL, "update: %llu bytes; vkCmdUpdateBuffer takes at most 65536 "
                                      "(upload larger data with dp_buffer_upload)", (unsigned long long)bytes);
    if (bytes == 0) return DP_OK;
    if ((st = ensure_recording(r, err)) != DP_OK) return st;
    dp_range rg = {dst->addr + offset, bytes, DP_ACCESS_WRITE};
    if ((st = track_xfer(r, &rg, 1, err)) != DP_OK) return st;
    vkCmdUpdateBuffer(r->cmd, dst->buffer, dst->offset + offset, bytes, data);
    r->st.transfers++;
    return DP_OK;
}

static dp_status run(dp_recorder *r, const char *what, bool replay, dp_err *err)
{
    /* A replay is the steady state (decode steps, GPU-loop chunks): the GPU is busy, the warm-up's work done. */
    if (replay) dp_warmup_stop(r->dev);
    dp_status st = dp_prefetch_before_run(r->dev, r->pf, replay, err);
    if (st != DP_OK) return st;
    st = dp_device_submit_wait(r->dev, r->cmd, r->fence, what, err);
    if (st != DP_OK) return st;
    r->st.submits++;
    if (!r->used) return DP_OK;
    uint64_t ts[QUERY_CHUNK];
    for (uint32_t p = 0; p * QUERY_CHUNK < r->used; p++) {
        uint32_t n = r->used - p * QUERY_CHUNK < QUERY_CHUNK ? r->used - p * QUERY_CHUNK : QUERY_CHUNK;
        st = DP_VK(err, vkGetQueryPoolResults(r->dev->device, r->pools[p], 0, n, sizeof ts, ts, sizeof ts[0],
                                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
        if (st != DP_OK) return st;
        for (uint32_t i = 0; i + 1 < n; i += 2)
            dp_profiler_add(r->dev->profiler, r->names[(p * QUERY_CHUNK + i) / 2], ts[i], ts[i + 1]);
    }
    return DP_OK;
}

dp_status dp_recorder_submit(dp_recorder *r, dp_err *err)
{
    dp_status st = ensure_recording(r, err);
    if (st != DP_OK) return st;
    if (r->cond_open) return DP_FAIL(err, DP_EINVAL, "recorder submit: a conditional block is still open");
    r->state = REC_DONE;
    dp_device_cmd_barrier(r->cmd);   /* the recording's writes become visible to the host (mapped tensors) */
    if ((st = DP_VK(err, vkEndCommandBuffer(r->cmd))) != DP_OK) {
        r->state = REC_IDLE;
        return st;
    }
    if (r->pf && (st = dp_prefetch_finish(r->pf, err)) != DP_OK) return st;
    return run(r, "recorder submit", false, err);
}

dp_status dp_recorder_replay(dp_recorder *r, dp_err *err)
{
    if (r->state != REC_DONE)
        return DP_FAIL(err, DP_EINVAL, "recorder replay: nothing submitted yet (or a new recording was started)");
    return run(r, "recorder replay", true, err);
}

void dp_recorder_get_stats(const dp_recorder *r, dp_recorder_stats *out)
{
    *out = r->st;
    out->prefetch = r->pf != NULL;
    out->prefetch_stages = out->prefetch_ranges = out->prefetch_led = 0;
    if (r->pf) dp_prefetch_schedule_size(r->pf, &out->prefetch_stages, &out->prefetch_ranges, &out->prefetch_led);
}
