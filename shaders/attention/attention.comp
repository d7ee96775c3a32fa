#version 460
// attention: out[t, h, :] = sum_j softmax_j(s_j) V_j,  s_j = cap(scale * q[t, h, :] . K_j),
//   cap(s) = softcap * tanh(s / softcap) when softcap > 0, else s.
// Keys j visible to the query at position P = pos[t] (HF masking_utils, MODEL_REFERENCE.md 1.6):
//   global (window = 0): 0 <= j <= P;   sliding (window W): P - W < j <= P, i.e. max(0, P - W + 1) .. P.
// Grouped-query: q head h reads kv head h / (n_q_heads / n_kv_heads).
// Where keys come from: positions >= pos[0] (this call's tokens; positions are consecutive, pos[t] =
// pos[0] + t) from the new k, v [T, n_kv_heads, D]; older positions from the caches Kc, Vc
// [n_kv_heads, cap, D] at slot j % cap. Hence the order with kv_append:
//   * attention then kv_append: always correct (cap >= W for sliding layers, > last position for global
//     ones and for a sliding cache with a slot per position of the context);
//   * kv_append then attention: correct when no slot a query needs was overwritten: T = 1 (decode), or
//     cap >= W + T - 1, or global layers, or no slot is ever reused (cap > the last position). The rope_kv
//     fusion (shaders/rope/rope_kv.comp) appends first, and fusions.lua applies it only there.
// With DP_KV_F16 the new k, v are rounded to f16 on load, so each key has the value the cache holds and a
// prefill gives what the same tokens decoded one by one give.
// Method: one workgroup per (query token, q head); keys in blocks of WG, one key per invocation for the
// score (a D-long dot product), online softmax (running max m and sum l, rescaled per block), the
// output row accumulated in shared memory (each invocation owns dims d = tid, tid + WG, ...). f32 throughout.
// Reductions use shared memory, so any subgroup size works. Prefill = the same kernel over T tokens (a
// tiled flash-attention prefill is a later speed task).
// Dispatch: (n_q_heads, n_tokens, 1).
// Push:  q (ACT [T, n_q_heads, D], read)  k, v (ACT [T, n_kv_heads, D], read)
//        kc, vc (KV [n_kv_heads, cap, D], read)  pos (u32 [T], read)  o (ACT [T, n_q_heads, D], write)
//        n_tokens, n_q_heads, n_kv_heads, head_dim (<= 256), cap, window, scale, softcap,
//        q_stride, kv_stride (elements between tokens of q and of k, v; 0 = heads * head_dim: lets q, k, v
//        be column slices of one fused qkv projection)
// Spec:  WG  workgroup size, a power of two (default 128)
// Defines: DP_ACT_F16, DP_KV_F16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;

layout(push_constant) uniform Push {
    ACT_In  q;
    ACT_In  k;
    ACT_In  v;
    KV_In   kc;
    KV_In   vc;
    U32In   pos;
    ACT_Out o;
    uint    n_tokens;
    uint    n_q_heads;
    uint    n_kv_heads;
    uint    head_dim;
    uint    cap;
    uint    window;
    float   scale;
    float   softcap;
    uint    q_stride;
    uint    kv_stride;
} p;

const uint MAX_D = 256u;
shared float q_s[MAX_D];
shared float o_s[MAX_D];
shared float p_s[WG];      // this block's probabilities (unnormalised)
shared float red[WG];

float wg_max(float v)
{
    uint tid = gl_LocalInvocationID.x;
    red[tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] = max(red[tid], red[tid + s]);
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

float wg_sum(float v)
{
    uint tid = gl_LocalInvocationID.x;
    red[tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

// Value as the cache type holds it.
float kv_round(float x)
{
#ifdef DP_KV_F16
    return float(float16_t(x));
#else
    return x;
#endif
}

// tanh without overflow for large |x| (exp(2x) / (exp(2x) + 1) forms give inf / inf = NaN).
float safe_tanh(float x)
{
    float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

void main()
{
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint D = p.head_dim, Hkv = p.n_kv_heads;
    uint hk = h / (p.n_q_heads / Hkv);
    uint p0 = p.pos.v[0u], qp = p.pos.v[t];
    uint lo = (p.window > 0u && qp >= p.window) ? qp - p.window + 1u : 0u;

    uint qs = p.q_stride != 0u ? p.q_stride : p.n_q_heads * D;
    uint ks = p.kv_stride != 0u ? p.kv_stride : Hkv * D;
    uint qbase = t * qs + h * D;
    for (uint d = tid; d < D; d += WG) {
        q_s[d] = act_load(p.q, qbase + d);
        o_s[d] = 0.0;
    }
    barrier();

    float m = 0.0, l = 0.0;     // running max (valid once started) and sum of exp(s - m)
    bool started = false;
    for (uint start = lo; start <= qp; start += WG) {
        uint j = start + tid;
        bool valid = j <= qp;
        float s = 0.0;
        if (valid) {
            if (j >= p0) {
                uint kb = (j - p0) * ks + hk * D;
                for (uint d = 0u; d < D; d++) s += q_s[d] * kv_round(act_load(p.k, kb + d));
            } else {
                uint kb = (hk * p.cap + j % p.cap) * D;
                for (uint d = 0u; d < D; d++) s += q_s[d] * kv_load(p.kc, kb + d);
            }
            s *= p.scale;
            if (p.softcap > 0.0) s = p.softcap * safe_tanh(s / p.softcap);
        }
        float bmax = wg_max(valid ? s : -3.0e38);
        float m_new = started ? max(m, bmax) : bmax;
        float alpha = started ? exp(m - m_new) : 0.0;
        float e = valid ? exp(s - m_new) : 0.0;
        p_s[tid] = e;
        l = l * alpha + wg_sum(e);   // wg_sum's barriers also publish p_s
        m = m_new;
        started = true;

        uint nb = min(WG, qp - start + 1u);
        for (uint d = tid; d < D; d += WG) {
            float acc = o_s[d] * alpha;
            for (uint b = 0u; b < nb; b++) {
                uint jb = start + b;
                float vv;
                if (jb >= p0) vv = kv_round(act_load(p.v, (jb - p0) * ks + hk * D + d));
                else          vv = kv_load(p.vc, (hk * p.cap + jb % p.cap) * D + d);
                acc += p_s[b] * vv;
            }
            o_s[d] = acc;
        }
        barrier();   // p_s is rewritten by the next block
    }

    uint obase = (t * p.n_q_heads + h) * D;
    for (uint d = tid; d < D; d += WG) act_store(p.o, obase + d, o_s[d] / l);
}
