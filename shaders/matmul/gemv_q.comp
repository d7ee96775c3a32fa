#version 460
// gemv_q: y[t, n] = sum_k x[t, k] * W[n, k]  (+ bias[n] with DP_BIAS), W block-quantised   decode (T small)
// W is [N, K] in ggml blocks, w_row_blocks blocks per row (0: K / QK, K a multiple of QK; more when the file pads
// rows to whole blocks, doppler convert --pad-k: then K need only be a multiple of 16, and the values past K of a
// row's last block are never decoded, so the padding never meets activation data), decoded in registers
// and never written out. Decode is bound by the bytes read, so the work unit is what one 16-byte load
// brings: 32 values of one block (dp_quant_unit.glsl: a uvec4 of codes plus the block's scales; on the flat
// layout every code load is one 128-bit load). A row has K / 32 units; the WG / ROWS threads that own a row
// take units lane, lane + WG / ROWS, ... so neighbouring threads read neighbouring bytes and every thread has
// work at small K (K = 1152: 36 units for 32 threads). A half unit's dot product is a * sum(code * x) +
// b * sum(x), its scale outside the inner loop; x is read 16 values at a time (two or four 16-byte loads when
// x and its row stride are 16-byte aligned). Each unit is decoded once for the TT tokens of a workgroup.
// Partial sums are reduced with subgroup shuffles inside each row's lanes (a row's lanes are consecutive
// invocations; the cluster is min(lanes per row, subgroup size)), then in shared memory. Accumulation is f32.
//
// DP_GLU: gate and up projections in one pass with the activation, y[t, n] = act(x[t] · Wg[n]) * (x[t] · Wu[n])
// (dp_act.glsl; kind 0 gelu_tanh, 1 silu), as fused/gemv_multi.comp does for float weights; both weights share
// the type and layout. The two dot products stay in f32.
//
// Dispatch: nb = ceil(N / ROWS) row blocks, tb = ceil(T / TT) token blocks.
//   groups = (gx, tb, gz) with gx = min(nb, 65535), gz = ceil(nb / gx)  (row block = x + gx * z); blocks past
//   the end are no-ops.
// Push (by name):
//   x         ACT  [T, x_stride]      activations (token-major)
//   w         quant blocks [N, K]     weights, in the layout the define names
//   y         ACT  [T, y_stride]      output (f32 with DP_OUT_F32)
//   bias      f32  [N]                only with DP_BIAS (not with DP_GLU)
//   wu        quant blocks [N, K]     DP_GLU: the up projection (w is the gate)
//   kind      uint                    DP_GLU: 0 gelu_tanh, 1 silu
//   T, N, K   uint                    shape (K a multiple of QK, or of 16 with w_row_blocks)
//   x_stride  uint                    elements between tokens of x; 0 = K
//   y_stride  uint                    elements between tokens of y; 0 = N
//   w_row_blocks uint                 blocks from one row of W (and Wu) to the next; 0 = K / QK (unpadded)
// Spec constants (by name):
//   WG    workgroup size (local_size_x_id = 0), default 128; a power of two, multiple of ROWS
//   ROWS  rows of W per workgroup, default 4 (a power of two); WG / ROWS threads per row
//   TT    tokens per workgroup, default 1 (up to 4: W is decoded once for all of them)
//   UN    units in flight per thread, default 1 (1..4). Decode is bound by memory latency: with UN = 1 a
//         thread takes its units v = lane, lane + TPR, ... one load -> wait -> decode and FMAs at a time,
//         ceil(units / TPR) serial round trips per row. UN = u steps by u * TPR and issues the loads of u
//         units (codes and scales of W, and Wu with DP_GLU; each token's 32 x values when x is 16-byte
//         aligned) before any arithmetic, then consumes them in the UN = 1 order into the same accumulators,
//         so the sums are bit for bit those of UN = 1 (fused/lm_head_q.comp mirrors the UN = 1 loop). Units
//         past the end load nothing and add nothing; halves past K (padded rows) load no x. Registers grow
//         by about UN * (12 * NW + 4 * TT * 2 * XQ16) (XQ16 = 2 uvec4 per 16 f16 values, 4 per 16 f32).
//         Unaligned x (element loads) is read when used, as with UN = 1.
//   Shared memory: 4 * TT * WG bytes (x2 with DP_GLU).
//   XK    DP_XQ8 only: the longest K staged, K rounded up to 16 (the staging: (16 * planes + 16) * TT * XK / 16
//         bytes)
// Defines: the weight type DP_Q_* and its layout DP_LAYOUT_COL | DP_LAYOUT_FLAT (dp_quant.glsl; none: row_wise),
//   DP_ACT_F16, DP_OUT_F32, DP_BIAS, DP_GLU, DP_XQ8 (with DP_XQ8_PLANES 1 or 2).
// DP_XQ8: x quantised to int8 per 16 values by each workgroup into shared memory, and each half's dot
//   product taken on the integer dot-product units (dp_quant_x8.glsl; the device needs integer_dot). The
//   result is then W · x8 with x8 within d / 2 of x per group (d = max |x| / 127 of the group), or with
//   two planes within d / 508, not W · x; UN sums alike for every value here too.
// DP_PRENORM (with DP_XQ8; fusion norm_gate_up, lua/lib/doppler/fusions.lua): the norm that feeds this GEMV
//   computed by the staging instead of a dispatch of its own. x is then the residual stream and the push adds
//   ra (the branch output a, ACT [T, K], rows K apart), nw1 / nw2 (norm weights, W [K]), r (ACT [T, K], out)
//   and eps1, off1, eps2, off2:
//     DP_PRENORM=1 (add_rmsnorm):   y = x + a
//     DP_PRENORM=2 (norm_add_norm): y = x + rmsnorm(a; nw1, eps1, off1), the normed a rounded to ACT first
//   y is rounded to ACT as the unfused kernels store it, and the workgroups of row block 0 store it to r (the
//   new residual stream; r must not alias x or ra). The GEMV's input is h = rmsnorm(y; nw2, eps2, off2), but
//   the staging quantises u = y * (off2 + nw2) and the dot products are scaled by 1 / rms(y) at the end:
//   scaling commutes with the per-group int8 quantisation, so no workgroup waits for the sum of y^2 before
//   its dot products (the subgroups' partial sums cross the barrier the staging has anyway). With
//   DP_PRENORM=2 the sum of a^2 is reduced before y is formed: one barrier more, behind the weights' loads.
//   Why: a norm as its own dispatch costs ~4-5 us on the H100, most of it ordering (docs/BENCHMARKS.md 29b);
//   the staging reads 1-2 more vectors of K values from L2. The result differs from the unfused chain's by
//   roundings only (h is never rounded to ACT; the sums of squares go in another order).
//   Needs a subgroup size >= 8 (pn_ss) and T rows of a K apart.
// DP_DOWN (with DP_GLU, TT = 1; fusion glu_down, lua/lib/doppler/fusions.lua): the layer's down projection in the
//   same dispatch. The workgroup's ROWS values of h = act(gate) * up (rounded to ACT, as the unfused path stores
//   h) never leave it: it multiplies them by its ROWS columns of D [K, N] and adds that share of y = D h to yd
//   with 64-bit integer atomics, in units of 2^-32 (each share truncated to the unit; |share| < 2^31), so the
//   sum does not depend on the order the workgroups add in: the same bits every run. No workgroup waits for
//   all of h, and h is not written. D comes as wd, its f16 columns in blocks of 8 ([N / 8][K][8]: one 16-byte
//   load per block and output; ROWS a multiple of 8, N of ROWS), or with DP_DCOL_Q4 / DP_DCOL_Q6 its Q4_K /
//   Q6_K values exactly, by blocks of 32 columns (quant/columns_q.comp's planes; ROWS a multiple of 32): the
//   codes (and Q6_K's high bits) and a scale pair per block and output, 24 or 32 bytes per 32 values against
//   64 in f16. yd must be zero before the dispatch; the
//   readers of yd take it as an `a` operand with DP_A_FIX64 (dp_types.glsl). The dispatch zeroes zd (K int64:
//   the sum an earlier fused MLP left, whose readers ran before this dispatch), so that a plan's fused MLPs
//   leave their sums zero for the next pass without a dispatch of their own. Push: y is absent; wd, yd, zd.
//   Why: on the H100 the gate+up and down dispatches of a layer cost ~23 us; in a probe one dispatch so made
//   took 1.2-1.35x less than the two (recipes/bench/glu_down.lua, docs/BENCHMARKS.md 34c).
// [[unroll]] marks the loops whose trip counts are spec constants: unrolled at pipeline creation, their
// arrays stay in registers (H100 decode: attention_decode 0.441 -> 0.416 ms per token, docs/BENCHMARKS.md 11h).
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef DP_DOWN
#extension GL_EXT_shader_atomic_int64 : require
#ifndef DP_GLU
#error "DP_DOWN is the fused MLP: it needs DP_GLU"
#endif
#endif
#ifdef DP_PRENORM
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifndef DP_XQ8
#error "DP_PRENORM needs DP_XQ8 (the norm is folded into the staging of x)"
#endif
#endif
#include "dp_types.glsl"
#include "dp_quant.glsl"
#ifdef DP_XQ8
#define DQU_RAW_SCALES
#endif
#include "dp_quant_unit.glsl"
#ifdef DP_XQ8
#include "dp_quant_x8.glsl"
#endif
#include "dp_act.glsl"

