#version 460
// attention_prefill_cm: tiled flash attention for prefill-sized T on the GPU's matrix units. Semantics are
// attention.comp's (visible keys p - W < j <= p, new keys from k, v and older ones from the caches at slot
// j % cap, GQA, softcap); the schedule is attention_prefill.comp's, with the two products of each key tile
// (scores S = Q Kᵀ and O += P V) made of VK_NV_cooperative_matrix 16 x 16 x 16 f16 tiles. Why: a 512-token
// Gemma 3 1B prefill spent 4.3 of its ~17 ms in attention_prefill's FMA loops on the H100 (docs/BENCHMARKS.md).
// Rows: the T * G (token, q head) pairs of one kv head (row r = t * G + g), RT matrix tiles of 16 rows per
// workgroup. Each row tile's head dims are split between SPLIT subgroups, each owning DH = D / SPLIT of them:
// its slice of Q (matrix tiles in registers), its partial scores (Q_h K_hᵀ over its dims) and its slice of the
// output O. Why several row tiles: each key tile is loaded once for all of them, and the per-tile costs (the
// loads' addressing, the barriers, the softmax) are paid once per 16 rows of math instead of being shared by
// split subgroups that each do one product; a 16000-token Llama 3.2 1B prefill (head_dim 64, 16 rows and 4
// subgroups of 16 dims) spent 1.95 of its 2.33 s in this kernel on the H100, ~8 TFLOPS (docs/BENCHMARKS.md).
// Per tile of BC keys:
//   the tile's K and V rows are copied to shared memory (the next tile's loads are issued before this tile's
//   products, so they travel while the matrix units work);
//   each subgroup stores its partial S; every subgroup of a row tile then reads the sum of the tile's SPLIT
//   partials and runs the online softmax for its 16 rows (two lanes per row): running max m, sum l, factor
//   a = exp(m_old - m_new) and
//   P = exp(S - m_new) (0 for masked keys), written to shared memory as f16;
//   O = diag(a) O + P V. The per-row factor needs each accumulator element's row, which the cooperative matrix
//   layout does not name: it is read once from a matrix loaded from a table whose element (r, c) is r.
// Numerics: products of f16 values are exact in f32 and the scores are summed in f32, as in
// attention_prefill.comp up to order. P enters the tensor cores as f16 (a relative rounding of at most
// 2^-11 per weight, so an output moves by at most 2^-11 * max |v| beyond the f32 kernel) while l sums the
// unrounded f32 weights. tests/lua/test_attention_cm.lua bounds it.
// Needs (lower/attention.lua checks, else attention_prefill.comp runs): f16 activations and KV, subgroup size 32, a
// 16 x 16 x 16 f16 shape, D a multiple of 16 * SPLIT. Lavapipe has no cooperative matrices: the test runs on
// the H100.
// Shared memory: (max(BC, 16 * RT) + BC) * (D + 8) * 2 (K, V tiles; the Q tile reuses K's) + S * 16 * BC * 4
//   (S) + S * 16 * (BC + 8) * 2 (P) + 1 KiB (row table) + S * 64 bytes, S = SPLIT * RT subgroups.
//   D = 256, BC = 16, SPLIT = 2, RT = 1: 21 KiB.  D = 64, BC = 64, SPLIT = 1, RT = 4: 45 KiB.
// Dispatch: (ceil(T * G / (16 * RT)), n_kv_heads, 1).
// Push:  as attention_prefill.comp: q, k, v, kc, vc, pos, o, n_tokens, n_q_heads, n_kv_heads, cap, window,
//        scale, softcap, q_stride, kv_stride.
// Spec:  WG = 32 * SPLIT * RT (local_size_x_id = 0); D head_dim; SPLIT subgroups per row tile; BC keys per
//        tile (a multiple of 16); RT row tiles per workgroup.
// Defines: DP_ACT_F16 and DP_KV_F16 (required; defined here too, so that `doppler shaders --precompile`
//          builds it without defines).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_control_flow_attributes : require
#ifndef DP_ACT_F16
#define DP_ACT_F16
#endif
#ifndef DP_KV_F16
#define DP_KV_F16
#endif
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint D = 256;
layout(constant_id = 2) const uint SPLIT = 2;
layout(constant_id = 3) const uint BC = 16;
layout(constant_id = 4) const uint RT = 1;

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

