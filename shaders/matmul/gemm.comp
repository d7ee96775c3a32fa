#version 460
// gemm: y[t, n] = sum_k x[t, k] * W[n, k]  (+ bias[n] with DP_BIAS)               prefill (T > 1)
// W is PyTorch's Linear layout [N, K]; both operands are K-contiguous. Classic shared-memory tiling: each
// workgroup computes a BM x BN tile of y (BM tokens x BN outputs), stepping over K in slices of BK; a slice
// of x and of W is staged in shared memory as f32 (converted once at load), transposed to [BK][BM+1] and
// [BK][BN+1] (the +1 keeps the transposing stores free of bank conflicts). Each thread accumulates a
// TM x TN register tile in f32, with rows ty + (BM/TM) * i and columns tx + (BN/TN) * j (strided, so that
// neighbouring threads read neighbouring shared words and write neighbouring outputs). Every edge is
// bounds-checked: any T, N, K.
//
// Dispatch: (ceil(N / BN), ceil(T / BM), 1).
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
//   WG   workgroup size (local_size_x_id = 0), default 256; MUST equal (BM / TM) * (BN / TN)
//   BM   tokens per tile, default 64        TM  tokens per thread, default 4   (BM % TM == 0)
//   BN   outputs per tile, default 64       TN  outputs per thread, default 4  (BN % TN == 0)
//   BK   K slice, default 16
//   Shared memory: 4 * BK * (BM + BN + 2) bytes (defaults: 8.3 KiB; BK = 32: 16.6 KiB); keep it <= 32 KiB.
// Defines: DP_OUT_F32 (y in f32 whatever the activations), DP_ACT_F16, DP_W_F32 | DP_W_F16 | DP_W_BF16 (dp_types.glsl), DP_BIAS, DP_BIAS_F32.
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

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

const uint TX = BN / TN;                       // threads along n
const uint TY = BM / TM;                       // threads along m (tokens)
const uint LA = (BM * BK + WG - 1u) / WG;      // x elements each thread stages per slice
const uint LB = (BN * BK + WG - 1u) / WG;      // W elements each thread stages per slice

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

    // The (row, k) slots a thread stages never change from one K slice to the next: compute their row
    // addresses once, in 64 bits (W can pass 2^31 elements).
    uint64_t a_row[LA]; uint a_k[LA]; bool a_ok[LA];
    for (uint i = 0u; i < LA; ++i) {
        const uint e = tid + i * WG, m = e / BK;
        a_k[i]  = e % BK;
        a_ok[i] = e < BM * BK && m0 + m < T;
        a_row[i] = uint64_t(p.x) + uint64_t(a_ok[i] ? m0 + m : 0u) * uint64_t(xs) * ACT_BYTES;
    }
    uint64_t b_row[LB]; uint b_k[LB]; bool b_ok[LB];
    for (uint i = 0u; i < LB; ++i) {
        const uint e = tid + i * WG, n = e / BK;
        b_k[i]  = e % BK;
        b_ok[i] = e < BN * BK && n0 + n < N;
        b_row[i] = uint64_t(p.w) + uint64_t(b_ok[i] ? n0 + n : 0u) * uint64_t(K) * W_BYTES;
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
            if (e >= BN * BK) break;
            const uint k = k0 + b_k[i];
            float v = 0.0;
            if (b_ok[i] && k < K) v = w_load(W_In(b_row[i]), k);
            Bs[b_k[i] * (BN + 1u) + e / BK] = v;
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
        const float bn = bias_load(n);
#else
        const float bn = 0.0;
#endif
        for (uint i = 0u; i < TM; ++i) {
            const uint m = m0 + ty + TY * i;
            if (m < T) out_store(p.y, m * ys + n, acc[i * TN + j] + bn);
        }
    }
}