#ifdef DP_GLU
#define NW 2u                 // dot products per (row, token): gate and up
#else
#define NW 1u
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG   = 128;
layout(constant_id = 1) const uint ROWS = 4;
layout(constant_id = 2) const uint TT   = 1;
layout(constant_id = 3) const uint UN   = 1;
layout(constant_id = 4) const uint XK   = 16;  // DP_XQ8: the longest K staged (>= p.K, a multiple of 16)

layout(push_constant) uniform Push {
    ACT_In  x;
    U16In   w;
#ifdef DP_GLU
    U16In   wu;
#endif
#ifndef DP_DOWN
    OUT_Out y;
#endif
#ifdef DP_BIAS
    F32In   bias;
#endif
    uint T;
    uint N;
    uint K;
    uint x_stride;
    uint y_stride;
    uint w_row_blocks;
#ifdef DP_GLU
    uint kind;
#endif
#ifdef DP_PRENORM
    ACT_In  ra;
    W_In    nw1;
    W_In    nw2;
    ACT_Out r;
    float   eps1;
    float   off1;
    float   eps2;
    float   off2;
#endif
#ifdef DP_DOWN
    V4In    wd;      // [N / 8][K][8] f16: D's columns
    I64Buf  yd;      // [K] int64, the sum (units of 2^-32)
    I64Buf  zd;      // [K] int64, zeroed here
#endif
} p;

