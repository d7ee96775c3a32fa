#version 460
// gemm_q: y[t, n] = sum_k x[t, k] * W[n, k]  (+ bias[n] with DP_BIAS), W block-quantised          prefill (T > 1)
// gemm.comp's tiling with the W slice dequantised on its way into shared memory: each K slice (BK, a
// multiple of 8) of the BN-row tile is BN * BK / 8 groups of 8 consecutive weights, each decoded in registers
// by one thread (dp_quant.glsl's dq8: exactly the CPU reference's values) and stored as f32, transposed to
// [BK][BN + 1]. The x slice and the register tiling are gemm.comp's. Accumulation is f32. Any T and N;
// K a multiple of QK (so of 8, and a slice never splits a group), or with w_row_blocks (rows padded to whole
// blocks, doppler convert --pad-k) a multiple of 8: groups at k >= K are zeros, so padding is never decoded.
//
// Dispatch: (ceil(N / BN), ceil(T / BM), 1).
// Push (by name): the same members as gemm.comp
//   x         ACT  [T, x_stride]      activations (token-major)
//   w         quant blocks [N, K]     weights, in the layout the define names
//   y         ACT  [T, y_stride]      output (f32 with DP_OUT_F32)
//   bias      f32  [N]                only with DP_BIAS
//   T, N, K   uint                    shape
//   x_stride  uint                    elements between tokens of x; 0 = K
//   y_stride  uint                    elements between tokens of y; 0 = N
//   w_row_blocks uint                 blocks from one row of W to the next; 0 = K / QK (unpadded)
// Spec constants (by name):
//   WG   workgroup size (local_size_x_id = 0), default 256; MUST equal (BM / TM) * (BN / TN)
//   BM   tokens per tile, default 64        TM  tokens per thread, default 4   (BM % TM == 0)
//   BN   outputs per tile, default 64       TN  outputs per thread, default 4  (BN % TN == 0)
//   BK   K slice, default 32 (a multiple of 8)
//   Shared memory: 4 * BK * (BM + BN + 2) bytes (defaults: 16.6 KiB); keep it <= 32 KiB.
// Defines: the weight type DP_Q_* and its layout DP_LAYOUT_COL | DP_LAYOUT_FLAT (dp_quant.glsl; none: row_wise),
//   DP_ACT_F16, DP_OUT_F32, DP_BIAS.
#include "dp_types.glsl"
#include "dp_quant.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

layout(push_constant) uniform Push {
    ACT_In  x;
    U16In   w;
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
} p;

const uint TX = BN / TN;                       // threads along n
const uint TY = BM / TM;                       // threads along m (tokens)
const uint LA = (BM * BK + WG - 1u) / WG;      // x elements each thread stages per slice
const uint LB = (BN * BK / 8u + WG - 1u) / WG; // W groups of 8 each thread stages per slice

shared float As[BK * (BM + 1u)];               // [BK][BM + 1]: x slice, transposed
shared float Bs[BK * (BN + 1u)];               // [BK][BN + 1]: W slice, transposed

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint tx = tid % TX, ty = tid / TX;
    const uint n0 = gl_WorkGroupID.x * BN;
    const uint m0 = gl_WorkGroupID.y * BM;
    const uint T = p.T, N = p.N, K = p.K;
    const uint xs = p.x_stride != 0u ? p.x_stride : K;
    const uint ys = p.y_stride != 0u ? p.y_stride : N;
    const uint nbr = p.w_row_blocks != 0u ? p.w_row_blocks : K / QK;

    // The (row, k) slots a thread stages never change from one K slice to the next: compute their x row
    // addresses once, in 64 bits (W can pass 2^31 elements; dq_block addresses W in 64 bits too).
    uint64_t a_row[LA]; uint a_k[LA]; bool a_ok[LA];
    for (uint i = 0u; i < LA; ++i) {
        const uint e = tid + i * WG, m = e / BK;
        a_k[i]  = e % BK;
        a_ok[i] = e < BM * BK && m0 + m < T;
        a_row[i] = uint64_t(p.x) + uint64_t(a_ok[i] ? m0 + m : 0u) * uint64_t(xs) * ACT_BYTES;
    }
    uint b_n[LB]; uint b_k[LB]; bool b_ok[LB];
    for (uint i = 0u; i < LB; ++i) {
        const uint e = tid + i * WG, n = e / (BK / 8u);
        b_k[i]  = (e % (BK / 8u)) * 8u;
        b_ok[i] = e < BN * BK / 8u && n0 + n < N;
        b_n[i]  = b_ok[i] ? n0 + n : 0u;
    }

    float acc[TM * TN];
    for (uint i = 0u; i < TM * TN; ++i) acc[i] = 0.0;

    for (uint k0 = 0u; k0 < K; k0 += BK) {
        for (uint i = 0u; i < LA; ++i) {
            const uint e = tid + i * WG;
            if (e >= BM * BK) break;
            const uint k = k0 + a_k[i];
            float v = 0.0;
            if (a_ok[i] && k < K) v = act_load(ACT_In(a_row[i]), k);
            As[a_k[i] * (BM + 1u) + e / BK] = v;
        }
        for (uint i = 0u; i < LB; ++i) {
            const uint e = tid + i * WG;
            if (e >= BN * BK / 8u) break;
            const uint k = k0 + b_k[i], n = e / (BK / 8u);
            float v[8];
            if (b_ok[i] && k < K) {
                dq8(dq_block(uint64_t(p.w), b_n[i], k / QK, N, nbr), k % QK, v);
            } else {
                for (uint j = 0u; j < 8u; ++j) v[j] = 0.0;
            }
            for (uint j = 0u; j < 8u; ++j) Bs[(b_k[i] + j) * (BN + 1u) + n] = v[j];
        }
        barrier();
        for (uint kk = 0u; kk < BK; ++kk) {
            float a[TM], b[TN];
            for (uint i = 0u; i < TM; ++i) a[i] = As[kk * (BM + 1u) + ty + TY * i];
            for (uint j = 0u; j < TN; ++j) b[j] = Bs[kk * (BN + 1u) + tx + TX * j];
            for (uint i = 0u; i < TM; ++i)
                for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = fma(a[i], b[j], acc[i * TN + j]);
        }
        barrier();
    }

    for (uint j = 0u; j < TN; ++j) {
        const uint n = n0 + tx + TX * j;
        if (n >= N) continue;
#ifdef DP_BIAS
        const float bn = p.bias.v[n];
#else
        const float bn = 0.0;
#endif
        for (uint i = 0u; i < TM; ++i) {
            const uint m = m0 + ty + TY * i;
            if (m < T) out_store(p.y, m * ys + n, acc[i * TN + j] + bn);
        }
    }
}
