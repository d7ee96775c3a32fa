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

layout(buffer_reference, std430, buffer_reference_align = 1) readonly  buffer U8In  { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) writeonly buffer U8Out { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1)           buffer U8Buf { uint8_t v[]; };

float dp_bf16_to_f32(uint16_t b) { return uintBitsToFloat(uint(b) << 16); }

// Round to nearest even, NaN kept quiet: the same rule as core/dtype.c's dp_f32_to_bf16.
uint16_t dp_f32_to_bf16(float f)
{
    uint x = floatBitsToUint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
}

#endif
