#version 460
// glu_down: a probe of one fused MLP dispatch per layer (recipes/bench/glu_down.lua), not a model kernel.
// doppler's decode runs a layer's MLP as two dependent dispatches: gate+up with the activation (h, I values),
// then down (y = D h, K values). Here one dispatch does both: workgroup g computes R rows of h (its gate and
// up rows against x), then multiplies them by its R columns of D and adds that partial y into y with atomics,
// so D is read by the workgroup that made the h it multiplies and no dispatch waits for all of h.
// D is stored transposed, as "columns": for each block of 32 columns and each output n, 32 4-bit codes and
// two f32 scales (a, b), value a * q - b: a Q4_K matrix's columns re-laid exactly (its sub-block scale d * sc
// and min dmin * m are exact in f32). y is accumulated in 64-bit fixed point (2^-32 units), so the sum does
// not depend on the order the workgroups add in: the fused and the two-dispatch modes give the same bits.
// The next layer reads y as its x (int64 / 2^32), as a model's next kernel would.
// Gate and up: 4-bit codes with one f32 scale per 32-block (value s * (q - 8)), rows in planes (codes, scales).
// GF16 = 1: gate and up as a float model holds them, f16 rows of K ([I][K], planes gc and uc; gs, us unused);
//   a lane requests GU 16-byte chunks (8 values) of each row before using any, and the dot products are
//   scaled by 1 / sqrt(K) (the values are 0.5 .. 1 in magnitude).
//
// TAIL = 1 (fused only): the last workgroup to finish (a counter) reads y back with atomic exchanges that
//   also zero it, and writes it as f32 to yf, which the next layer reads: the cost of handing an ordinary f32
//   vector to the next kernel instead of the fixed-point sum.
// DF16 = 1: D's columns as f16 (the engine's f16 copies, transposed; blocks of 8 columns, one uvec4 per
//   (block, output)) instead of 4-bit codes; R then need only be a multiple of 8.
// MODE 0: fused (phase 1, then phase 2). MODE 1: phase 1 only, h written to `h`. MODE 2: phase 2 only, h read
//   from `h`. MODE 3: fills `words` u32 of w at byte w_off (kind 0 codes, 1 block scales, 2 column scale
//   pairs with `kk` columns). MODE 4: zeroes `words` int64 of y_out.
// Spec constants: WG, K (x and y length), R (rows of h per workgroup, a multiple of 32), PREF (1: phase 2's
//   codes and scales are loaded before phase 1 runs, so their memory latency overlaps it).
// Dispatch: MODE 0/1/2: (I / R, 1, 1). Push: w (weights of the layer), x_in (int64 [K]), y_out (int64 [K]),
//   h (f32 [I]), offsets of the planes in w, I.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_atomic_int64 : require
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint K = 1152;
layout(constant_id = 2) const uint R = 32;
layout(constant_id = 3) const uint MODE = 0;
layout(constant_id = 4) const uint PREF = 1;
layout(constant_id = 5) const uint TAIL = 0;   // 1: the last workgroup converts y to f32 (yf) and zeroes y
layout(constant_id = 6) const uint DF16 = 0;   // 1: D's columns in f16 (8 per (block, output)), scaled 1/sqrt(I)
layout(constant_id = 7) const uint GF16 = 0;   // 1: gate and up as f16 rows (a float model's), scaled 1/sqrt(K)
layout(constant_id = 8) const uint GU = 2;     // GF16: 16-byte chunks of each row a lane requests at once

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer I64In { int64_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer V2In { vec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer U32Coh { uint v[]; };

layout(push_constant) uniform Push {
    V4Buf    w;
    I64In    x_in;
    I64Buf   y_out;
    F32Buf   h;
    F32In    xf_in;  // TAIL: x as f32 (the layer before's yf)
    F32Buf   yf;     // TAIL: y as f32
    U32Coh   ctr;    // TAIL: workgroups done (zero between dispatches)
    uint64_t gc;    // byte offsets in w: gate codes [I][K/32] uvec4, up codes, gate scales [I][K/32] f32, up
    uint64_t uc;    //   scales, D's codes [I/32][K] uvec4, D's scale pairs [I/32][K] vec2
    uint64_t gs;
    uint64_t us;
    uint64_t dc;
    uint64_t ds;
    uint64_t w_off;
    uint     I;
    uint     words;
    uint     kind;
    uint     kk;
} p;

const uint NB = K / 32u;              // blocks of x
const uint TPR = WG / R;              // lanes per row of h (a power of two, at most a subgroup)
const uint CB = DF16 != 0u ? 8u : 32u; // columns of D per block
const uint KB = R / CB;               // D's column blocks per workgroup
const uint NPT = (K + WG - 1u) / WG;  // outputs per lane in phase 2
const float FIX = 4294967296.0;       // y's unit: 2^-32 (a power of two: scaling by it is exact)

// x with 4 floats of padding after each 32: the lanes of a row read 32-float blocks TPR apart, which
// without padding fall on the same banks.
shared vec4 xs[NB * 9u];
shared float xsum[NB];     // sum of each block of x (the codes' offset 8)
shared float hs[R];
shared float hsum[R / 8u]; // sum of each block of h (D's minima; KB of them)
shared bool last_s;

uint hash(uint i)
{
    uint v = i * 0x9E3779B9u + 0x7F4A7C15u;
    v ^= v >> 16; v *= 0x85EBCA6Bu; v ^= v >> 13; v *= 0xC2B2AE35u; v ^= v >> 16;
    return v;
}

// sum over 32 codes of q * x[b*32 ..]: codes low nibble first, x from shared.
float dot_block(uvec4 c, uint b)
{
    float s = 0.0;
    [[unroll]] for (uint wd = 0u; wd < 4u; wd++) {
        vec4 x0 = xs[b * 9u + 2u * wd], x1 = xs[b * 9u + 2u * wd + 1u];
        uint v = c[wd];
        s += float(v & 15u) * x0.x + float((v >> 4) & 15u) * x0.y + float((v >> 8) & 15u) * x0.z
           + float((v >> 12) & 15u) * x0.w + float((v >> 16) & 15u) * x1.x + float((v >> 20) & 15u) * x1.y
           + float((v >> 24) & 15u) * x1.z + float(v >> 28) * x1.w;
    }
    return s;
}

// sum over 32 codes of q * h[kb*32 ..], h from shared (every lane reads the same word: a broadcast).
float dot_h(uvec4 c, uint kb)
{
    float s = 0.0;
    [[unroll]] for (uint wd = 0u; wd < 4u; wd++) {
        uint v = c[wd];
        [[unroll]] for (uint i = 0u; i < 8u; i++) s += float((v >> (4u * i)) & 15u) * hs[kb * 32u + wd * 8u + i];
    }
    return s;
}

void phase1(uint g)
{
    const uint t = gl_LocalInvocationID.x;
    for (uint k = t; k < K; k += WG) {
        float v = TAIL != 0u ? p.xf_in.v[k] : float(p.x_in.v[k]) / FIX;
        uint b = k / 32u, e = k % 32u;
        xs[b * 9u + e / 4u][e % 4u] = v;
    }
    barrier();
    for (uint b = t; b < NB; b += WG) {
        vec4 s = vec4(0.0);
        [[unroll]] for (uint i = 0u; i < 8u; i++) s += xs[b * 9u + i];
        xsum[b] = s.x + s.y + s.z + s.w;
    }
    barrier();
    const uint r = t / TPR, j = t % TPR, row = g * R + r;
    if (GF16 != 0u) {
        // chunk c of a row holds x[8c .. 8c + 8): xs vec4s (c / 4) * 9 + 2 (c % 4) and the one after
        V4In gr = V4In(uint64_t(p.w) + p.gc + uint64_t(row) * K * 2ul);
        V4In ur = V4In(uint64_t(p.w) + p.uc + uint64_t(row) * K * 2ul);
        float ga = 0.0, ua = 0.0;
        for (uint c0 = j; c0 < K / 8u; c0 += GU * TPR) {
            uvec4 wg[GU], wu[GU];
            [[unroll]] for (uint i = 0u; i < GU; i++) {
                const uint c = min(c0 + i * TPR, K / 8u - 1u);
                wg[i] = gr.v[c]; wu[i] = ur.v[c];
            }
            [[unroll]] for (uint i = 0u; i < GU; i++) {
                const uint c = c0 + i * TPR;
                if (c >= K / 8u) break;
                const vec4 x0 = xs[(c / 4u) * 9u + 2u * (c % 4u)], x1 = xs[(c / 4u) * 9u + 2u * (c % 4u) + 1u];
                const float xe[8] = float[8](x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w);
                [[unroll]] for (uint wd = 0u; wd < 4u; wd++) {
                    const vec2 a = unpackHalf2x16(wg[i][wd]), b = unpackHalf2x16(wu[i][wd]);
                    ga += a.x * xe[2u * wd] + a.y * xe[2u * wd + 1u];
                    ua += b.x * xe[2u * wd] + b.y * xe[2u * wd + 1u];
                }
            }
        }
        [[unroll]] for (uint off = TPR / 2u; off > 0u; off >>= 1) {
            ga += subgroupShuffleXor(ga, off);
            ua += subgroupShuffleXor(ua, off);
        }
        ga *= inversesqrt(float(K)); ua *= inversesqrt(float(K));
        if (j == 0u) hs[r] = ga / (1.0 + exp(-ga)) * ua;
        return;
    }
    V4In gc = V4In(uint64_t(p.w) + p.gc + uint64_t(row) * NB * 16ul);
    V4In uc = V4In(uint64_t(p.w) + p.uc + uint64_t(row) * NB * 16ul);
    F32In gsc = F32In(uint64_t(p.w) + p.gs + uint64_t(row) * NB * 4ul);
    F32In usc = F32In(uint64_t(p.w) + p.us + uint64_t(row) * NB * 4ul);
    float ga = 0.0, ua = 0.0;
    for (uint b = j; b < NB; b += TPR) {
        uvec4 cg = gc.v[b], cu = uc.v[b];
        float sg = gsc.v[b], su = usc.v[b];
        ga += sg * (dot_block(cg, b) - 8.0 * xsum[b]);
        ua += su * (dot_block(cu, b) - 8.0 * xsum[b]);
    }
    [[unroll]] for (uint off = TPR / 2u; off > 0u; off >>= 1) {
        ga += subgroupShuffleXor(ga, off);
        ua += subgroupShuffleXor(ua, off);
    }
    if (j == 0u) hs[r] = ga / (1.0 + exp(-ga)) * ua;   // silu(gate) * up
}

void main()
{
    const uint t = gl_LocalInvocationID.x, g = gl_WorkGroupID.x;
    if (MODE == 3u) {
        U32Buf o = U32Buf(uint64_t(p.w) + p.w_off);
        for (uint i = gl_GlobalInvocationID.x; i < p.words; i += gl_NumWorkGroups.x * WG) {
            uint v = hash(uint(p.w_off / 4ul) + i);
            if (p.kind == 0u) o.v[i] = v;
            else if (p.kind == 3u) o.v[i] = (v & 0x83FF83FFu) | 0x38003800u;   // two halves, |v| in [0.5, 1)
            else if (p.kind == 1u) o.v[i] = floatBitsToUint((0.75 + float(v & 255u) / 512.0) * 0.25 * inversesqrt(float(K)));
            else {
                float a = (0.75 + float(hash(uint(p.w_off / 4ul) + (i & ~1u)) & 255u) / 512.0) * 0.25 * inversesqrt(float(p.kk));
                o.v[i] = floatBitsToUint((i & 1u) == 0u ? a : 8.0 * a);
            }
        }
        return;
    }
    if (MODE == 4u) {
        for (uint i = gl_GlobalInvocationID.x; i < p.words; i += gl_NumWorkGroups.x * WG) p.y_out.v[i] = 0l;
        return;
    }
    // Phase 2's weights: lane t takes outputs n = t, t + WG, ...
    V4In dc = V4In(uint64_t(p.w) + p.dc);
    V2In ds = V2In(uint64_t(p.w) + p.ds);
    const uint CW = 1u;   // uvec4 per (block, output)
    uvec4 c[NPT * KB * CW];
    vec2 s[NPT * KB];
    if (PREF != 0u && MODE == 0u) {
        [[unroll]] for (uint i = 0u; i < NPT; i++) {
            uint n = t + i * WG;
            [[unroll]] for (uint kb = 0u; kb < KB; kb++) {
                uint at = (g * KB + kb) * K + min(n, K - 1u);
                [[unroll]] for (uint q = 0u; q < CW; q++) c[(i * KB + kb) * CW + q] = dc.v[at * CW + q];
                if (DF16 == 0u) s[i * KB + kb] = ds.v[at];
            }
        }
    }
    if (MODE != 2u) phase1(g);
    else if (t < R) hs[t] = p.h.v[g * R + t];
    if (MODE == 1u) {
        barrier();
        if (t < R) p.h.v[g * R + t] = hs[t];
        return;
    }
    barrier();
    if (DF16 == 0u && t < KB) {
        float v = 0.0;
        for (uint i = 0u; i < 32u; i++) v += hs[t * 32u + i];
        hsum[t] = v;
    }
    barrier();
    [[unroll]] for (uint i = 0u; i < NPT; i++) {
        uint n = t + i * WG;
        if (n >= K) break;
        float y = 0.0;
        [[unroll]] for (uint kb = 0u; kb < KB; kb++) {
            uint at = (g * KB + kb) * K + n;
            if (DF16 != 0u) {
                uvec4 cc = (PREF != 0u && MODE == 0u) ? c[i * KB + kb] : dc.v[at];
                [[unroll]] for (uint wd = 0u; wd < 4u; wd++) {
                    vec2 hv = unpackHalf2x16(cc[wd]);
                    y += hv.x * hs[kb * 8u + wd * 2u] + hv.y * hs[kb * 8u + wd * 2u + 1u];
                }
            } else {
                uvec4 cc; vec2 ss;
                if (PREF != 0u && MODE == 0u) { cc = c[i * KB + kb]; ss = s[i * KB + kb]; }
                else { cc = dc.v[at]; ss = ds.v[at]; }
                y += ss.x * dot_h(cc, kb) - ss.y * hsum[kb];
            }
        }
        if (DF16 != 0u) y *= inversesqrt(float(p.I));
        atomicAdd(p.y_out.v[n], int64_t(y * FIX));
    }
    if (TAIL == 0u) return;
    // the last workgroup hands y on as f32 and leaves it (and the counter) zero for the next replay
    memoryBarrierBuffer();
    barrier();
    if (t == 0u) {
        bool last = atomicAdd(p.ctr.v[0], 1u) == gl_NumWorkGroups.x - 1u;
        if (last) atomicExchange(p.ctr.v[0], 0u);
        last_s = last;
    }
    barrier();
    if (!last_s) return;
    memoryBarrierBuffer();
    for (uint n = t; n < K; n += WG) p.yf.v[n] = float(atomicExchange(p.y_out.v[n], 0l)) / FIX;
}
