/*
** core/sample.c: see sample.h. Written for clarity, not speed: it is the reference the GPU sampler
** (shaders/sample/) is tested against id for id. Every float operation here has a twin in
** shaders/sample/sample_common.glsl or a kernel, in the same order: change both or neither.
*/
#include "core/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A fused multiply-add would round once where the GPU rounds twice (its code is `precise`). GCC in ISO C
** mode (-std=c11, as CMakeLists.txt sets) never contracts; clang needs the pragma. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float dp_sample_exp(float x)
{
    if (x < -87.0f) return 0.0f;                      /* keeps 2^k normal: no subnormal anywhere */
    if (fabsf(x) < 0x1p-30f) return 1.0f;             /* the polynomial would make subnormals */
    float k = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - k * 0.693359375f;                   /* k * C1 is exact: C1 has 9 bits */
    r = r - k * -2.12194440e-4f;
    float z = r * r;
    float y = ((((( 1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r
                 + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * z + r + 1.0f;
    return y * bits_f32((uint32_t)((int32_t)k + 127) << 23);
}

float dp_sample_log(float x)
{
    uint32_t b = f32_bits(x);
    int32_t e = (int32_t)(b >> 23) - 126;
    float m = bits_f32((b & 0x7fffffu) | 0x3f000000u);   /* x = m 2^e, m in [0.5, 1) */
    float f;
    if (m < 0.707106781186547524f) {
        e -= 1;
        f = m + m - 1.0f;                                  /* exact (Sterbenz) */
    } else {
        f = m - 1.0f;
    }
    float z = f * f;
    float y = (((((((( 7.0376836292e-2f * f - 1.1514610310e-1f) * f + 1.1676998740e-1f) * f
                    - 1.2420140846e-1f) * f + 1.4249322787e-1f) * f - 1.6668057665e-1f) * f
                 + 2.0000714765e-1f) * f - 2.4999993993e-1f) * f + 3.3333331174e-1f) * f * z;
    float fe = (float)e;
    y = y + -2.12194440e-4f * fe;
    y = y + -0.5f * z;
    float r = f + y;
    return r + 0.693359375f * fe;
}

/* PCG's RXS-M-XS output permutation used as a 32-bit hash (Jarzynski & Olano, JCGT 2020). */
static uint32_t pcg_hash(uint32_t x)
{
    uint32_t state = x * 747796405u + 2891336453u;
    uint32_t word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

float dp_sample_uniform(uint64_t seed, uint32_t step, uint32_t id)
{
    uint32_t h = pcg_hash((uint32_t)seed + pcg_hash((uint32_t)(seed >> 32)));
    h = pcg_hash(step + h);
    h = pcg_hash(id + h);
    return (float)((h >> 9) * 2u + 1u) * 0x1p-24f;         /* 2j + 1 < 2^24: exact */
}

float dp_sample_gumbel(uint64_t seed, uint32_t step, uint32_t id)
{
    float u = dp_sample_uniform(seed, step, id);
    return -dp_sample_log(-dp_sample_log(u));
}

void dp_sample_derive(const dp_sample_params *p, dp_sample_consts *out)
{
    out->greedy = p->temperature <= 0.0f || p->top_k == 1;
    if (p->top_k > 0) out->k = p->top_k < DP_SAMPLE_CAP ? (uint32_t)p->top_k : DP_SAMPLE_CAP;
    else out->k = p->top_p < 1.0f ? DP_SAMPLE_CAP : 0;
    out->inv_penalty = (float)(1.0 / (double)p->repeat_penalty);
    out->log_min_p = p->min_p > 0.0f ? (float)log((double)p->min_p) : -INFINITY;
}

typedef struct cand {
    float   z;
    int32_t id;
} cand;

/* Descending z, ties to the lower id: a total order (ids differ). */
static int before(const cand *x, const cand *y)
{
    return x->z > y->z || (x->z == y->z && x->id < y->id);
}

static int by_order(const void *a, const void *b)
{
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

size_t dp_sample_scratch_bytes(size_t n) { return n * (sizeof(cand) + sizeof(float)); }

int32_t dp_sample(const float *logits, size_t n, const bool *seen, const dp_sample_params *p,
                  void *scratch, dp_err *err)
{
    dp_sample_consts k;
    dp_sample_derive(p, &k);
    cand *c = scratch;
    float *cum = (float *)(c + n);
    size_t m = 0, best = 0;
    for (size_t i = 0; i < n; i++) {
        float z = logits[i];
        if (seen && seen[i] && p->repeat_penalty != 1.0f) z = z > 0.0f ? z * k.inv_penalty : z * p->repeat_penalty;
        if (isnan(z) || z == -INFINITY) continue;
        c[m].z = z;
        c[m].id = (int32_t)i;
        if (before(&c[m], &c[best])) best = m;
        m++;
    }
    if (m == 0) {
        DP_FAIL(err, DP_EINVAL, "sampling: none of the %zu logits is a number above -inf", n);
        return -1;
    }
    if (k.greedy) return c[best].id;
    float zmax = c[best].z;

    if (k.k > 0) {
        /* top-k, then top-p over the k best in order */
        qsort(c, m, sizeof *c, by_order);
        if (m > k.k) m = k.k;
        if (p->top_p < 1.0f) {
            float s = 0.0f;
            for (size_t i = 0; i < m; i++) {
                s = s + dp_sample_exp(c[i].z - zmax);
                cum[i] = s;
            }
            float lim = p->top_p * s;
            size_t keep = m;
            for (size_t i = 0; i < m; i++)
                if (cum[i] >= lim) { keep = i + 1; break; }
            m = keep;
        }
    }
    /* min-p, then the Gumbel-max draw among what is left (c[0] = the max always survives). */
    float lim = k.log_min_p == -INFINITY ? -INFINITY : zmax + k.log_min_p;   /* no inf - inf */
    int32_t id = -1;
    float key_best = 0.0f;
    for (size_t i = 0; i < m; i++) {
        if (!(c[i].z >= lim)) continue;
        float key = c[i].z + p->temperature * dp_sample_gumbel(p->seed, (uint32_t)p->step, (uint32_t)c[i].id);
        if (id < 0 || key > key_best || (key == key_best && c[i].id < id)) {
            key_best = key;
            id = c[i].id;
        }
    }
    return id;
}
