/*
** core/sample.h: the sampling reference — how doppler turns one logits row into a token id.
** Order (llama.cpp's, which local-inference users expect; MODEL_REFERENCE.md §7):
**   repetition penalty -> top-k -> top-p -> min-p -> temperature -> softmax -> draw.
** The draw uses a counter-based generator, u = dp_sample_uniform(seed, step), so a run is
** reproducible from its seed and the GPU sampler can draw the very same number.
*/
#ifndef DP_CORE_SAMPLE_H
#define DP_CORE_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dp_sample_params {
    float    temperature;     /* <= 0: greedy */
    int32_t  top_k;           /* <= 0: off */
    float    top_p;           /* >= 1: off */
    float    min_p;           /* <= 0: off */
    float    repeat_penalty;  /* 1: off; applied once per distinct id in `seen` */
    uint64_t seed;
    uint64_t step;            /* which draw of the run: 1, 2, ... */
} dp_sample_params;

/* Uniform in [0, 1) from (seed, step): a PCG-style hash, 24 bits of mantissa (exact in f32). */
float dp_sample_uniform(uint64_t seed, uint64_t step);

/* Picks an id from logits[0..n). seen[i] marks ids already in the context (may be NULL).
** scratch must hold n floats + n int32 (dp_sample_scratch_bytes). Ties in ordering go to the
** lower id. Returns the id, or -1 with err set when n == 0 or every logit is NaN. */
size_t  dp_sample_scratch_bytes(size_t n);
int32_t dp_sample(const float *logits, size_t n, const bool *seen, const dp_sample_params *p,
                  void *scratch, dp_err *err);

#endif