const uint R16 = 16u;                 // rows per matrix tile
const uint RW  = R16 * RT;            // rows per workgroup
const uint NSG = SPLIT * RT;          // subgroups per workgroup
const uint DH  = D / SPLIT;           // head dims per subgroup
const uint NDC = DH / 16u;            // 16-dim chunks per subgroup
const uint NKC = BC / 16u;            // 16-key chunks per tile
const uint DV  = D / 8u;              // 16-byte vectors per key row
const uint KR  = DV + 1u;             // a padded shared row, in vectors (spreads the tile loads over banks)
const uint PR  = BC / 8u + 1u;        // a padded P row, in vectors
const uint HK  = BC / 2u;             // keys per lane in the softmax (two lanes per row)
const uint LKV = (BC * DV + WG - 1u) / WG;   // K (and V) vectors each thread copies per tile
const uint KROWS = BC > RW ? BC : RW; // K's shared rows: a key tile, and the Q tile before the loop
const float NEG = -3.0e38;

shared uvec4 Ks[KROWS * KR];          // K tile [key][dim] (the Q tile [row][dim] before the loop)
shared uvec4 Vs[BC * KR];             // V tile [key][dim]
shared float Ss[NSG * R16 * BC];      // each subgroup's partial scores [row][key]; its output staging at the end
shared uvec4 Ps[NSG * R16 * PR];      // each subgroup's P [row][key], f16
shared float Af[NSG * R16];           // each subgroup's per-row factor a (at the end: 1 / l)
shared float Rt[16 * 16];             // row table: element (r, c) = r

