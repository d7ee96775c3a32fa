#version 460
// glu_down_float: a layer's MLP in one dispatch for float gate and up weights, one token (fusion glu_down):
//   h[n] = act(x · Wg[n]) * (x · Wu[n]),   y += D h   (D [K, N] by its f16 columns)
// as matmul/gemv_q.comp's DP_DOWN does where gate and up are quantised blocks; read that header for what
// both share: y is a 64-bit fixed-point sum yd in units of 2^-32 that the readers take with DP_A_FIX64 (each
// workgroup's share truncated to the unit, so the sum does not depend on the order the workgroups add in),
// the dispatch zeroes zd (the sum of the fused MLP before it), D comes as its f16 columns in blocks of 8
// ([N / 8][K][8], one 16-byte load per block and output), and h is rounded to ACT by integer operations
// (act_round_int), as the unfused path stores it. Without this kernel a float model's MLP is two dependent
// dispatches: gate+up (fused/gemv_multi.comp, DP_GLU) and down (matmul/gemv.comp).
// Scheme: the workgroup stages x (K values) in shared memory as f32, coalesced (thread i takes values i,
// i + WG, ...), in VW / 4 planes of vec4 (plane q holds values 4q .. 4q + 3 of each 16-byte chunk of weights)
// so that neighbouring lanes read neighbouring 16 bytes. It owns ROWS rows of h with TPR = WG / ROWS
// consecutive lanes per row; lane l takes its row's 16-byte chunks (VW weights) l, l + TPR, ... of gate and
// up, UN chunks per batch (their loads, then their arithmetic). A row's partial sums are reduced by shuffles
// within clusters of min(TPR, subgroup size) lanes, then in shared memory; the workgroup then multiplies its
// ROWS values of h by their columns of D (lanes over the K outputs) and adds to yd.
// Why: on the H100 the probe (recipes/bench/glu_down.lua --gate f16 --down f16) took 21.9 us per Gemma 3 1B
// layer and 39.1 at Llama 3.2 1B's shape where the engine's two kernels take 25.4 and 42.9 (docs/BENCHMARKS.md
// 36a). In the engine this kernel took 26.2 and 43.9 us against the two kernels' 25.9 and 42.1 (36c), so the
// rule takes it only with hint glu_down=on (lower.glu_down_float_ok).
// DP_PRENORM=2 (fusion norm_gate_up, then glu_down; Gemma's norm_add_norm): x is the residual stream, and the
//   staging forms u = y * (off2 + nw2) with y = x + rmsnorm(a; nw1, eps1, off1), the normed a and y rounded to
//   ACT as the unfused kernels store them (by integer operations, act_round_int: with act_round the H100's sums
//   differed from the chain of the stored values by a slope of 9e-5, 36b), row block 0 storing y to r (the new
//   residual stream); the dot products are scaled by 1 / rms(y; eps2) before the activation, as
//   fused/gemv_multi.comp's DP_PRENORM=2.
//   With DP_A_FIX64 a is a fused MLP's sum (dp_types.glsl).
// Dispatch: (N / ROWS, 1, 1), N / ROWS <= 65535.
// Push: x ACT [K]; wg, wu W [N, K] (rows K apart); wd f16 [N / 8][K][8]; yd, zd int64 [K]; N; kind (0 gelu_tanh,
//   1 silu); with DP_PRENORM ra A [K], nw1, nw2 NW [K], r ACT [K] (not x or ra), eps1, off1, eps2, off2.
// Spec: WG (a multiple of ROWS), ROWS (a multiple of 8 dividing N; WG / ROWS a power of two), UN (chunks per
//   lane per batch, 1..4), KC (K, a multiple of 8).
// Defines: DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16 (gate and up), DP_PRENORM=2 with DP_NW_F16 | DP_NW_BF16
//   (none: f32 norm weights) and DP_A_FIX64. Needs int64 atomics and a subgroup of 8 or more.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_atomic_int64 : require
#include "dp_types.glsl"
#include "dp_act.glsl"

