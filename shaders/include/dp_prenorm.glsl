// shaders/include/dp_prenorm.glsl: what the float GEMVs that fold Gemma's norm (DP_PRENORM=2) share:
// fused/gemv_multi.comp (q/k/v, gate+up) and fused/glu_down_float.comp (the fused MLP). The norm weights'
// type (DP_NW_F16 | DP_NW_BF16 | none: f32), the workgroup's sum, and a 16-byte chunk of norm weights.
// Include after the kernel's WG spec constant and VW (values per 16-byte chunk of its weights); the kernel
// enables GL_KHR_shader_subgroup_arithmetic. Needs a subgroup of 8 or more (pn_ss).
#ifndef DP_PRENORM_GLSL
#define DP_PRENORM_GLSL

#if defined(DP_NW_F16)
#define NW_In F16In
#define NW_BYTES 2u
#define nw_load(q, i) float((q).v[(i)])
#elif defined(DP_NW_BF16)
#define NW_In BF16In
#define NW_BYTES 2u
#define nw_load(q, i) dp_bf16_to_f32((q).v[(i)])
#else
#define NW_In F32In
#define NW_BYTES 4u
#define nw_load(q, i) ((q).v[(i)])
#endif

shared float pn_ss[WG / 8u];             // per subgroup (size >= 8): the sum of a^2, then of y^2

// The workgroup's sum of every thread's v (a barrier inside; pn_ss is free again when it returns).
float pn_workgroup_sum(float v)
{
    const float s = subgroupAdd(v);
    if (subgroupElect()) pn_ss[gl_SubgroupID] = s;
    barrier();
    float t = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; ++g) t += pn_ss[g];
    barrier();
    return t;
}

// The norm weight's values k0 .. k0 + VW: 16-byte loads where the chunk allows them. Why vector loads: a
// thread's chunk is VW consecutive values, so element loads would put each lane of a warp on another sector
// per instruction (gemv_q.comp's staging spent ~7 us more per call that way, docs/BENCHMARKS.md 29d).
void pn_nw(NW_In w, uint k0, out float v[VW])
{
    const uint64_t a = uint64_t(w) + uint64_t(k0) * NW_BYTES;
    if ((VW * NW_BYTES) % 16u == 0u && (a & 15ul) == 0ul) {
        DP_UNROLL for (uint q = 0u; q < VW * NW_BYTES / 16u; ++q) {
            const uvec4 u = DP_RAW16_In(a).v[q];
#if defined(DP_NW_F16) || defined(DP_NW_BF16)
            const uint wd[4] = uint[4](u.x, u.y, u.z, u.w);
            DP_UNROLL for (uint j = 0u; j < 4u; ++j) {
#ifdef DP_NW_F16
                const vec2 h = unpackHalf2x16(wd[j]);
#else
                const vec2 h = vec2(uintBitsToFloat(wd[j] << 16), uintBitsToFloat(wd[j] & 0xffff0000u));
#endif
                if (8u * q + 2u * j + 1u < VW) { v[8u * q + 2u * j] = h.x; v[8u * q + 2u * j + 1u] = h.y; }
            }
#else
            const vec4 f = uintBitsToFloat(u);
            DP_UNROLL for (uint j = 0u; j < 4u; ++j) if (4u * q + j < VW) v[4u * q + j] = f[j];
#endif
        }
    } else {
        DP_UNROLL for (uint e = 0u; e < VW; ++e) v[e] = nw_load(w, k0 + e);
    }
}
#endif
