#version 450
// copy: dst[0, bytes) = src[0, bytes). Bandwidth-bound: when both addresses are 16-byte aligned,
// each invocation moves UNROLL uvec4s per trip of a grid-stride loop (all loads issued before the
// stores, so that several 16-byte requests are in flight); the bytes % 16 tail and unaligned
// addresses take a byte loop. src and dst must not overlap.
// Dispatch: (groups, 1, 1), any groups >= 1; for full bandwidth a few waves of the device
//           (e.g. 4 * SMs * 2048 / WG groups), never more than needed: ceil(bytes / 16 / WG).
// Push:  src (V4In), dst (V4Out), bytes (u64)
// Spec constants: WG      workgroup size (local_size_x_id = 0)  default 256
//                 UNROLL  uvec4s per invocation per trip          default 4
// Defines: none
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint UNROLL = 4;

layout(push_constant) uniform Push { V4In src; V4Out dst; uint64_t bytes; } p;

void main()
{
    uint64_t s = uint64_t(p.src), d = uint64_t(p.dst);
    uint stride = gl_NumWorkGroups.x * WG;
    uint gid = gl_GlobalInvocationID.x;
    uint64_t done = 0;
    if (((s | d) & 15ul) == 0ul) {
        uint n = uint(p.bytes >> 4);
        uint i = gid;
        uvec4 t[UNROLL];
        for (; uint64_t(i) + uint64_t(UNROLL - 1u) * stride < n; i += UNROLL * stride) {
            for (uint k = 0u; k < UNROLL; k++) t[k] = p.src.v[i + k * stride];
            for (uint k = 0u; k < UNROLL; k++) p.dst.v[i + k * stride] = t[k];
        }
        for (; i < n; i += stride) p.dst.v[i] = p.src.v[i];
        done = uint64_t(n) << 4;
    }
    U8In sb = U8In(s + done);
    U8Out db = U8Out(d + done);
    uint rest = uint(p.bytes - done);
    for (uint i = gid; i < rest; i += stride) db.v[i] = sb.v[i];
}