#ifdef DP_DOWN
shared float hs[ROWS];                   // this workgroup's rows of h
#if defined(DP_DCOL_Q4) || defined(DP_DCOL_Q6)
shared float hsum[ROWS / 16u];           // sums of h over each run of 16 (the blocks' minima / offsets)
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer DColV2In { vec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer DColU2In { uvec2 v[]; };
// sum over the 16 codes of word pair (w0, w1) (nibbles, low first) of code * h[h0 + i]
float dcol_dot16(uint w0, uint w1, uint h0)
{
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; ++i) s += float((w0 >> (4u * i)) & 15u) * hs[h0 + i];
    [[unroll]] for (uint i = 0u; i < 8u; ++i) s += float((w1 >> (4u * i)) & 15u) * hs[h0 + 8u + i];
    return s;
}
#endif
#endif

const uint TPR = WG / ROWS;              // threads per row
#ifdef DP_GLU
#define WU_ADDR p.wu
#else
#define WU_ADDR p.w
#endif

shared float red[NW * TT * WG];          // [NW * TT][WG / cluster]: one partial sum per cluster, token, weight

#ifdef DP_XQ8
const uint XG = XK / 16u;                // 16-value groups of x per token
shared x8group x8s[TT * XG];             // [t][g] (dp_quant_x8.glsl)
#endif

// 16 values of x as loaded by 16-byte loads (x_fetch16), unpacked when used (x_unpack16): the UN units in
// flight hold XQ16 uvec4 per half and token.
#ifdef DP_ACT_F16
#define XQ16 2u
#else
#define XQ16 4u
#endif
struct xhalf { uvec4 q[XQ16]; };

