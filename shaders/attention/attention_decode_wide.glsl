// attention_decode_wide.glsl: attention_decode.comp's DP_WIDE method for one chunk (hint attention_decode=wide).
// Why: the rounds method (the .comp's own) walks a chunk in rounds of UK keys per cluster, each round a
// memory round trip followed by its cluster's online softmax, and splits contexts into chunks of one round so
// that they run in parallel, and then pays the chunk merge (its atomic, the partials' loads: ~2.4 us of a
// Gemma 3 1B layer on the H100, docs/BENCHMARKS.md 42d). This method takes a chunk in blocks of BK = NCL * UK
// keys and issues every load of a block at once, so a chunk of a short context is one block, one round trip
// and no merge:
//   scores: cluster cl (LK lanes over the dims, as the rounds method) takes keys kb + cl + u NCL (u < UK),
//           reduces the G q heads' dot products over its lanes and stores the scaled, softcapped, masked
//           scores in sc_s [G][BK];
//   values: after one barrier, lane sgl of every subgroup takes keys kb + sgl + x SGS (x < VX), so each
//           subgroup's lanes hold every key of the block: the block's max is one subgroupMax, and the
//           running sums of every lane are rescaled by the same factor; subgroup sgi accumulates its RV
//           vectors of V (sgi + r NSG) for those keys, and at the end its lanes' sums are added with
//           subgroupAdd.
// The V rows and the cache's key rows of the first block are loaded before the rope prologue (DP_ROPE_QK), as
// the rounds method loads its first round. Registers: UK * NVL + RV * VX 16-byte vectors per invocation (the
// rows as stored, unpacked where used).
// Spec: SGS the device's subgroup size (the host's caps; BK must be a multiple of it: lower/attention.lua).
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(constant_id = 11) const uint SGS = 32;
const uint BK = NCL * UK;                   // keys per block
const uint NSG = WG / SGS;                  // subgroups per workgroup
const uint DV = D / VEC;                    // vectors per row
const uint RV = (DV + NSG - 1u) / NSG;      // a subgroup's vectors of each V row
const uint VX = BK / SGS;                   // a lane's keys per block in the values phase
// array lengths, named once: glslang takes each spelling of a spec-constant size as a type of its own
const uint NKR = UK * NVL;                  // a lane's key vectors per block
const uint NVR = RV * VX;                   // a lane's value vectors per block
const uint NQR = G * EPL;                   // a lane's query elements
const uint NOA = G * RV * VEC;              // a lane's output sums

shared float sc_s[G * BK];

// VEC elements of the caches' type packed in 16 bytes: f16 pairs (DP_KV_F16) or f32 bits. The f16 conversion is
// kv_round's, so a new row packed here holds what the caches would.
uvec4 pack_vec(float r[VEC])
{
#ifdef DP_KV_F16
    uint w[4];
    DP_UNROLL for (uint i = 0u; i < 4u; i++)
        w[i] = uint(float16BitsToUint16(float16_t(r[2u * i]))) | (uint(float16BitsToUint16(float16_t(r[2u * i + 1u]))) << 16);
    return uvec4(w[0], w[1], w[2], w[3]);
#else
    return uvec4(floatBitsToUint(r[0]), floatBitsToUint(r[1]), floatBitsToUint(r[2]), floatBitsToUint(r[3]));
#endif
}

void unpack_vec(uvec4 u, out float r[VEC])
{
#ifdef DP_KV_F16
    vec2 a = unpackHalf2x16(u.x), b = unpackHalf2x16(u.y), c = unpackHalf2x16(u.z), d = unpackHalf2x16(u.w);
    r[0] = a.x; r[1] = a.y; r[2] = b.x; r[3] = b.y; r[4] = c.x; r[5] = c.y; r[6] = d.x; r[7] = d.y;
#else
    r[0] = uintBitsToFloat(u.x); r[1] = uintBitsToFloat(u.y); r[2] = uintBitsToFloat(u.z); r[3] = uintBitsToFloat(u.w);
#endif
}

