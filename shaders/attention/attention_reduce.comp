#version 460
// attention_reduce: flash-decoding, stage 2 of 2: merges attention_decode.comp's per-chunk partials.
//   o[t, h, :] = sum_c exp(m_c - M) ov_c[:] / sum_c exp(m_c - M) l_c,   M = max_c m_c,
// over the chunks c that hold keys; the chunk count follows from pos with attention_decode's formula (the
// partial slots of empty chunks are never read: they hold stale values from earlier steps).
// Dispatch: (n_q_heads, n_tokens, 1).
// Push:  part_o (f32 [T, n_q_heads, n_chunks, D], read)  part_ml (f32 [T, n_q_heads, n_chunks, 2], read)
//        pos (u32 [T], read)  o (ACT [T, n_q_heads, D], write)
//        n_q_heads, head_dim, window, n_chunks, min_chunk (the values given to attention_decode)
// Spec:  WG  workgroup size (default 64)
// Defines: DP_ACT_F16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(push_constant) uniform Push {
    F32In   part_o;
    F32In   part_ml;
    U32In   pos;
    ACT_Out o;
    uint    n_q_heads;
    uint    head_dim;
    uint    window;
    uint    n_chunks;
    uint    min_chunk;
} p;

void main()
{
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, D = p.head_dim;
    uint qp = p.pos.v[t];
    uint lo = (p.window > 0u && qp >= p.window) ? qp - p.window + 1u : 0u;
    uint n = qp - lo + 1u;
    uint clen = max(p.min_chunk, (n + p.n_chunks - 1u) / p.n_chunks);
    uint nc = (n + clen - 1u) / clen;
    uint base = (t * p.n_q_heads + h) * p.n_chunks;

    float M = -3.0e38;
    for (uint c = 0u; c < nc; c++) M = max(M, p.part_ml.v[(base + c) * 2u]);
    float L = 0.0;
    for (uint c = 0u; c < nc; c++) L += p.part_ml.v[(base + c) * 2u + 1u] * exp(p.part_ml.v[(base + c) * 2u] - M);
    float inv = 1.0 / L;
    for (uint d = tid; d < D; d += WG) {
        float acc = 0.0;
        for (uint c = 0u; c < nc; c++) acc += exp(p.part_ml.v[(base + c) * 2u] - M) * p.part_o.v[(base + c) * D + d];
        act_store(p.o, (t * p.n_q_heads + h) * D + d, acc * inv);
    }
}
