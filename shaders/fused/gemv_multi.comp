#version 460
// gemv_multi: several GEMVs of one input in one pass (fused projections), the decode hot spot.
//   default:  three linears of the same x:  y_i[t, n] = sum_k x[t, k] * W_i[n, k]  (+ b_i[n] with DP_BIAS)
//             for i = 0, 1, 2 (Q, K and V projections; N2 = 0 makes it two). Rows of the three weights are
//             one row space [0, N0 + N1 + N2); a workgroup's rows may straddle two weights.
//   DP_GLU:   gate and up projections with the activation:  y[t, n] = act(x[t] · Wg[n]) * (x[t] · Wu[n])
//             act = gelu_tanh (kind 0, GeGLU) | silu (kind 1, SwiGLU), the formulas of act/glu.comp; the
//             two dot products stay in f32 (the unfused path rounds them to the activation type first).
// Same scheme as matmul/gemv.comp: each workgroup owns ROWS rows and TT tokens, threads split K in 16-byte
// chunks (vector path when K and the row strides allow, element loads otherwise), partial sums reduced with
// subgroupAdd and across subgroups in shared memory. Every weight row is read once per TT tokens.
// Dispatch: nb = ceil(rows / ROWS) row blocks (rows = N0 + N1 + N2, or N with DP_GLU), tb = ceil(T / TT):
//   groups (gx, tb, gz), gx = min(nb, 65535), gz = ceil(nb / gx); row block = x + gx * z.
// Push (by name):
//   default: x ACT [T, x_stride]; w0, w1, w2 W [N_i, K]; y0, y1, y2 ACT [T, N_i]; b0, b1, b2 W [N_i] (DP_BIAS);
//            T, N0, N1, N2, K, x_stride (0 = K)
//   DP_GLU:  x; wg, wu W [N, K]; y ACT [T, N]; T, N, K, x_stride, kind
// Spec constants: WG (default 128), ROWS (rows per workgroup, default 2), TT (tokens per workgroup, <= 4),
//   UN (chunks in flight per thread, default 1, 1..4): as in matmul/gemv.comp, decode waits on memory
//   latency, one round trip per loop iteration; UN = u issues the loads (every weight row's, every token's
//   x) of u chunks c, c + WG, ... before any arithmetic, then consumes them in the UN = 1 order, so the sums
//   are bit for bit those of UN = 1. Chunks past the end load nothing and add nothing. Registers grow by
//   about UN * (4 * ROWS * NW + 4 * TT * XQ). The element path ignores UN.
//   Shared memory: 4 * NACC * WG bytes with NACC = ROWS * TT (x2 with DP_GLU).
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16, DP_BIAS (default mode), DP_GLU.
// DP_PRENORM=2 (without DP_BIAS, TT = 1; fusion norm_qkv, with DP_GLU norm_gate_up, lua/lib/doppler/fusions.lua): Gemma's
//   sandwich norm (norm_add_norm) that feeds the projections computed here, as gemv_q.comp's DP_PRENORM=2
//   does it in its staging (read that header): x is the residual stream, ra the branch output, nw1 / nw2 the
//   norm weights (DP_NW_F16 | DP_NW_BF16 | none: f32), r the new residual stream written by row block 0. The
//   workgroup reduces the sum of a^2 first; then each thread forms u = y * (off2 + nw2) for the chunks of x it
//   reads anyway, and the sums are scaled by 1 / rms(y) at the end (the sum of y^2 travels with the dot
//   products' reduction). Llama's form (=1) is not taken here (fusions.lua, norm_qkv, says why).
//   With DP_A_FIX64 ra is the fused MLP's fixed-point sum (dp_types.glsl), two values per 16-byte load.
//   With DP_GLU (fusion norm_gate_up on float weights) the same for gate+up: both sums are scaled by
//   1 / rms(y) before the activation.
// DP_UNROLL marks the loops whose trip counts are spec constants: on a GPU unrolled at pipeline creation
// (dp_common.glsl), their arrays stay in registers (H100 decode: attention_decode 0.441 -> 0.416 ms per
// token, docs/BENCHMARKS.md 11h).
#extension GL_EXT_control_flow_attributes : require
#include "dp_types.glsl"
#include "dp_act.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#ifdef DP_PRENORM
#ifdef DP_BIAS
#error "DP_PRENORM takes no biases (the push block holds 128 bytes)"
#endif
#if DP_PRENORM != 2
#error "gemv_multi takes DP_PRENORM=2 (norm_add_norm) only"
#endif
#endif

