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
// [[unroll]] marks the loops whose trip counts are spec constants: unrolled at pipeline creation, their
// arrays stay in registers (H100 decode: attention_decode 0.441 -> 0.416 ms per token, docs/BENCHMARKS.md 11h).
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
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
    OUT_Out y;
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
} p;

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
    stage_x8(t0, xs, vec);
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
#ifdef DP_GLU
        out_store(p.y, (t0 + t) * ys + n0 + r, dp_glu_act(s[0], p.kind) * s[1]);
#else
#ifdef DP_BIAS
        s[0] += p.bias.v[n0 + r];
#endif
        out_store(p.y, (t0 + t) * ys + n0 + r, s[0]);
#endif
    }
}
