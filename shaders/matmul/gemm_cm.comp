#version 460
// gemm_cm: y[t, n] = sum_k x[t, k] * W[n, k]  (+ bias[n] with DP_BIAS) on the GPU's matrix units   prefill
// Same semantics as gemm.comp, for f16 activations and f16 weights (the default on an H100, where quantised
// weights get f16 copies: q_matmul=dequant_f16). Why: a prefill linear is a real matrix product (T tokens
// share each W row), and on NVIDIA hardware the tensor cores multiply f16 tiles far faster than FMAs can; the
// tiled FMA kernel reaches ~7 TFLOP/s on the H100 (docs/BENCHMARKS.md). VK_NV_cooperative_matrix exposes them
// as subgroup-wide matrices (fcoopmatNV): a product of an LM x LK tile of x and an LK x LN tile of Wᵀ is added
// to an LM x LN f32 accumulator in one instruction sequence. Products of f16 values are exact in f32, so the
// result differs from gemm.comp's only by the order of the f32 sums.
// Schedule: a workgroup owns a BM x BN tile of y (BM tokens x BN outputs) and steps over K in slices of BK.
// Each slice of x ([BM][BK]) and of W ([BN][BK]; W is [N, K], so a row of W is a column of Wᵀ: loaded
// column-major) is copied to shared memory with 16-byte loads, each row padded by 16 bytes so that the
// subgroups' tile loads do not collide on banks. The next slice's global loads are issued before the current
// slice's matrix products (held in registers), so memory latency hides behind the math. The workgroup's
// SGM x SGN subgroups each own a (BM / SGM) x (BN / SGN) sub-tile: CR x CC accumulators. Edges: rows past T
// or N and k past K load zeros; the epilogue stores each accumulator to a per-subgroup f32 staging tile in
// shared memory and writes the in-range elements (plus bias, converted to the output type).
//
// DP_SPLITK (lower/linear.lua, where the tiles alone cannot fill the GPU: a K loop of slices is a chain of memory
// round trips, ~1.7 us each on the H100, so few workgroups with long K loops leave it idle): the grid's z
// splits K into parts of k_split elements (whole slices); each part's f32 tile goes to `part`, and the last
// workgroup of a tile (counter) adds the parts in order.
// DP_GLU (the gate_up fusion in prefill): two weights, gate w and up wu, of the same shape; the workgroup keeps
// both products of its tile (their slices share x's) and writes y = act(x · Wgᵀ) * (x · Wuᵀ) with act =
// dp_glu_act(kind) (0 gelu_tanh, 1 silu): the GLU MLP's activation in the epilogue, so the gate and up
// outputs never go to memory and the glu kernel's pass is gone. Both products stay f32 until the output
// (the unfused path rounds each to the activation type first). Not with DP_SPLITK or DP_BIAS.
// DP_MULTI (the qkv fusion in prefill): two or three linears of one x, weights w, w1, w2 into y, y1, y2 (N, N1, N2
// outputs; N2 = 0 for two): one grid over the concatenated columns, each column tile reading one weight (N and
// N1 are multiples of BN). One dispatch instead of three, and the small k / v projections share the grid.
// The fixed-count loops (accumulator tiles, slice steps, copies) carry DP_UNROLL: their bounds are spec
// constants, and unrolled they keep the accumulators in registers (H100: 512-token prefill 26.6k -> 28.6k tok/s).
// Needs: K % 8 == 0 (whole 16-byte vectors of a row), subgroup size 32 (WG = 32 * SGM * SGN), a device with
// VK_NV_cooperative_matrix and an f16 x f16 -> f32 shape DP_CM_M x DP_CM_N x DP_CM_K (caps.coopmat_shape);
// lower/linear.lua checks all of it and falls back to gemm.comp / gemv.comp otherwise. Lavapipe has no cooperative
// matrices: this kernel's test (tests/lua/test_gemm_cm.lua) runs where the device has them (the H100).
//
// Dispatch: (ceil(N / BN), ceil(T / BM), splits) (splits = 1 without DP_SPLITK).
// Push (by name):
//   x         f16  [T, x_stride]      activations (token-major)
//   w         f16  [N, K]             weights
//   y         ACT  [T, y_stride]      output (f32 with DP_OUT_F32)
//   bias      f16  [N]                only with DP_BIAS (f32 with DP_BIAS_F32: a quantised model's bias)
//   T, N, K   uint                    shape
//   x_stride  uint                    elements between tokens of x; 0 = K
//   y_stride  uint                    elements between tokens of y; 0 = N
//   part      f32 [tiles * splits * BM * BN]   DP_SPLITK: partial tiles (tile = y * groups.x + x)
//   counter   u32 [tiles]             DP_SPLITK: zero between dispatches (the kernel resets what it used)
//   k_split   uint                    DP_SPLITK: K elements per split, a multiple of BK
// Spec constants (by name): WG (local_size_x_id = 0) = 32 * SGM * SGN; BM, BN tile (multiples of SGM * DP_CM_M
//   and SGN * DP_CM_N); BK K slice (a multiple of DP_CM_K and of 8); SGM, SGN subgroups along m and n.
//   wu        f16  [N, K]             DP_GLU: the up projection (w is the gate)
//   w1, w2    f16  [N1 | N2, K]       DP_MULTI: the second and third weights; y1, y2 their outputs; N1, N2
//                                     (dispatch: ceil((N + N1 + N2) / BN) column tiles)
//   kind      uint                    DP_GLU: the gate activation, 0 gelu_tanh, 1 silu
//   Shared memory: 2 * (BM + BN) * (BK + 8) + 4 * (WG / 32) * DP_CM_M * DP_CM_N bytes (64 x 64 x 32: 14 KiB);
//   with DP_GLU 2 * (BM + 2 BN) * (BK + 8) + 8 * (WG / 32) * DP_CM_M * DP_CM_N.
// Defines: DP_ACT_F16 and DP_W_F16 (required), DP_CM_M / DP_CM_N / DP_CM_K, DP_OUT_F32, DP_BIAS,
//   DP_BIAS_F32, DP_GLU, DP_MULTI.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_control_flow_attributes : require
// f16 x f16 is the only product this kernel makes (lower/linear.lua passes both defines); defining them here too lets
// `doppler shaders --precompile` build it without defines, with the 16 x 16 x 16 shape the H100 reports.
#ifndef DP_ACT_F16
#define DP_ACT_F16
#endif
#ifndef DP_W_F16
#define DP_W_F16
#endif
#ifndef DP_CM_M
#define DP_CM_M 16
#define DP_CM_N 16
#define DP_CM_K 16
#endif
#include "dp_types.glsl"
#ifdef DP_GLU
#include "dp_act.glsl"
#if defined(DP_SPLITK) || defined(DP_BIAS) || defined(DP_MULTI)
#error "gemm_cm: DP_GLU takes neither DP_SPLITK, DP_BIAS nor DP_MULTI"
#endif
#endif
#if defined(DP_MULTI) && defined(DP_BIAS)
#error "gemm_cm: DP_MULTI takes no DP_BIAS"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG  = 128;
layout(constant_id = 1) const uint BM  = 64;
layout(constant_id = 2) const uint BN  = 64;
layout(constant_id = 3) const uint BK  = 32;
layout(constant_id = 4) const uint SGM = 2;
layout(constant_id = 5) const uint SGN = 2;

