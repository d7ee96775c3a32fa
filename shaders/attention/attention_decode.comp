#version 460
// attention_decode: flash-decoding in one dispatch, for decode-sized T.
// Semantics are attention.comp's (read its header: visible keys, which keys come from the new k, v and
// which from the caches, GQA, softcap, f16 rounding of new keys); this kernel only splits the work:
//   the n visible keys of token t (lo .. qp, qp = pos[t]) are cut into chunks of
//     clen = max(min_chunk, ceil(n / n_chunks)) keys; chunk c covers lo + c * clen .. (clen keys, up to qp);
//     nc = ceil(n / clen) chunks hold keys, the others exit at once (so the dispatch size does not depend on
//     the context length: one recorded command buffer serves every step);
//   a workgroup per (head group, chunk, token) computes for each of its G q heads (a group: GS groups share
//   one kv head, so G * GS = n_q_heads / n_kv_heads; GS = 1 reads K and V once for all the kv head's q heads,
//   GS > 1 reads them once per group, from L2, and spreads the heads' arithmetic over GS times more
//   workgroups: lower/attention.lua's auto takes G = 1, docs/BENCHMARKS.md 21d) the chunk's partial softmax:
//     m = max_j s_j,  l = sum_j exp(s_j - m),  ov[:] = sum_j exp(s_j - m) V_j[:]
//   with one chunk (nc = 1) it writes o = ov / l directly; otherwise it stores the partial and the LAST
//   workgroup of its (head group, token) to finish merges all nc partials:
//     o[:] = sum_c exp(m_c - M) ov_c[:] / sum_c exp(m_c - M) l_c,   M = max_c m_c.
// "Last": after storing its partials (coherent) and a buffer memory barrier, each workgroup increments
// counter[t * n_groups + group] atomically; the one that sees nc - 1 merges and sets the counter back to 0,
// so the buffer is ready for the next replay of the recorded command buffer (no host reset; it must be
// zero when first used). Partial slots of empty chunks are never read.
// Method: the workgroup is cut into clusters of LK lanes (inside one subgroup); a cluster reads UK key rows
// per round (lanes over D, VEC consecutive elements per load, 16-byte loads from the caches when aligned),
// reduces the G * UK dot products with subgroupShuffleXor, and keeps its own online softmax; the clusters
// are merged in shared memory at the end. f32 throughout.
// Why UK rows per round: a round's loads are all issued before any is used, so a cluster waits for memory
// once per UK keys; at decode sizes the kernel is bound by that latency (~1 us per round on the H100), not
// by the bytes (~0.1 MB per layer at a few hundred keys).
// Why the merge loads everything at once: the last workgroup's merge is on the critical path of the layer;
// it issues the loads of every (m, l) pair of its heads (to shared memory) and of its output elements'
// partials of up to MB chunks (to registers) together, derives each chunk's weight in shared memory, and
// sums each output element's partials in chunk order (more than MB chunks: MB further loads at a time).
// Variants (lower/attention.lua picks them per head_dim, hints attention_lanes / attention_wg / attention_unroll
// override): LK, WG and UK.
// Dispatch: (n_groups = n_kv_heads * GS, n_chunks, n_tokens); group x holds q heads x * G .. x * G + G - 1.
// Push:  q (ACT [T, n_q_heads, D], read)  k, v (ACT [T, n_kv_heads, D], read)
//        kc, vc (KV [n_kv_heads, cap, D], read)  pos (u32 [T], read)  o (ACT [T, n_q_heads, D], write)
//        part_o (f32 [T, n_q_heads, n_chunks, D], read-write)  part_ml (f32 [T, n_q_heads, n_chunks, 2]: m, l)
//        counter (u32 [T * n_groups], read-write, zero between dispatches)
//        n_tokens, n_q_heads, n_kv_heads, cap, window, scale, softcap, q_stride, kv_stride (as attention.comp),
//        n_chunks (<= MAX_CHUNKS), min_chunk (>= 1)
// Spec:  WG  workgroup size, a multiple of LK (default 128); UK  key rows per cluster per round (default 4;
//            lower/attention.lua picks 2)
//        D   head_dim (default 256); G  q heads per workgroup (default 1); GS  workgroups per kv head (default 1)
//        MAX_CHUNKS  the most chunks the merge holds (default 64; lower/attention.lua raises it with n_chunks)
//        LK  lanes per key row: a power of two <= the subgroup size, D / LK a multiple of VEC (8 with
//            DP_KV_F16, else 4); the host picks min(subgroup size, D / VEC) unless a hint says otherwise
// Defines: DP_ACT_F16, DP_KV_F16, DP_ROPE_QK (below), DP_QK_NORM and DP_W_F32 | DP_W_F16 | DP_W_BF16 (with it)
//
// DP_ROPE_QK (fusion attention_rope, lua/lib/doppler/fusions.lua): the attention prologue of rope_kv.comp in
// this dispatch, for decode-sized T (<= MAX_NEW = 4 tokens). q, k are the projection outputs (unrotated,
// unnormed); each workgroup computes, exactly as rope_kv.comp does (its lanes, order and rounding points):
//   its G q rows of token t: [rmsnorm (DP_QK_NORM)], rope, rounded to the activation type (rope_kv's store);
//   the new keys it covers (positions >= pos[0], tokens ua ..): the same for k of kv head hk;
// staged in shared memory (rope pairs i, i + ROT/2 cross lanes). The workgroup of chunk 0 of (hk, t) (its first
// group, where GS > 1) also
// appends k (roped) and v of token t to the caches at slot pos[t] % cap (unless a later token of the call
// takes the slot, as kv_append). No workgroup reads a slot being written: attention reads only keys
// j < pos[0] from the caches, and those slots differ from every pos[t] % cap where the rope_kv rule allows
// appending before attention (global layers, caches with a slot per position of the context, or
// cap >= window + T - 1), which attention_rope requires.
// The first round's cache rows (and v rows) are loaded before the prologue, so their latency overlaps it.
// With DP_ROPE_QK the push block changes (128 bytes at most): n_tokens, n_q_heads, n_kv_heads, n_chunks
// come from the dispatch shape (T = z, n_kv_heads = x / GS, n_q_heads = G x, n_chunks = y), min_chunk is a
// spec constant, kc, vc are read-write, and it adds
//   inv_freq (f32 [ROT / 2], read), with DP_QK_NORM qw, kw (W [D], read);
//   spec: MINC (min_chunk), ROT (rotary dims, even, <= D), NL (rmsnorm's lanes per row for D: a power of two
//         dividing WG), with DP_QK_NORM EPS, WOFF (the norm's eps and weight offset)
// DP_UNROLL marks the loops whose trip counts are spec constants: on a GPU unrolled at pipeline creation
// (dp_common.glsl), their arrays stay in registers (H100 decode: attention_decode 0.441 -> 0.416 ms per
// token, docs/BENCHMARKS.md 11h).
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef DP_ROPE_QK
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint D = 256;
layout(constant_id = 2) const uint G = 1;
layout(constant_id = 3) const uint LK = 32;
layout(constant_id = 4) const uint UK = 4;
layout(constant_id = 10) const uint GS = 1;
layout(constant_id = 11) const uint MAX_CHUNKS = 64;
#ifdef DP_ROPE_QK
layout(constant_id = 5) const uint MINC = 1;
layout(constant_id = 6) const uint ROT = 256;
layout(constant_id = 7) const uint NL = 64;
#ifdef DP_QK_NORM
layout(constant_id = 8) const float EPS = 1e-6;
layout(constant_id = 9) const float WOFF = 0.0;
#endif
#endif

