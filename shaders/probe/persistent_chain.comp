#version 460
// persistent_chain: a probe of the persistent-kernel design (recipes/bench/persistent.lua), not a model kernel.
// It runs a chain of GEMVs shaped like a decode token's projections (y = W x, each step's x the step before's
// y) two ways, with the same arithmetic:
//   dispatch mode (MODE 0): one dispatch per step; the recorder puts a barrier between dispatches, as in a
//     doppler decode plan.
//   persistent mode (MODE 1): one dispatch runs every step of every token. Its G workgroups must all be
//     resident at once (G at most one per SM for WG = 1024 on the H100); between steps they meet at a grid
//     barrier, a counter in device memory that each workgroup increments and then polls. Before it polls, a
//     workgroup requests its first weights of the next step: weights do not depend on the activations, so
//     their memory latency overlaps the wait.
//   chain mode (MODE 4): one dispatch per step as in dispatch mode, but recorded without barriers
//     (rec:dispatch's self_ordered): each workgroup requests its first weights, waits at the same counter as
//     the grid barrier until every workgroup of the dispatches before has signalled (push `target`: their
//     workgroups in all), runs the step and signals. The dispatches' launches overlap the steps before them,
//     as the persistent mode's steps do, and a dispatch's workgroups wait only for those of earlier
//     dispatches. That relies on the GPU launching every workgroup of a dispatch before any of a later one,
//     which Vulkan does not promise: here one workgroup of 1024 per SM leaves a later one no room to overtake;
//     doppler's decode chained this way (small workgroups of different sizes) saw waits that never ended
//     (docs/BENCHMARKS.md, session 25), and a wait gives up as the grid barrier's does.
// What the probe leaves out of a real megakernel: RoPE, the KV cache's append (attention reads a fixed cache
// of `P` positions), residual adds and sampling; the norms are folded into the GEMV that reads them (each
// workgroup sums the squares of x itself); its 4-bit format is one f32 scale per row, not Q4_K's blocks.
// Weights are made on the GPU by MODE 3 (a hash of the word index; recipes/bench/persistent.lua repeats it on
// the CPU for its check).
//
// Steps: ops[j] = three uvec4: (weight byte offset lo, hi, N, K), (flags, scale byte offset lo, hi, 0),
// (head_dim, heads, kv_heads, P); flags bit 0: x is RMS-normalised first (no gain); bit 1: x[k] = silu(a[k]) *
// a[k + K] of the input a (GLU); bit 2: an attention step instead of a GEMV (below). With Q4 = 2 (mixed, below)
// bits 3-5 give a GEMV's weight type: none f16, bit 3 q4, bit 3 + bit 5 q5, bit 4 q8; the third uvec4 then
// holds (q5's fifth bits' byte offset lo, hi, 0, 0).
// Attention step: x (K = heads * head_dim) holds each head's query; the f16 keys and values of P positions are
// [P, kv_heads, head_dim] at the weight offset and at the scale offset. Workgroup g takes heads g, g + G, ...:
// y[h, :] = softmax_p(q_h . k_p / sqrt(head_dim)) v_p, with kv head h / (heads / kv_heads).
// Step s of the dispatch (s = 0, 1, ...: token s / n_ops, op s % n_ops) reads act slot (first + s) & 1 and
// writes the other; a slot holds `slot` floats. y[n] = (sum_k W[n, k] x[k]) * r[n], with r[n] = 1/sqrt(K)
// for f16 weights and the row's f32 scale for 4-bit ones (nibble - 8, 32 per uvec4, low nibble first).
//
// Dispatch: MODE 0/1/4: (G, 1, 1). MODE 2 (resets the grid counter and the failure flag): (1, 1, 1).
//           MODE 3: (G, 1, 1) any G, writes `words` u32 of kind `kind` at byte offset `w_off` of w.
// Push: ops, w, act, ctl (u32 [2]: grid counter, failure flag), n_ops, first (first step), steps, slot,
//       w_off, words, kind (0: f16 pairs, 1: nibbles, 2: f32 row scales of a K-column matrix), kk (that K),
//       target (MODE 4: the count to wait for; 0 for the first step after a reset).
// Spec constants: WG (workgroup size), UN (16-byte weight chunks in flight per lane, per buffer), Q4 (0: f16
//   weights, 1: 4-bit, 2: mixed), MODE, MAX_K (the largest K of the chain), SYNC (the grid barrier, below: 0
//   acquire, 1 volatile, 2 fence).
// Mixed (Q4 = 2; runs 54): each GEMV has the type its flags name, at the bytes of a ggml type: q4 = Q4_0 / Q4_K
//   (a 16-byte chunk of 32 codes, byte j holding element j in its low nibble and j + 16 in its high one, and an
//   f16 scale per chunk: 0.5625 bytes per weight), q5 = Q5_0 (q4 plus a u32 of fifth bits per chunk, bit j for
//   element j: 0.6875), q8 = Q8_0 (16 signed bytes per chunk, an f16 scale per 32: 1.0625); values code - 8,
//   code - 16 and code. Their x is staged as int8 (gemv_q's DP_XQ8 scheme: 32 values per group, a scale d and
//   the sum of the codes) and each 16-byte chunk is summed by 8 (q4, q5) or 4 (q8) packed dot products
//   (SPV_KHR_integer_dot_product), as doppler's gemv_q does: the arithmetic of ~1 instruction per weight that
//   its quantised rows need to be bound by bytes, which the 4-bit path (Q4 = 1, ~5 per weight) is not. d is a
//   power of two (2^(e - 7), amax = m 2^e), so that v / d is exact and the CPU reference quantises x bit for bit.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_memory_scope_semantics : require
#include "dp_common.glsl"
#include "dp_dot8.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint UN = 2;
layout(constant_id = 2) const uint Q4 = 0;
layout(constant_id = 3) const uint MODE = 0;
layout(constant_id = 4) const uint MAX_K = 4096;   // the largest K of the chain: x is staged in shared memory
layout(constant_id = 5) const uint SYNC = 2;       // the grid barrier's memory ordering (below)

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Ops { uvec4 v[]; };
// coherent: another workgroup's stores of the step before must be seen after the grid barrier (not L1's copy).
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Act { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent volatile buffer Ctl { uint v[]; };

layout(push_constant) uniform Push {
    Ops   ops;
    V4Buf w;
    Act   act;
    Ctl   ctl;
    uint  n_ops;
    uint  first;
    uint  steps;
    uint  slot;
    uint64_t w_off;
    uint  words;
    uint  kind;
    uint  kk;
    uint  target;
} p;

const uint SPIN_LIMIT = 1u << 24;  // a grid barrier that never fills (G too large to be resident) gives up
const uint EPT = Q4 == 1u ? 32u : 8u;   // weights per 16-byte chunk (Q4 = 2: per step, Step.ept)
const uint F_Q4 = 8u, F_Q8 = 16u, F_Q5 = 32u;   // mixed: the flags of a step's weight type

// x of the step. Lane l of a subgroup reads chunk l's EPT values, EPT floats after lane l - 1's. For 4-bit
// weights (EPT = 32) 4 floats of padding after every 32 put the 16-byte reads of 8 lanes on 8 different bank
// groups (without, that path ran at ~0.3 TB/s on the H100: run 28a); f16 (EPT = 8) has a 2-way conflict left,
// and no room for padding at K = 8192 in 48 KiB.
const uint XPAD = Q4 == 1u ? 4u : 0u;
shared vec4 xs[MAX_K / 4u + (MAX_K / EPT) * XPAD / 4u];
uint xpos(uint k) { return k + (k / EPT) * XPAD; }
// Mixed: an int8 x lives in xs too (a step stages one form): group g's codes of elements 0-15 at xs[g], of
// 16-31 at xs[XG + g] (lane l reads 16 consecutive bytes: no bank conflict), (d, sum of codes) at xs[2 XG + g].
const uint XG = MAX_K / 32u;
shared float red[WG];   // one partial per subgroup (WG bounds their number); the attention's V partials
const uint MAX_P = 1024u;
shared float sc[MAX_P]; // the attention's scores, then weights

uint dp_hash(uint i)
{
    uint h = i * 0x9E3779B9u + 0x7F4A7C15u;
    h ^= h >> 16; h *= 0x85EBCA6Bu; h ^= h >> 13; h *= 0xC2B2AE35u; h ^= h >> 16;
    return h;
}

// Weights of one step as seen by this subgroup: rows sg, sg + nsg, ...; each row in groups of SG * UN chunks.
struct Step { uint64_t w; uint64_t sc; uint N; uint K; uint flags; uint cpr; uint ipr; uint iters; uvec4 at; uint ept; };

bool is_quant(uint flags) { return Q4 == 2u && (flags & (F_Q4 | F_Q8)) != 0u; }

Step step_at(uint j)
{
    uvec4 a = p.ops.v[3u * j], b = p.ops.v[3u * j + 1u];
    Step s;
    s.at = p.ops.v[3u * j + 2u];
    s.w = uint64_t(p.w) + packUint2x32(a.xy);
    s.sc = uint64_t(p.w) + packUint2x32(b.yz);
    s.N = a.z; s.K = a.w; s.flags = b.x;
    s.ept = Q4 != 2u ? EPT : (s.flags & F_Q4) != 0u ? 32u : (s.flags & F_Q8) != 0u ? 16u : 8u;
    s.cpr = s.K / s.ept;
    s.ipr = (s.cpr + gl_SubgroupSize * UN - 1u) / (gl_SubgroupSize * UN);
    uint nsg = gl_NumWorkGroups.x * gl_NumSubgroups, sg = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    uint rows = sg < s.N && (s.flags & 4u) == 0u ? (s.N - sg + nsg - 1u) / nsg : 0u;
    s.iters = rows * s.ipr;
    return s;
}

// Loads iteration t's chunks of this lane (zeros past the row's end); for a mixed quantised step also each
// chunk's scale (cs) and fifth bits (c5), in the same round trip.
void load_iter(Step s, uint t, inout uvec4 c[UN], inout float cs[UN], inout uint c5[UN])
{
    uint nsg = gl_NumWorkGroups.x * gl_NumSubgroups, sg = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    uint row = sg + (t / s.ipr) * nsg, g = t % s.ipr;
    V4In wr = V4In(s.w + uint64_t(row) * uint64_t(s.cpr) * 16ul);
    bool q = is_quant(s.flags), q8 = (s.flags & F_Q8) != 0u, q5 = (s.flags & F_Q5) != 0u;
    [[unroll]] for (uint u = 0u; u < UN; u++) {
        uint ch = (g * UN + u) * gl_SubgroupSize + gl_SubgroupInvocationID;
        bool live = t < s.iters && ch < s.cpr;
        c[u] = live ? wr.v[ch] : uvec4(0u);
        if (q) {
            uint gi = row * (s.K / 32u) + (q8 ? ch / 2u : ch);   // the chunk's group of 32 weights
            cs[u] = live ? unpackHalf2x16(uint(U16In(s.sc).v[gi])).x : 0.0;
            c5[u] = (live && q5) ? U32In(uint64_t(p.w) + packUint2x32(s.at.xy)).v[gi] : 0u;
        }
    }
}

// 8 f16 weights (or keys) against x[k0 .. k0 + 8) (k0 a multiple of 8).
float dot_f16(uvec4 c, uint k0)
{
    uint b = xpos(k0) / 4u;
    vec4 x0 = xs[b], x1 = xs[b + 1u];
    vec2 h0 = unpackHalf2x16(c.x), h1 = unpackHalf2x16(c.y), h2 = unpackHalf2x16(c.z), h3 = unpackHalf2x16(c.w);
    return h0.x * x0.x + h0.y * x0.y + h1.x * x0.z + h1.y * x0.w
         + h2.x * x1.x + h2.y * x1.y + h3.x * x1.z + h3.y * x1.w;
}

// One 16-byte chunk of a weight row against x[k0 .. k0 + EPT).
float dot_chunk(uvec4 c, uint k0)
{
    if (Q4 != 1u) return dot_f16(c, k0);
    uint b = xpos(k0) / 4u;
    float a = 0.0;
    [[unroll]] for (uint q = 0u; q < 4u; q++) {
        vec4 lo = xs[b + 2u * q], hi = xs[b + 2u * q + 1u];
        uint w = c[q];
        a += (float(w & 15u) - 8.0) * lo.x + (float((w >> 4u) & 15u) - 8.0) * lo.y
           + (float((w >> 8u) & 15u) - 8.0) * lo.z + (float((w >> 12u) & 15u) - 8.0) * lo.w
           + (float((w >> 16u) & 15u) - 8.0) * hi.x + (float((w >> 20u) & 15u) - 8.0) * hi.y
           + (float((w >> 24u) & 15u) - 8.0) * hi.z + (float(w >> 28u) - 8.0) * hi.w;
    }
    return a;
}

// Mixed: chunk ch of a q4 / q5 row (32 codes, fifth bits f5) against group ch of the int8 x, scaled by its d.
// Bits 4i .. 4i + 3 of f5 go to bit 4 of bytes 0-3 (dp_quant_x8.glsl's multiply).
float dot_q45(uvec4 c, uint ch, bool q5, uint f5)
{
    uvec4 xl = floatBitsToUint(xs[ch]), xh = floatBitsToUint(xs[XG + ch]);
    vec4 dq = xs[2u * XG + ch];
    int sum = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint lo = c[i] & 0x0f0f0f0fu, hi = (c[i] >> 4u) & 0x0f0f0f0fu;
        if (q5) {
            lo |= (((f5 >> (4u * i)) & 15u) * 0x02040810u) & 0x10101010u;
            hi |= (((f5 >> (16u + 4u * i)) & 15u) * 0x02040810u) & 0x10101010u;
        }
        sum += x8_sudot4(xl[i], lo, 0) + x8_sudot4(xh[i], hi, 0);
    }
    return dq.x * float(sum - (q5 ? 16 : 8) * int(dq.y));
}

