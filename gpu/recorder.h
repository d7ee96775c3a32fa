/*
** gpu/recorder.h: many dispatches (and copies, fills, small updates) in one command buffer.
** The recorder knows which device-address ranges each command reads and writes (from the kernel's
** reflection and the tensors bound) and inserts a memory barrier only when a command touches a
** range that an earlier command since the last barrier wrote (read after write, write after write)
** or writes a range one read (write after read). Submission waits on a fence with the device
** timeout (an error, never an endless wait); replay re-submits the last recording unchanged.
** With a side prefetcher (dp_recorder_prefetch, gpu/prefetch.h) each stage (the commands between two barriers)
** begins with a signal dispatch beside its own, and replays run a kernel on the side queue that reads the next
** stage's weights into L2.
**
**   dp_dispatch d;  dp_dispatch_init(&d, kernel);
**   dp_dispatch_tensor(&d, "x", x);  dp_dispatch_tensor(&d, "y", y);  dp_dispatch_u32(&d, "n", n);
**   if (dp_recorder_dispatch(rec, &d, groups, 1, 1, err) != DP_OK) ...
**   dp_recorder_submit(rec, err);       // end + submit + wait
**   dp_recorder_replay(rec, err);       // same command buffer again
*/
#ifndef DP_GPU_RECORDER_H
#define DP_GPU_RECORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "gpu/device.h"
#include "gpu/kernel.h"
#include "gpu/pool.h"
#include "gpu/prefetch.h"
#include "gpu/reflect.h"
#include "gpu/tensor.h"

#define DP_PUSH_MAX 256
#define DP_DISPATCH_MAX_RANGES 32

typedef struct dp_range {
    uint64_t  addr;     /* device address */
    uint64_t  size;     /* bytes */
    dp_access access;
} dp_range;

/* A dispatch being prepared: push bytes + ranges. Setters never fail on their own: the first
** mistake (unknown name, wrong kind) is kept and reported by dp_recorder_dispatch. */
typedef struct dp_dispatch {
    dp_kernel *kernel;
    uint8_t    push[DP_PUSH_MAX];
    uint64_t   set_mask;                       /* bit i: push member i was set */
    dp_range   ranges[DP_DISPATCH_MAX_RANGES];
    uint32_t   n_ranges;
    /* The kernel orders itself after the commands before it (it waits in the shader on counters the earlier
    ** dispatches bump: recipes/bench/persistent.lua's chain mode), so no hazard barrier goes before it. Its
    ** ranges still join the hazard set: a later command that is not self-ordered waits for it as usual. Such
    ** waits rely on the device launching an earlier dispatch's workgroups before a later one's, which Vulkan
    ** does not promise (docs/BENCHMARKS.md, session 25): a probe's tool; the decode plans do not use it. */
    bool       self_ordered;
    dp_err     err;
} dp_dispatch;

void dp_dispatch_init(dp_dispatch *d, dp_kernel *k);
void dp_dispatch_u32(dp_dispatch *d, const char *name, uint32_t v);
void dp_dispatch_i32(dp_dispatch *d, const char *name, int32_t v);
void dp_dispatch_f32(dp_dispatch *d, const char *name, float v);
void dp_dispatch_u64(dp_dispatch *d, const char *name, uint64_t v);   /* also i64 */
/* Any scalar member by its reflected kind (bool/u32/i32/f32/f16/u64/i64/f64). */
void dp_dispatch_number(dp_dispatch *d, const char *name, double v);
/* Pointer member: the tensor's address; range and access (from reflection) join the hazard set. */
void dp_dispatch_tensor(dp_dispatch *d, const char *name, const dp_gtensor *t);
void dp_dispatch_addr(dp_dispatch *d, const char *name, uint64_t addr, uint64_t bytes);

typedef struct dp_recorder dp_recorder;

typedef struct dp_recorder_stats {
    uint64_t dispatches;   /* recorded since the recording began */
    uint64_t barriers;     /* hazard barriers inserted in the current recording */
    uint64_t transfers;    /* copies, fills, updates */
    uint64_t conditionals; /* conditional blocks (dp_recorder_begin_conditional) in the current recording */
    uint64_t submits;      /* submissions + replays, over the recorder's life */
    bool     prefetch;         /* a side prefetcher reads ahead of this recorder's replays */
    uint64_t prefetch_stages;  /* its last finished recording: stages (signals) */
    uint64_t prefetch_ranges;  /* and weight ranges read ahead */
    uint64_t prefetch_led;     /* and stages whose reads start at a light stage before depth (light_lead) */
} dp_recorder_stats;

