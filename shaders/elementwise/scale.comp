#version 450
// scale: y[i] = x[i] * s for i < n (f32). y may alias x (in place).
// Dispatch: (groups, 1, 1), any groups >= 1: a grid-stride loop covers n; ceil(n / WG) is enough.
// Push:  x (F32In), y (F32Out), n (u32: elements), s (f32)
// Spec constants: WG  workgroup size (local_size_x_id = 0)  default 256
// Defines: none
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push { F32In x; F32Out y; uint n; float s; } p;

void main()
{
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
        p.y.v[i] = p.x.v[i] * p.s;
}