// Mixed: chunk ch of a q8 row (16 signed codes) against its half of group ch / 2 of the int8 x.
float dot_q8(uvec4 c, uint ch)
{
    uint g = ch >> 1u;
    uvec4 xq = floatBitsToUint(xs[(ch & 1u) * XG + g]);
    int sum = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) sum += x8_sdot4(xq[i], c[i], 0);
    return xs[2u * XG + g].x * float(sum);
}

// The grid barrier, three ways (spec constant SYNC):
//   SYNC 0: the count is bumped with release semantics at device scope and read with acquire semantics; the
//           workgroup's control barriers carry them to every invocation, with device-scope semantics.
//   SYNC 1: a plain atomicAdd after memoryBarrierBuffer(), polled with volatile loads; act is `coherent`, so
//           its loads go past the non-coherent L1. No acquire: it relies on the GPU not issuing the loads
//           after the poll before the poll ends. Correct on the H100 in every run that compared it bit for
//           bit with the dispatch mode, not by the memory model.
//   SYNC 2: release and acquire at device scope by lane 0 only (the acquire as one fence after relaxed
//           polls), passed on to the other invocations by workgroup-scope control barriers: a chain the
//           Vulkan memory model orders, with one device-scope fence per side instead of one per invocation.
// On lavapipe none can be relied on: llvmpipe ends every loop of an invocation once their trips together
// pass 65535 (LP_MAX_TGSI_LOOP_ITERATIONS), so a long poll ends early and the loops after it do not run. The
// script's tests there use one workgroup; on a GPU the modes' outputs are compared bit for bit.
uint grid_count()
{
    if (SYNC == 0u) return atomicLoad(p.ctl.v[0], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
    if (SYNC == 2u) return atomicLoad(p.ctl.v[0], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed);
    return p.ctl.v[0];
}

// Once one workgroup has given up, the others stop waiting (the run is wrong and the script says so).
bool grid_reached(uint target) { return grid_count() >= target || p.ctl.v[1] != 0u; }

// Second half: lane 0 polls until every workgroup has signalled `target` times.
void grid_wait(uint target)
{
    if (gl_LocalInvocationIndex == 0u) {
        for (uint spins = 0u; spins < SPIN_LIMIT && !grid_reached(target); spins++) {}
        if (!grid_reached(target)) p.ctl.v[1] = 1u;
        if (SYNC == 2u) memoryBarrier(gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
    }
    if (SYNC == 0u)
        controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquireRelease);
    else if (SYNC == 2u)
        controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer, gl_SemanticsAcquireRelease);
    else
        barrier();
}

