#version 460
// repack_flat: a quantised weight's row_wise blocks (the file's order) rewritten in the flat layout on the device
// (dp_quant.glsl's DP_LAYOUT_FLAT, core/quant_layout.c's dp_qlayout_pack: segment s of every block, in block
// order, forms plane s; planes in DQ_SEG_* order, plane s starting after n_blocks * the sizes of the planes
// before it). Why on the GPU: the kernels read flat planes with 128-bit loads, and repacking while uploading
// costs the CPU ~1 s per GB; here it is one pass over the bytes at device bandwidth, with nothing on disk.
// Every segment offset and size is even, so the copy moves 16-bit words: one invocation per word of the source.
// Dispatch: ceil(n_words / WG) groups as (min(g, 65535), ceil(g / 65535), 1).
// Push:  src (the row_wise blocks, read)  dst (the same byte count, write; not src)
//        n_words (the tensor's bytes / 2, a whole number of blocks; < 2^32: tensors under 8 GiB)
// Spec:  WG  workgroup size (default 256)
// Defines: the weight type DP_Q_* (dp_quant.glsl)
#include "dp_quant.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(push_constant) uniform Push {
    U16In  src;
    U16Out dst;
    uint   n_words;
} p;

void main()
{
    const uint WPB = QB / 2u;                      // 16-bit words per block
    const uint i = (gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y) * WG + gl_LocalInvocationID.x;
    if (i >= p.n_words) return;
    const uint n_blocks = p.n_words / WPB;
    const uint blk = i / WPB, byte = 2u * (i % WPB);
    uint64_t plane = 0ul;                          // byte offset of plane s in dst
    for (uint s = 0u; s < DQ_NSEG; ++s) {
        if (byte >= DQ_SEG_OFF[s] && byte < DQ_SEG_OFF[s] + DQ_SEG_SIZE[s]) {
            const uint64_t at = plane + uint64_t(blk) * DQ_SEG_SIZE[s] + (byte - DQ_SEG_OFF[s]);
            U16Out(uint64_t(p.dst) + at).v[0] = p.src.v[i];
            return;
        }
        plane += uint64_t(n_blocks) * DQ_SEG_SIZE[s];
    }
}
