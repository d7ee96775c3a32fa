#version 450
// add: y[i] = a[i] + b[i] for i < n (f32). y may alias a or b (in place).
// Dispatch: (groups, 1, 1), any groups >= 1: a grid-stride loop covers n; ceil(n / WG) is enough.
// Push:  a (F32In), b (F32In), y (F32Out), n (u32: elements)
// Spec constants: WG  workgroup size (local_size_x_id = 0)  default 256
// Defines: none
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push { F32In a; F32In b; F32Out y; uint n; } p;

void main()
{
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
        p.y.v[i] = p.a.v[i] + p.b.v[i];
}
