/*
** core/random.h: a small seeded generator for synthetic weights and tests (not for sampling,
** whose RNG must match the GPU's: see the sampler). splitmix64 is tiny, fast and passes BigCrush;
** normals come from Box-Muller, so a stream is reproducible from its seed on every machine.
*/
#ifndef DP_CORE_RANDOM_H
#define DP_CORE_RANDOM_H

#include <stdint.h>

typedef struct dp_rng {
    uint64_t state;
    double   spare;      /* the second Box-Muller value */
    int      has_spare;
} dp_rng;

void     dp_rng_seed(dp_rng *r, uint64_t seed, uint64_t stream);  /* stream: e.g. a tensor index */
uint64_t dp_rng_u64(dp_rng *r);
double   dp_rng_uniform(dp_rng *r);     /* [0, 1) */
double   dp_rng_normal(dp_rng *r);      /* mean 0, std 1 */

#endif
