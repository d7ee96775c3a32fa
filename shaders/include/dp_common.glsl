// shaders/include/dp_common.glsl: what every doppler kernel includes.
// Tensors arrive as device addresses in the push-constant block (GL_EXT_buffer_reference), never as
// descriptor bindings: that is how tensors larger than a binding's range (lavapipe: 128 MiB) are read.
// The access qualifier of the pointee tells the recorder what a kernel reads and writes:
//   *In  = readonly (NonWritable), *Out = writeonly (NonReadable), *Buf = read and write.
#ifndef DP_COMMON_GLSL
#define DP_COMMON_GLSL

#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

// DP_UNROLL before a loop whose bounds are spec constants: [[unroll]] (GL_EXT_control_flow_attributes, which
// the kernel enables) on a GPU, where the unrolled loop keeps its arrays in registers; [[dont_unroll]] on a CPU
// device (DP_DEVICE_CPU, given by gpu/device.c). lavapipe compiles a kernel with LLVM at its first dispatch, and
// the unrolled loops made that up to 10x slower without running faster: attention_prefill 4.9 -> 0.6 s per
// variant, gemv_multi and the norms about 2x (docs/BENCHMARKS.md, session 17). The loop's arithmetic and its
// order are the same either way. gemv.comp, gemv_q.comp and dp_quant_x8.glsl write [[unroll]] itself: rolled,
// their register arrays went to memory and lavapipe ran gemv_q 2x slower.
#ifdef DP_DEVICE_CPU
#define DP_UNROLL [[dont_unroll]]
#else
#define DP_UNROLL [[unroll]]
#endif

layout(buffer_reference, std430, buffer_reference_align = 4) readonly  buffer F32In  { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer F32Out { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4)           buffer F32Buf { float v[]; };

layout(buffer_reference, std430, buffer_reference_align = 2) readonly  buffer F16In  { float16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) writeonly buffer F16Out { float16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2)           buffer F16Buf { float16_t v[]; };

// bf16 has no GLSL type: stored as uint16, widened with dp_bf16_to_f32.
layout(buffer_reference, std430, buffer_reference_align = 2) readonly  buffer BF16In  { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) writeonly buffer BF16Out { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2)           buffer BF16Buf { uint16_t v[]; };

layout(buffer_reference, std430, buffer_reference_align = 4) readonly  buffer U32In  { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer U32Out { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4)           buffer U32Buf { uint v[]; };

layout(buffer_reference, std430, buffer_reference_align = 4) readonly  buffer I32In  { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer I32Out { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4)           buffer I32Buf { int v[]; };

layout(buffer_reference, std430, buffer_reference_align = 8)           buffer I64Buf { int64_t v[]; };

layout(buffer_reference, std430, buffer_reference_align = 1) readonly  buffer U8In  { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) writeonly buffer U8Out { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1)           buffer U8Buf { uint8_t v[]; };

layout(buffer_reference, std430, buffer_reference_align = 2) readonly  buffer U16In  { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) writeonly buffer U16Out { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2)           buffer U16Buf { uint16_t v[]; };

// 16-byte vectors: bandwidth-bound kernels (copy) move uvec4s; the address must be 16-byte aligned.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly  buffer V4In  { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer V4Out { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16)           buffer V4Buf { uvec4 v[]; };

float dp_bf16_to_f32(uint16_t b) { return uintBitsToFloat(uint(b) << 16); }

// Round to nearest even, NaN kept quiet: the same rule as core/dtype.c's dp_f32_to_bf16.
uint16_t dp_f32_to_bf16(float f)
{
    uint x = floatBitsToUint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
}

// IEEE half <-> float on the bits, bit-identical to core/dtype.c (round to nearest even, subnormals
// kept, NaN kept NaN): the hardware conversion's rounding and denormal handling are not specified.
uint16_t dp_f32_to_f16_bits(float f)
{
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    uint e8 = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (e8 == 0xffu) return uint16_t(sign | 0x7c00u | (man != 0u ? 0x200u : 0u));
    int e = int(e8) - 127 + 15;
    if (e >= 31) return uint16_t(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return uint16_t(sign);
        man |= 0x800000u;
        uint shift = uint(14 - e);
        uint h = man >> shift, rem = man & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (h & 1u) != 0u)) h++;
        return uint16_t(sign | h);
    }
    uint h = sign | (uint(e) << 10) | (man >> 13);
    uint rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;
    return uint16_t(h);
}

float dp_f16_bits_to_f32(uint16_t hb)
{
    uint h = uint(hb);
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint bits;
    if (e == 0u) {
        if (man == 0u) {
            bits = sign;
        } else {                      // subnormal: normalise
            int k = findMSB(man);     // 0..9
            man = (man << uint(10 - k)) & 0x3ffu;
            bits = sign | (uint(k - 24 + 127) << 23) | (man << 13);
        }
    } else if (e == 31u) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((e - 15u + 127u) << 23) | (man << 13);
    }
    return uintBitsToFloat(bits);
}

#endif
