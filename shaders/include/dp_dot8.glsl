// shaders/include/dp_dot8.glsl: packed 8-bit integer dot products (SPV_KHR_integer_dot_product; Vulkan 1.3
// shaderIntegerDotProduct, caps integer_dot), for gemv_q's int8 activations (dp_quant_x8.glsl) and the persistent
// probe. Written with GL_EXT_spirv_intrinsics because Debian 12's glslang predates GL_EXT_integer_dot_product.
//   x8_sdot4(a, b, 0)   sum of the four signed bytes of a times those of b
//   x8_sudot4(a, b, 0)  the same with b's bytes unsigned
// The last operand is the packed format: 0 is PackedVectorFormat4x8Bit.
#ifndef DP_DOT8_GLSL
#define DP_DOT8_GLSL

#extension GL_EXT_spirv_intrinsics : require

// OpSDotKHR (4450): signed x signed bytes; OpSUDotKHR (4452): signed (first) x unsigned (second) bytes.
// Capabilities DotProductKHR (6019) and DotProductInput4x8BitPackedKHR (6018).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int x8_sdot4(uint a, uint b, spirv_literal int packed_format);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int x8_sudot4(uint a, uint b, spirv_literal int packed_format);

#endif
