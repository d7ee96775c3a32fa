// shaders/norm/norm_rows.glsl: the row layout and sum reduction shared by rmsnorm.comp and add_rmsnorm.comp.
// A workgroup of WG invocations normalises ROWS rows; each row gets LR = WG / ROWS lanes (a power of two).
// The row's lanes are taken from the subgroup layout, never from gl_LocalInvocationID, so that:
//   LR <= subgroup size: a row is a cluster of LR lanes of one subgroup, reduced with subgroupShuffleXor
//                        (no shared memory, no barrier);
//   LR >  subgroup size: a row is LR / subgroup-size whole subgroups: subgroupAdd, then one barrier and a
//                        sum over the row's subgroups in shared memory.
// The branch depends only on gl_SubgroupSize, so it is uniform and the barrier is reached by all.
// Needs: WG and ROWS spec constants declared before the include, and the extensions
// GL_KHR_shader_subgroup_basic, _arithmetic and _shuffle enabled at the top of the kernel.

const uint LR = WG / ROWS;   // lanes per row
shared float norm_red[WG];   // one slot per subgroup (WG bounds the subgroup count for any size)

// This invocation's row within the workgroup (0 .. ROWS-1) and lane within the row (0 .. LR-1).
void norm_lane(out uint rw, out uint ln)
{
    uint sg = gl_SubgroupSize;
    if (LR <= sg) {
        rw = gl_SubgroupID * (sg / LR) + gl_SubgroupInvocationID / LR;
        ln = gl_SubgroupInvocationID % LR;
    } else {
        uint per = LR / sg;   // subgroups per row
        rw = gl_SubgroupID / per;
        ln = (gl_SubgroupID % per) * sg + gl_SubgroupInvocationID;
    }
}

// The sum of v over the row's LR lanes, returned to every lane of the row.
float norm_row_sum(float v, uint rw)
{
    uint sg = gl_SubgroupSize;
    if (LR <= sg) {
        for (uint off = LR / 2u; off > 0u; off >>= 1) v += subgroupShuffleXor(v, off);
        return v;
    }
    uint per = LR / sg;
    float s = subgroupAdd(v);
    if (subgroupElect()) norm_red[gl_SubgroupID] = s;
    barrier();
    float t = 0.0;
    for (uint i = 0u; i < per; i++) t += norm_red[rw * per + i];
    return t;
}