// The partials are read back by another workgroup of the same dispatch: coherent, so that the writer's
// memory barrier makes them visible to the merging workgroup.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer F32Coh { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer U32Coh { uint v[]; };

#ifdef DP_ROPE_QK
layout(push_constant) uniform Push {
    ACT_In  q;
    ACT_In  k;
    ACT_In  v;
    KV_Buf  kc;
    KV_Buf  vc;
    U32In   pos;
    ACT_Out o;
    F32Coh  part_o;
    F32Coh  part_ml;
    U32Coh  counter;
    F32In   inv_freq;
#ifdef DP_QK_NORM
    W_In    qw;
    W_In    kw;
#endif
    uint    cap;
    uint    window;
    float   scale;
    float   softcap;
    uint    q_stride;
    uint    kv_stride;
} p;
#define N_Q_HEADS  (gl_NumWorkGroups.x * G)
#define N_KV_HEADS (gl_NumWorkGroups.x / GS)
#define N_CHUNKS   gl_NumWorkGroups.y
#define MIN_CHUNK  MINC
#define KC_IN      KV_In(uint64_t(p.kc))
#define VC_IN      KV_In(uint64_t(p.vc))
#else
layout(push_constant) uniform Push {
    ACT_In  q;
    ACT_In  k;
    ACT_In  v;
    KV_In   kc;
    KV_In   vc;
    U32In   pos;
    ACT_Out o;
    F32Coh  part_o;
    F32Coh  part_ml;
    U32Coh  counter;
    uint    n_tokens;
    uint    n_q_heads;
    uint    n_kv_heads;
    uint    cap;
    uint    window;
    float   scale;
    float   softcap;
    uint    q_stride;
    uint    kv_stride;
    uint    n_chunks;
    uint    min_chunk;
} p;
#define N_Q_HEADS  p.n_q_heads
#define N_KV_HEADS p.n_kv_heads
#define N_CHUNKS   p.n_chunks
#define MIN_CHUNK  p.min_chunk
#define KC_IN      p.kc
#define VC_IN      p.vc
#endif

