/*
** core/random.c: see random.h.
*/
#include "core/random.h"

#include <math.h>

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void dp_rng_seed(dp_rng *r, uint64_t seed, uint64_t stream)
{
    r->state = mix(seed ^ mix(stream + 0x9e3779b97f4a7c15ull));
    r->has_spare = 0;
}

uint64_t dp_rng_u64(dp_rng *r)
{
    r->state += 0x9e3779b97f4a7c15ull;
    return mix(r->state);
}

double dp_rng_uniform(dp_rng *r)
{
    return (double)(dp_rng_u64(r) >> 11) * 0x1p-53;
}

double dp_rng_normal(dp_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1 = dp_rng_uniform(r), u2 = dp_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;                 /* log(0) */
    double radius = sqrt(-2.0 * log(u1)), angle = 2.0 * M_PI * u2;
    r->spare = radius * sin(angle);
    r->has_spare = 1;
    return radius * cos(angle);
}
