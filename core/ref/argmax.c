/*
** core/ref/argmax.c: CPU reference argmax over logit rows (shaders/argmax/), torch.argmax's rules:
** the lowest index among equal maxima, and a NaN beats every number (the first NaN wins).
*/
#include <math.h>

#include "core/ref/ref.h"

void dp_ref_argmax(const float *x, uint32_t rows, uint32_t n, uint32_t *out)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *row = x + (uint64_t)r * n;
        uint32_t best = 0;
        for (uint32_t i = 1; i < n && !isnan(row[best]); i++)
            if (isnan(row[i]) || row[i] > row[best]) best = i;
        out[r] = best;
    }
}