#ifdef DP_KV_F16
const uint VEC = 8u;
#else
const uint VEC = 4u;
#endif
const uint EPL = D / LK;      // elements per lane
const uint NVL = EPL / VEC;   // vectors per lane
const uint NCL = WG / LK;     // clusters per workgroup
const float NEG = -3.0e38;    // "no key yet": exp(NEG - s) = 0 for any finite score

// MAX_CHUNKS (spec): the merge keeps every chunk's (m, l) in shared memory; n_chunks <= MAX_CHUNKS
const uint MB = 16u;          // chunks whose partials the merge loads in one batch
const uint EPT = (G * D + WG - 1u) / WG;   // output elements per invocation in the merge

// One shared array, used twice: first the clusters' partial outputs red_o [NCL][D], then (after the last
// barrier of that merge) the chunk merge's mg_w [G][MAX_CHUNKS] (each chunk's m, then its weight
// exp(m - M)), mg_l [G][MAX_CHUNKS] (its l) and mg_inv [G] (1 / L per head).
const uint MG = 2u * G * MAX_CHUNKS + G;
#ifdef DP_ROPE_QK
// the prologue's staging rows stg [ROWS][D], the roped q rows q_s [G][D] and new key rows ks_s [MAX_NEW][D]
// share sh too: they are dead before the clusters' merge writes it (ks_s is read last in the key loop, and a
// barrier follows it)
const uint MAX_NEW = 4u;
const uint ROWS = WG / NL;     // prologue rows at once (norm_rows.glsl's name)
const uint SH0 = NCL * D > MG ? NCL * D : MG;
const uint SHR = (ROWS + G + MAX_NEW) * D;
const uint SH = SH0 > SHR ? SH0 : SHR;
#else
const uint SH = NCL * D > MG ? NCL * D : MG;
#endif
shared float red_ml[NCL * G * 2u];
shared float sh[SH];
shared bool last_s;
#define red_o(i) sh[i]
#define mg_w(i) sh[i]
#define mg_l(i) sh[G * MAX_CHUNKS + (i)]
#define mg_inv(g) sh[2u * G * MAX_CHUNKS + (g)]
#ifdef DP_ROPE_QK
#define stg(i)  sh[i]
#define q_s(i)  sh[ROWS * D + (i)]
#define ks_s(i) sh[(ROWS + G) * D + (i)]
#include "../norm/norm_rows.glsl"
#include "dp_rope.glsl"
#endif

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

