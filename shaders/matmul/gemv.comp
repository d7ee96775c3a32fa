#version 460
// gemv: y[t, n] = sum_k x[t, k] * W[n, k]  (+ bias[n] with DP_BIAS)          the decode hot spot (T = 1..~8)
// W is PyTorch's Linear layout [N, K]. Each workgroup owns ROWS consecutive rows of W and TT consecutive
// tokens; its WG threads split K so that neighbouring threads read neighbouring 16-byte chunks of a row
// (coalesced), each W element is read once per TT tokens, and partial sums are reduced with subgroupAdd and
// then across subgroups in shared memory (any subgroup size). Accumulation is f32.
// Vectorised path (uvec4 loads: 4 f32 or 8 f16/bf16 weights per load) when K is a multiple of VW
// (4 for f32 weights, 8 for f16/bf16) and W, x and their row strides are 16-byte aligned; element loads
// otherwise (any K). The test is uniform, taken once per dispatch.
//
// Dispatch: nb = ceil(N / ROWS) row blocks, tb = ceil(T / TT) token blocks.
//   groups = (gx, tb, gz) with gx = min(nb, 65535), gz = ceil(nb / gx)   (row block = x + gx * z;
//   65535 is Vulkan's guaranteed limit per dimension, and a 262144-row lm_head at ROWS = 2 exceeds it).
//   Blocks past the end are no-ops.
// Push (by name):
//   x         ACT  [T, x_stride]      activations (token-major)
//   w         W    [N, K]             weights
//   y         ACT  [T, y_stride]      output
//   bias      W    [N]                only with DP_BIAS (the member does not exist otherwise); f32 with
//                                     DP_BIAS_F32 (a quantised model's bias next to the f16 copy of its weight)
//   T, N, K   uint                    shape
//   x_stride  uint                    elements between tokens of x; 0 = K
//   y_stride  uint                    elements between tokens of y; 0 = N (lets y be a column slice)
// Spec constants (by name):
//   WG    workgroup size (local_size_x_id = 0), default 128. H100 hint: 64..128 for K ~ 1k, 256 for K >= 4k.
//   ROWS  rows of W per workgroup, default 2 (1..8)
//   TT    tokens per workgroup, default 1 (use T when T <= 4: W is streamed once for all of them)
//   UN    chunks in flight per thread, default 1 (1..4). Decode is bound by memory latency: with UN = 1 a
//         thread walks its chunks c = tid, tid + WG, ... one load -> wait -> FMAs at a time, so a row of
//         K / VW chunks costs ceil(K / VW / WG) serial round trips (Gemma 3 1B's down projection, K = 6912
//         f16, WG = 128: 7). With UN = u the loop steps by u * WG and issues the weight and x loads of u
//         chunks before any arithmetic, then consumes them in the UN = 1 order into the same accumulators:
//         the result is bit for bit that of UN = 1 for every UN (fused/lm_head.comp mirrors the UN = 1 loop).
//         Chunks past the end load nothing and add nothing. Registers per thread grow by about
//         UN * (4 * ROWS + 4 * TT * XQ) (the raw uvec4s held). The element path ignores UN.
//   Shared memory: 4 * ROWS * TT * WG bytes (WG = 128, ROWS = 4, TT = 4: 8 KiB); keep it <= 32 KiB.
// Defines: DP_OUT_F32 (y in f32 whatever the activations), DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16 (dp_types.glsl), DP_BIAS, DP_BIAS_F32.
// [[unroll]] marks the loops whose trip counts are spec constants: unrolled at pipeline creation, their
// arrays stay in registers (H100 decode: attention_decode 0.441 -> 0.416 ms per token, docs/BENCHMARKS.md 11h).
#extension GL_EXT_control_flow_attributes : require
#include "dp_types.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG   = 128;
layout(constant_id = 1) const uint ROWS = 2;
layout(constant_id = 2) const uint TT   = 1;
layout(constant_id = 3) const uint UN   = 1;

layout(push_constant) uniform Push {
    ACT_In  x;
    W_In    w;
    OUT_Out y;
#if defined(DP_BIAS) && defined(DP_BIAS_F32)
    F32In   bias;
#elif defined(DP_BIAS)
    W_In    bias;
#endif
    uint T;
    uint N;
    uint K;
    uint x_stride;
    uint y_stride;
} p;

#ifdef DP_BIAS_F32
#define bias_load(n) (p.bias.v[(n)])
#else
#define bias_load(n) w_load(p.bias, (n))
#endif

#include "dp_wchunk.glsl"

// Partial sums of each subgroup: [ROWS * TT][WG] (WG bounds the number of subgroups for any subgroup size).
shared float red[ROWS * TT * WG];

// One chunk of x (VW values of one token row) as loaded, unpacked only when used (x_unpack), so that UN
// chunks in flight hold XQ uvec4 each: one f16 uvec4, VW / 4 f32 ones, or, for f16 x with f32 weights (4
// halves, read element-wise: x is small and cached), their f32 values' bits.
#if defined(DP_ACT_F16)
#define XQ 1u
#else
#define XQ (VW / 4u)
#endif
struct xchunk { uvec4 q[XQ]; };

// Loads x[k0 .. k0 + VW) of one token row (row base address xrow, 16-byte aligned on the vector path).
xchunk x_fetch(uint64_t xrow, uint k0)
{
    xchunk c;
#if defined(DP_ACT_F16) && !defined(DP_W_F32)       // 8 halves = one uvec4
    c.q[0] = DP_RAW16_In(xrow).v[k0 / 8u];
#elif defined(DP_ACT_F16)                           // 4 halves: element loads, kept as f32 bits
    ACT_In xr = ACT_In(xrow);
    [[unroll]] for (uint e = 0u; e < VW; ++e) c.q[0][e] = floatBitsToUint(act_load(xr, k0 + e));
#else                                               // f32: VW / 4 uvec4
    DP_RAW16_In xr = DP_RAW16_In(xrow);
    [[unroll]] for (uint q = 0u; q < XQ; ++q) c.q[q] = xr.v[k0 / 4u + q];
#endif
    return c;
}

