#version 460
// rope: rotary position embedding in place on x[T, H, D] (q or k), NeoX / HF rotate_half pairing:
//   a = float(pos[t]) * inv_freq[i]   (one f32 product, as HF's f32 matmul of inv_freq by positions)
//   x[i]        <- x[i] cos a - x[i + R/2] sin a
//   x[i + R/2]  <- x[i + R/2] cos a + x[i] sin a            for i < R/2, R = rot_dim <= D (partial rotary)
// Dimensions >= rot_dim are left as they are. inv_freq is built on the host (core/ref/rope.c:
// dp_rope_inv_freq), so default, linear and llama3 scaling are only different tables; positions come from
// a buffer so that the GPU can advance them itself.
// cos/sin: the angle is first reduced to [-pi, pi] exactly (64-bit fixed point, reduce_angle in
// shaders/include/dp_rope.glsl, shared with rope_kv.comp), because
// GPU sin/cos are only accurate near zero and angles reach ~1e5 rad at long positions. Needs shaderInt64.
// Dispatch: one invocation per (t, h, i): count = T * H * rot_dim / 2 invocations;
//           groups (min(g, 65535), ceil(g / 65535), 1) with g = ceil(count / WG).
// Push:  x (ACT, read-write)  pos (u32 [T], read)  inv_freq (f32 [rot_dim / 2], read)
//        n_tokens, n_heads, head_dim, rot_dim, x_stride (elements between tokens of x; 0 = n_heads * head_dim,
//        so that q or k can be a column slice of a fused qkv projection)
// Spec:  WG  workgroup size (default 256)
// Defines: DP_ACT_F16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_Buf x;          // [n_tokens, n_heads, head_dim]
    U32In   pos;        // [n_tokens]
    F32In   inv_freq;   // [rot_dim / 2]
    uint    n_tokens;
    uint    n_heads;
    uint    head_dim;
    uint    rot_dim;
    uint    x_stride;
} p;

#include "dp_rope.glsl"

void main()
{
    uint gid = gl_GlobalInvocationID.x + gl_WorkGroupID.y * 65535u * WG;
    uint half_rot = p.rot_dim / 2u;
    uint count = p.n_tokens * p.n_heads * half_rot;
    if (gid >= count) return;
    uint i = gid % half_rot;
    uint row = gid / half_rot;          // t * n_heads + h
    uint t = row / p.n_heads;

    float a = reduce_angle(float(p.pos.v[t]) * p.inv_freq.v[i]);
    float c = cos(a), s = sin(a);
    uint xs = p.x_stride != 0u ? p.x_stride : p.n_heads * p.head_dim;
    uint base = t * xs + (row - t * p.n_heads) * p.head_dim;
    float x0 = act_load(p.x, base + i);
    float x1 = act_load(p.x, base + i + half_rot);
    act_store(p.x, base + i, x0 * c - x1 * s);
    act_store(p.x, base + i + half_rot, x1 * c + x0 * s);
}