#if defined(DP_PRENORM) && DP_PRENORM != 2
#error "glu_down_float takes DP_PRENORM=2 (norm_add_norm) only"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG   = 512;
layout(constant_id = 1) const uint ROWS = 32;
layout(constant_id = 2) const uint UN   = 2;
layout(constant_id = 3) const uint KC   = 1152;

#include "dp_wchunk.glsl"

#ifdef DP_PRENORM
#include "dp_prenorm.glsl"
#endif

layout(push_constant) uniform Push {
    ACT_In  x;
    W_In    wg;
    W_In    wu;
    V4In    wd;
    I64Buf  yd;
    I64Buf  zd;
    uint    N;
    uint    kind;
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

const uint TPR = WG / ROWS;                      // lanes per row of h
const uint NC  = KC / VW;                        // 16-byte chunks per weight row
const uint EPT = (KC + WG - 1u) / WG;            // staged values per thread

shared vec4 xs4[KC / 4u];                        // x: plane q of chunk c at xs4[q * NC + c]
shared float red[2u * WG];                       // [gate, up][cluster]: partial sums of the rows
shared float hs[ROWS];                           // this workgroup's rows of h

// Stores value k of x to its plane.
void stage(uint k, float v) { xs4[(k % VW) / 4u * NC + k / VW][k % 4u] = v; }

// Chunk c of the weight row at `row`: one 16-byte load, or (a row not 16-byte aligned: a view) its
// elements' bits gathered into the same uvec4.
uvec4 w_chunk(uint64_t row, uint c, bool vec)
{
    if (vec) return DP_RAW16_In(row).v[c];
    W_In w = W_In(row);
    uvec4 u;
#if defined(DP_W_F32)
    DP_UNROLL for (uint e = 0u; e < 4u; ++e) u[e] = floatBitsToUint(w_load(w, 4u * c + e));
#elif defined(DP_W_F16)
    DP_UNROLL for (uint e = 0u; e < 4u; ++e)
        u[e] = packHalf2x16(vec2(w_load(w, 8u * c + 2u * e), w_load(w, 8u * c + 2u * e + 1u)));
#else
    DP_UNROLL for (uint e = 0u; e < 4u; ++e) u[e] = uint(w.v[8u * c + 2u * e]) | (uint(w.v[8u * c + 2u * e + 1u]) << 16);
#endif
    return u;
}


void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint n0 = gl_WorkGroupID.x * ROWS;
    if (n0 >= p.N) return;                       // uniform over the workgroup
    const uint r = tid / TPR, lane = tid % TPR;
    const uint n = n0 + r;                       // < N: ROWS divides N
    const uint64_t grow = uint64_t(p.wg) + uint64_t(n) * uint64_t(KC) * W_BYTES;
    const uint64_t urow = uint64_t(p.wu) + uint64_t(n) * uint64_t(KC) * W_BYTES;
    const bool vec = ((grow | urow) & 15ul) == 0ul;   // the row bases (KC * W_BYTES is a multiple of 16)

    // Stage x (or with DP_PRENORM u = y * (off2 + nw2)); coalesced element loads from L2.
#ifdef DP_PRENORM
    float inv2;
    {
        float av[EPT];
        float ss = 0.0;
        DP_UNROLL for (uint j = 0u; j < EPT; ++j) {
            const uint k = tid + j * WG;
            av[j] = k < KC ? a_load(p.ra, k) : 0.0;
            ss += av[j] * av[j];
        }
        const float inv1 = inversesqrt(pn_workgroup_sum(ss) / float(KC) + p.eps1);
        float ss2 = 0.0;
        DP_UNROLL for (uint j = 0u; j < EPT; ++j) {
            const uint k = tid + j * WG;
            if (k >= KC) continue;
            const float an = act_round_int(av[j] * inv1 * (p.off1 + nw_load(p.nw1, k)));
            const float y = act_round_int(act_load(p.x, k) + an);
            if (gl_WorkGroupID.x == 0u) act_store(p.r, k, y);
            ss2 += y * y;
            stage(k, y * (p.off2 + nw_load(p.nw2, k)));
        }
        const float s = subgroupAdd(ss2);
        if (subgroupElect()) pn_ss[gl_SubgroupID] = s;
        barrier();
        float t = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; ++g) t += pn_ss[g];
        inv2 = inversesqrt(t / float(KC) + p.eps2);
    }