#if defined(DP_PRENORM) && !defined(DP_A_FIX64)
// With a an activation row (not the fused MLP's sum), the first chunks' weights are requested before the
// sum of a^2 and its barriers, so that their latency overlaps that reduction instead of following it (the
// loop below then loads from its second batch on), and that sum reads a by 16-byte chunks. On the H100
// (docs/BENCHMARKS.md 35d) Gemma 3 1B F16 decode 1.01x; with the fixed-point sum as a (Gemma's Q4_K_M
// q/k/v) the same made that decode 0.97x, so it keeps the element loads after the reduction.
#define DP_PN_EARLY
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG   = 128;
layout(constant_id = 1) const uint ROWS = 2;
layout(constant_id = 2) const uint TT   = 1;
layout(constant_id = 3) const uint UN   = 1;

#ifdef DP_GLU
#define NW 2u                 // dot products per (row, token): gate and up
#else
#define NW 1u
#endif
#define NACC (ROWS * TT * NW)

#include "dp_wchunk.glsl"

#ifdef DP_PRENORM
#include "dp_prenorm.glsl"
#endif

layout(push_constant) uniform Push {
    ACT_In  x;
#ifdef DP_GLU
    W_In    wg;
    W_In    wu;
    ACT_Out y;
#else
    W_In    w0;
    W_In    w1;
    W_In    w2;
    ACT_Out y0;
    ACT_Out y1;
    ACT_Out y2;
#ifdef DP_BIAS
    W_In    b0;
    W_In    b1;
    W_In    b2;
#endif
#endif
    uint T;
#ifdef DP_GLU
    uint N;
#else
    uint N0;
    uint N1;
    uint N2;
#endif
    uint K;
    uint x_stride;
#ifdef DP_GLU
    uint kind;
#endif
#ifdef DP_PRENORM
    A_In    ra;
    NW_In   nw1;
    NW_In   nw2;
    ACT_Out r;
    float   eps1;
    float   off1;
    float   eps2;
    float   off2;
#endif
} p;

// Partial sums of each subgroup: [NACC][WG] (WG bounds the number of subgroups for any subgroup size).
shared float red[NACC * WG];

// One chunk of x as loaded, unpacked only when used (matmul/gemv.comp's x_fetch / x_unpack): XQ uvec4,
// one of f16, VW / 4 of f32, or for f16 x with f32 weights (4 halves read element-wise) their f32 bits.
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
#elif defined(DP_ACT_F16)                           // 4 halves: element loads (x is small and cached)
    ACT_In xr = ACT_In(xrow);
    DP_UNROLL for (uint e = 0u; e < VW; ++e) c.q[0][e] = floatBitsToUint(act_load(xr, k0 + e));
#else                                               // f32: VW / 4 uvec4
    DP_RAW16_In xr = DP_RAW16_In(xrow);
    DP_UNROLL for (uint q = 0u; q < XQ; ++q) c.q[q] = xr.v[k0 / 4u + q];
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
    DP_UNROLL for (uint q = 0u; q < XQ; ++q) {
        const uvec4 u = c.q[q];
        v[4u * q + 0u] = uintBitsToFloat(u.x); v[4u * q + 1u] = uintBitsToFloat(u.y);
        v[4u * q + 2u] = uintBitsToFloat(u.z); v[4u * q + 3u] = uintBitsToFloat(u.w);
    }
#endif
}

#ifdef DP_PRENORM
// Element k of the GEMV's input before the scale 1 / rms(y): u = y * (off2 + w2) with y = x + rmsnorm(a; w1),
// rounded as the unfused kernels store them; y is stored by the writer and added to ss.
float pn_u(float xk, float ak, float w1, float w2, uint k, float inv1, bool writer, inout float ss)
{
    const float an = act_round(ak * inv1 * (p.off1 + w1));
    const float y = act_round(xk + an);
    if (writer) act_store(p.r, k, y);
    ss += y * y;
    return y * (p.off2 + w2);
}
#endif

#ifdef DP_PN_EARLY
// a[k0 .. k0 + VW) of an activation row (laid out as x: contiguous, 16-byte aligned on the vector path).
void pn_a_chunk(uint64_t arow, uint k0, out float av[VW]) { x_unpack(x_fetch(arow, k0), av); }
#endif

#ifndef DP_GLU
// Row n of the joint row space -> which weight (0..2) and the row inside it.
uint which(uint n, out uint local_row)
{
    if (n < p.N0) { local_row = n; return 0u; }
    if (n < p.N0 + p.N1) { local_row = n - p.N0; return 1u; }
    local_row = n - p.N0 - p.N1;
    return 2u;
}
#endif

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint block = gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.z;
    const uint n0 = block * ROWS;
    const uint t0 = gl_WorkGroupID.y * TT;