// x[k0 .. k0 + 16) of the row at xrow; the row base and k0's byte offset are 16-byte aligned (`vec`).
xhalf x_fetch16(uint64_t xrow, uint k0)
{
    xhalf r;
    DP_RAW16_In xr = DP_RAW16_In(xrow + uint64_t(k0) * uint64_t(ACT_BYTES));
    [[unroll]] for (uint q = 0u; q < XQ16; ++q) r.q[q] = xr.v[q];
    return r;
}

void x_unpack16(xhalf r, out float v[16])
{
#ifdef DP_ACT_F16
    [[unroll]] for (uint q = 0u; q < 2u; ++q) {
        const uvec4 u = r.q[q];
        vec2 a = unpackHalf2x16(u.x), b = unpackHalf2x16(u.y), c = unpackHalf2x16(u.z), d = unpackHalf2x16(u.w);
        v[8u * q + 0u] = a.x; v[8u * q + 1u] = a.y; v[8u * q + 2u] = b.x; v[8u * q + 3u] = b.y;
        v[8u * q + 4u] = c.x; v[8u * q + 5u] = c.y; v[8u * q + 6u] = d.x; v[8u * q + 7u] = d.y;
    }
#else
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
        const vec4 f = uintBitsToFloat(r.q[q]);
        v[4u * q + 0u] = f.x; v[4u * q + 1u] = f.y; v[4u * q + 2u] = f.z; v[4u * q + 3u] = f.w;
    }
#endif
}

// x[k0 .. k0 + 16) of the row at xrow by element loads (x or its row stride not 16-byte aligned).
void x16_elements(uint64_t xrow, uint k0, out float v[16])
{
    ACT_In xr = ACT_In(xrow);
    [[unroll]] for (uint i = 0u; i < 16u; ++i) v[i] = act_load(xr, k0 + i);
}

#ifdef DP_XQ8
// x8s <- the workgroup's TT rows of x in 16-value groups of int8 (x8_quantise16). Every workgroup
// quantises the rows it needs itself (a few KiB from L2) rather than a separate dispatch doing it once: a
// dependent dispatch costs more than that on the H100 (docs/DEVICES.md). The caller issues its weight loads
// first. (Issuing all of a thread's x loads before quantising any, an unrolled loop, measured slower on the
// H100: down 1152 x 6912 Q4_K 48.0 -> 53.9 us, docs/BENCHMARKS.md 14a.)
void stage_x8(uint t0, uint xs, bool vec)
{
    const uint G = p.K / 16u;
    for (uint i = gl_LocalInvocationID.x; i < TT * G; i += WG) {
        const uint t = i / G, g = i % G;
        const uint64_t xrow = uint64_t(p.x) + uint64_t(min(t0 + t, p.T - 1u)) * uint64_t(xs) * ACT_BYTES;
        float v[16];
        if (vec) x_unpack16(x_fetch16(xrow, 16u * g), v);
        else     x16_elements(xrow, 16u * g, v);
        x8s[t * XG + g] = x8_quantise16(v);
    }
}

#ifdef DP_PRENORM
#if DP_PRENORM != 1 && DP_PRENORM != 2
#error "DP_PRENORM is 1 (add_rmsnorm) or 2 (norm_add_norm)"
#endif
const uint PN_SG = WG / 8u;              // subgroups per workgroup at most (subgroup size >= 8)
shared float pn_ss[2u * TT * PN_SG];     // [0, TT * PN_SG): sums of a^2; then sums of y^2, per subgroup

// The sum over the workgroup of each thread's v (token t's slot of pn_ss at base): subgroup sums are written
// by the subgroups' first lanes; the caller reads them after a barrier (pn_total).
void pn_publish(uint base, uint t, float v)
{
    const float s = subgroupAdd(v);
    if (subgroupElect()) pn_ss[base + t * PN_SG + gl_SubgroupID] = s;
}

float pn_total(uint base, uint t)
{
    float s = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; ++g) s += pn_ss[base + t * PN_SG + g];
    return s;
}

// 4 values of a norm weight from element k on (element loads).
vec4 pn_w4(W_In w, uint k) { return vec4(w_load(w, k), w_load(w, k + 1u), w_load(w, k + 2u), w_load(w, k + 3u)); }

