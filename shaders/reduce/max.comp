#version 450
// max: one stage of max(x[0..n)): y[g] = max of workgroup g's grid-stride share; -inf when empty.
// Dispatch: (G, 1, 1) -> G partials; then (1, 1, 1) over the G partials -> y[0]. See reduce.glsl.
// Push:  x (F32In), y (F32Out: G values), n (u32: elements of x)
// Spec constants: WG  workgroup size, a power of two (local_size_x_id = 0)  default 256
// Defines: none
#define OP(a, b) max((a), (b))
#define IDENTITY uintBitsToFloat(0xff800000u)
#include "reduce.glsl"
