/*
** gpu/profiler.c: per-kernel-name GPU time statistics (see profiler.h).
*/
#include <stdlib.h>
#include <string.h>

#include "gpu/profiler.h"

struct dp_profiler {
    bool              on;
    double            ns_per_tick;
    uint64_t          mask;        /* timestampValidBits */
    dp_profile_entry *e;
    uint32_t          n, cap;
};

dp_status dp_profiler_create(float period_ns, uint32_t valid_bits, dp_profiler **out, dp_err *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating the profiler");
    (*out)->ns_per_tick = period_ns;
    (*out)->mask = valid_bits >= 64 ? UINT64_MAX : valid_bits ? (1ull << valid_bits) - 1 : 0;
    return DP_OK;
}

void dp_profiler_destroy(dp_profiler *p)
{
    if (!p) return;
    free(p->e);
    free(p);
}

void dp_profiler_enable(dp_profiler *p, bool on) { p->on = on; }
bool dp_profiler_enabled(const dp_profiler *p) { return p->on; }
void dp_profiler_reset(dp_profiler *p) { p->n = 0; }

void dp_profiler_add(dp_profiler *p, const char *name, uint64_t t0, uint64_t t1)
{
    double us = (double)((t1 - t0) & p->mask) * p->ns_per_tick / 1000.0;
    dp_profile_entry *e = NULL;
    for (uint32_t i = 0; i < p->n && !e; i++)
        if (strcmp(p->e[i].name, name) == 0) e = &p->e[i];
    if (!e) {
        if (p->n == p->cap) {
            uint32_t cap = p->cap ? 2 * p->cap : 16;
            dp_profile_entry *ne = realloc(p->e, cap * sizeof *ne);
            if (!ne) return;   /* a lost sample, not a failure */
            p->e = ne;
            p->cap = cap;
        }
        e = &p->e[p->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", name);
        e->min_us = us;
        e->max_us = us;
    }
    e->count++;
    e->total_us += us;
    e->mean_us = e->total_us / (double)e->count;
    if (us < e->min_us) e->min_us = us;
    if (us > e->max_us) e->max_us = us;
}

static int by_total(const void *a, const void *b)
{
    double x = ((const dp_profile_entry *)a)->total_us, y = ((const dp_profile_entry *)b)->total_us;
    return x < y ? 1 : x > y ? -1 : 0;
}

const dp_profile_entry *dp_profiler_entries(dp_profiler *p, uint32_t *count)
{
    if (p->n) qsort(p->e, p->n, sizeof *p->e, by_total);
    *count = p->n;
    return p->e;
}

void dp_profiler_print(dp_profiler *p, FILE *f)
{
    uint32_t n;
    const dp_profile_entry *e = dp_profiler_entries(p, &n);
    fprintf(f, "%-32s %8s %12s %10s %10s %10s\n", "kernel", "count", "total us", "mean us", "min us", "max us");
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%-32s %8llu %12.1f %10.2f %10.2f %10.2f\n", e[i].name, (unsigned long long)e[i].count,
                e[i].total_us, e[i].mean_us, e[i].min_us, e[i].max_us);
}