// The same, one 16-byte load for f32 weights (w 16-byte aligned, k % 4 == 0). Why vector loads: with a group
// of 16 values per invocation, element loads put every lane of a warp on another 32-byte sector for each of
// 16 load instructions; gate+up then spent ~7 us more per call on them (docs/BENCHMARKS.md 29d).
vec4 pn_w4v(W_In w, uint k)
{
#ifdef DP_W_F32
    return uintBitsToFloat(DP_RAW16_In(uint64_t(w) + uint64_t(k) * 4ul).v[0]);
#else
    return pn_w4(w, k);
#endif
}

// stage_x8 for DP_PRENORM: x8s <- u = y * (off2 + nw2) of the workgroup's TT tokens (the header), the residual
// y to r by row block 0, and each subgroup's sum of y^2 to pn_ss (read after the caller's barrier). With vec,
// x and a are read as stage_x8 reads x (16-byte loads) and f32 norm weights 16 bytes at a time (pn_w4v).
void stage_x8_prenorm(uint t0, uint xs, bool writer, bool vec)
{
    const uint K = p.K, G = K / 16u;
    float inv1[TT];
#if DP_PRENORM == 2
    // rmsnorm(a)'s scale: the sum of a^2 over the workgroup first
    {
        float ss[TT];
        [[unroll]] for (uint t = 0u; t < TT; ++t) ss[t] = 0.0;
        for (uint i = gl_LocalInvocationID.x; i < TT * G; i += WG) {
            const uint t = i / G, g = i % G;
            const uint64_t arow = uint64_t(p.ra) + uint64_t(min(t0 + t, p.T - 1u)) * uint64_t(K) * ACT_BYTES;
            float av[16];
            if (vec) x_unpack16(x_fetch16(arow, 16u * g), av);
            else     x16_elements(arow, 16u * g, av);
            float s = 0.0;
            [[unroll]] for (uint e = 0u; e < 16u; ++e) s += av[e] * av[e];
            [[unroll]] for (uint tt = 0u; tt < TT; ++tt) if (tt == t) ss[tt] += s;
        }
        [[unroll]] for (uint t = 0u; t < TT; ++t) pn_publish(0u, t, ss[t]);
        barrier();
        [[unroll]] for (uint t = 0u; t < TT; ++t) inv1[t] = inversesqrt(pn_total(0u, t) / float(K) + p.eps1);
    }
#else
    [[unroll]] for (uint t = 0u; t < TT; ++t) inv1[t] = 1.0;
#endif
    float ss2[TT];
    [[unroll]] for (uint t = 0u; t < TT; ++t) ss2[t] = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < TT * G; i += WG) {
        const uint t = i / G, g = i % G, tok = min(t0 + t, p.T - 1u);
        const uint64_t xrow = uint64_t(p.x) + uint64_t(tok) * uint64_t(xs) * ACT_BYTES;
        const uint64_t arow = uint64_t(p.ra) + uint64_t(tok) * uint64_t(K) * ACT_BYTES;
        float inv = 1.0;
        [[unroll]] for (uint tt = 0u; tt < TT; ++tt) if (tt == t) inv = inv1[tt];
        float u[16], xv[16], av[16];
        if (vec) {
            x_unpack16(x_fetch16(xrow, 16u * g), xv);
            x_unpack16(x_fetch16(arow, 16u * g), av);
        } else {
            x16_elements(xrow, 16u * g, xv);
            x16_elements(arow, 16u * g, av);
        }
        float s = 0.0;
        [[unroll]] for (uint c = 0u; c < 4u; ++c) {
            const uint k = 16u * g + 4u * c;
            const vec4 x4 = vec4(xv[4u * c], xv[4u * c + 1u], xv[4u * c + 2u], xv[4u * c + 3u]);
            const vec4 a4 = vec4(av[4u * c], av[4u * c + 1u], av[4u * c + 2u], av[4u * c + 3u]);
            const vec4 g2 = p.off2 + (vec ? pn_w4v(p.nw2, k) : pn_w4(p.nw2, k));
#if DP_PRENORM == 2
            const vec4 g1 = p.off1 + (vec ? pn_w4v(p.nw1, k) : pn_w4(p.nw1, k));
#endif
            [[unroll]] for (uint e = 0u; e < 4u; ++e) {
#if DP_PRENORM == 2
                const float an = act_round(a4[e] * inv * g1[e]);
#else
                const float an = a4[e];
#endif
                const float y = act_round(x4[e] + an);
                if (writer && t0 + t < p.T) act_store(p.r, tok * K + k + e, y);
                s += y * y;
                u[4u * c + e] = y * g2[e];
            }
        }
        [[unroll]] for (uint tt = 0u; tt < TT; ++tt) if (tt == t) ss2[tt] += s;
        x8s[t * XG + g] = x8_quantise16(u);
    }
    [[unroll]] for (uint t = 0u; t < TT; ++t) pn_publish(TT * PN_SG, t, ss2[t]);
}
#endif
#endif

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint block = gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.z;
    const uint n0 = block * ROWS;
    const uint t0 = gl_WorkGroupID.y * TT;
    if (n0 >= p.N || t0 >= p.T) return;            // uniform over the workgroup

    const uint K  = p.K;
    const uint xs = p.x_stride != 0u ? p.x_stride : K;
    const uint ys = p.y_stride != 0u ? p.y_stride : p.N;
    const uint r = tid / TPR, lane = tid % TPR;
    const uint n = min(n0 + r, p.N - 1u);          // rows past the end decode the last row; dropped below
    const bool vec = (uint64_t(p.x) & 15ul) == 0ul && ((xs * ACT_BYTES) & 15u) == 0u;

    float acc[NW * TT];                            // [w * TT + t]
    [[unroll]] for (uint i = 0u; i < NW * TT; ++i) acc[i] = 0.0;

    uint64_t xrow[TT];
    [[unroll]] for (uint t = 0u; t < TT; ++t)
        xrow[t] = uint64_t(p.x) + uint64_t(min(t0 + t, p.T - 1u)) * uint64_t(xs) * ACT_BYTES;

    const uint nb = p.w_row_blocks != 0u ? p.w_row_blocks : K / QK;   // row stride in blocks
    const uint units = (K + QK - 1u) / QK * DQU_PER_BLOCK;             // units of the blocks holding k < K
