#version 450
// cast: y[i] = convert(x[i]) for i < n between f32, f16 and bf16 (all six directions).
// Conversions work on the bits and match core/dtype.c exactly (round to nearest even; f16
// subnormals kept; NaN stays NaN); hardware conversions leave rounding and denormals unspecified.
// Dispatch: (groups, 1, 1), any groups >= 1: a grid-stride loop covers n.
// Push:  x (source type, read), y (destination type, write), n (u32: elements)
// Spec constants: WG  workgroup size (local_size_x_id = 0)  default 256
// Defines: DP_SRC_F32 | DP_SRC_F16 | DP_SRC_BF16 and DP_DST_F32 | DP_DST_F16 | DP_DST_BF16
//          (default: DP_SRC_F32 + DP_DST_F16)
#include "dp_common.glsl"

#if !defined(DP_SRC_F32) && !defined(DP_SRC_F16) && !defined(DP_SRC_BF16)
#define DP_SRC_F32
#endif
#if !defined(DP_DST_F32) && !defined(DP_DST_F16) && !defined(DP_DST_BF16)
#define DP_DST_F16
#endif

#if defined(DP_SRC_F32)
#define SRC_T F32In
#define LOAD(i) p.x.v[i]
#elif defined(DP_SRC_F16)
#define SRC_T U16In
#define LOAD(i) dp_f16_bits_to_f32(p.x.v[i])
#else
#define SRC_T BF16In
#define LOAD(i) dp_bf16_to_f32(p.x.v[i])
#endif

#if defined(DP_DST_F32)
#define DST_T F32Out
#define STORE(i, f) p.y.v[i] = (f)
#elif defined(DP_DST_F16)
#define DST_T U16Out
#define STORE(i, f) p.y.v[i] = dp_f32_to_f16_bits(f)
#else
#define DST_T BF16Out
#define STORE(i, f) p.y.v[i] = dp_f32_to_bf16(f)
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push { SRC_T x; DST_T y; uint n; } p;

void main()
{
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        float f = LOAD(i);
        STORE(i, f);
    }
}
