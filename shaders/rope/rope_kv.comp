#version 460
// rope_kv: the attention prologue of one layer in one dispatch (fusion rope_kv, lua/lib/doppler/fusions.lua):
//   with DP_QK_NORM  q[t, h, :] <- rmsnorm(q[t, h, :]) * (w_offset + qw),  k[t, h, :] likewise with kw
//                    (Gemma 3, Qwen 3: the per-head q/k norm; one eps and offset for both);
//   then             q, k <- rope(q), rope(k)                           (rope.comp's pairing and angles);
//   then             Kc[h, pos[t] % cap, :] = k[t, h, :],  Vc[...] = v[t, h, :]   (kv_append.comp).
// It replaces rmsnorm (q), rmsnorm (k), rope (q), rope (k) and kv_append: the same values at the same
// rounding points — the normed row is rounded to the activation type (as rmsnorm stores it), rope reads
// that and stores its result in the activation type, the caches get the stored k (and v) converted to the
// KV type. The sum of squares uses rmsnorm.comp's lanes and order (norm_rows.glsl with one row per
// workgroup and the LR rmsnorm picks for this row length), so the norm is bit-identical to rmsnorm's.
// The caches are written BEFORE attention reads them: doppler.lower appends here only where attention.comp's
// header allows that order (T = 1, global layers, caches with a slot per position of the context, or
// cap >= window + T - 1); attention then skips its own kv_append. q and k are updated in place (attention
// reads them; new keys come from k, older from the caches, as before). A token whose slot a later token of
// the call takes is not appended (kv_append).
// Method: one workgroup per (q or kv head, token); the row is read once into registers, normalised,
// staged in shared memory (rope pairs i, i + rot/2 cross lanes), rotated and written back; a kv-head
// workgroup also stores its k row and copies its v row into the caches.
// Dispatch: (n_q_heads + n_kv_heads, min(T, 65535), ceil(T / 65535)); token = y + z * 65535.
// Push:  q (ACT [T, n_q_heads, D], read-write)  k (ACT [T, n_kv_heads, D], read-write)
//        v (ACT [T, n_kv_heads, D], read)  kc, vc (KV [n_kv_heads, cap, D], write)  pos (u32 [T], read)
//        inv_freq (f32 [rot_dim / 2], read)
//        with DP_QK_NORM: qw, kw (W [D], read), eps, w_offset
//        n_tokens, n_q_heads, n_kv_heads, cap, rot_dim (<= D, even),
//        q_stride, kv_stride (elements between tokens of q and of k, v; 0 = heads * D: column slices of a
//        fused qkv projection, Phi-3)
// Spec:  WG  lanes per row: a power of two (the host uses rmsnorm's: pow2 >= ceil(D / 4), 8 .. 256)
//        D   head_dim
// Defines: DP_ACT_F16, DP_KV_F16, DP_QK_NORM, DP_W_F32 | DP_W_F16 | DP_W_BF16
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint D = 256;
const uint ROWS = 1u;

#include "../norm/norm_rows.glsl"
#include "dp_rope.glsl"

layout(push_constant) uniform Push {
    ACT_Buf q;
    ACT_Buf k;
    ACT_In  v;
    KV_Out  kc;
    KV_Out  vc;
    U32In   pos;
    F32In   inv_freq;
#ifdef DP_QK_NORM
    W_In    qw;
    W_In    kw;
    float   eps;
    float   w_offset;
#endif
    uint    n_tokens;
    uint    n_q_heads;
    uint    n_kv_heads;
    uint    cap;
    uint    rot_dim;
    uint    q_stride;
    uint    kv_stride;
} p;

const uint EPL = (D + WG - 1u) / WG;   // elements per lane
shared float row_s[D];

void main()
{
    uint slot = gl_WorkGroupID.x;
    uint t = gl_WorkGroupID.y + gl_WorkGroupID.z * 65535u;
    bool is_q = slot < p.n_q_heads;
    uint h = is_q ? slot : slot - p.n_q_heads;
    uint rw, ln;
    norm_lane(rw, ln);   // rw = 0: one row per workgroup
    if (t >= p.n_tokens) return;   // uniform per workgroup

    uint qs = p.q_stride != 0u ? p.q_stride : p.n_q_heads * D;
    uint ks = p.kv_stride != 0u ? p.kv_stride : p.n_kv_heads * D;
    uint base = is_q ? t * qs + h * D : t * ks + h * D;
    ACT_Buf x = is_q ? p.q : p.k;

    float xr[EPL];
    for (uint e = 0u; e < EPL; e++) {
        uint i = ln + e * WG;
        xr[e] = i < D ? act_load(x, base + i) : 0.0;
    }
#ifdef DP_QK_NORM
    float ss = 0.0;
    for (uint e = 0u; e < EPL; e++) ss += xr[e] * xr[e];
    float inv = inversesqrt(norm_row_sum(ss, rw) / float(D) + p.eps);
    W_In w = is_q ? p.qw : p.kw;
    for (uint e = 0u; e < EPL; e++) {
        uint i = ln + e * WG;
        if (i < D) xr[e] = act_round(xr[e] * inv * (p.w_offset + w_load(w, i)));
    }
#endif
    for (uint e = 0u; e < EPL; e++) {
        uint i = ln + e * WG;
        if (i < D) row_s[i] = xr[e];
    }
    barrier();

    uint tp = p.pos.v[t];
    uint half_rot = p.rot_dim / 2u;
    // append unless a later token of this call takes the slot (kv_append.comp)
    bool append = !is_q && uint64_t(tp) + p.cap > uint64_t(p.pos.v[p.n_tokens - 1u]);
    uint dst = (h * p.cap + tp % p.cap) * D;
    for (uint e = 0u; e < EPL; e++) {
        uint i = ln + e * WG;
        if (i >= D) break;
        float y = xr[e];
        if (i < p.rot_dim) {
            uint j = i < half_rot ? i : i - half_rot;
            float a = reduce_angle(float(tp) * p.inv_freq.v[j]);
            float c = cos(a), s = sin(a);
            y = i < half_rot ? row_s[i] * c - row_s[i + half_rot] * s : row_s[i] * c + row_s[i - half_rot] * s;
        }
        act_store(x, base + i, y);
        if (append) {
            kv_store(p.kc, dst + i, act_round(y));
            kv_store(p.vc, dst + i, act_load(p.v, base + i));
        }
    }
}
