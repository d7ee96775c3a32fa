// shaders/sample/sample_common.glsl: the sampler's arithmetic, twin of core/sample.c line for line, so that
// the GPU draws the very id the CPU reference draws. Everything is `precise` (no fused multiply-add, no
// reassociation): Vulkan rounds f32 +, -, * correctly, so these give the bits the C code gives. exp and log
// are Cephes' polynomials (the built-ins' precision is implementation-defined).
#ifndef DP_SAMPLE_COMMON_GLSL
#define DP_SAMPLE_COMMON_GLSL

#define DP_NO_ID 0xffffffffu       // "no candidate": sorts after every real id

// Candidate order: larger z first, ties to the lower id. Invalid entries carry (-inf, DP_NO_ID).
bool dp_before(float za, uint ia, float zb, uint ib)
{
    return za > zb || (za == zb && ia < ib);
}

// Is a (penalised) logit a candidate at all? NaN and -inf never are.
bool dp_candidate(float z)
{
    return !isnan(z) && z != uintBitsToFloat(0xff800000u);
}

float dp_sample_exp(float x)
{
    if (x < -87.0) return 0.0;
    if (abs(x) < uintBitsToFloat(0x30800000u)) return 1.0;     // 2^-30
    precise float k = floor(x * 1.44269504088896341 + 0.5);
    precise float r = x - k * 0.693359375;
    r = r - k * -2.12194440e-4;
    precise float z = r * r;
    precise float y = ((((( 1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r
                        + 4.1665795894e-2) * r + 1.6666665459e-1) * r + 5.0000001201e-1) * z + r + 1.0;
    precise float res = y * uintBitsToFloat(uint(int(k) + 127) << 23);
    return res;
}

float dp_sample_log(float x)
{
    uint b = floatBitsToUint(x);
    int e = int(b >> 23) - 126;
    float m = uintBitsToFloat((b & 0x7fffffu) | 0x3f000000u);
    precise float f;
    if (m < 0.707106781186547524) {
        e -= 1;
        f = m + m - 1.0;
    } else {
        f = m - 1.0;
    }
    precise float z = f * f;
    precise float y = (((((((( 7.0376836292e-2 * f - 1.1514610310e-1) * f + 1.1676998740e-1) * f
                           - 1.2420140846e-1) * f + 1.4249322787e-1) * f - 1.6668057665e-1) * f
                        + 2.0000714765e-1) * f - 2.4999993993e-1) * f + 3.3333331174e-1) * f * z;
    float fe = float(e);
    y = y + -2.12194440e-4 * fe;
    y = y + -0.5 * z;
    precise float r = f + y;
    precise float res = r + 0.693359375 * fe;
    return res;
}

uint dp_pcg_hash(uint x)
{
    uint state = x * 747796405u + 2891336453u;
    uint word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

float dp_sample_uniform(uint seed_lo, uint seed_hi, uint step, uint id)
{
    uint h = dp_pcg_hash(seed_lo + dp_pcg_hash(seed_hi));
    h = dp_pcg_hash(step + h);
    h = dp_pcg_hash(id + h);
    return float((h >> 9) * 2u + 1u) * uintBitsToFloat(0x33800000u);   // * 2^-24, exact
}

float dp_sample_gumbel(uint seed_lo, uint seed_hi, uint step, uint id)
{
    float u = dp_sample_uniform(seed_lo, seed_hi, step, id);
    return -dp_sample_log(-dp_sample_log(u));
}

// The draw's key: z + T * g (greedy: T = 0 gives z itself, no noise computed).
float dp_sample_key(float z, float temperature, uint seed_lo, uint seed_hi, uint step, uint id)
{
    if (temperature <= 0.0) return z;
    precise float key = z + temperature * dp_sample_gumbel(seed_lo, seed_hi, step, id);
    return key;
}

#endif
