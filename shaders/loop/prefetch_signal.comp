#version 460
// prefetch_signal: tells the side prefetcher (prefetch.comp) that stage `stage` of the main recording has
// begun. gpu/recorder.c records it as the first dispatch after each barrier, beside the stage's own kernels
// (no barrier of its own), so it costs an independent dispatch and orders nothing.
// Progress counts stages over every run of the recording: the run's first signal takes the count the last
// run left as its base, and stage s writes base + s + 1. The count is kept in WG words 256 bytes apart
// (one per invocation), so that the side kernel's workgroups poll different L2 slices.
// Dispatch: (1, 1, 1).  Push: ctl (u32: copies at 64 k, the run's base at CTL_BASE), stage.
#include "dp_common.glsl"
#include "dp_prefetch.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 32;   // copies of the progress count

layout(push_constant) uniform Push {
    PrefetchCtl ctl;
    uint        stage;
} p;

shared uint s_base;

void main()
{
    uint lid = gl_LocalInvocationID.x, base;
    if (p.stage == 0u) {
        if (lid == 0u) s_base = p.ctl.v[0];
        barrier();
        base = s_base;
        if (lid == 0u) p.ctl.v[CTL_BASE] = base;
    } else {
        base = p.ctl.v[CTL_BASE];
    }
    p.ctl.v[lid * CTL_STRIDE] = base + p.stage + 1u;
}