// First half: the workgroup's stores are made visible, then the count goes up.
void grid_signal()
{
    if (SYNC == 1u) {
        memoryBarrierBuffer();
        barrier();
        if (gl_LocalInvocationIndex == 0u) atomicAdd(p.ctl.v[0], 1u);
        return;
    }
    if (SYNC == 0u)
        controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                       gl_SemanticsAcquireRelease);
    else
        controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                       gl_SemanticsAcquireRelease);
    if (gl_LocalInvocationIndex == 0u)
        atomicAdd(p.ctl.v[0], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelease);
}

// Stages x of the step (the act slot at in_base) in shared memory, normalised or gated as its flags say.
void stage_x(Step s, uint in_base)
{
    uint lid = gl_LocalInvocationIndex;
    float scale = 1.0;
    if ((s.flags & 1u) != 0u) {
        float ss = 0.0;
        for (uint k = lid; k < s.K; k += WG) { float v = p.act.v[in_base + k]; ss += v * v; }
        ss = subgroupAdd(ss);
        if (gl_SubgroupInvocationID == 0u) red[gl_SubgroupID] = ss;
        barrier();
        ss = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) ss += red[i];
        scale = inversesqrt(ss / float(s.K) + 1e-6);
    }
    if (is_quant(s.flags)) {   // an invocation per group of 32: int8 codes, d = 2^(e - 7), the codes' sum
        for (uint g = lid; g < s.K / 32u; g += WG) {
            float v[32];
            float amax = 0.0;
            [[unroll]] for (uint i = 0u; i < 32u; i++) {
                uint k = 32u * g + i;
                float a = p.act.v[in_base + k];
                if ((s.flags & 2u) != 0u) a = a / (1.0 + exp(-a)) * p.act.v[in_base + k + s.K];
                v[i] = a * scale;
                amax = max(amax, abs(v[i]));
            }
            int e;
            frexp(amax, e);
            float inv = ldexp(1.0, 7 - e);
            uvec4 lo = uvec4(0u), hi = uvec4(0u);
            int sq = 0;
            [[unroll]] for (uint i = 0u; i < 32u; i++) {
                int q = clamp(int(roundEven(v[i] * inv)), -127, 127);
                sq += q;
                if (i < 16u) lo[i / 4u] |= uint(q & 255) << (8u * (i % 4u));
                else hi[(i - 16u) / 4u] |= uint(q & 255) << (8u * (i % 4u));
            }
            xs[g] = uintBitsToFloat(lo);
            xs[XG + g] = uintBitsToFloat(hi);
            xs[2u * XG + g] = vec4(ldexp(1.0, e - 7), float(sq), 0.0, 0.0);
        }
        barrier();
        return;
    }
    for (uint k = lid; k < s.K; k += WG) {
        float v = p.act.v[in_base + k];
        if ((s.flags & 2u) != 0u) {
            float g = v, up = p.act.v[in_base + k + s.K];
            v = g / (1.0 + exp(-g)) * up;
        }
        uint at = xpos(k);
        xs[at / 4u][at % 4u] = v * scale;
    }
    barrier();
}

