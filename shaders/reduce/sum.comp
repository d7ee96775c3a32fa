#version 450
// sum: one stage of sum(x[0..n)): y[g] = sum of workgroup g's grid-stride share (f32 accumulation).
// Dispatch: (G, 1, 1) -> G partials; then (1, 1, 1) over the G partials -> y[0]. See reduce.glsl.
// Push:  x (F32In), y (F32Out: G values), n (u32: elements of x)
// Spec constants: WG  workgroup size, a power of two (local_size_x_id = 0)  default 256
// Defines: none
#define OP(a, b) ((a) + (b))
#define IDENTITY 0.0
#include "reduce.glsl"
