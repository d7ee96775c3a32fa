#version 460
// attention_prefill: tiled flash attention for prefill-sized T. Semantics are attention.comp's (read its
// header: visible keys p - W < j <= p, new keys from k, v and older ones from the caches at slot j % cap,
// GQA, softcap, new keys rounded to the KV type); only the schedule differs.
// Rows: the T * G (token, q head) pairs of one kv head, G = n_q_heads / n_kv_heads, row r = t * G + g, so the
// q heads that share a kv head share every K/V tile. A workgroup takes BR = WG / LANES consecutive rows
// and walks the keys its rows can see (lo(pos of first row) .. pos of last row) in tiles of BC keys:
//   the tile's K and V rows are loaded into shared memory (as the KV type, 16-byte loads from the caches
//   when aligned); each row is a cluster of LANES lanes of one subgroup, lane ln owning the dims
//   d = ln + LANES * i; a score is a partial dot product reduced with subgroupShuffleXor, and each row
//   keeps an online softmax (running max m, sum l, output o[dims] in registers) updated once per tile.
// Masked keys (outside a row's window or after its position) get weight 0 exactly.
// The loops over a lane's dims and a tile's keys carry DP_UNROLL (spec-constant bounds): unrolled, the q, o
// and score arrays stay in registers (H100, Gemma 3 1B 512-token prefill: 4.78 -> 4.34 ms). The innermost two
// (a key's dims in the score, a tile's keys in the output sum) and the shuffle loop are [[unroll]] on a CPU
// device too: rolled there, an invocation ran ~74 loop iterations per key at head_dim 256 and llvmpipe ended
// its loops past ~900 keys (65535 in all; docs/ARCHITECTURE.md), unrolled ~9 (~8,000 keys), at no cost worth
// a number in lavapipe's compile or run time.
// Shared memory: 2 * BC * D * KV bytes (lower/attention.lua keeps it <= 16 KiB: lavapipe has 32 KiB).
// Dispatch: (ceil(T * G / BR), n_kv_heads, 1).
// Push:  q (ACT [T, n_q_heads, D], read)  k, v (ACT [T, n_kv_heads, D], read)
//        kc, vc (KV [n_kv_heads, cap, D], read)  pos (u32 [T], read)  o (ACT [T, n_q_heads, D], write)
//        n_tokens, n_q_heads, n_kv_heads, cap, window, scale, softcap, q_stride, kv_stride (as attention.comp)
// Spec:  WG  workgroup size, a multiple of LANES (default 128)
//        D  head_dim (default 256)   LANES  lanes per row: a power of two <= the subgroup size, dividing D
//        BC keys per tile (default 16)
// Defines: DP_ACT_F16, DP_KV_F16
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint D = 256;
layout(constant_id = 2) const uint LANES = 8;
layout(constant_id = 3) const uint BC = 16;

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
    uint    cap;
    uint    window;
    float   scale;
    float   softcap;
    uint    q_stride;
    uint    kv_stride;
} p;

#ifdef DP_KV_F16
const uint VEC = 8u;
#else
const uint VEC = 4u;
#endif
const uint DPL = D / LANES;   // dims per lane
const uint BR = WG / LANES;   // rows per workgroup
const uint NV = D / VEC;      // vectors per key row
const float NEG = -3.0e38;

shared KV_T k_s[BC * D];
shared KV_T v_s[BC * D];

float kv_round(float x)
{
#ifdef DP_KV_F16
    return float(float16_t(x));
#else
    return x;
#endif
}