// A workgroup-wide reduction (max or sum) of one value per invocation.
float wg_reduce(float v, bool is_max)
{
    v = is_max ? subgroupMax(v) : subgroupAdd(v);
    barrier();   // red may still be read by the reduction before
    if (gl_SubgroupInvocationID == 0u) red[gl_SubgroupID] = v;
    barrier();
    float r = red[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++) r = is_max ? max(r, red[i]) : r + red[i];
    return r;
}

// The attention step (flags bit 2), on x staged in xs.
void attention_step(Step s, uint out_base)
{
    uint hd = s.at.x, heads = s.at.y, group = s.at.y / s.at.z, P = s.at.w, lid = gl_LocalInvocationIndex;
    float scale = inversesqrt(float(hd));
    for (uint h = gl_WorkGroupID.x; h < heads; h += gl_NumWorkGroups.x) {
        uint kvh = h / group;
        // scores: one position per invocation at a time, the key read as hd / 8 uvec4s
        float m = -1e30;
        for (uint t = lid; t < P; t += WG) {
            V4In kr = V4In(s.w + (uint64_t(t) * uint64_t(s.at.z) + uint64_t(kvh)) * uint64_t(hd) * 2ul);
            float d = 0.0;
            for (uint c = 0u; c < hd / 8u; c++) d += dot_f16(kr.v[c], h * hd + 8u * c);
            sc[t] = d * scale;
            m = max(m, d * scale);
        }
        m = wg_reduce(m, true);
        float l = 0.0;
        for (uint t = lid; t < P; t += WG) { float e = exp(sc[t] - m); sc[t] = e; l += e; }
        l = wg_reduce(l, false);   // its barriers also publish sc
        // values: invocation i sums dimension i % hd over positions i / hd, i / hd + WG / hd, ...
        uint d = lid % hd, slice = lid / hd, slices = WG / hd;
        float acc = 0.0;
        if (slice < slices) {
            U16In vr = U16In(s.sc);
            for (uint t = slice; t < P; t += slices)
                acc += sc[t] * unpackHalf2x16(uint(vr.v[(t * s.at.z + kvh) * hd + d])).x;
        }
        barrier();
        red[lid] = acc;
        barrier();
        if (lid < hd) {
            float o = 0.0;
            for (uint i = 0u; i < slices; i++) o += red[i * hd + lid];
            p.act.v[out_base + h * hd + lid] = o / l;
        }
        barrier();   // sc and red are rewritten by the next head
    }
}

