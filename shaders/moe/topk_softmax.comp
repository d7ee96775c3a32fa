#version 460
// topk_softmax: mixture-of-experts routing, one router-logits row per token (HF MixtralSparseMoeBlock):
//   p = softmax(logits[t, :])                         over all E experts, f32
//   ids[t, 0..k) = the k largest p, in descending order (the lowest index first on ties)
//   w[t, j] = p[ids[t, j]] / sum_j' p[ids[t, j']]     (the k weights renormalised to sum to 1)
// A NaN logit makes every weight of its row NaN (it is never silently routed around).
// Dispatch: one invocation per token: groups (ceil(n_tokens / WG), 1, 1).
// Push:  logits (ACT [n_tokens, n_experts], read)  ids (u32 [n_tokens, top_k], write)
//        w (f32 [n_tokens, top_k], write)  n_tokens, n_experts (<= 256), top_k (<= 8, <= n_experts)
// Spec:  WG  workgroup size (default 64)
// Defines: DP_ACT_F16 (logits in f16; the math is f32 either way)
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(push_constant) uniform Push {
    ACT_In logits;
    U32Out ids;
    F32Out w;
    uint   n_tokens;
    uint   n_experts;
    uint   top_k;
} p;

const uint MAX_K = 8u;

void main()
{
    uint t = gl_GlobalInvocationID.x;
    if (t >= p.n_tokens) return;
    uint E = p.n_experts, K = min(p.top_k, MAX_K);
    uint base = t * E;

    float m = act_load(p.logits, base);
    bool nan_seen = false;
    for (uint e = 0u; e < E; e++) {
        float v = act_load(p.logits, base + e);
        nan_seen = nan_seen || isnan(v);
        m = max(m, v);
    }
    float sum = 0.0;
    for (uint e = 0u; e < E; e++) sum += exp(act_load(p.logits, base + e) - m);

    // Selection by repeated maximum over the experts not yet taken (E and k are small).
    uint chosen[MAX_K];
    float prob[MAX_K];
    float kept = 0.0;
    for (uint j = 0u; j < K; j++) {
        uint best = 0xffffffffu;
        float bv = 0.0;
        for (uint e = 0u; e < E; e++) {
            bool taken = false;
            for (uint i = 0u; i < j; i++) taken = taken || chosen[i] == e;
            float v = act_load(p.logits, base + e);
            if (!taken && (best == 0xffffffffu || v > bv)) { best = e; bv = v; }
        }
        chosen[j] = best;
        prob[j] = exp(bv - m) / sum;
        kept += prob[j];
    }
    for (uint j = 0u; j < K; j++) {
        p.ids.v[t * p.top_k + j] = chosen[j];
        p.w.v[t * p.top_k + j] = nan_seen ? uintBitsToFloat(0x7fc00000u) : prob[j] / kept;
    }
}
