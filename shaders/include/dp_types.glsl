// shaders/include/dp_types.glsl: element types chosen by define, so that one kernel source serves every
// dtype variant. Kernels name the reference types and go through the load/store macros below; the macros
// (not functions) work on *In, *Out and *Buf references alike. Arithmetic is always f32.
//
// Defines (set by the runtime from the kernel key; absent = the f32 default):
//   DP_ACT_F16                  activations are f16 (else f32)
//   DP_W_F32 | DP_W_F16 | DP_W_BF16   weights (none = f32); bf16 is stored as uint16
//   DP_KV_F16                   KV cache is f16 (else f32)
//   DP_OUT_F32                  matrix kernels write f32 whatever the activation type (logits)
//   DP_A_FIX64                  a kernel's branch-output operand `a` is a 64-bit fixed-point sum (A_In, a_load)
// Provided, for X in ACT, W, KV:
//   X_In / X_Out / X_Buf        buffer-reference types (readonly / writeonly / read-write)
//   X_T                         the stored element type (float, float16_t or uint16_t for bf16)
//   X_BYTES                     bytes per element (4 or 2), for 64-bit address math: X_In(addr + i * X_BYTES)
//   x_load(p, i)   -> float     (act_load, w_load, kv_load)
//   x_store(p, i, v)            (act_store, kv_store; weights are never written by kernels)
// Also: DP_RAW16_In, 16-byte raw loads (uvec4) for vectorised kernels; decode with dp_w_unpack / dp_act_unpack
// helpers defined in the kernels that use them.
#ifndef DP_TYPES_GLSL
#define DP_TYPES_GLSL

#include "dp_common.glsl"

// ---- activations -------------------------------------------------------------------------------
#ifdef DP_ACT_F16
#define ACT_In    F16In
#define ACT_Out   F16Out
#define ACT_Buf   F16Buf
#define ACT_T     float16_t
#define ACT_BYTES 2u
#define act_load(p, i)     float((p).v[(i)])
#define act_store(p, i, x) ((p).v[(i)] = float16_t(x))
#else
#define ACT_In    F32In
#define ACT_Out   F32Out
#define ACT_Buf   F32Buf
#define ACT_T     float
#define ACT_BYTES 4u
#define act_load(p, i)     ((p).v[(i)])
#define act_store(p, i, x) ((p).v[(i)] = float(x))
#endif
// x as act_store would store it, back in f32: the rounding point of a value the unfused kernels store
#define act_round(x)       float(ACT_T(x))
// The same by integer operations (round to nearest even, dp_common.glsl), for a value whose rounding must
// happen in registers: the H100's driver drops float(float16_t(x)) and unpackHalf2x16(packHalf2x16(x)) there
// and keeps the f32 value (docs/BENCHMARKS.md 34h, 36b).
float act_round_int(float x)
{
#ifdef DP_ACT_F16
    return dp_f16_bits_to_f32(dp_f32_to_f16_bits(x));
#else
    return x;
#endif
}

// ---- a branch output `a` that may come from the fused MLP ----------------------------------------
// DP_A_FIX64: a kernel's operand `a` is the 64-bit fixed-point sum (units of 2^-32) that the fused MLP adds
// its workgroups' shares of the down projection into (matmul/gemv_q.comp, DP_DOWN), read as the activation
// type would hold it: a_load rounds to ACT as the unfused down projection's store did (act_round; the H100's
// driver drops that round trip in registers and keeps the f32 value, which is the closer one). Otherwise `a` is an
// activation. A_In is its reference type and A_BYTES its element size, for address math.
#ifdef DP_A_FIX64
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer AFix64In { int64_t v[]; };
#define A_In    AFix64In
#define A_BYTES 8u
#define a_fix(q) act_round(float(q) * (1.0 / 4294967296.0))
#define a_load(p, i) a_fix((p).v[(i)])
// two elements per 16-byte load (vector paths; the address 16-byte aligned)
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer AFix64x2In { i64vec2 v[]; };
#else
#define A_In    ACT_In
#define A_BYTES ACT_BYTES
#define a_load(p, i) act_load(p, i)
#endif

// ---- outputs of matrix kernels: the activation type, or f32 with DP_OUT_F32 (logits) ----------
#ifdef DP_OUT_F32
#define OUT_Out F32Out
#define out_store(p, i, x) ((p).v[(i)] = float(x))
#else
#define OUT_Out ACT_Out
#define out_store(p, i, x) act_store(p, i, x)
#endif

// ---- weights -----------------------------------------------------------------------------------
#if defined(DP_W_F16)
#define W_In    F16In
#define W_T     float16_t
#define W_BYTES 2u
#define w_load(p, i) float((p).v[(i)])
#elif defined(DP_W_BF16)
#define W_In    BF16In
#define W_T     uint16_t
#define W_BYTES 2u
#define w_load(p, i) dp_bf16_to_f32((p).v[(i)])
#else
#ifndef DP_W_F32
#define DP_W_F32
#endif
#define W_In    F32In
#define W_T     float
#define W_BYTES 4u
#define w_load(p, i) ((p).v[(i)])
#endif

// ---- KV cache ----------------------------------------------------------------------------------
#ifdef DP_KV_F16
#define KV_In    F16In
#define KV_Out   F16Out
#define KV_Buf   F16Buf
#define KV_T     float16_t
#define KV_BYTES 2u
#define kv_load(p, i)     float((p).v[(i)])
#define kv_store(p, i, x) ((p).v[(i)] = float16_t(x))
#else
#define KV_In    F32In
#define KV_Out   F32Out
#define KV_Buf   F32Buf
#define KV_T     float
#define KV_BYTES 4u
#define kv_load(p, i)     ((p).v[(i)])
#define kv_store(p, i, x) ((p).v[(i)] = float(x))
#endif

// ---- 16-byte raw loads ---------------------------------------------------------------------------
// A uvec4 holds 4 f32 or 8 f16/bf16 elements. The address must be a multiple of 16: kernels check that
// (and the row length) at run time and fall back to element loads otherwise.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer DP_RAW16_In { uvec4 v[]; };

#endif