void run_step(uint s_idx, bool wait, uint target)
{
    uint j = (p.first + s_idx) % p.n_ops;
    Step s = step_at(j);
    uint in_base = ((p.first + s_idx) & 1u) * p.slot, out_base = (((p.first + s_idx) & 1u) ^ 1u) * p.slot;
    uvec4 cur[UN], nxt[UN];
    float cur_s[UN], nxt_s[UN];
    uint cur_5[UN], nxt_5[UN];
    load_iter(s, 0u, cur, cur_s, cur_5);      // requested before the wait: weights do not depend on x
    if (wait) grid_wait(target);
    stage_x(s, in_base);
    if ((s.flags & 4u) != 0u) { attention_step(s, out_base); return; }
    uint nsg = gl_NumWorkGroups.x * gl_NumSubgroups, sg = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    float acc = 0.0;
    for (uint t = 0u; t < s.iters; t++) {
        load_iter(s, t + 1u, nxt, nxt_s, nxt_5);   // the next iteration's chunks are in flight while these are summed
        uint g = t % s.ipr;
        [[unroll]] for (uint u = 0u; u < UN; u++) {
            uint ch = (g * UN + u) * gl_SubgroupSize + gl_SubgroupInvocationID;
            if (ch < s.cpr) {
                if (!is_quant(s.flags)) acc += dot_chunk(cur[u], ch * s.ept);
                else if ((s.flags & F_Q8) != 0u) acc += cur_s[u] * dot_q8(cur[u], ch);
                else acc += cur_s[u] * dot_q45(cur[u], ch, (s.flags & F_Q5) != 0u, cur_5[u]);
            }
        }
        if (g == s.ipr - 1u) {
            float sum = subgroupAdd(acc);
            uint row = sg + (t / s.ipr) * nsg;
            if (gl_SubgroupInvocationID == 0u) {
                float r = Q4 == 1u ? F32In(s.sc).v[row] : inversesqrt(float(s.K));
                p.act.v[out_base + row] = sum * r;
            }
            acc = 0.0;
        }
        [[unroll]] for (uint u = 0u; u < UN; u++) { cur[u] = nxt[u]; cur_s[u] = nxt_s[u]; cur_5[u] = nxt_5[u]; }
    }
}

