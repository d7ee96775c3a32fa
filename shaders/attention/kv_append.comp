#version 460
// kv_append: Kc[h, pos[t] % cap, :] = k[t, h, :] and Vc[h, pos[t] % cap, :] = v[t, h, :]
// Caches are [n_kv_heads, cap, head_dim]: cap = the whole context for global layers, or a ring buffer
// of cap >= window slots for sliding layers. A token is skipped when a later token of the same call takes
// its slot (pos[t] + cap <= pos[T-1]), so that no two invocations write one slot.
// Values are converted to the cache type (f16 with DP_KV_F16).
// Order with attention: see shaders/attention/attention.comp (attention may run before or after).
// Dispatch: one invocation per element of k: count = n_tokens * n_kv_heads * head_dim;
//           groups (min(g, 65535), ceil(g / 65535), 1) with g = ceil(count / WG).
// Push:  k, v (ACT [T, n_kv_heads, head_dim], read)  kc, vc (KV [n_kv_heads, cap, head_dim], write)
//        pos (u32 [T], read)  n_tokens, n_kv_heads, head_dim, cap,
//        kv_stride (elements between tokens of k and v; 0 = n_kv_heads * head_dim)
// Spec:  WG  workgroup size (default 256)
// Defines: DP_ACT_F16, DP_KV_F16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_In  k;
    ACT_In  v;
    KV_Out  kc;
    KV_Out  vc;
    U32In   pos;
    uint    n_tokens;
    uint    n_kv_heads;
    uint    head_dim;
    uint    cap;
    uint    kv_stride;
} p;

void main()
{
    uint gid = gl_GlobalInvocationID.x + gl_WorkGroupID.y * 65535u * WG;
    if (gid >= p.n_tokens * p.n_kv_heads * p.head_dim) return;
    uint d = gid % p.head_dim;
    uint h = (gid / p.head_dim) % p.n_kv_heads;
    uint t = gid / (p.head_dim * p.n_kv_heads);
    uint tp = p.pos.v[t];
    if (uint64_t(tp) + p.cap <= uint64_t(p.pos.v[p.n_tokens - 1u])) return;
    uint dst = (h * p.cap + tp % p.cap) * p.head_dim + d;
    uint src = p.kv_stride != 0u ? t * p.kv_stride + h * p.head_dim + d : gid;
    kv_store(p.kc, dst, act_load(p.k, src));
    kv_store(p.vc, dst, act_load(p.v, src));
}
