#version 460
// argmax_final: stage 2 of the row-wise argmax: ids[r] = the index of the best of the row's n_chunks
// (value, index) pairs from argmax_partial.comp (torch.argmax order: NaN first, larger, lower index).
// Dispatch: (rows, 1, 1).
// Push:  part_val (f32 [rows, n_chunks], read)  part_idx (u32, read)  ids (u32 [rows], write)  n_chunks
// Spec:  WG  workgroup size, a power of two (default 64)
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(push_constant) uniform Push {
    F32In   part_val;
    U32In   part_idx;
    U32Out  ids;
    uint    n_chunks;
} p;

#include "argmax_reduce.glsl"

void main()
{
    uint r = gl_WorkGroupID.x;
    uint id = argmax_reduce(p.part_val, p.part_idx, r * p.n_chunks, p.n_chunks);
    if (gl_LocalInvocationID.x == 0u) p.ids.v[r] = id;
}