void main()
{
    if (MODE == 2u) {
        if (gl_LocalInvocationIndex == 0u) { p.ctl.v[0] = 0u; p.ctl.v[1] = 0u; }
        return;
    }
    if (MODE == 3u) {
        U32Buf o = U32Buf(uint64_t(p.w) + p.w_off);
        for (uint i = gl_GlobalInvocationID.x; i < p.words; i += gl_NumWorkGroups.x * WG) {
            uint h = dp_hash(uint(p.w_off / 4ul) + i);
            if (p.kind == 0u) o.v[i] = (h & 0x83FF83FFu) | 0x38003800u;    // two halves, |v| in [0.5, 1)
            else if (p.kind == 1u) o.v[i] = h;                               // eight nibbles
            else o.v[i] = floatBitsToUint((0.75 + float(h & 255u) / 512.0) * 0.25 * inversesqrt(float(p.kk)));
        }
        return;
    }
    if (MODE == 4u) {
        run_step(0u, p.target > 0u, p.target);
        grid_signal();
        return;
    }
    for (uint s = 0u; s < p.steps; s++) {
        bool wait = MODE == 1u && s > 0u;
        run_step(s, wait, s * gl_NumWorkGroups.x);
        if (MODE == 1u && s + 1u < p.steps) grid_signal();
        else if (s + 1u < p.steps) barrier();   // shared x is rewritten by the next step
    }
}