// Element d of a lane's slice: vector i (of NVL), element e (of VEC).
uint lane_dim(uint ln, uint i, uint e) { return (ln + i * LK) * VEC + e; }

// The lane's EPL elements of key/value row j for kv head hk, as attention.comp reads them.
void load_row(ACT_In src, KV_In cache, uint j, uint hk, uint ln, uint p0, uint ks, bool vec_ok, out float r[EPL])
{
    if (j >= p0) {
        uint b = (j - p0) * ks + hk * D;
        DP_UNROLL for (uint i = 0u; i < NVL; i++)
            DP_UNROLL for (uint e = 0u; e < VEC; e++) r[i * VEC + e] = kv_round(act_load(src, b + lane_dim(ln, i, e)));
        return;
    }
    uint row = (hk * p.cap + j % p.cap) * D;
    if (vec_ok) {
        DP_RAW16_In cv = DP_RAW16_In(uint64_t(cache));
        DP_UNROLL for (uint i = 0u; i < NVL; i++) {
            uvec4 u = cv.v[row / VEC + ln + i * LK];
#ifdef DP_KV_F16
            vec2 a = unpackHalf2x16(u.x), b = unpackHalf2x16(u.y), c = unpackHalf2x16(u.z), d = unpackHalf2x16(u.w);
            r[i * 8u + 0u] = a.x; r[i * 8u + 1u] = a.y; r[i * 8u + 2u] = b.x; r[i * 8u + 3u] = b.y;
            r[i * 8u + 4u] = c.x; r[i * 8u + 5u] = c.y; r[i * 8u + 6u] = d.x; r[i * 8u + 7u] = d.y;
#else
            r[i * 4u + 0u] = uintBitsToFloat(u.x); r[i * 4u + 1u] = uintBitsToFloat(u.y);
            r[i * 4u + 2u] = uintBitsToFloat(u.z); r[i * 4u + 3u] = uintBitsToFloat(u.w);
#endif
        }
        return;
    }
    DP_UNROLL for (uint i = 0u; i < NVL; i++)
        DP_UNROLL for (uint e = 0u; e < VEC; e++) r[i * VEC + e] = kv_load(cache, row + lane_dim(ln, i, e));
}

