#version 460
// warmup: keeps the GPU busy, and so its clock up, while the host works alone (gpu/warmup.c). An idle GPU
// lowers its clock 1.5-3 s after its last work and raises it again only after ~0.3 s of new work, so without
// this the first passes after a long load or a first compile run at a fraction of the clock
// (docs/BENCHMARKS.md, session 31).
// Lane 0 of each workgroup polls the host's quit word until it is set or `limit` polls have passed; the
// first workgroup then stores its poll count (the host reads it: how long the kernel ran, in polls). Nothing
// else is read or written, so the main queue's work beside it is untouched.
// Dispatch: (groups, 1, 1).  Push: ctl (u32 [2]: quit, polls), limit.
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 32;

layout(buffer_reference, std430, buffer_reference_align = 4) coherent volatile buffer WarmCtl { uint v[]; };

layout(push_constant) uniform Push {
    WarmCtl ctl;
    uint    limit;
} p;

void main()
{
    if (gl_LocalInvocationID.x != 0u) return;
    uint polls = 0u;
    while (polls < p.limit && p.ctl.v[0] == 0u) polls++;
    if (gl_WorkGroupID.x == 0u) p.ctl.v[1] = polls;
}