#ifdef DP_GLU
    const uint NR = p.N;
#else
    const uint NR = p.N0 + p.N1 + p.N2;
#endif
    if (n0 >= NR || t0 >= p.T) return;             // uniform over the workgroup

    const uint K  = p.K;
    const uint xs = p.x_stride != 0u ? p.x_stride : K;

    // Row base addresses (64-bit); rows and tokens past the end are clamped (their sums are dropped).
    uint64_t wrow[ROWS * NW];
    bool aligned = true;
    DP_UNROLL for (uint r = 0u; r < ROWS; ++r) {
        const uint n = min(n0 + r, NR - 1u);
#ifdef DP_GLU
        wrow[r * 2u]      = uint64_t(p.wg) + uint64_t(n) * uint64_t(K) * W_BYTES;
        wrow[r * 2u + 1u] = uint64_t(p.wu) + uint64_t(n) * uint64_t(K) * W_BYTES;
#else
        uint lr;
        const uint i = which(n, lr);
        const uint64_t base = i == 0u ? uint64_t(p.w0) : (i == 1u ? uint64_t(p.w1) : uint64_t(p.w2));
        wrow[r] = base + uint64_t(lr) * uint64_t(K) * W_BYTES;
#endif
    }
    DP_UNROLL for (uint r = 0u; r < ROWS * NW; ++r) aligned = aligned && (wrow[r] & 15ul) == 0ul;
    uint64_t xrow[TT];
    DP_UNROLL for (uint t = 0u; t < TT; ++t)
        xrow[t] = uint64_t(p.x) + uint64_t(min(t0 + t, p.T - 1u)) * uint64_t(xs) * ACT_BYTES;

    float acc[NACC];
    DP_UNROLL for (uint i = 0u; i < NACC; ++i) acc[i] = 0.0;

    const bool x_vec_ok =
#if defined(DP_ACT_F16) && defined(DP_W_F32)
        true;
#else
        (uint64_t(p.x) & 15ul) == 0ul && ((xs * ACT_BYTES) & 15u) == 0u;
#endif
    // The row addresses depend on the workgroup, so the test is per workgroup (still uniform within it).
    bool vec = (K % VW) == 0u && ((K * W_BYTES) & 15u) == 0u && aligned && x_vec_ok;
    // Issue the loads of UN chunks (c0, c0 + WG, ...) into raw and xq before using any.
#define DP_LOAD_CHUNKS(C0) \
    DP_UNROLL for (uint i = 0u; i < UN; ++i) { \
        const uint c = (C0) + i * WG; \
        if (c >= chunks) continue;          /* past the end: nothing loaded, nothing added */ \
        DP_UNROLL for (uint r = 0u; r < ROWS * NW; ++r) raw[i * ROWS * NW + r] = DP_RAW16_In(wrow[r]).v[c]; \
        DP_UNROLL for (uint t = 0u; t < TT; ++t) xq[i * TT + t] = x_fetch(xrow[t], c * VW); \
    }
#ifdef DP_PRENORM
    // a is read as x is: 16-byte chunks on the vector path
    vec = vec && (uint64_t(p.ra) & 15ul) == 0ul;
    // token 0 only (TT = 1): a's row, the norm of a (DP_PRENORM=2), and the sum of y^2 of this thread's elements
    const uint64_t arow = uint64_t(p.ra);
    const bool writer = block == 0u;
    float inv1, pss = 0.0;
#ifdef DP_PN_EARLY
    const uint chunks = K / VW;
    uvec4 raw[UN * ROWS * NW];
    xchunk xq[UN * TT];
    if (vec) { DP_LOAD_CHUNKS(tid) }
#endif
    {
        float ss = 0.0;
#ifdef DP_PN_EARLY
        if (vec) {
            for (uint c = tid; c < chunks; c += WG) {
                float av[VW];
                pn_a_chunk(arow, c * VW, av);
                DP_UNROLL for (uint e = 0u; e < VW; ++e) ss += av[e] * av[e];
            }
        } else
#endif
        {
            for (uint k = tid; k < K; k += WG) { const float v = a_load(A_In(arow), k); ss += v * v; }
        }
        inv1 = inversesqrt(pn_workgroup_sum(ss) / float(K) + p.eps1);
    }
