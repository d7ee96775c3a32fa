/*
** core/sample.h: the sampling reference — how doppler turns one logits row into a token id. The GPU
** sampler (shaders/sample/, lowered by lua/lib/doppler/lower/sample.lua) computes the very same id:
** every step below uses only f32 operations that IEEE and Vulkan round alike (+, -, *, compares;
** exp and log are our own polynomials, dp_sample_exp / dp_sample_log), so the two agree bit for bit
** on finite normal logits. docs/SAMPLING.md explains the choices.
**
** Order (llama.cpp's, which local-inference users expect; MODEL_REFERENCE.md §7):
**   1. repetition penalty: for each distinct id in the context, z > 0 ? z * (1/r) : z * r
**      (1/r rounded to f32 once: dp_sample_consts).
**      Ids whose (penalised) logit is NaN or -inf are never candidates.
**   2. greedy when temperature <= 0 or top_k == 1: the largest z, ties to the lower id.
**   3. top-k (k > 0): the k largest (ties to the lower id), k capped at DP_SAMPLE_CAP.
**      With top_k == 0 and top_p < 1, top-p works on the DP_SAMPLE_CAP largest.
**   4. top-p (< 1): over the candidates in descending order, e_i = dp_sample_exp(z_i - z_max),
**      cum_i = e_0 + ... + e_i summed in that order in f32; keep the first m with
**      cum_{m-1} >= top_p * cum_last (at least one).
**   5. min-p (> 0): keep z_i >= z_max + log(min_p) (log rounded to f32 once), i.e. p_i >= min_p p_max.
**   6. draw (Gumbel-max): id = argmax over the kept of z_i + T * g_i, g_i = dp_sample_gumbel(seed,
**      step, i); ties to the lower id. argmax(z/T + g) is an exact sample of softmax(z/T); the
**      multiplication by T instead of the division by T keeps every operation correctly rounded.
** The session draws with step = the number of tokens in the context (the position of the token
** being drawn), so a run is reproducible from its seed whatever the prefill chunking.
*/
#ifndef DP_CORE_SAMPLE_H
#define DP_CORE_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Candidates kept when top-k or top-p needs an ordering: the GPU sorts at most this many. */
#define DP_SAMPLE_CAP 1024

typedef struct dp_sample_params {
    float    temperature;     /* <= 0: greedy */
    int32_t  top_k;           /* <= 0: off; 1: greedy; > DP_SAMPLE_CAP: DP_SAMPLE_CAP */
    float    top_p;           /* >= 1: off */
    float    min_p;           /* <= 0: off */
    float    repeat_penalty;  /* 1: off; applied once per distinct id in `seen` */
    uint64_t seed;
    uint64_t step;            /* which draw: the session uses the context length; low 32 bits used */
} dp_sample_params;

/* What the kernels receive as push constants besides temperature and top_p, derived once. */
typedef struct dp_sample_consts {
    bool     greedy;          /* temperature <= 0 or top_k == 1 */
    uint32_t k;               /* candidates to sort: 0 = no sorting (neither top-k nor top-p) */
    float    inv_penalty;     /* (float)(1.0 / repeat_penalty) */
    float    log_min_p;       /* (float)log(min_p), -inf when min-p is off */
} dp_sample_consts;

void dp_sample_derive(const dp_sample_params *p, dp_sample_consts *out);

/* exp and natural log in f32 from +, -, * only (Cephes' polynomials), written identically in
** shaders/sample/sample_common.glsl. exp: 0 below -87 (no subnormals), x in [-87, 88]. log: x > 0 normal. */
float dp_sample_exp(float x);
float dp_sample_log(float x);

/* Uniform in (0, 1), (2j + 1) / 2^24 for a 23-bit j, from a PCG hash chain over (seed, step, id). */
float dp_sample_uniform(uint64_t seed, uint32_t step, uint32_t id);
/* Standard Gumbel noise: -log(-log(u)). */
float dp_sample_gumbel(uint64_t seed, uint32_t step, uint32_t id);

/* Picks an id from logits[0..n). seen[i] marks ids already in the context (may be NULL).
** scratch must hold dp_sample_scratch_bytes(n) bytes. Returns the id, or -1 with err set when no
** logit is a candidate (n == 0, or all NaN / -inf). */
size_t  dp_sample_scratch_bytes(size_t n);
int32_t dp_sample(const float *logits, size_t n, const bool *seen, const dp_sample_params *p,
                  void *scratch, dp_err *err);

#endif
