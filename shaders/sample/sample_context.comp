#version 460
// sample_context: records a pass's token ids in the context buffer the repetition penalty reads, and the
// context length: ctx[pos[t]] = ids[t] for t < T (pos < cap), n_ctx[0] = pos[T - 1] + 1. The sampler also
// uses n_ctx as its draw counter (step), so a recorded pass replays token after token unchanged.
// Dispatch: (ceil(T / WG), 1, 1).
// Push:  ids (u32 [T], read)  pos (u32 [T], read)  ctx (u32 [cap], write)  n_ctx (u32 [1], write)  T, cap
// Spec:  WG  workgroup size (default 64)
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(push_constant) uniform Push {
    U32In   ids;
    U32In   pos;
    U32Out  ctx;
    U32Out  n_ctx;
    uint    T;
    uint    cap;
} p;

void main()
{
    uint t = gl_GlobalInvocationID.x;
    if (t >= p.T) return;
    uint at = p.pos.v[t];
    if (at < p.cap) p.ctx.v[at] = p.ids.v[t];
    if (t == p.T - 1u) p.n_ctx.v[0] = min(at + 1u, p.cap);
}