dp_status dp_recorder_create(dp_device *dev, dp_recorder **out, dp_err *err);
void      dp_recorder_destroy(dp_recorder *rec);   /* NULL-safe; waits if a submission is pending */

/* Reads the weights of each stage ahead of it on the device's side queue while the recording is replayed
** (gpu/prefetch.h); NULL switches it off. Where the device cannot, nothing happens (stats.prefetch says which).
** Drops the current recording: call it before recording. Options out of range => DP_EINVAL. */
dp_status dp_recorder_prefetch(dp_recorder *rec, const dp_prefetch_opts *o, dp_err *err);

/* Starts a new recording, dropping the previous one. Recording commands on a recorder that
** was submitted also starts a new one. */
dp_status dp_recorder_begin(dp_recorder *rec, dp_err *err);

dp_status dp_recorder_dispatch(dp_recorder *rec, const dp_dispatch *d, uint32_t gx, uint32_t gy,
                               uint32_t gz, dp_err *err);
/* Raw form: push bytes as the kernel's block layout, plus the ranges it touches. */
dp_status dp_recorder_dispatch_raw(dp_recorder *rec, dp_kernel *k, const void *push, uint32_t push_bytes,
                                   const dp_range *ranges, uint32_t n_ranges,
                                   uint32_t gx, uint32_t gy, uint32_t gz, dp_err *err);
/* Group counts read from `groups` at byte `offset` (VkDispatchIndirectCommand: 3 x u32). */
dp_status dp_recorder_dispatch_indirect(dp_recorder *rec, const dp_dispatch *d, const dp_buffer *groups,
                                        uint64_t offset, dp_err *err);

dp_status dp_recorder_copy(dp_recorder *rec, const dp_buffer *dst, uint64_t dst_off,
                           const dp_buffer *src, uint64_t src_off, uint64_t bytes, dp_err *err);
/* offset and bytes multiples of 4; `value` repeated. */
dp_status dp_recorder_fill(dp_recorder *rec, const dp_buffer *dst, uint64_t offset, uint64_t bytes,
                           uint32_t value, dp_err *err);
/* vkCmdUpdateBuffer: bytes <= 65536, offset and bytes multiples of 4; data copied at record time. */
dp_status dp_recorder_update(dp_recorder *rec, const dp_buffer *dst, uint64_t offset, const void *data,
                             uint64_t bytes, dp_err *err);
/* Conditional rendering (caps.conditional_rendering; DP_EINVAL without it): the dispatches recorded between
** begin and end run only while the u32 at `pred` + `offset` is zero (run_if_zero) or non-zero; barriers and
** timestamps still run. Why: the GPU decode loop skips its steps after a stop with one read of a state word
** per step, where an indirect dispatch per kernel cost the H100 ~0.1 ms per token (docs/BENCHMARKS.md 31j).
** Begin records the barrier that makes earlier shader, transfer and host writes of the word visible to the
** read, and end an execution dependency from the read to later compute work (which may write the word).
** The prefetcher's stage signals inside a block are skipped with it: see dp_recorder_side_restart. Blocks do
** not nest, and a recording cannot be submitted with one open. */
dp_status dp_recorder_begin_conditional(dp_recorder *rec, const dp_buffer *pred, uint64_t offset, bool run_if_zero,
                                        dp_err *err);
dp_status dp_recorder_end_conditional(dp_recorder *rec, dp_err *err);
/* After a replay whose conditional blocks skipped work, the side prefetcher's progress count no longer matches
** its schedule: this stops rec's side kernel, so that the next replay starts it afresh (no-op without one). */
void      dp_recorder_side_restart(dp_recorder *rec);
/* An unconditional full barrier (for hazards the recorder cannot see). */
dp_status dp_recorder_barrier(dp_recorder *rec, dp_err *err);

dp_status dp_recorder_submit(dp_recorder *rec, dp_err *err);   /* end + submit + wait */
dp_status dp_recorder_replay(dp_recorder *rec, dp_err *err);   /* last submitted recording again */

void      dp_recorder_get_stats(const dp_recorder *rec, dp_recorder_stats *out);

#endif
