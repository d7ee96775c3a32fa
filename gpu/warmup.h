/*
** gpu/warmup.h: the clock warm-up. While the host works alone (loading weights, compiling a plan), a tiny
** kernel on the side queue (shaders/loop/warmup.comp) keeps the GPU busy, so that its clock is up when the
** first pass runs: an idle GPU lowers its clock 1.5-3 s after its last work, and the driver raises it again
** only after ~0.3 s of new work. On the H100 the first ~0.2-0.3 s of passes after such a pause ran ~4x slower
** (docs/BENCHMARKS.md, session 31, runs 38a and 38c). One workgroup spins on one SM; nothing else is read or
** written.
** It ends when told to (dp_warmup_stop: every replay of a recording and the side prefetcher's start stop it,
** gpu/recorder.c, gpu/prefetch.c) or after `polls` polls of its quit word (0.15-0.22 us each on the H100).
** With dp_device_opts.side_on_main (tests on devices with one queue) it runs on the main queue, and every
** main-queue submit stops it first.
**
**   dp_warmup_start(dev, polls, &started, err)  starts it unless it runs; started: whether it runs now (false
**                                               where the device has no side queue or no memory both queues poll)
**   dp_warmup_stop(dev)                         ends it and waits for it; no-op when none runs
**   dp_warmup_get_stats(dev, &s)                starts, and the polls of the last one that ended
*/
#ifndef DP_GPU_WARMUP_H
#define DP_GPU_WARMUP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "gpu/device.h"

typedef struct dp_warmup dp_warmup;

typedef struct dp_warmup_stats {
    uint64_t starts;       /* kernels launched */
    uint32_t last_polls;   /* polls of the last one that ended (= its limit: it ran out; less: it was stopped) */
    bool     running;      /* launched, not yet seen to end */
} dp_warmup_stats;

dp_status dp_warmup_start(dp_device *dev, uint32_t polls, bool *started, dp_err *err);
void      dp_warmup_stop(dp_device *dev);
void      dp_warmup_get_stats(dp_device *dev, dp_warmup_stats *out);
void      dp_warmup_destroy(dp_device *dev);   /* device close: stops it, frees what it holds */

#endif