// Vector dv (elements dv VEC ..) of key/value row j of kv head hk, as load_row reads it: a new row (j >= p0)
// from the pass's input, rounded as the caches store it; an older one from the cache, one 16-byte load where
// the caches are aligned.
uvec4 load_vec(ACT_In src, KV_In cache, uint j, uint hk, uint dv, uint p0, uint ks, bool vec_ok)
{
    float r[VEC];
    if (j >= p0) {
        uint b = (j - p0) * ks + hk * D + dv * VEC;
        DP_UNROLL for (uint e = 0u; e < VEC; e++) r[e] = act_load(src, b + e);
        return pack_vec(r);
    }
    uint row = (hk * p.cap + j % p.cap) * D;
    if (vec_ok) return DP_RAW16_In(uint64_t(cache)).v[row / VEC + dv];
    DP_UNROLL for (uint e = 0u; e < VEC; e++) r[e] = kv_load(cache, row + dv * VEC + e);
    return pack_vec(r);
}

// Every load of the block at kb, issued before any is used: cluster cl's key rows (lane ln's vectors) and lane
// sgl's value rows (subgroup sgi's vectors). Past k1 the last key is read again (a valid address; its score is
// masked). With DP_ROPE_QK a new key comes from the prologue (ks_s), so its slots stay unused.
void wide_load(uint kb, uint k1, uint hk, uint cl, uint ln, uint sgi, uint sgl, uint p0, uint ks, bool vec_ok,
               out uvec4 kraw[NKR], out uvec4 vraw[NVR])
{
    DP_UNROLL for (uint u = 0u; u < UK; u++) {
        uint j = min(kb + cl + u * NCL, k1 - 1u);
        DP_UNROLL for (uint i = 0u; i < NVL; i++) {
#ifdef DP_ROPE_QK
            kraw[u * NVL + i] = j < p0 ? load_vec(p.k, KC_IN, j, hk, ln + i * LK, p0, ks, vec_ok) : uvec4(0u);
#else
            kraw[u * NVL + i] = load_vec(p.k, KC_IN, j, hk, ln + i * LK, p0, ks, vec_ok);
#endif
        }
    }
    DP_UNROLL for (uint r = 0u; r < RV; r++) {
        uint dv = min(sgi + r * NSG, DV - 1u);   // past DV (more subgroups than vectors): read, never used
        DP_UNROLL for (uint x = 0u; x < VX; x++)
            vraw[r * VX + x] = load_vec(p.v, VC_IN, min(kb + sgl + x * SGS, k1 - 1u), hk, dv, p0, ks, vec_ok);
    }
}

// The scores phase of the block at kb (above); lane 0 of each cluster stores its keys' scores.
void wide_scores(uint kb, uint k1, uint cl, uint ln, uint p0, uint ua, float qr[NQR], uvec4 kraw[NKR])
{
    float s[G * UK];
    DP_UNROLL for (uint u = 0u; u < UK; u++) {
        uint j = min(kb + cl + u * NCL, k1 - 1u);
        float kr[EPL];
        DP_UNROLL for (uint i = 0u; i < NVL; i++) {
            float r[VEC];
            unpack_vec(kraw[u * NVL + i], r);
            DP_UNROLL for (uint e = 0u; e < VEC; e++) kr[i * VEC + e] = r[e];
        }
#ifdef DP_ROPE_QK
        if (j >= p0)   // roped here, rounded as rope_kv stores k, then as attention reads a new key
            DP_UNROLL for (uint i = 0u; i < NVL; i++)
                DP_UNROLL for (uint e = 0u; e < VEC; e++)
                    kr[i * VEC + e] = kv_round(ks_s((j - p0 - ua) * D + lane_dim(ln, i, e)));
#endif
        DP_UNROLL for (uint g = 0u; g < G; g++) {
            float d = 0.0;
            DP_UNROLL for (uint e = 0u; e < EPL; e++) d += qr[g * EPL + e] * kr[e];
            s[g * UK + u] = d;
        }
    }
    for (uint off = LK / 2u; off > 0u; off >>= 1)
        DP_UNROLL for (uint i = 0u; i < G * UK; i++) s[i] += subgroupShuffleXor(s[i], off);
    if (ln == 0u)
        DP_UNROLL for (uint g = 0u; g < G; g++)
            DP_UNROLL for (uint u = 0u; u < UK; u++) {
                float x = s[g * UK + u] * p.scale;
                if (p.softcap > 0.0) x = p.softcap * safe_tanh(x / p.softcap);
                sc_s[g * BK + cl + u * NCL] = (kb + cl + u * NCL < k1) ? x : NEG;
            }
}