#ifdef DP_XQ8
    // x quantised (stage_x8): each half adds a * d * sum(code * q) + b * d * sum(q). The first UN units'
    // loads go out before the staging and its barrier, each next batch's before the current one's
    // arithmetic, so a thread always has a batch of weights in flight.
    dq_unit un[UN * NW], cur[UN * NW];
#define DP_LOAD_UNITS(V0) \
    [[unroll]] for (uint i = 0u; i < UN; ++i) { \
        const uint v = (V0) + i * TPR; \
        if (v >= units) continue; \
        un[i * NW] = dqu_load(dq_block(uint64_t(p.w), n, v / DQU_PER_BLOCK, p.N, nb), v % DQU_PER_BLOCK); \
        if (NW > 1u) un[i * NW + NW - 1u] = dqu_load(dq_block(uint64_t(WU_ADDR), n, v / DQU_PER_BLOCK, p.N, nb), \
                                                      v % DQU_PER_BLOCK); \
    }
    DP_LOAD_UNITS(lane)
#ifdef DP_PRENORM
    // 16-byte loads where x, a and the norm weights allow them (as stage_x8's vec)
    const bool pvec = vec && (uint64_t(p.ra) & 15ul) == 0ul && (uint64_t(p.nw1) & 15ul) == 0ul &&
                      (uint64_t(p.nw2) & 15ul) == 0ul;
    stage_x8_prenorm(t0, xs, block == 0u, pvec);
#else
    stage_x8(t0, xs, vec);
