#version 450
// columns: the columns of an f16 matrix W [N, K] (row-major) in blocks of 8:
//   y[c][n][j] = W[n, 8c + j]   for c < K / 8, n < N, j < 8        (y is [K / 8][N][8] f16)
// so that a kernel reading 8 consecutive columns for each row n makes one 16-byte load per n, neighbouring
// n at neighbouring addresses. Made once per weight at plan compile time, for the fused MLP's down projection
// (matmul/gemv_q.comp's DP_DOWN: a workgroup holds 8 k of h and adds D[:, k..k+8) h[k..k+8) to every output).
// Each invocation moves one 16-byte unit. K must be a multiple of 8 (the rows' units are then 16-byte aligned).
// Dispatch: u = N * K / 8 units; (gx, gy, 1) workgroups with gx = min(ceil(u / WG), 65535),
//   gy = ceil(ceil(u / WG) / gx); unit index = (x + gx * y) * WG + local id; units past u are no-ops.
// Push: w (V4In [N, K] f16), y (V4Out [K / 8, N, 8] f16), N, K.
// Spec constants: WG (local_size_x_id = 0), default 256.
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push { V4In w; V4Out y; uint N; uint K; } p;

void main()
{
    const uint cpr = p.K / 8u;   // units per row of W
    const uint i = (gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y) * WG + gl_LocalInvocationID.x;
    if (uint64_t(i) >= uint64_t(p.N) * cpr) return;
    const uint n = i / cpr, c = i % cpr;
    p.y.v[c * p.N + n] = p.w.v[i];   // fewer than 2^32 units (a 16-byte index)
}
