#version 460
// sample_penalty: the repetition penalty, applied into a scratch copy z of the logits row x (x itself stays
// intact: --logits-out reads it). Two dispatches of this kernel:
//   mode 0: z[i] = x[i] for i < n                                      Dispatch: groups_1d(n)
//   mode 1: for j < min(n_ctx[0], cap), id = ctx[j] < n:                Dispatch: groups_1d(cap)
//           z[id] = x[id] > 0 ? x[id] * inv_penalty : x[id] * penalty
// An id seen twice is written twice with the same value (read from x, not z): once per distinct id.
// groups_1d folds the groups as (x <= 65535, y); the element index is (gy * gx_count + gx) * WG + tid.
// Push:  x (f32 [n], read)  z (f32 [n], write)  ctx (u32 [cap], read)  n_ctx (u32 [1], read)
//        n, cap, mode, penalty, inv_penalty (= (float)(1.0 / penalty), see core/sample.h)
// Spec:  WG  workgroup size (default 256)
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    F32In   x;
    F32Out  z;
    U32In   ctx;
    U32In   n_ctx;
    uint    n;
    uint    cap;
    uint    mode;
    float   penalty;
    float   inv_penalty;
} p;

void main()
{
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (p.mode == 0u) {
        if (i < p.n) p.z.v[i] = p.x.v[i];
        return;
    }
    if (i >= min(p.n_ctx.v[0], p.cap)) return;
    uint id = p.ctx.v[i];
    if (id >= p.n) return;
    float v = p.x.v[id];
    precise float w = v > 0.0 ? v * p.inv_penalty : v * p.penalty;
    p.z.v[id] = w;
}
