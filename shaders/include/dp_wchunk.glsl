// shaders/include/dp_wchunk.glsl: one 16-byte chunk of float weights (W_T, dp_types.glsl), as the float GEMVs
// read them (matmul/gemv.comp, fused/gemv_multi.comp, fused/lm_head.comp, fused/glu_down_float.comp):
//   VW              weights per chunk (4 for f32, 8 for f16 / bf16)
//   w_unpack(u, v)  the chunk's VW floats
#ifndef DP_WCHUNK_GLSL
#define DP_WCHUNK_GLSL

#ifdef DP_W_F32
#define VW 4u      // weights per 16-byte load
#else
#define VW 8u
#endif

void w_unpack(uvec4 u, inout float v[VW])
{
#if defined(DP_W_F32)
    v[0] = uintBitsToFloat(u.x); v[1] = uintBitsToFloat(u.y);
    v[2] = uintBitsToFloat(u.z); v[3] = uintBitsToFloat(u.w);
#elif defined(DP_W_F16)
    vec2 a = unpackHalf2x16(u.x), b = unpackHalf2x16(u.y), c = unpackHalf2x16(u.z), d = unpackHalf2x16(u.w);
    v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y; v[4] = c.x; v[5] = c.y; v[6] = d.x; v[7] = d.y;
#else   // bf16: element 2j is the low half of word j (little endian)
    v[0] = uintBitsToFloat(u.x << 16); v[1] = uintBitsToFloat(u.x & 0xffff0000u);
    v[2] = uintBitsToFloat(u.y << 16); v[3] = uintBitsToFloat(u.y & 0xffff0000u);
    v[4] = uintBitsToFloat(u.z << 16); v[5] = uintBitsToFloat(u.z & 0xffff0000u);
    v[6] = uintBitsToFloat(u.w << 16); v[7] = uintBitsToFloat(u.w & 0xffff0000u);
#endif
}

#endif
