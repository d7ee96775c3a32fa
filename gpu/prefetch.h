/*
** gpu/prefetch.h: a side prefetcher for a replayed recording. While the main queue replays a recording (the
** decode step, the GPU loop's chunk), a kernel on a second queue (shaders/loop/prefetch.comp) reads the
** weights the next stages will read, so that they are in the GPU's L2 when those stages run. A stage is what
** lies between two barriers of the recording; a tiny signal dispatch at the start of each stage
** (shaders/loop/prefetch_signal.comp) counts the stages begun. The main queue never waits for the side one:
** the results are the same bits with or without it, only the time moves.
** Weights = ranges a dispatch only reads and no command of the recording writes, between min and max bytes
** (an embedding table read one row at a time, or a head larger than L2, is left out by size).
** One submit serves many runs: the side kernel stays while the host replays the recording and leaves when
** told to (a new recording, another recorder's work, destroy) or when the replays stop for a while.
** Needs a second queue family that computes and memory both device-local and host-visible (the control words
** the host resets and the side kernel polls); dp_prefetch_create gives NULL where either is missing.
**
**   dp_prefetch_begin(pf)                            a new recording (stops the side kernel)
**   dp_prefetch_stage(pf, cmd) at each stage's first dispatch; dp_prefetch_note(pf, ranges, n, ...) per command
**   dp_prefetch_finish(pf, err)                      the recording ended: its schedule
**   dp_prefetch_before_run(dev, pf, replay, err)     before each main submit (pf may be NULL)
*/
#ifndef DP_GPU_PREFETCH_H
#define DP_GPU_PREFETCH_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "core/status.h"
#include "gpu/device.h"

struct dp_range;
typedef struct dp_prefetch dp_prefetch;

typedef struct dp_prefetch_opts {
    uint32_t depth;       /* stage j's weights are read once stage j - depth has begun (>= 1) */
    uint32_t light_lead;  /* up to this many stages earlier, from the last light stage before j (0: off) */
    uint32_t groups;      /* workgroups of the side kernel */
    uint32_t wg;          /* invocations per workgroup */
    uint64_t min_bytes;   /* ranges smaller than this are not weights worth reading ahead */
    uint64_t max_bytes;   /* nor larger ones (they would not stay in L2) */
    uint32_t copies;      /* progress words the side workgroups poll (spread over L2's slices), 1..64 */
    uint32_t skip;        /* stages not read when the side kernel reaches them: 0 none, 1 those the main queue has
                          ** finished, 2 those it has begun (DP_PREFETCH_SKIP_*) */
} dp_prefetch_opts;

enum { DP_PREFETCH_SKIP_NONE = 0, DP_PREFETCH_SKIP_FINISHED = 1, DP_PREFETCH_SKIP_BEGUN = 2 };

/* What the side kernels of dev have found (since the device opened, the running one's so far included): the stages
** with weights they reached, those the main queue had already finished by then (they were late), and those they
** skipped (opts.skip). */
typedef struct dp_prefetch_counts {
    uint64_t stages, late, skipped;
} dp_prefetch_counts;

/* depth 1, light_lead 0, 32 workgroups of 256, ranges of 256 KiB to 24 MiB, 32 copies, skip 0 (docs/BENCHMARKS.md,
** session 20). A light stage is one with no weights to read ahead (attention, a norm): its kernels leave DRAM
** idle, so reads that start there compete with nothing; light_lead lets stage j's reads start at the last
** light stage up to light_lead stages before it (and never later than depth says). */
void dp_prefetch_opts_default(dp_prefetch_opts *o);

/* lead[s] for stages with stage_bytes[s] bytes to read ahead: stage s's reads start once stage s - lead[s] has
** begun (counting back past stage 0 into the replay before). depth, or further back to the last light stage (no
** bytes) within light_lead stages, where the bytes of the stages after it up to s (s's included) come to at
** most max_bytes: the side kernel must read them all before s runs, and they must still be in L2 then. */
void dp_prefetch_leads(const uint64_t *stage_bytes, uint32_t stages, const dp_prefetch_opts *o, uint32_t *lead);

/* *out = NULL (and DP_OK) where the device cannot run it; options out of range => DP_EINVAL. */
dp_status dp_prefetch_create(dp_device *dev, const dp_prefetch_opts *o, dp_prefetch **out, dp_err *err);
void      dp_prefetch_destroy(dp_prefetch *pf);   /* NULL-safe; stops the side kernel */

void      dp_prefetch_begin(dp_prefetch *pf);
/* Records the signal of a new stage into cmd (binds its own pipeline: the caller rebinds). */
void      dp_prefetch_stage(dp_prefetch *pf, VkCommandBuffer cmd);
/* A command's ranges: its writes always count (they are not weights); its reads are weights of the current
** stage only for a dispatch (a copy's source is not read ahead). */
dp_status dp_prefetch_note(dp_prefetch *pf, const struct dp_range *rs, uint32_t n, bool dispatch, dp_err *err);
dp_status dp_prefetch_finish(dp_prefetch *pf, dp_err *err);
/* Before a main-queue submit of pf's recording (pf NULL: of a recording without one): stops another
** recording's side kernel, and for a replay starts pf's unless it is still there. */
dp_status dp_prefetch_before_run(dp_device *dev, dp_prefetch *pf, bool replay, dp_err *err);
/* The last finished recording's schedule: stages, weight ranges (0 ranges: no side kernel runs), and stages whose
** reads start earlier than depth says (light_lead). */
void      dp_prefetch_schedule_size(const dp_prefetch *pf, uint64_t *stages, uint64_t *ranges, uint64_t *led);
/* dev's counts (dp_prefetch_counts above). */
void      dp_prefetch_get_counts(const dp_device *dev, dp_prefetch_counts *out);
/* Stops whichever side kernel runs on dev (before device memory is freed: it may be reading it). */
void      dp_prefetch_quiesce(dp_device *dev);
/* Stops pf's side kernel if it runs (the next dp_prefetch_before_run of a replay starts it at count 0). */
void      dp_prefetch_restart(dp_device *dev, dp_prefetch *pf);

#endif
