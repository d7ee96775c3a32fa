// reduce/reduce.glsl: one stage of a vector reduction, shared by sum.comp and max.comp.
// Each workgroup folds a grid-stride share of x into one value, written to y[workgroup]. Run it
// twice to reduce a vector: n -> G partials (G groups), then G -> 1 (one group).
// In shared memory only: the subgroup size differs between devices (8 on lavapipe, 32 on NVIDIA)
// and nothing here depends on it. WG must be a power of two.
// The including file defines OP(a, b) and IDENTITY.
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push { F32In x; F32Out y; uint n; } p;

shared float part[WG];

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint stride = gl_NumWorkGroups.x * WG;
    float acc = IDENTITY;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) acc = OP(acc, p.x.v[i]);
    part[t] = acc;
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1) {
        if (t < h) part[t] = OP(part[t], part[t + h]);
        barrier();
    }
    if (t == 0u) p.y.v[gl_WorkGroupID.x] = part[0];
}
