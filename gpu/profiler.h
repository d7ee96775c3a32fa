/*
** gpu/profiler.h: GPU time per kernel name. When enabled, recorders write a timestamp before and
** after each dispatch (a query pool per recorder); after the submission completes the ticks are
** converted with timestampPeriod and added to per-name statistics here. Dispatches overlap when
** no barrier separates them, so a kernel's time includes waiting for its predecessors' stage.
*/
#ifndef DP_GPU_PROFILER_H
#define DP_GPU_PROFILER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

typedef struct dp_profiler dp_profiler;

typedef struct dp_profile_entry {
    char     name[64];
    uint64_t count;
    double   total_us;
    double   mean_us;
    double   min_us, max_us;
} dp_profile_entry;

dp_status dp_profiler_create(float timestamp_period_ns, uint32_t valid_bits, dp_profiler **out, dp_err *err);
void      dp_profiler_destroy(dp_profiler *p);

void      dp_profiler_enable(dp_profiler *p, bool on);  /* affects recordings started afterwards */
bool      dp_profiler_enabled(const dp_profiler *p);
void      dp_profiler_reset(dp_profiler *p);            /* forgets the statistics */

/* Adds one measured dispatch (ticks from the query pool). */
void      dp_profiler_add(dp_profiler *p, const char *name, uint64_t t0, uint64_t t1);

/* Entries sorted by total time, descending; valid until the next add/reset. */
const dp_profile_entry *dp_profiler_entries(dp_profiler *p, uint32_t *count);
void      dp_profiler_print(dp_profiler *p, FILE *f);

#endif