float safe_tanh(float x)
{
    float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

uint first_key(uint qp) { return (p.window > 0u && qp >= p.window) ? qp - p.window + 1u : 0u; }

// Vector vi (VEC elements) of key row j (tile row c) into k_s / v_s.
void load_vec(uint c, uint vi, uint j, uint jhi, uint hk, uint p0, uint ks, bool vec_ok)
{
    uint sb = c * D + vi * VEC;
    if (j > jhi) {   // past the block's last position: finite zeros (their weight is 0; 0 * NaN would not be)
        for (uint e = 0u; e < VEC; e++) { k_s[sb + e] = KV_T(0.0); v_s[sb + e] = KV_T(0.0); }
        return;
    }
    if (j >= p0) {
        uint b = (j - p0) * ks + hk * D + vi * VEC;
        for (uint e = 0u; e < VEC; e++) {
            k_s[sb + e] = KV_T(kv_round(act_load(p.k, b + e)));
            v_s[sb + e] = KV_T(kv_round(act_load(p.v, b + e)));
        }
        return;
    }
    uint row = (hk * p.cap + j % p.cap) * D;
    if (vec_ok) {
        uvec4 uk = DP_RAW16_In(uint64_t(p.kc)).v[row / VEC + vi];
        uvec4 uv = DP_RAW16_In(uint64_t(p.vc)).v[row / VEC + vi];
#ifdef DP_KV_F16
        for (uint w = 0u; w < 4u; w++) {
            vec2 a = unpackHalf2x16(uk[w]), b = unpackHalf2x16(uv[w]);
            k_s[sb + 2u * w] = float16_t(a.x); k_s[sb + 2u * w + 1u] = float16_t(a.y);
            v_s[sb + 2u * w] = float16_t(b.x); v_s[sb + 2u * w + 1u] = float16_t(b.y);
        }
#else
        for (uint w = 0u; w < 4u; w++) { k_s[sb + w] = uintBitsToFloat(uk[w]); v_s[sb + w] = uintBitsToFloat(uv[w]); }
#endif
        return;
    }
    for (uint e = 0u; e < VEC; e++) {
        k_s[sb + e] = KV_T(kv_load(p.kc, row + vi * VEC + e));
        v_s[sb + e] = KV_T(kv_load(p.vc, row + vi * VEC + e));
    }
}

void main()
{
    uint blk = gl_WorkGroupID.x, hk = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint G = p.n_q_heads / p.n_kv_heads, rows = p.n_tokens * G;
    uint rw = gl_SubgroupID * (gl_SubgroupSize / LANES) + gl_SubgroupInvocationID / LANES;
    uint ln = gl_SubgroupInvocationID % LANES;

    uint r0 = blk * BR, r1 = min(r0 + BR, rows) - 1u;          // the block's rows (r0 < rows by dispatch)
    uint p0 = p.pos.v[0u];
    uint jlo = first_key(p.pos.v[r0 / G]), jhi = p.pos.v[r1 / G];

    uint r = r0 + rw;
    bool live = r < rows;
    uint t = live ? r / G : 0u, h = hk * G + (live ? r % G : 0u);
    uint qp = p.pos.v[t], lo = first_key(qp);

    uint qs = p.q_stride != 0u ? p.q_stride : p.n_q_heads * D;
    uint ks = p.kv_stride != 0u ? p.kv_stride : p.n_kv_heads * D;
    bool vec_ok = (uint64_t(p.kc) % 16ul) == 0ul && (uint64_t(p.vc) % 16ul) == 0ul;

    float qr[DPL], oa[DPL], s[BC];
    DP_UNROLL for (uint i = 0u; i < DPL; i++) {
        qr[i] = act_load(p.q, t * qs + h * D + ln + LANES * i);
        oa[i] = 0.0;
    }
    float m = NEG, l = 0.0;

    for (uint jt = jlo; jt <= jhi; jt += BC) {
        for (uint x = tid; x < BC * NV; x += WG) load_vec(x / NV, x % NV, jt + x / NV, jhi, hk, p0, ks, vec_ok);
        barrier();

        float bmax = NEG;
        DP_UNROLL for (uint c = 0u; c < BC; c++) {
            float acc = 0.0;
            [[unroll]] for (uint i = 0u; i < DPL; i++) acc += qr[i] * float(k_s[c * D + ln + LANES * i]);
            [[unroll]] for (uint off = LANES / 2u; off > 0u; off >>= 1) acc += subgroupShuffleXor(acc, off);
            uint j = jt + c;
            bool vis = live && j >= lo && j <= qp;
            acc *= p.scale;
            if (p.softcap > 0.0) acc = p.softcap * safe_tanh(acc / p.softcap);
            s[c] = vis ? acc : NEG;
            bmax = max(bmax, s[c]);
        }
        if (bmax > NEG) {   // the row sees a key of this tile (uniform over the row's lanes)
            float mn = max(m, bmax);
            float a = exp(m - mn), sum = 0.0;
            DP_UNROLL for (uint c = 0u; c < BC; c++) {
                s[c] = s[c] > NEG ? exp(s[c] - mn) : 0.0;
                sum += s[c];
            }
            l = l * a + sum;
            m = mn;
            DP_UNROLL for (uint i = 0u; i < DPL; i++) {
                float acc = oa[i] * a;
                [[unroll]] for (uint c = 0u; c < BC; c++) acc += s[c] * float(v_s[c * D + ln + LANES * i]);
                oa[i] = acc;
            }
        }
        barrier();   // the tile is overwritten next
    }

    if (live) {
        uint ob = (t * p.n_q_heads + h) * D;
        DP_UNROLL for (uint i = 0u; i < DPL; i++) act_store(p.o, ob + ln + LANES * i, oa[i] / l);
    }
}