#else
    DP_UNROLL for (uint j = 0u; j < EPT; ++j) {
        const uint k = tid + j * WG;
        if (k < KC) stage(k, act_load(p.x, k));
    }
    barrier();
#endif

    // Gate and up of row n over this lane's chunks: the loads of UN chunks, then their arithmetic. Why not
    // requested before the staging, or the next batch before the current one is used: either holds more
    // registers across the loop, and with more than 64 per invocation only one workgroup of 512 fits an SM
    // of the H100 (216 workgroups for Gemma 3 1B then run in two waves): such a version took 31.3 us per Gemma
    // 3 1B layer, this one 26.2 (docs/BENCHMARKS.md 36b, 36c).
    float g = 0.0, u = 0.0;
    for (uint c0 = lane; c0 < NC; c0 += UN * TPR) {
        uvec4 rg[UN], ru[UN];
        DP_UNROLL for (uint i = 0u; i < UN; ++i) {
            const uint c = min(c0 + i * TPR, NC - 1u);
            rg[i] = w_chunk(grow, c, vec);
            ru[i] = w_chunk(urow, c, vec);
        }
        DP_UNROLL for (uint i = 0u; i < UN; ++i) {
            const uint c = c0 + i * TPR;
            if (c >= NC) break;
            float xv[VW], gv[VW], uv[VW];
            DP_UNROLL for (uint q = 0u; q < VW / 4u; ++q) {
                const vec4 x4 = xs4[q * NC + c];
                DP_UNROLL for (uint e = 0u; e < 4u; ++e) xv[4u * q + e] = x4[e];
            }
            w_unpack(rg[i], gv);
            w_unpack(ru[i], uv);
            DP_UNROLL for (uint e = 0u; e < VW; ++e) { g = fma(gv[e], xv[e], g); u = fma(uv[e], xv[e], u); }
        }
    }

    // The row's sums: shuffles within clusters of CW lanes (a row's lanes are consecutive invocations), then
    // the row's clusters in shared memory.
    const uint CW = min(TPR, gl_SubgroupSize);
    for (uint off = CW / 2u; off > 0u; off /= 2u) {
        g += subgroupShuffleXor(g, off);
        u += subgroupShuffleXor(u, off);
    }
    if (tid % CW == 0u) { red[tid / CW] = g; red[WG + tid / CW] = u; }
    barrier();
    if (tid < ROWS) {
        const uint per_row = TPR / CW;
        float sg = 0.0, su = 0.0;
        for (uint c = 0u; c < per_row; ++c) { sg += red[tid * per_row + c]; su += red[WG + tid * per_row + c]; }
#ifdef DP_PRENORM
        sg *= inv2;                              // the dot products with h = u / rms(y)
        su *= inv2;
#endif
        hs[tid] = act_round_int(dp_glu_act(sg, p.kind) * su);
    }
    barrier();

    // y[o] += sum over this workgroup's rows j of D[o, n0 + j] * h[n0 + j], for o = tid, tid + WG, ...
    for (uint o = tid; o < KC; o += WG) {
        float v = 0.0;
        DP_UNROLL for (uint c = 0u; c < ROWS / 8u; ++c) {
            const uvec4 q = p.wd.v[(n0 / 8u + c) * KC + o];
            DP_UNROLL for (uint e = 0u; e < 4u; ++e) {
                const vec2 d = unpackHalf2x16(q[e]);
                v += d.x * hs[c * 8u + 2u * e] + d.y * hs[c * 8u + 2u * e + 1u];
            }
        }
        atomicAdd(p.yd.v[o], int64_t(v * 4294967296.0));
    }
    const uint nblk = p.N / ROWS;
    for (uint i = gl_WorkGroupID.x * WG + tid; i < KC; i += nblk * WG) p.zd.v[i] = 0l;
}
