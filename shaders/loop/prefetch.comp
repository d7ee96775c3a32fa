#version 460
// prefetch: reads the weights the main queue's next stages will read, so that they are in the GPU's L2 when
// those stages run. It runs on a second queue beside the main recording's runs (gpu/prefetch.c): barriers of
// the main queue do not wait for it, and it waits for nothing but the main queue's progress count, which each
// stage's prefetch_signal sets as it begins. Stage j of run c is read once the count reaches
// c * stages + j + 1 - lead[j], i.e. while the lead[j] stages before it run (the host picks the leads:
// dp_prefetch_leads in gpu/prefetch.c).
// It stays for run after run of the recording (one submit for many), and leaves when the host sets the quit
// word, or after SPIN_LIMIT polls without progress (the host stopped replaying).
// Late stages: the count it last saw when it reaches a stage says whether the main queue has begun that stage
// or already finished it (begun the one after). Workgroup 0 counts the stages it reaches and the finished ones
// (CTL_SEEN, CTL_LATE: gpu/prefetch.h's counts); with SKIP it does not read a finished stage (1) or a begun one
// (2), and counts those (CTL_SKIPPED). Why: a side kernel behind the main queue reads weights no kernel will
// read again before L2 has dropped them, competing with the main queue for DRAM; whether that is what makes
// a process decode slower with the prefetcher than without is what the counts are for (docs/BENCHMARKS.md 46).
// Nothing is written but those counts: the loads feed an xor that is stored only if it equals a value the data
// never makes in practice, which is what keeps the compiler from dropping them.
// Dispatch: (G, 1, 1).  Push: first (u32 [stages + 1]: each stage's first range), lead (u32 [stages]), ranges
// (uvec4: address lo, hi, bytes lo, hi), ctl (dp_prefetch.glsl), stages.  Spec: WG, UN, COPIES, SKIP (0, 1, 2).
#extension GL_EXT_control_flow_attributes : require
#include "dp_common.glsl"
#include "dp_prefetch.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
// 32-byte sectors touched per invocation between two uses of the loaded values.
layout(constant_id = 1) const uint UN = 8;
// Copies of the progress count; workgroup g polls copy g % COPIES.
layout(constant_id = 2) const uint COPIES = 32;
// Stages not read: 0 none, 1 those the main queue has finished, 2 those it has begun (when this kernel reaches them).
layout(constant_id = 3) const uint SKIP = 0;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Ranges { uvec4 v[]; };

layout(push_constant) uniform Push {
    U32In       first;
    U32In       lead;
    Ranges      ranges;
    PrefetchCtl ctl;
    uint        stages;
} p;

const uint SPIN_LIMIT = 1u << 20;
const uint SECTOR = 32u;

shared bool s_leave;
shared uint s_seen;

// Lane 0 waits until the progress count reaches `need` (counts wrap: compared as a difference); `seen` is the
// count it read last.
bool wait_for(uint need, out uint seen)
{
    if (gl_LocalInvocationID.x == 0u) {
        uint slot = (gl_WorkGroupID.x % COPIES) * CTL_STRIDE, spins = 0u;
        bool leave = false;
        uint count = p.ctl.v[slot];
        while (int(count - need) < 0 && !leave) {
            spins++;
            leave = spins == SPIN_LIMIT || ((spins & 63u) == 0u && p.ctl.v[CTL_QUIT] != 0u);
            count = p.ctl.v[slot];
        }
        s_leave = leave;
        s_seen = count;
    }
    barrier();
    bool leave = s_leave;
    seen = s_seen;
    barrier();   // every lane has read them before lane 0 may write them again
    return !leave;
}

void main()
{
    uint acc = 0u;
    uint64_t stride = uint64_t(gl_NumWorkGroups.x) * WG;
    uint64_t me = uint64_t(gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    bool going = true;
    for (uint c = 0u; going; c++) {
        for (uint j = 0u; j < p.stages && going; j++) {
            uint b = p.first.v[j], e = p.first.v[j + 1u];
            if (b == e) continue;
            uint seen;
            going = wait_for(c * p.stages + j + 1u - min(p.lead.v[j], j + 1u + c * p.stages), seen);
            if (!going) break;
            uint begin = c * p.stages + j + 1u;            // the count once stage j of run c has begun
            bool finished = int(seen - (begin + 1u)) >= 0, begun = int(seen - begin) >= 0;
            bool skip = (SKIP == 1u && finished) || (SKIP == 2u && begun);
            if (gl_WorkGroupID.x == 0u && gl_LocalInvocationID.x == 0u) {
                atomicAdd(p.ctl.v[CTL_SEEN], 1u);
                if (finished) atomicAdd(p.ctl.v[CTL_LATE], 1u);
                if (skip) atomicAdd(p.ctl.v[CTL_SKIPPED], 1u);
            }
            if (skip) continue;
            for (uint r = b; r < e; r++) {
                uvec4 d = p.ranges.v[r];
                uint64_t base = packUint2x32(d.xy);
                uint64_t n = packUint2x32(d.zw) / SECTOR;
                for (uint64_t i = me; i < n; i += stride * UN) {
                    uint v[UN];
                    [[unroll]] for (uint u = 0u; u < UN; u++) {
                        uint64_t s = i + uint64_t(u) * stride;
                        v[u] = s < n ? U32In(base + s * SECTOR).v[0] : 0u;
                    }
                    [[unroll]] for (uint u = 0u; u < UN; u++) acc ^= v[u];
                }
            }
        }
        // A run without a stage to read would spin here for ever: leave instead.
        if (p.first.v[p.stages] == 0u) break;
    }
    if (acc == 0x7fc00001u) p.ctl.v[CTL_SINK] = acc;
}