#ifdef DP_ROPE_QK
// rope_kv.comp's work for this workgroup's rows, in its lane layout (NL lanes per row, norm_rows.glsl, so the
// norm sums in rmsnorm's lanes and order) and with its rounding points: rows 0 .. G-1 are the q heads
// hx * G + g of token t, rows G .. G + nkr - 1 the k rows of kv head hk for tokens ua, ua + 1, ...; the
// results go to q_s and ks_s (rounded to the activation type, as rope_kv stores q and k), and the workgroup
// of chunk 0 appends token t's k and v. Called by every invocation (barriers inside).
void rope_prologue(uint hx, uint hk, uint c, uint t, uint ua, uint nkr, uint qs, uint ks)
{
    const uint EPN = (D + NL - 1u) / NL;   // elements per lane
    uint rw, ln;
    norm_lane(rw, ln);
    uint nrows = G + nkr;
    uint tp_last = p.pos.v[gl_NumWorkGroups.z - 1u];
    for (uint r0 = 0u; r0 < nrows; r0 += ROWS) {   // uniform: every invocation reaches the barriers
        uint row = r0 + rw;
        bool live = row < nrows, is_q = row < G;
        uint u = is_q ? t : ua + (row - G);         // the row's token
        uint base = is_q ? t * qs + (hx * G + row) * D : u * ks + hk * D;
        ACT_In x = is_q ? p.q : p.k;
        // Everything the row needs from memory is loaded here, with x: the norm weights, the position and
        // the RoPE frequencies do not depend on the sums, and loaded after a barrier each would be one more
        // memory round trip on this kernel's critical path.
        float xr[EPN], fr[EPN];
        uint tp = live ? p.pos.v[u] : 0u;
        DP_UNROLL for (uint e = 0u; e < EPN; e++) {
            uint i = ln + e * NL;
            xr[e] = (live && i < D) ? act_load(x, base + i) : 0.0;
            fr[e] = (live && i < ROT) ? p.inv_freq.v[i < ROT / 2u ? i : i - ROT / 2u] : 0.0;
        }
#ifdef DP_QK_NORM
        W_In w = is_q ? p.qw : p.kw;
        float wr[EPN];
        DP_UNROLL for (uint e = 0u; e < EPN; e++) {
            uint i = ln + e * NL;
            wr[e] = (live && i < D) ? w_load(w, i) : 0.0;
        }
        float ss = 0.0;
        DP_UNROLL for (uint e = 0u; e < EPN; e++) ss += xr[e] * xr[e];
        float inv = inversesqrt(norm_row_sum(ss, rw) / float(D) + EPS);
        DP_UNROLL for (uint e = 0u; e < EPN; e++) {
            uint i = ln + e * NL;
            if (live && i < D) xr[e] = act_round(xr[e] * inv * (WOFF + wr[e]));
        }
#endif
        DP_UNROLL for (uint e = 0u; e < EPN; e++) {
            uint i = ln + e * NL;
            if (i < D) stg(rw * D + i) = xr[e];
        }
        barrier();
        if (live) {
            const uint half_rot = ROT / 2u;
            bool append = !is_q && c == 0u && hx % GS == 0u && u == t && uint64_t(tp) + p.cap > uint64_t(tp_last);
            uint dst = (hk * p.cap + tp % p.cap) * D;
            DP_UNROLL for (uint e = 0u; e < EPN; e++) {
                uint i = ln + e * NL;
                if (i >= D) break;
                float y = xr[e];
                if (i < ROT) {
                    float a = reduce_angle(float(tp) * fr[e]);
                    float cs = cos(a), sn = sin(a);
                    y = i < half_rot ? stg(rw * D + i) * cs - stg(rw * D + i + half_rot) * sn
                                     : stg(rw * D + i) * cs + stg(rw * D + i - half_rot) * sn;
                }
                y = act_round(y);
                if (is_q) q_s(row * D + i) = y;
                else ks_s((u - ua) * D + i) = y;
                if (append) {
                    kv_store(p.kc, dst + i, y);
                    kv_store(p.vc, dst + i, act_load(p.v, base + i));
                }
            }
        }
        barrier();   // stg is rewritten by the next rows; q_s, ks_s are read after the last
    }
}
#endif