float safe_tanh(float x)
{
    float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

uint first_key(uint qp) { return (p.window > 0u && qp >= p.window) ? qp - p.window + 1u : 0u; }

// 8 halves from element e of an f16 buffer: one 16-byte load where `vec` (aligned), else element loads.
uvec4 load8(uint64_t base, uint e, bool vec)
{
    const uint64_t a = base + uint64_t(e) * 2ul;
    if (vec) return DP_RAW16_In(a).v[0];
    F16In h = F16In(a);
    uvec4 r;
    for (uint i = 0u; i < 4u; ++i)
        r[i] = uint(float16BitsToUint16(h.v[2u * i])) | (uint(float16BitsToUint16(h.v[2u * i + 1u])) << 16);
    return r;
}

// Vector vi of key j's K or V row (`second` picks V): new keys (j >= p0) from k / v, older from the cache;
// zeros past the block's last position (their weight is 0, and 0 * NaN would not be).
uvec4 key_vec(uint j, uint vi, bool second, uint jhi, uint p0, uint hk, uint ks, bool nvec, bool cvec)
{
    if (j > jhi) return uvec4(0u);
    if (j >= p0) return load8(uint64_t(second ? p.v : p.k), (j - p0) * ks + hk * D + vi * 8u, nvec);
    return load8(uint64_t(second ? p.vc : p.kc), (hk * p.cap + j % p.cap) * D + vi * 8u, cvec);
}

void main()
{
    const uint tid = gl_LocalInvocationID.x, sg = tid / 32u, lane = tid % 32u;
    const uint rt = sg / SPLIT, part = sg % SPLIT;   // this subgroup's row tile, and its dims' slice of it
    const uint hk = gl_WorkGroupID.y;
    const uint G = p.n_q_heads / p.n_kv_heads, rows = p.n_tokens * G;
    // The workgroup's rows (positions rise with the row) see keys jlo .. jhi between them; the key tiles
    // cover that span, and each row masks what it must not see.
    const uint rw0 = gl_WorkGroupID.x * RW, rw1 = min(rw0 + RW, rows) - 1u;
    const uint r0 = rw0 + rt * R16;
    const uint p0 = p.pos.v[0u];
    const uint jlo = first_key(p.pos.v[rw0 / G]), jhi = p.pos.v[rw1 / G];
    const uint qs = p.q_stride != 0u ? p.q_stride : p.n_q_heads * D;
    const uint ks = p.kv_stride != 0u ? p.kv_stride : p.n_kv_heads * D;
    const bool qvec = (uint64_t(p.q) & 15ul) == 0ul && (qs & 7u) == 0u;
    const bool nvec = (uint64_t(p.k) & 15ul) == 0ul && (uint64_t(p.v) & 15ul) == 0ul && (ks & 7u) == 0u;
    const bool cvec = (uint64_t(p.kc) & 15ul) == 0ul && (uint64_t(p.vc) & 15ul) == 0ul;

    // The softmax lane's row (two lanes per row, each half of the tile's keys).
    const uint srow = lane / 2u, shalf = lane % 2u;
    const uint rr = r0 + srow;
    const bool live = rr < rows;
    const uint qp = live ? p.pos.v[rr / G] : 0u, lo = first_key(qp);

    // The row table and the Q tile (rows past the end are zeros).
    for (uint e = tid; e < 256u; e += WG) Rt[e] = float(e / 16u);
    for (uint x = tid; x < RW * DV; x += WG) {
        const uint row = x / DV, vi = x % DV, r = rw0 + row;
        Ks[row * KR + vi] = r < rows ? load8(uint64_t(p.q), (r / G) * qs + (hk * G + r % G) * D + vi * 8u, qvec) : uvec4(0u);
    }
    // The first tile's K and V, in registers.
    uvec4 rk[LKV], rv[LKV];
    DP_UNROLL for (uint i = 0u; i < LKV; ++i) {
        const uint e = tid + i * WG;
        rk[i] = e < BC * DV ? key_vec(jlo + e / DV, e % DV, false, jhi, p0, hk, ks, nvec, cvec) : uvec4(0u);
        rv[i] = e < BC * DV ? key_vec(jlo + e / DV, e % DV, true, jhi, p0, hk, ks, nvec, cvec) : uvec4(0u);
    }
    barrier();
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> qf[NDC];
    DP_UNROLL for (uint c = 0u; c < NDC; ++c)
        coopMatLoadNV(qf[c], Ks, rt * R16 * KR + (part * DH + c * 16u) / 8u, KR, false);
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> rowm;
    coopMatLoadNV(rowm, Rt, 0u, 16u, false);
    uint rowof[rowm.length()];
    DP_UNROLL for (uint i = 0u; i < rowm.length(); ++i) rowof[i] = uint(rowm[i]);

    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> oacc[NDC];
    DP_UNROLL for (uint c = 0u; c < NDC; ++c) oacc[c] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    float m = NEG, l = 0.0;

    for (uint jt = jlo; jt <= jhi; jt += BC) {
        barrier();                                   // the previous tile (or the Q tile) is consumed
        DP_UNROLL for (uint i = 0u; i < LKV; ++i) {
            const uint e = tid + i * WG;
            if (e < BC * DV) { Ks[(e / DV) * KR + e % DV] = rk[i]; Vs[(e / DV) * KR + e % DV] = rv[i]; }
        }
        barrier();
        const uint jn = jt + BC;                     // the next tile's loads travel during this one's math
        if (jn <= jhi) {
            DP_UNROLL for (uint i = 0u; i < LKV; ++i) {
                const uint e = tid + i * WG;
                rk[i] = e < BC * DV ? key_vec(jn + e / DV, e % DV, false, jhi, p0, hk, ks, nvec, cvec) : uvec4(0u);
                rv[i] = e < BC * DV ? key_vec(jn + e / DV, e % DV, true, jhi, p0, hk, ks, nvec, cvec) : uvec4(0u);
            }
        }
        // This subgroup's partial scores over its dims.
        DP_UNROLL for (uint kc = 0u; kc < NKC; ++kc) {
            fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> s = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
            DP_UNROLL for (uint c = 0u; c < NDC; ++c) {
                fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> kt;
                coopMatLoadNV(kt, Ks, kc * 16u * KR + (part * DH + c * 16u) / 8u, KR, true);   // Kᵀ: column-major
                s = coopMatMulAddNV(qf[c], kt, s);
            }
            coopMatStoreNV(s, Ss, sg * R16 * BC + kc * 16u, BC, false);
        }
        barrier();                                   // every subgroup's partial scores are in
        // Online softmax of row srow over keys shalf * HK .. + HK (a row tile's subgroups compute the same values).
        float sv[HK];
        float bmax = NEG;
        DP_UNROLL for (uint e = 0u; e < HK; ++e) {
            const uint c = shalf * HK + e, j = jt + c;
            float s = 0.0;
            DP_UNROLL for (uint h = 0u; h < SPLIT; ++h) s += Ss[(rt * SPLIT + h) * R16 * BC + srow * BC + c];
            s *= p.scale;
            if (p.softcap > 0.0) s = p.softcap * safe_tanh(s / p.softcap);
            sv[e] = (live && j >= lo && j <= qp) ? s : NEG;
            bmax = max(bmax, sv[e]);
        }
        bmax = max(bmax, subgroupShuffleXor(bmax, 1u));
        const float mn = max(m, bmax);
        const float a = exp(m - mn);
        float sum = 0.0;
        DP_UNROLL for (uint e = 0u; e < HK; e += 8u) {
            uvec4 pk;
            DP_UNROLL for (uint w = 0u; w < 4u; ++w) {
                const float x0 = sv[e + 2u * w] > NEG ? exp(sv[e + 2u * w] - mn) : 0.0;
                const float x1 = sv[e + 2u * w + 1u] > NEG ? exp(sv[e + 2u * w + 1u] - mn) : 0.0;
                sum += x0 + x1;
                pk[w] = packHalf2x16(vec2(x0, x1));
            }
            Ps[(sg * R16 + srow) * PR + (shalf * HK + e) / 8u] = pk;
        }
        sum += subgroupShuffleXor(sum, 1u);
        l = l * a + sum;
        m = mn;
        if (shalf == 0u) Af[sg * R16 + srow] = a;
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        // O = diag(a) O + P V over this subgroup's dims.
        float af[rowm.length()];
        DP_UNROLL for (uint i = 0u; i < rowm.length(); ++i) af[i] = Af[sg * R16 + rowof[i]];
        DP_UNROLL for (uint c = 0u; c < NDC; ++c)
            DP_UNROLL for (uint i = 0u; i < rowm.length(); ++i) oacc[c][i] *= af[i];
        DP_UNROLL for (uint kc = 0u; kc < NKC; ++kc) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> pm;
            coopMatLoadNV(pm, Ps, (sg * R16) * PR + kc * 2u, PR, false);
            DP_UNROLL for (uint c = 0u; c < NDC; ++c) {
                fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> vt;
                coopMatLoadNV(vt, Vs, kc * 16u * KR + (part * DH + c * 16u) / 8u, KR, false);
                oacc[c] = coopMatMulAddNV(pm, vt, oacc[c]);
            }
        }
    }

    // O / l, through this subgroup's staging tile (its part of Ss) to the output rows that exist.
    barrier();                                       // every subgroup has read the last tile's scores
    if (shalf == 0u) Af[sg * R16 + srow] = l > 0.0 ? 1.0 / l : 0.0;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    float inv[rowm.length()];
    DP_UNROLL for (uint i = 0u; i < rowm.length(); ++i) inv[i] = Af[sg * R16 + rowof[i]];
    const uint cs = sg * R16 * BC;
    DP_UNROLL for (uint c = 0u; c < NDC; ++c) {
        DP_UNROLL for (uint i = 0u; i < rowm.length(); ++i) oacc[c][i] *= inv[i];
        coopMatStoreNV(oacc[c], Ss, cs, 16u, false);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        for (uint e = lane; e < 256u; e += 32u) {
            const uint r = r0 + e / 16u;
            if (r < rows) act_store(p.o, ((r / G) * p.n_q_heads + hk * G + r % G) * D + part * DH + c * 16u + e % 16u, Ss[cs + e]);
        }
        subgroupBarrier();                           // the tile is read before the next store overwrites it
    }
}