#ifdef DP_SPLITK
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer F32Coh { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer U32Coh { uint v[]; };
#endif

layout(push_constant) uniform Push {
    F16In   x;
    F16In   w;
    OUT_Out y;
#if defined(DP_BIAS) && defined(DP_BIAS_F32)
    F32In   bias;
#elif defined(DP_BIAS)
    F16In   bias;
#endif
#ifdef DP_SPLITK
    F32Coh  part;
    U32Coh  counter;
    uint    k_split;
#endif
#ifdef DP_GLU
    F16In   wu;
    uint    kind;
#endif
#ifdef DP_MULTI
    F16In   w1;
    F16In   w2;
    OUT_Out y1;
    OUT_Out y2;
    uint    N1;
    uint    N2;
#endif
    uint T;
    uint N;
    uint K;
    uint x_stride;
    uint y_stride;
} p;

const uint LM = DP_CM_M, LN = DP_CM_N, LK = DP_CM_K;
const uint VR  = BK / 8u;              // 16-byte vectors per tile row
const uint SR  = VR + 1u;              // a padded shared row, in vectors
const uint CR  = BM / SGM / LM;        // accumulator tiles per subgroup along m
const uint CC  = BN / SGN / LN;        // ... along n
const uint LA  = (BM * VR + WG - 1u) / WG;   // x vectors each thread copies per slice
const uint LB  = (BN * VR + WG - 1u) / WG;   // W vectors each thread copies per slice

shared uvec4 As[BM * SR];              // [BM][SR]: x slice, row-major (token, k)
shared uvec4 Bs[BN * SR];              // [BN][SR]: W slice = Wᵀ slice column-major
#ifdef DP_GLU
shared uvec4 Bu[BN * SR];              // [BN][SR]: the up weight's slice
const uint NSTAGE = 2u;                // staging tiles per subgroup: gate and up
#else
const uint NSTAGE = 1u;
#endif
shared float Cs[(WG / 32u) * NSTAGE * LM * LN];  // staging tiles per subgroup (epilogue)
shared bool last_s;                    // DP_SPLITK: this workgroup sums the tile's partials

// 8 consecutive halves of row `row` of a [rows, stride] f16 matrix from element k, as one 16-byte vector;
// zeros where the row is out of range. `vec`: base and stride allow a single aligned 16-byte load.
uvec4 load8(uint64_t base, uint row, uint rows, uint stride, uint k, bool vec)
{
    if (row >= rows) return uvec4(0u);
    const uint64_t a = base + (uint64_t(row) * uint64_t(stride) + uint64_t(k)) * 2ul;
    if (vec) return DP_RAW16_In(a).v[0];
    F16In e = F16In(a);
    uvec4 r;
    for (uint i = 0u; i < 4u; ++i)
        r[i] = uint(float16BitsToUint16(e.v[2u * i])) | (uint(float16BitsToUint16(e.v[2u * i + 1u])) << 16);
    return r;
}

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = tid / 32u, lane = tid % 32u;     // subgroup size 32 (checked by lower/linear.lua)
    const uint sm = sg / SGN, sn = sg % SGN;         // this subgroup's sub-tile
    uint n0 = gl_WorkGroupID.x * BN;
    const uint m0 = gl_WorkGroupID.y * BM;
    uint N = p.N;
    const uint T = p.T, K = p.K;
    uint64_t wa = uint64_t(p.w);
    OUT_Out yo = p.y;
#ifdef DP_MULTI
    // the weight (and output) this column tile belongs to: lower/linear.lua keeps N and N1 multiples of BN
    if (n0 >= N) {
        n0 -= N; wa = uint64_t(p.w1); yo = p.y1; N = p.N1;
        if (n0 >= N) { n0 -= N; wa = uint64_t(p.w2); yo = p.y2; N = p.N2; }
    }
#endif
    const uint xs = p.x_stride != 0u ? p.x_stride : K;
    const uint ys = p.y_stride != 0u ? p.y_stride : N;
    const bool xvec = (uint64_t(p.x) & 15ul) == 0ul && (xs & 7u) == 0u;
    const bool wvec = (wa & 15ul) == 0ul;  // K % 8 == 0
#ifdef DP_SPLITK
    // this workgroup's part of K: [kb, ke), whole slices
    const uint kb = gl_WorkGroupID.z * p.k_split, ke = min(K, kb + p.k_split);
#else
    const uint kb = 0u, ke = K;
#endif

    fcoopmatNV<32, gl_ScopeSubgroup, LM, LN> acc[CR][CC];
    DP_UNROLL for (uint i = 0u; i < CR; ++i)
        DP_UNROLL for (uint j = 0u; j < CC; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>(0.0);
#ifdef DP_GLU
    fcoopmatNV<32, gl_ScopeSubgroup, LM, LN> accu[CR][CC];
    DP_UNROLL for (uint i = 0u; i < CR; ++i)
        DP_UNROLL for (uint j = 0u; j < CC; ++j) accu[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>(0.0);
    const bool uvec = (uint64_t(p.wu) & 15ul) == 0ul;
#endif

    // The first slice's vectors, in registers (K may be shorter than one slice).
    uvec4 ra[LA], rb[LB];
    DP_UNROLL for (uint i = 0u; i < LA; ++i) {
        const uint e = tid + i * WG, r = e / VR, c = e % VR;
        ra[i] = (e < BM * VR && kb + c * 8u < ke) ? load8(uint64_t(p.x), m0 + r, T, xs, kb + c * 8u, xvec) : uvec4(0u);
    }
    DP_UNROLL for (uint i = 0u; i < LB; ++i) {
        const uint e = tid + i * WG, r = e / VR, c = e % VR;
        rb[i] = (e < BN * VR && kb + c * 8u < ke) ? load8(wa, n0 + r, N, K, kb + c * 8u, wvec) : uvec4(0u);
    }
#ifdef DP_GLU
    uvec4 ru[LB];
    DP_UNROLL for (uint i = 0u; i < LB; ++i) {
        const uint e = tid + i * WG, r = e / VR, c = e % VR;
        ru[i] = (e < BN * VR && kb + c * 8u < ke) ? load8(uint64_t(p.wu), n0 + r, N, K, kb + c * 8u, uvec) : uvec4(0u);
    }
#endif

    for (uint k0 = kb; k0 < ke; k0 += BK) {
        barrier();                                   // the previous slice's tiles are consumed
        DP_UNROLL for (uint i = 0u; i < LA; ++i) {
            const uint e = tid + i * WG;
            if (e < BM * VR) As[(e / VR) * SR + e % VR] = ra[i];
        }
        DP_UNROLL for (uint i = 0u; i < LB; ++i) {
            const uint e = tid + i * WG;
            if (e < BN * VR) Bs[(e / VR) * SR + e % VR] = rb[i];
#ifdef DP_GLU
            if (e < BN * VR) Bu[(e / VR) * SR + e % VR] = ru[i];
#endif
        }
        barrier();
        // Issue the next slice's loads now: they travel while the matrix units work on this one.
        const uint k1 = k0 + BK;
        if (k1 < ke) {
            DP_UNROLL for (uint i = 0u; i < LA; ++i) {
                const uint e = tid + i * WG, r = e / VR, c = e % VR;
                const uint k = k1 + c * 8u;
                ra[i] = (e < BM * VR && k < ke) ? load8(uint64_t(p.x), m0 + r, T, xs, k, xvec) : uvec4(0u);
            }
            DP_UNROLL for (uint i = 0u; i < LB; ++i) {
                const uint e = tid + i * WG, r = e / VR, c = e % VR;
                const uint k = k1 + c * 8u;
                rb[i] = (e < BN * VR && k < ke) ? load8(wa, n0 + r, N, K, k, wvec) : uvec4(0u);
#ifdef DP_GLU
                ru[i] = (e < BN * VR && k < ke) ? load8(uint64_t(p.wu), n0 + r, N, K, k, uvec) : uvec4(0u);
#endif
            }
        }
        DP_UNROLL for (uint kk = 0u; kk < BK; kk += LK) {
            fcoopmatNV<16, gl_ScopeSubgroup, LM, LK> a[CR];
            DP_UNROLL for (uint i = 0u; i < CR; ++i)
                coopMatLoadNV(a[i], As, (sm * CR * LM + i * LM) * SR + kk / 8u, SR, false);
            DP_UNROLL for (uint j = 0u; j < CC; ++j) {
                fcoopmatNV<16, gl_ScopeSubgroup, LK, LN> b;
                coopMatLoadNV(b, Bs, (sn * CC * LN + j * LN) * SR + kk / 8u, SR, true);
                DP_UNROLL for (uint i = 0u; i < CR; ++i) acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
#ifdef DP_GLU
                coopMatLoadNV(b, Bu, (sn * CC * LN + j * LN) * SR + kk / 8u, SR, true);
                DP_UNROLL for (uint i = 0u; i < CR; ++i) accu[i][j] = coopMatMulAddNV(a[i], b, accu[i][j]);
#endif
            }
        }
    }

#ifdef DP_SPLITK
    // Split K: every workgroup of the tile stores its f32 partial tile; the last to finish (atomic counter,
    // reset by it for the next replay) sums the partials in split order (deterministic) and writes y.
    const uint nz = gl_NumWorkGroups.z;
    if (nz > 1u) {
        const uint ti = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
        const uint pb = (ti * nz + gl_WorkGroupID.z) * BM * BN;
        DP_UNROLL for (uint i = 0u; i < CR; ++i)
            DP_UNROLL for (uint j = 0u; j < CC; ++j)
                coopMatStoreNV(acc[i][j], p.part.v, pb + (sm * CR + i) * LM * BN + (sn * CC + j) * LN, BN, false);
        memoryBarrierBuffer();
        barrier();
        if (tid == 0u) {
            const bool last = atomicAdd(p.counter.v[ti], 1u) == nz - 1u;
            if (last) atomicExchange(p.counter.v[ti], 0u);
            last_s = last;
        }
        barrier();
        if (!last_s) return;
        memoryBarrierBuffer();
        for (uint e = tid; e < BM * BN; e += WG) {
            const uint m = m0 + e / BN, n = n0 + e % BN;
            if (m >= T || n >= N) continue;
            float v = 0.0;
            for (uint z = 0u; z < nz; ++z) v += p.part.v[(ti * nz + z) * BM * BN + e];
#ifdef DP_BIAS
            v += float(p.bias.v[n]);
#endif
            out_store(yo, m * ys + n, v);
        }
        return;
    }
#endif
    // Epilogue: through this subgroup's staging tile, so that edges, bias and the output type are per element.
    const uint cs = sg * NSTAGE * LM * LN;
    DP_UNROLL for (uint i = 0u; i < CR; ++i) {
        DP_UNROLL for (uint j = 0u; j < CC; ++j) {
            coopMatStoreNV(acc[i][j], Cs, cs, LN, false);
#ifdef DP_GLU
            coopMatStoreNV(accu[i][j], Cs, cs + LM * LN, LN, false);
#endif
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            const uint mt = m0 + (sm * CR + i) * LM, nt = n0 + (sn * CC + j) * LN;
            for (uint e = lane; e < LM * LN; e += 32u) {
                const uint m = mt + e / LN, n = nt + e % LN;
                if (m >= T || n >= N) continue;
                float v = Cs[cs + e];
#ifdef DP_BIAS
                v += float(p.bias.v[n]);
#endif
#ifdef DP_GLU
                v = dp_glu_act(v, p.kind) * Cs[cs + LM * LN + e];
#endif
                out_store(yo, m * ys + n, v);
            }
            subgroupBarrier();                       // the tile is read before the next store overwrites it
        }
    }
}