#endif
    barrier();
    for (uint v0 = lane; v0 < units; v0 += UN * TPR) {
        [[unroll]] for (uint i = 0u; i < UN * NW; ++i) cur[i] = un[i];
        DP_LOAD_UNITS(v0 + UN * TPR)
        [[unroll]] for (uint i = 0u; i < UN; ++i) {
            const uint v = v0 + i * TPR;
            if (v >= units) continue;
            const uint b = v / DQU_PER_BLOCK, u = v % DQU_PER_BLOCK;
            [[unroll]] for (uint h = 0u; h < 2u; ++h) {
                const uint k0 = b * QK + dqu_k0(u, h);
                if (k0 >= K) continue;             // padding (--pad-k rows)
                [[unroll]] for (uint t = 0u; t < TT; ++t) {
                    const x8group xg = x8s[t * XG + k0 / 16u];
                    [[unroll]] for (uint j = 0u; j < NW; ++j) {
                        acc[j * TT + t] = x8_half_acc(dqu_codes8(cur[i * NW + j], u, h), xg,
                                                      cur[i * NW + j].a[h], cur[i * NW + j].b[h], acc[j * TT + t]);
                    }
                }
            }
        }
    }
#undef DP_LOAD_UNITS
#else
    for (uint v0 = lane; v0 < units; v0 += UN * TPR) {
        // Issue the loads of UN units (weights, and x when aligned) before using any ...
        dq_unit un[UN * NW];
        xhalf xq[UN * 2u * TT];                    // [i][h][t]
        [[unroll]] for (uint i = 0u; i < UN; ++i) {
            const uint v = v0 + i * TPR;
            if (v >= units) continue;              // past the end: nothing loaded, nothing added
            const uint b = v / DQU_PER_BLOCK, u = v % DQU_PER_BLOCK;
            un[i * NW] = dqu_load(dq_block(uint64_t(p.w), n, b, p.N, nb), u);
#ifdef DP_GLU
            un[i * NW + 1u] = dqu_load(dq_block(uint64_t(p.wu), n, b, p.N, nb), u);
#endif
            if (!vec) continue;
            [[unroll]] for (uint h = 0u; h < 2u; ++h) {
                const uint k0 = b * QK + dqu_k0(u, h);
                if (k0 >= K) continue;             // padding: no x there
                [[unroll]] for (uint t = 0u; t < TT; ++t) xq[(i * 2u + h) * TT + t] = x_fetch16(xrow[t], k0);
            }
        }
        // ... then consume them in the order of UN = 1 (unit by unit), so every UN sums alike.
        [[unroll]] for (uint i = 0u; i < UN; ++i) {
            const uint v = v0 + i * TPR;
            if (v >= units) continue;
            const uint b = v / DQU_PER_BLOCK, u = v % DQU_PER_BLOCK;
            [[unroll]] for (uint h = 0u; h < 2u; ++h) {
                float q[NW][16];
                [[unroll]] for (uint j = 0u; j < NW; ++j) dqu_codes(un[i * NW + j], u, h, q[j]);
                const uint k0 = b * QK + dqu_k0(u, h);
                if (k0 >= K) continue;             // padding (--pad-k rows); uniform unless rows are padded
                [[unroll]] for (uint t = 0u; t < TT; ++t) {
                    float xv[16];
                    if (vec) x_unpack16(xq[(i * 2u + h) * TT + t], xv);
                    else     x16_elements(xrow[t], k0, xv);
                    [[unroll]] for (uint j = 0u; j < NW; ++j)
                        acc[j * TT + t] = dqu_half_acc(q[j], xv, un[i * NW + j].a[h], un[i * NW + j].b[h],
                                                       acc[j * TT + t]);
                }
            }
        }
    }
