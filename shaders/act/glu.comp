#version 460
// glu: y[t, f] = act(gate[t * gate_stride + f]) * up[t * up_stride + f]     for t < n_tokens, f < F
//   act = gelu_tanh (kind 0: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))), Gemma's GeGLU)
//       | silu      (kind 1: u / (1 + exp(-u)), SwiGLU of Llama / Qwen / Mistral / Phi-3)
// Separate gate and up tensors [T, F]: strides F, F. A fused [T, 2F] tensor, gate first then up (Phi-3's
// gate_up_proj): gate = the tensor, up = the same tensor at element offset F (a view), strides 2F.
// Dispatch: one invocation per output element: count = n_tokens * F;
//           groups (min(g, 65535), ceil(g / 65535), 1) with g = ceil(count / WG).
// Push:  gate, up (ACT, read)  y (ACT [T, F], write)  n_tokens, F, gate_stride, up_stride, kind
// Spec:  WG  workgroup size (default 256)
// Defines: DP_ACT_F16
#include "dp_types.glsl"
#include "dp_act.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    ACT_In  gate;
    ACT_In  up;
    ACT_Out y;
    uint    n_tokens;
    uint    F;
    uint    gate_stride;
    uint    up_stride;
    uint    kind;
} p;

void main()
{
    uint gid = gl_GlobalInvocationID.x + gl_WorkGroupID.y * 65535u * WG;
    if (gid >= p.n_tokens * p.F) return;
    uint t = gid / p.F, f = gid % p.F;
    float g = act_load(p.gate, t * p.gate_stride + f);
    float u = act_load(p.up, t * p.up_stride + f);
    act_store(p.y, gid, dp_glu_act(g, p.kind) * u);
}