// The values phase of a block (above): m, l, oa are this lane's running max (the same in every lane), sum of
// exp(s - m) over its keys, and sums of exp(s - m) V over its keys for its subgroup's vectors.
void wide_values(uint sgl, uvec4 vraw[NVR], inout float m[G], inout float l[G], inout float oa[NOA])
{
    DP_UNROLL for (uint g = 0u; g < G; g++) {
        float sv[VX];
        float mx = NEG;
        DP_UNROLL for (uint x = 0u; x < VX; x++) {
            sv[x] = sc_s[g * BK + sgl + x * SGS];
            mx = max(mx, sv[x]);
        }
        float mn = max(m[g], subgroupMax(mx));
        float a = exp(m[g] - mn);
        l[g] *= a;
        DP_UNROLL for (uint i = 0u; i < RV * VEC; i++) oa[g * RV * VEC + i] *= a;
        DP_UNROLL for (uint x = 0u; x < VX; x++) {
            float pe = exp(sv[x] - mn);
            l[g] += pe;
            DP_UNROLL for (uint r = 0u; r < RV; r++) {
                float vv[VEC];
                unpack_vec(vraw[r * VX + x], vv);
                DP_UNROLL for (uint e = 0u; e < VEC; e++) oa[g * RV * VEC + r * VEC + e] += pe * vv[e];
            }
        }
        m[g] = mn;
    }
}

// One chunk (keys k0 .. k1 - 1 of token t) for the workgroup's G q heads: with one chunk (nc = 1) the output
// o = sum / L, else the chunk's partial (sums, m, L) for the merge, as the rounds method stores them. Called by
// every invocation (barriers inside); ua, nkr: the prologue's new key rows (DP_ROPE_QK).
void wide_chunk(uint hx, uint hk, uint c, uint t, uint k0, uint k1, uint p0, uint nc, uint qs, uint ks, bool vec_ok,
                uint ua, uint nkr)
{
    uint tid = gl_LocalInvocationID.x, sgi = gl_SubgroupID, sgl = gl_SubgroupInvocationID;
    // clusters from the subgroup layout, as the rounds method
    uint cl = sgi * (gl_SubgroupSize / LK) + sgl / LK, ln = sgl % LK;
    uvec4 kraw[NKR], vraw[NVR];
    wide_load(k0, k1, hk, cl, ln, sgi, sgl, p0, ks, vec_ok, kraw, vraw);
#ifdef DP_ROPE_QK
    rope_prologue(hx, hk, c, t, ua, nkr, qs, ks);
#endif
    float qr[NQR], oa[NOA], m[G], l[G];
    DP_UNROLL for (uint g = 0u; g < G; g++) {
        DP_UNROLL for (uint i = 0u; i < NVL; i++)
            DP_UNROLL for (uint e = 0u; e < VEC; e++)
#ifdef DP_ROPE_QK
                qr[g * EPL + i * VEC + e] = q_s(g * D + lane_dim(ln, i, e));
#else
                qr[g * EPL + i * VEC + e] = act_load(p.q, t * qs + (hx * G + g) * D + lane_dim(ln, i, e));
#endif
        DP_UNROLL for (uint i = 0u; i < RV * VEC; i++) oa[g * RV * VEC + i] = 0.0;
        m[g] = NEG;
        l[g] = 0.0;
    }
    for (uint kb = k0; kb < k1; kb += BK) {   // uniform: every invocation reaches the barriers
        if (kb != k0) {
            barrier();   // sc_s of the last block is read
            wide_load(kb, k1, hk, cl, ln, sgi, sgl, p0, ks, vec_ok, kraw, vraw);
        }
        wide_scores(kb, k1, cl, ln, p0, ua, qr, kraw);
        barrier();
        wide_values(sgl, vraw, m, l, oa);
    }
    DP_UNROLL for (uint g = 0u; g < G; g++) {
        float L = subgroupAdd(l[g]);
        uint head = t * N_Q_HEADS + hx * G + g;
        uint slot = head * N_CHUNKS + c;
        DP_UNROLL for (uint r = 0u; r < RV; r++) {
            uint dv = sgi + r * NSG;
            DP_UNROLL for (uint e = 0u; e < VEC; e++) {
                float acc = subgroupAdd(oa[g * RV * VEC + r * VEC + e]);
                if (dv < DV && sgl == e % SGS) {
                    uint d = dv * VEC + e;
                    if (nc == 1u) act_store(p.o, head * D + d, acc * (1.0 / L));   // as the merge, one chunk
                    else p.part_o.v[slot * D + d] = acc;
                }
            }
        }
        if (tid == 0u && nc > 1u) {
            p.part_ml.v[slot * 2u] = m[g];
            p.part_ml.v[slot * 2u + 1u] = L;
        }
    }
}
