/*
** core/sample.c: see sample.h. Written for clarity, not speed: it is the reference the GPU
** sampler is tested against and the fallback for settings the GPU path does not cover.
*/
#include "core/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float dp_sample_uniform(uint64_t seed, uint64_t step)
{
    /* Two rounds of the PCG output permutation over a 32-bit state derived from (seed, step):
    ** cheap, well mixed, and expressible in 32-bit GLSL arithmetic. */
    uint32_t s = (uint32_t)seed ^ (uint32_t)(seed >> 32) * 0x9e3779b9u;
    s ^= (uint32_t)step * 0x85ebca6bu + (uint32_t)(step >> 32);
    for (int round = 0; round < 2; round++) {
        uint32_t state = s * 747796405u + 2891336453u;
        uint32_t word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
        s = (word >> 22u) ^ word;
    }
    return (float)(s >> 8) * 0x1p-24f;
}

typedef struct cand {
    float   z;
    int32_t id;
} cand;

static int by_logit_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->z != y->z) return x->z > y->z ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

size_t dp_sample_scratch_bytes(size_t n) { return n * sizeof(cand); }

int32_t dp_sample(const float *logits, size_t n, const bool *seen, const dp_sample_params *p,
                  void *scratch, dp_err *err)
{
    cand *c = scratch;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        float z = logits[i];
        if (isnan(z)) continue;
        if (seen && seen[i] && p->repeat_penalty != 1.0f) z = z > 0 ? z / p->repeat_penalty : z * p->repeat_penalty;
        c[m].z = z;
        c[m].id = (int32_t)i;
        m++;
    }
    if (m == 0) {
        DP_FAIL(err, DP_EINVAL, "sampling: no finite logits among %zu", n);
        return -1;
    }
    qsort(c, m, sizeof *c, by_logit_desc);
    if (p->temperature <= 0.0f) return c[0].id;                     /* greedy */
    if (p->top_k > 0 && (size_t)p->top_k < m) m = (size_t)p->top_k;

    /* Probabilities of the untempered distribution (top-p and min-p see it, as in llama.cpp). */
    double zmax = c[0].z, sum = 0;
    for (size_t i = 0; i < m; i++) sum += exp((double)c[i].z - zmax);
    if (p->top_p < 1.0f) {
        double cum = 0;
        size_t keep = m;
        for (size_t i = 0; i < m; i++) {
            cum += exp((double)c[i].z - zmax) / sum;
            if (cum >= p->top_p) { keep = i + 1; break; }
        }
        m = keep;
    }
    if (p->min_p > 0.0f) {
        /* prob_i >= min_p * prob_max  <=>  z_i - zmax >= log(min_p) */
        double lim = log((double)p->min_p);
        size_t keep = 1;
        while (keep < m && (double)c[keep].z - zmax >= lim) keep++;
        m = keep;
    }
    /* Temperature last, then a draw by inverse CDF over the kept candidates in order. */
    double total = 0;
    for (size_t i = 0; i < m; i++) total += exp(((double)c[i].z - zmax) / p->temperature);
    double u = dp_sample_uniform(p->seed, p->step) * total, acc = 0;
    for (size_t i = 0; i < m; i++) {
        acc += exp(((double)c[i].z - zmax) / p->temperature);
        if (u < acc) return c[i].id;
    }
    return c[m - 1].id;
}