void main()
{
    uint hx = gl_WorkGroupID.x, c = gl_WorkGroupID.y, t = gl_WorkGroupID.z, tid = gl_LocalInvocationID.x;
    uint hk = hx / GS;   // the kv head of this workgroup's G q heads
    uint p0 = p.pos.v[0u], qp = p.pos.v[t];
    uint lo = (p.window > 0u && qp >= p.window) ? qp - p.window + 1u : 0u;
    uint n = qp - lo + 1u;
    uint clen = max(MIN_CHUNK, (n + N_CHUNKS - 1u) / N_CHUNKS);
    if (c * clen >= n) return;   // past the visible keys: uniform per workgroup, before any barrier
    uint k0 = lo + c * clen, k1 = min(k0 + clen, qp + 1u);

    // cluster and lane from the subgroup layout, so that a cluster never straddles two subgroups
    uint cl = gl_SubgroupID * (gl_SubgroupSize / LK) + gl_SubgroupInvocationID / LK;
    uint ln = gl_SubgroupInvocationID % LK;

    uint qs = p.q_stride != 0u ? p.q_stride : N_Q_HEADS * D;
    uint ks = p.kv_stride != 0u ? p.kv_stride : N_KV_HEADS * D;
    bool vec_ok = (uint64_t(p.kc) % 16ul) == 0ul && (uint64_t(p.vc) % 16ul) == 0ul;

#ifdef DP_ROPE_QK
    // the new keys this workgroup reads are tokens ua .. k1 - 1 - p0; chunk 0 also needs token t's k to append it
    bool has_new = k1 > p0;
    uint ua = has_new ? max(k0, p0) - p0 : t;
    uint nkr = has_new ? (c == 0u ? t : k1 - 1u - p0) - ua + 1u : (c == 0u ? 1u : 0u);
    // the first round's rows that do not depend on the prologue (cache keys, and v), loaded before it
    float kr[UK * EPL], vr[UK * EPL];
    if (k0 + cl < k1)
        DP_UNROLL for (uint u = 0u; u < UK; u++) {
            float row[EPL];
            uint j = min(k0 + cl + u * NCL, k1 - 1u);
            if (j < p0) {
                load_row(p.k, KC_IN, j, hk, ln, p0, ks, vec_ok, row);
                DP_UNROLL for (uint e = 0u; e < EPL; e++) kr[u * EPL + e] = row[e];
            }
            load_row(p.v, VC_IN, j, hk, ln, p0, ks, vec_ok, row);
            DP_UNROLL for (uint e = 0u; e < EPL; e++) vr[u * EPL + e] = row[e];
        }
    rope_prologue(hx, hk, c, t, ua, nkr, qs, ks);
#endif
    float qr[G * EPL], oa[G * EPL], m[G], l[G];
    DP_UNROLL for (uint g = 0u; g < G; g++) {
        uint qb = t * qs + (hx * G + g) * D;
        DP_UNROLL for (uint i = 0u; i < NVL; i++)
            DP_UNROLL for (uint e = 0u; e < VEC; e++) {
#ifdef DP_ROPE_QK
                qr[g * EPL + i * VEC + e] = q_s(g * D + lane_dim(ln, i, e));
#else
                qr[g * EPL + i * VEC + e] = act_load(p.q, qb + lane_dim(ln, i, e));
#endif
                oa[g * EPL + i * VEC + e] = 0.0;
            }
        m[g] = NEG;
        l[g] = 0.0;
    }

    // rounds of UK keys per cluster: keys j0, j0 + NCL, ... j0 + (UK - 1) NCL; past k1 the last key is read
    // again (a valid address) and its score masked out
#ifdef DP_ROPE_QK
    // new keys from ks_s (roped here, rounded as rope_kv stores k, then as attention reads a new key); the
    // first round's other rows were loaded before the prologue
    bool first = true;
    for (uint j0 = k0 + cl; j0 < k1; j0 += NCL * UK) {
        float row[EPL];
        DP_UNROLL for (uint u = 0u; u < UK; u++) {
            uint j = min(j0 + u * NCL, k1 - 1u);
            if (j >= p0) {
                DP_UNROLL for (uint i = 0u; i < NVL; i++)
                    DP_UNROLL for (uint e = 0u; e < VEC; e++)
                        kr[u * EPL + i * VEC + e] = kv_round(ks_s((j - p0 - ua) * D + lane_dim(ln, i, e)));
            } else if (!first) {
                load_row(p.k, KC_IN, j, hk, ln, p0, ks, vec_ok, row);
                DP_UNROLL for (uint e = 0u; e < EPL; e++) kr[u * EPL + e] = row[e];
            }
            if (!first) {
                load_row(p.v, VC_IN, j, hk, ln, p0, ks, vec_ok, row);
                DP_UNROLL for (uint e = 0u; e < EPL; e++) vr[u * EPL + e] = row[e];
            }
        }
        first = false;
#else
    for (uint j0 = k0 + cl; j0 < k1; j0 += NCL * UK) {
        float kr[UK * EPL], vr[UK * EPL], row[EPL];
        DP_UNROLL for (uint u = 0u; u < UK; u++) {
            uint j = min(j0 + u * NCL, k1 - 1u);
            load_row(p.k, p.kc, j, hk, ln, p0, ks, vec_ok, row);
            DP_UNROLL for (uint e = 0u; e < EPL; e++) kr[u * EPL + e] = row[e];
            load_row(p.v, p.vc, j, hk, ln, p0, ks, vec_ok, row);
            DP_UNROLL for (uint e = 0u; e < EPL; e++) vr[u * EPL + e] = row[e];
        }
#endif
        float s[G * UK];
        DP_UNROLL for (uint g = 0u; g < G; g++)
            DP_UNROLL for (uint u = 0u; u < UK; u++) {
                float d = 0.0;
                DP_UNROLL for (uint e = 0u; e < EPL; e++) d += qr[g * EPL + e] * kr[u * EPL + e];
                s[g * UK + u] = d;
            }
        // the G * UK reductions interleaved: independent shuffles in flight together
        for (uint off = LK / 2u; off > 0u; off >>= 1)
            DP_UNROLL for (uint i = 0u; i < G * UK; i++) s[i] += subgroupShuffleXor(s[i], off);
        DP_UNROLL for (uint g = 0u; g < G; g++) {
            float mn = m[g];
            DP_UNROLL for (uint u = 0u; u < UK; u++) {
                float x = s[g * UK + u] * p.scale;
                if (p.softcap > 0.0) x = p.softcap * safe_tanh(x / p.softcap);
                x = (j0 + u * NCL < k1) ? x : NEG;
                s[g * UK + u] = x;
                mn = max(mn, x);
            }
            float a = exp(m[g] - mn);
            l[g] *= a;
            DP_UNROLL for (uint e = 0u; e < EPL; e++) oa[g * EPL + e] *= a;
            DP_UNROLL for (uint u = 0u; u < UK; u++) {
                float pe = exp(s[g * UK + u] - mn);
                l[g] += pe;
                DP_UNROLL for (uint e = 0u; e < EPL; e++) oa[g * EPL + e] += pe * vr[u * EPL + e];
            }
            m[g] = mn;
        }
    }

    // merge the clusters: per q head, rescale each cluster's sums to the common max and add them up
    if (ln == 0u)
        DP_UNROLL for (uint g = 0u; g < G; g++) {
            red_ml[(cl * G + g) * 2u] = m[g];
            red_ml[(cl * G + g) * 2u + 1u] = l[g];
        }
    barrier();
    uint nc = (n + clen - 1u) / clen;
    DP_UNROLL for (uint g = 0u; g < G; g++) {
        float M = NEG;
        DP_UNROLL for (uint x = 0u; x < NCL; x++) M = max(M, red_ml[(x * G + g) * 2u]);
        float f = exp(m[g] - M);
        DP_UNROLL for (uint i = 0u; i < NVL; i++)
            DP_UNROLL for (uint e = 0u; e < VEC; e++) red_o(cl * D + lane_dim(ln, i, e)) = oa[g * EPL + i * VEC + e] * f;
        barrier();
        float L = 0.0;
        DP_UNROLL for (uint x = 0u; x < NCL; x++) L += red_ml[(x * G + g) * 2u + 1u] * exp(red_ml[(x * G + g) * 2u] - M);
        uint head = t * N_Q_HEADS + hx * G + g;
        uint slot = head * N_CHUNKS + c;
        for (uint d = tid; d < D; d += WG) {
            float acc = 0.0;
            DP_UNROLL for (uint x = 0u; x < NCL; x++) acc += red_o(x * D + d);
            if (nc == 1u) act_store(p.o, head * D + d, acc * (1.0 / L));   // as the merge below, one chunk
            else p.part_o.v[slot * D + d] = acc;
        }
        if (tid == 0u && nc > 1u) {
            p.part_ml.v[slot * 2u] = M;
            p.part_ml.v[slot * 2u + 1u] = L;
        }
        barrier();   // red_o is rewritten for the next head
    }
    if (nc == 1u) return;   // uniform: nc depends on pos and the push constants only

    // the last workgroup of this (kv head, token) merges the chunks
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) {
        uint ci = t * gl_NumWorkGroups.x + hx;
        bool last = atomicAdd(p.counter.v[ci], 1u) == nc - 1u;
        if (last) atomicExchange(p.counter.v[ci], 0u);   // ready for the next replay
        last_s = last;
    }
    barrier();
    if (!last_s) return;
    memoryBarrierBuffer();
    // One round trip for what the merge reads: this invocation's output elements' partials of the first MB
    // chunks go to registers and every (head, chunk) pair's m and l to shared memory, all loads issued
    // together. The partials do not depend on the weights; loaded after them (four chunks per round trip)
    // they cost more round trips on the layer's critical path (docs/BENCHMARKS.md 13e). Addresses past the
    // end are clamped to valid ones and their values never used.
    float po[EPT * MB];
    DP_UNROLL for (uint e = 0u; e < EPT; e++) {
        uint i = min(tid + e * WG, G * D - 1u);
        uint base = (t * N_Q_HEADS + hx * G + i / D) * N_CHUNKS;
        DP_UNROLL for (uint x = 0u; x < MB; x++) po[e * MB + x] = p.part_o.v[(base + min(x, nc - 1u)) * D + i % D];
    }
    for (uint i = tid; i < G * nc; i += WG) {
        uint g = i / nc, x = i % nc;
        uint slot = (t * N_Q_HEADS + hx * G + g) * N_CHUNKS + x;
        mg_w(g * MAX_CHUNKS + x) = p.part_ml.v[slot * 2u];
        mg_l(g * MAX_CHUNKS + x) = p.part_ml.v[slot * 2u + 1u];
    }
    barrier();
    // per head: M = max_c m_c, L = sum_c exp(m_c - M) l_c, and each chunk's weight exp(m_c - M)
    for (uint g = tid; g < G; g += WG) {
        float M = NEG;
        for (uint x = 0u; x < nc; x++) M = max(M, mg_w(g * MAX_CHUNKS + x));
        float L = 0.0;
        for (uint x = 0u; x < nc; x++) {
            float w = exp(mg_w(g * MAX_CHUNKS + x) - M);
            L += mg_l(g * MAX_CHUNKS + x) * w;
            mg_w(g * MAX_CHUNKS + x) = w;
        }
        mg_inv(g) = 1.0 / L;
    }
    barrier();
    // each output element: its nc weighted partials summed in chunk order (past MB chunks, MB loads at a time)
    DP_UNROLL for (uint e = 0u; e < EPT; e++) {
        uint i = tid + e * WG;
        if (i >= G * D) break;
        uint g = i / D, d = i % D;
        uint head = t * N_Q_HEADS + hx * G + g;
        uint base = head * N_CHUNKS;
        float acc = 0.0;
        DP_UNROLL for (uint x = 0u; x < MB; x++)
            if (x < nc) acc += mg_w(g * MAX_CHUNKS + x) * po[e * MB + x];
        for (uint x0 = MB; x0 < nc; x0 += MB) {
            float q[MB];
            DP_UNROLL for (uint x = 0u; x < MB; x++) q[x] = p.part_o.v[(base + min(x0 + x, nc - 1u)) * D + d];
            DP_UNROLL for (uint x = 0u; x < MB; x++)
                if (x0 + x < nc) acc += mg_w(g * MAX_CHUNKS + x0 + x) * q[x];
        }
        act_store(p.o, head * D + d, acc * mg_inv(g));
    }
}