#endif

    // Reduce each row's TPR partial sums: shuffles within clusters of CW consecutive lanes, then shared memory.
    const uint CW = min(TPR, gl_SubgroupSize);
    [[unroll]] for (uint i = 0u; i < NW * TT; ++i) acc[i] = dqu_cluster_sum(acc[i], CW);
    if (tid % CW == 0u)
        [[unroll]] for (uint i = 0u; i < NW * TT; ++i) red[i * WG + tid / CW] = acc[i];
    barrier();
    const uint per_row = TPR / CW;                 // clusters per row
    if (lane < TT && n0 + r < p.N && t0 + lane < p.T) {
        const uint t = lane;
        float s[NW];
        [[unroll]] for (uint j = 0u; j < NW; ++j) {
            s[j] = 0.0;
            [[unroll]] for (uint c = 0u; c < per_row; ++c) s[j] += red[(j * TT + t) * WG + r * per_row + c];
        }
#ifdef DP_PRENORM
        // h = y * inv2 * (off2 + nw2): the scale 1 / rms(y) left out of the staging
        const float inv2 = inversesqrt(pn_total(TT * PN_SG, t) / float(K) + p.eps2);
        [[unroll]] for (uint j = 0u; j < NW; ++j) s[j] *= inv2;
#endif
#ifdef DP_DOWN
        // h as the unfused path stores it (out_store), rounded by integer operations (act_round_int): with
        // act_round the H100's fused sums differed from D times the unfused h by ~3e-4 of their size (34h)
        hs[r] = act_round_int(dp_glu_act(s[0], p.kind) * s[1]);
#elif defined(DP_GLU)
        out_store(p.y, (t0 + t) * ys + n0 + r, dp_glu_act(s[0], p.kind) * s[1]);
#else
#ifdef DP_BIAS
        s[0] += p.bias.v[n0 + r];
#endif
        out_store(p.y, (t0 + t) * ys + n0 + r, s[0]);
#endif
    }
#ifdef DP_DOWN
    if (lane == 0u && n0 + r >= p.N) hs[r] = 0.0;  // rows past N (none when N is a multiple of ROWS)
    barrier();
#if defined(DP_DCOL_Q4) || defined(DP_DCOL_Q6)
    if (tid < ROWS / 16u) {
        float v = 0.0;
        for (uint i = 0u; i < 16u; ++i) v += hs[16u * tid + i];
        hsum[tid] = v;
    }
    barrier();
    const uint C = p.N / 32u;
#endif
    // y[o] += sum over this workgroup's rows j of D[o, n0 + j] * h[n0 + j], for o = tid, tid + WG, ...
    const uint nblk = (p.N + ROWS - 1u) / ROWS;
    for (uint o = tid; o < K; o += WG) {
        float v = 0.0;
#if defined(DP_DCOL_Q4) || defined(DP_DCOL_Q6)
        [[unroll]] for (uint c = 0u; c < ROWS / 32u; ++c) {
            const uint at = (n0 / 32u + c) * K + o;
            const uvec4 q = p.wd.v[at];
#ifdef DP_DCOL_Q4
            // W = a * code - b over the block
            const vec2 ab = DColV2In(uint64_t(p.wd) + uint64_t(C) * K * 16ul).v[at];
            v += ab.x * (dcol_dot16(q.x, q.y, 32u * c) + dcol_dot16(q.z, q.w, 32u * c + 16u))
                 - ab.y * (hsum[2u * c] + hsum[2u * c + 1u]);
#else
            // W = a_half * (code - 32), code = low nibble | high 2 bits << 4
            const uvec2 hi = DColU2In(uint64_t(p.wd) + uint64_t(C) * K * 16ul).v[at];
            const vec2 a = DColV2In(uint64_t(p.wd) + uint64_t(C) * K * 24ul).v[at];
            float s0 = dcol_dot16(q.x, q.y, 32u * c), s1 = dcol_dot16(q.z, q.w, 32u * c + 16u);
            [[unroll]] for (uint i = 0u; i < 16u; ++i) {
                s0 += float(((hi.x >> (2u * i)) & 3u) << 4) * hs[32u * c + i];
                s1 += float(((hi.y >> (2u * i)) & 3u) << 4) * hs[32u * c + 16u + i];
            }
            v += a.x * (s0 - 32.0 * hsum[2u * c]) + a.y * (s1 - 32.0 * hsum[2u * c + 1u]);
#endif
        }
#else
        [[unroll]] for (uint c = 0u; c < ROWS / 8u; ++c) {
            const uvec4 q = p.wd.v[(n0 / 8u + c) * K + o];
            [[unroll]] for (uint e = 0u; e < 4u; ++e) {
                const vec2 d = unpackHalf2x16(q[e]);
                v += d.x * hs[c * 8u + 2u * e] + d.y * hs[c * 8u + 2u * e + 1u];
            }
        }
#endif
        atomicAdd(p.yd.v[o], int64_t(v * 4294967296.0));
    }
    for (uint i = block * WG + tid; i < K; i += nblk * WG) p.zd.v[i] = 0l;
#endif
}
