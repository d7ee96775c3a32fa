/*
** core/ref/moe.c: CPU references of the mixture-of-experts kernels (shaders/moe/): routing (softmax over
** the experts, top-k, renormalised weights: HF's MixtralSparseMoeBlock), the selected experts' matrix
** products over a stacked [E, N, K] weight, and the weighted combine. Plain loops; products accumulate in
** double so that the reference is the more exact side of a comparison.
*/
#include <math.h>
#include <stdint.h>

#include "core/ref/ref.h"

void dp_ref_topk_softmax(const float *logits, uint32_t T, uint32_t E, uint32_t k, uint32_t *ids, float *w)
{
    for (uint32_t t = 0; t < T; t++) {
        const float *l = logits + (uint64_t)t * E;
        float m = l[0];
        int nan_seen = 0;
        for (uint32_t e = 0; e < E; e++) {
            nan_seen |= isnan(l[e]);
            if (l[e] > m) m = l[e];
        }
        double sum = 0.0;
        for (uint32_t e = 0; e < E; e++) sum += exp((double)l[e] - m);
        double kept = 0.0;
        for (uint32_t j = 0; j < k; j++) {
            uint32_t best = UINT32_MAX;
            for (uint32_t e = 0; e < E; e++) {
                int taken = 0;
                for (uint32_t i = 0; i < j; i++) taken |= ids[t * k + i] == e;
                if (!taken && (best == UINT32_MAX || l[e] > l[best])) best = e;
            }
            ids[t * k + j] = best;
            w[t * k + j] = (float)(exp((double)l[best] - m) / sum);
            kept += w[t * k + j];
        }
        for (uint32_t j = 0; j < k; j++) w[t * k + j] = nan_seen ? NAN : (float)(w[t * k + j] / kept);
    }
}

void dp_ref_expert_matmul(const float *x, const float *W, const uint32_t *ids, uint32_t T, uint32_t k,
                          uint32_t E, uint32_t N, uint32_t K, bool x_per_slot, float *y)
{
    for (uint32_t s = 0; s < T * k; s++) {
        const float *xr = x + (uint64_t)(x_per_slot ? s : s / k) * K;
        uint32_t e = ids[s];
        for (uint32_t n = 0; n < N; n++) {
            if (e >= E) {
                y[(uint64_t)s * N + n] = NAN;
                continue;
            }
            const float *wr = W + ((uint64_t)e * N + n) * K;
            double acc = 0.0;
            for (uint32_t i = 0; i < K; i++) acc += (double)wr[i] * xr[i];
            y[(uint64_t)s * N + n] = (float)acc;
        }
    }
}

void dp_ref_weighted_sum(const float *x, const float *w, uint32_t T, uint32_t k, uint32_t N, float *y)
{
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (uint32_t j = 0; j < k; j++) acc += (double)w[t * k + j] * x[((uint64_t)t * k + j) * N + n];
            y[(uint64_t)t * N + n] = (float)acc;
        }
}
