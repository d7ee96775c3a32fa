#version 460
// softcap: x[i] <- c * tanh(x[i] / c), in place over n elements (final-logit soft-capping, Gemma 2 style;
// attention-logit capping is fused into shaders/attention/attention.comp).
// Dispatch: one invocation per element: groups (min(g, 65535), ceil(g / 65535), 1), g = ceil(n / WG).
// Push:  x (ACT, read-write)  n, c
// Spec:  WG  workgroup size (default 256)
// Defines: DP_ACT_F16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_Buf x;
    uint    n;
    float   c;
} p;

// tanh without overflow for large |x|.
float safe_tanh(float x)
{
    float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

void main()
{
    uint gid = gl_GlobalInvocationID.x + gl_WorkGroupID.y * 65535u * WG;
    if (gid >= p.n) return;
    act_store(p.x, gid, p.c * safe_tanh(act_load(p.x, gid) / p.c));
}
