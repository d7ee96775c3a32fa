#version 460
// gemv_q: y[t, n] = sum_k x[t, k] * W[n, k]  (+ bias[n] with DP_BIAS), W block-quantised   decode (T small)
// W is [N, K] in ggml blocks, w_row_blocks blocks per row (0: K / QK, K a multiple of QK; more when the file pads
// rows to whole blocks, doppler convert --pad-k: then K need only be a multiple of 8, and the elements past K of a
// row's last block are never decoded, so the padding never meets activation data), dequantised in registers
// (dp_quant.glsl's dq8, exactly the CPU reference's values) and never written out. The work unit is a group of
// 8 consecutive weights: a row has K / 8 groups, and the WG / ROWS threads that own a row take groups
// tid, tid + WG / ROWS, ... so neighbouring threads read neighbouring bytes and every thread has work even at
// small K (K = 1152: 144 groups for 32 threads per row). Each group's x values are read once per token and
// the weights once per TT tokens. Partial sums are reduced per row in shared memory (no subgroup-size
// assumption). Accumulation is f32.
//
// Dispatch: nb = ceil(N / ROWS) row blocks, tb = ceil(T / TT) token blocks.
//   groups = (gx, tb, gz) with gx = min(nb, 65535), gz = ceil(nb / gx)  (row block = x + gx * z); blocks past
//   the end are no-ops.
// Push (by name): the same members as gemv.comp
//   x         ACT  [T, x_stride]      activations (token-major)
//   w         quant blocks [N, K]     weights, in the layout the define names
//   y         ACT  [T, y_stride]      output (f32 with DP_OUT_F32)
//   bias      f32  [N]                only with DP_BIAS
//   T, N, K   uint                    shape (K a multiple of QK, or of 8 with w_row_blocks)
//   x_stride  uint                    elements between tokens of x; 0 = K
//   y_stride  uint                    elements between tokens of y; 0 = N
//   w_row_blocks uint                 blocks from one row of W to the next; 0 = K / QK (unpadded)
// Spec constants (by name):
//   WG    workgroup size (local_size_x_id = 0), default 128; a power of two, multiple of ROWS
//   ROWS  rows of W per workgroup, default 4 (a power of two); WG / ROWS threads per row
//   TT    tokens per workgroup, default 1 (up to 4: W is decoded once for all of them)
//   Shared memory: 4 * TT * WG bytes.
// Defines: the weight type DP_Q_* and its layout DP_LAYOUT_COL | DP_LAYOUT_FLAT (dp_quant.glsl; none: row_wise),
//   DP_ACT_F16, DP_OUT_F32, DP_BIAS.
#include "dp_types.glsl"
#include "dp_quant.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG   = 128;
layout(constant_id = 1) const uint ROWS = 4;
layout(constant_id = 2) const uint TT   = 1;

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

const uint TPR = WG / ROWS;              // threads per row

shared float red[TT * WG];               // [TT][WG]: one partial sum per thread and token

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
    const uint n = n0 + r;

    float acc[TT];
    for (uint t = 0u; t < TT; ++t) acc[t] = 0.0;

    if (n < p.N) {
        const uint nb = p.w_row_blocks != 0u ? p.w_row_blocks : K / QK;
        uint64_t xrow[TT];
        for (uint t = 0u; t < TT; ++t)
            xrow[t] = uint64_t(p.x) + uint64_t(min(t0 + t, p.T - 1u)) * uint64_t(xs) * ACT_BYTES;
        const uint groups = K / 8u;
        for (uint g = lane; g < groups; g += TPR) {
            const uint k0 = g * 8u;
            float wv[8];
            dq8(dq_block(uint64_t(p.w), n, k0 / QK, p.N, nb), k0 % QK, wv);
            for (uint t = 0u; t < TT; ++t) {
                ACT_In xr = ACT_In(xrow[t]);
                float s = acc[t];
                for (uint i = 0u; i < 8u; ++i) s = fma(wv[i], act_load(xr, k0 + i), s);
                acc[t] = s;
            }
        }
    }

    for (uint t = 0u; t < TT; ++t) red[t * WG + tid] = acc[t];
    barrier();
    for (uint s = TPR / 2u; s > 0u; s >>= 1) {      // tree over each row's TPR threads
        if (lane < s)
            for (uint t = 0u; t < TT; ++t) red[t * WG + tid] += red[t * WG + tid + s];
        barrier();
    }
    if (lane < TT && n < p.N && t0 + lane < p.T) {
        const uint t = lane;
        float s = red[t * WG + r * TPR];
#ifdef DP_BIAS
        s += p.bias.v[n];
#endif
        out_store(p.y, (t0 + t) * ys + n, s);
    }
}
