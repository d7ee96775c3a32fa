#version 460
// gather: y[t, c] = table[ids[t], c] * scale           token embedding lookup (and any row gather)
// The table may pass 128 MiB and 2^31 elements (Gemma 3's 262144 x 1152), so each row's address is computed
// in 64 bits and the row is then indexed with a 32-bit column. An id >= rows yields a zero row (the kernel
// cannot report errors; the host validates token ids, this only keeps a bad id from reading out of bounds).
// Gemma multiplies by sqrt(hidden) rounded to the weight dtype (HF: embed_scale.to(weight.dtype)): the caller
// passes scale already rounded that way.
//
// Dispatch: (ceil(C / WG), min(T, 65535), 1); each workgroup walks tokens y, y + 65535, ... so any T works.
// Push (by name):
//   ids    U32  [T]           token ids
//   table  W    [rows, C]     embedding table (f32 / f16 / bf16 by DP_W_*)
//   y      ACT  [T, C]        output
//   T, C, rows  uint
//   scale  float              multiplier (1.0 for none)
// Spec constants (by name): WG workgroup size (local_size_x_id = 0), default 256.
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16 (dp_types.glsl).
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    U32In   ids;
    W_In    table;
    ACT_Out y;
    uint    T;
    uint    C;
    uint    rows;
    float   scale;
} p;

void main()
{
    const uint c = gl_GlobalInvocationID.x;
    if (c >= p.C) return;
    for (uint t = gl_WorkGroupID.y; t < p.T; t += gl_NumWorkGroups.y) {
        const uint id = p.ids.v[t];
        float v = 0.0;
        if (id < p.rows) {
            W_In row = W_In(uint64_t(p.table) + uint64_t(id) * uint64_t(p.C) * W_BYTES);
            v = w_load(row, c) * p.scale;
        }
        ACT_Out yrow = ACT_Out(uint64_t(p.y) + uint64_t(t) * uint64_t(p.C) * ACT_BYTES);
        act_store(yrow, c, v);
    }
}