// The VW floats of a chunk x_fetch loaded.
void x_unpack(xchunk c, inout float v[VW])
{
#if defined(DP_ACT_F16) && !defined(DP_W_F32)
    const uvec4 u = c.q[0];
    vec2 a = unpackHalf2x16(u.x), b = unpackHalf2x16(u.y), cc = unpackHalf2x16(u.z), d = unpackHalf2x16(u.w);
    v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y; v[4] = cc.x; v[5] = cc.y; v[6] = d.x; v[7] = d.y;
#else
    [[unroll]] for (uint q = 0u; q < XQ; ++q) {
        const uvec4 u = c.q[q];
        v[4u * q + 0u] = uintBitsToFloat(u.x); v[4u * q + 1u] = uintBitsToFloat(u.y);
        v[4u * q + 2u] = uintBitsToFloat(u.z); v[4u * q + 3u] = uintBitsToFloat(u.w);
    }
#endif
}

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint block = gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.z;
    const uint n0 = block * ROWS;
    const uint t0 = gl_WorkGroupID.y * TT;
    if (n0 >= p.N || t0 >= p.T) return;            // uniform over the workgroup: no barrier is skipped unevenly

    const uint K  = p.K;
    const uint xs = p.x_stride != 0u ? p.x_stride : K;
    const uint ys = p.y_stride != 0u ? p.y_stride : p.N;

    // Row base addresses in 64 bits (an lm_head's N * K can pass 2^31 elements). Rows and tokens past
    // the end are clamped to the last valid one: they read real memory and their sums are dropped.
    uint64_t wrow[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; ++r)
        wrow[r] = uint64_t(p.w) + uint64_t(min(n0 + r, p.N - 1u)) * uint64_t(K) * W_BYTES;
    uint64_t xrow[TT];
    [[unroll]] for (uint t = 0u; t < TT; ++t)
        xrow[t] = uint64_t(p.x) + uint64_t(min(t0 + t, p.T - 1u)) * uint64_t(xs) * ACT_BYTES;

    float acc[ROWS * TT];
    [[unroll]] for (uint i = 0u; i < ROWS * TT; ++i) acc[i] = 0.0;

    const bool x_vec_ok =
#if defined(DP_ACT_F16) && defined(DP_W_F32)
        true;                                       // x is read element-wise on this combination
#else
        (uint64_t(p.x) & 15ul) == 0ul && ((xs * ACT_BYTES) & 15u) == 0u;
#endif
    const bool vec = (K % VW) == 0u && (uint64_t(p.w) & 15ul) == 0ul && ((K * W_BYTES) & 15u) == 0u && x_vec_ok;

    if (vec) {
        const uint chunks = K / VW;
        for (uint c0 = tid; c0 < chunks; c0 += UN * WG) {
            // Issue the loads of UN chunks (every row's weights, every token's x) before using any ...
            uvec4 raw[UN * ROWS];
            xchunk xq[UN * TT];
            [[unroll]] for (uint i = 0u; i < UN; ++i) {
                const uint c = c0 + i * WG;
                if (c >= chunks) continue;          // past the end: nothing loaded, nothing added
                [[unroll]] for (uint r = 0u; r < ROWS; ++r) raw[i * ROWS + r] = DP_RAW16_In(wrow[r]).v[c];
                [[unroll]] for (uint t = 0u; t < TT; ++t) xq[i * TT + t] = x_fetch(xrow[t], c * VW);
            }
            // ... then consume them in the order of UN = 1 (chunk by chunk), so every UN sums alike.
            [[unroll]] for (uint i = 0u; i < UN; ++i) {
                if (c0 + i * WG >= chunks) continue;
                [[unroll]] for (uint t = 0u; t < TT; ++t) {
                    float xv[VW];
                    x_unpack(xq[i * TT + t], xv);
                    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
                        float wv[VW];
                        w_unpack(raw[i * ROWS + r], wv);
                        float s = acc[r * TT + t];
                        [[unroll]] for (uint e = 0u; e < VW; ++e) s = fma(wv[e], xv[e], s);
                        acc[r * TT + t] = s;
                    }
                }
            }
        }
    } else {
        for (uint k = tid; k < K; k += WG) {
            float wv[ROWS];
            [[unroll]] for (uint r = 0u; r < ROWS; ++r) wv[r] = w_load(W_In(wrow[r]), k);
            [[unroll]] for (uint t = 0u; t < TT; ++t) {
                float xv = act_load(ACT_In(xrow[t]), k);
                [[unroll]] for (uint r = 0u; r < ROWS; ++r) acc[r * TT + t] = fma(wv[r], xv, acc[r * TT + t]);
            }
        }
    }

    [[unroll]] for (uint i = 0u; i < ROWS * TT; ++i) {
        float s = subgroupAdd(acc[i]);
        if (subgroupElect()) red[i * WG + gl_SubgroupID] = s;
    }
    barrier();
    for (uint i = tid; i < ROWS * TT; i += WG) {
        const uint r = i / TT, t = i % TT;
        const uint n = n0 + r, tok = t0 + t;
        if (n >= p.N || tok >= p.T) continue;
        float s = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; ++g) s += red[i * WG + g];
#ifdef DP_BIAS
        s += bias_load(n);
#endif
        out_store(p.y, tok * ys + n, s);
    }
}
