#version 460
// eltwise: the graph's elementwise ops on activations, one kernel with a `kind` switch:
//   kind 0 add:       y[i] = a[i] + b[i]
//   kind 1 mul:       y[i] = a[i] * b[i]
//   kind 2 scale:     y[i] = a[i] * s
//   kind 3 gelu_tanh: y[i] = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
//   kind 4 silu:      y[i] = a / (1 + exp(-a))
// Residual adds and unfused activations use it; fused forms (glu, add_rmsnorm) are in act/ and norm/.
// a and b may be strided column slices of a fused projection (Phi-3's gate_up with fusion=off): element i
// of a logical [rows, cols] value is read at (i / cols) * stride + i % cols. y is always contiguous.
// Dispatch: groups (min(g, 65535), ceil(g / 65535), 1), g = ceil(n / WG); i = gid.x + gid.y * 65535 * WG.
// Push:  a (ACT, read)  b (ACT, read; ignored by unary kinds, pass a)  y (ACT, write)  n, kind, s
//        cols (row length, used only with a stride), a_stride, b_stride (elements from one row to the
//        next; 0: contiguous)
// Spec:  WG  workgroup size (default 256)
// Defines: DP_ACT_F16
#include "dp_types.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_In  a;
    ACT_In  b;
    ACT_Out y;
    uint    n;
    uint    kind;
    float   s;
    uint    cols;
    uint    a_stride;
    uint    b_stride;
} p;

// Where logical element i of an operand with row stride `stride` lies (0: contiguous, the index itself).
uint at(uint i, uint stride)
{
    return stride == 0u ? i : (i / p.cols) * stride + i % p.cols;
}

// tanh that stays finite for large |x| (the exp form overflows to inf / inf).
float safe_tanh(float x)
{
    float e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_WorkGroupID.y * 65535u * WG;
    if (i >= p.n) return;
    float a = act_load(p.a, at(i, p.a_stride));
    float r;
    switch (p.kind) {
    case 0u: r = a + act_load(p.b, at(i, p.b_stride)); break;
    case 1u: r = a * act_load(p.b, at(i, p.b_stride)); break;
    case 2u: r = a * p.s; break;
    case 3u: r = 0.5 * a * (1.0 + safe_tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))); break;
    default: r = a / (1.0 + exp(-a)); break;
    }
    act_store(p.y, i, r);
}