#endif

    if (vec) {
#ifndef DP_PN_EARLY
        const uint chunks = K / VW;
#endif
        for (uint c0 = tid; c0 < chunks; c0 += UN * WG) {
#ifdef DP_PN_EARLY
            if (c0 != tid) { DP_LOAD_CHUNKS(c0) }
#else
            uvec4 raw[UN * ROWS * NW];
            xchunk xq[UN * TT];
            DP_LOAD_CHUNKS(c0)
#endif
            // ... then consume them in the order of UN = 1 (chunk by chunk), so every UN sums alike.
            DP_UNROLL for (uint i = 0u; i < UN; ++i) {
                if (c0 + i * WG >= chunks) continue;
                DP_UNROLL for (uint t = 0u; t < TT; ++t) {
                    float xv[VW];
                    x_unpack(xq[i * TT + t], xv);
#ifdef DP_PRENORM
                    {
                        const uint k0 = (c0 + i * WG) * VW;
                        float av[VW], g1[VW], g2[VW];
#ifdef DP_A_FIX64
                        AFix64x2In a2 = AFix64x2In(arow + uint64_t(k0) * 8ul);
                        DP_UNROLL for (uint e = 0u; e < VW / 2u; ++e) {
                            const i64vec2 q = a2.v[e];
                            av[2u * e] = a_fix(q.x);
                            av[2u * e + 1u] = a_fix(q.y);
                        }
#else
                        pn_a_chunk(arow, k0, av);
#endif
                        pn_nw(p.nw2, k0, g2);
                        pn_nw(p.nw1, k0, g1);
                        DP_UNROLL for (uint e = 0u; e < VW; ++e)
                            xv[e] = pn_u(xv[e], av[e], g1[e], g2[e], k0 + e, inv1, writer, pss);
                    }
#endif
                    DP_UNROLL for (uint r = 0u; r < ROWS * NW; ++r) {
                        float wv[VW];
                        w_unpack(raw[i * ROWS * NW + r], wv);
                        float s = acc[r * TT + t];
                        DP_UNROLL for (uint e = 0u; e < VW; ++e) s = fma(wv[e], xv[e], s);
                        acc[r * TT + t] = s;
                    }
                }
            }
        }
#undef DP_LOAD_CHUNKS
    } else {
        for (uint k = tid; k < K; k += WG) {
            float wv[ROWS * NW];
            DP_UNROLL for (uint r = 0u; r < ROWS * NW; ++r) wv[r] = w_load(W_In(wrow[r]), k);
            DP_UNROLL for (uint t = 0u; t < TT; ++t) {
                float xv = act_load(ACT_In(xrow[t]), k);
#ifdef DP_PRENORM
                xv = pn_u(xv, a_load(A_In(arow), k), nw_load(p.nw1, k), nw_load(p.nw2, k), k, inv1, writer, pss);
#endif
                DP_UNROLL for (uint r = 0u; r < ROWS * NW; ++r) acc[r * TT + t] = fma(wv[r], xv, acc[r * TT + t]);
            }
        }
    }

    DP_UNROLL for (uint i = 0u; i < NACC; ++i) {
        float s = subgroupAdd(acc[i]);
        if (subgroupElect()) red[i * WG + gl_SubgroupID] = s;
    }
#ifdef DP_PRENORM
    {
        const float s = subgroupAdd(pss);
        if (subgroupElect()) pn_ss[gl_SubgroupID] = s;
    }
#endif
    barrier();
#ifdef DP_PRENORM
    float inv2 = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; ++g) inv2 += pn_ss[g];
    inv2 = inversesqrt(inv2 / float(K) + p.eps2);
#endif
    for (uint i = tid; i < ROWS * TT; i += WG) {
        const uint r = i / TT, t = i % TT;
        const uint n = n0 + r, tok = t0 + t;
        if (n >= NR || tok >= p.T) continue;
#ifdef DP_GLU
        float g = 0.0, u = 0.0;
        for (uint s = 0u; s < gl_NumSubgroups; ++s) {
            g += red[((r * 2u) * TT + t) * WG + s];
            u += red[((r * 2u + 1u) * TT + t) * WG + s];
        }
#ifdef DP_PRENORM
        g *= inv2;                                 // the dot products with h = u / rms(y)
        u *= inv2;
#endif
        act_store(p.y, tok * p.N + n, dp_glu_act(g, p.kind) * u);
#else
        float s = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; ++g) s += red[i * WG + g];
#ifdef DP_PRENORM
        s *= inv2;                                 // h = u / rms(y)
#endif
        uint lr;
        const uint w = which(n, lr);
#ifdef DP_BIAS
        s += w_load(w == 0u ? p.b0 : (w == 1u ? p.b1 : p.b2), lr);
#endif
        if (w == 0u)      act_store(p.y0, tok * p.N0 + lr, s);
        else if (w == 1u) act_store(p.y1, tok * p.N1 + lr, s);
        else              act_store(p.y2, tok * p.N2 + lr, s);
#endif
    }
}
