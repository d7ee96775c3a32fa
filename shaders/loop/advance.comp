#version 460
// advance: the step between two decode steps of a GPU-resident decode loop (lua/lib/doppler/loop.lua). It
// consumes the id the step just sampled, as the host's step-by-step loop does (doppler.generate): a stop id
// (or no candidate, 0xffffffff) stops; otherwise the id is emitted into the out ring and, unless that was
// the last token allowed, becomes the next step's input (ids[0], pos[0] + 1). Once stopped, every later
// step of the chunk is skipped, and this kernel itself changes nothing more: the steps are conditional
// blocks that read state[0] (doppler.loop's default where the device has conditional rendering), or their
// kernels are dispatched indirectly from `args`, whose group counts this kernel zeroes (hint loop_skip).
// mode 0 (at the start of a chunk): args = tmpl (the normal group counts), nothing else.
// mode 2: first the step's last kernel, argmax_final.comp (argmax_reduce.glsl over part_val / part_idx, the
//   fused LM head's n_chunks pairs), whose id it writes to next as that kernel would, then mode 1. Why: the
//   two were dependent single-workgroup dispatches (~6-7 us each on the H100, docs/BENCHMARKS.md session 23);
//   doppler.loop records mode 2 where a step ends with argmax_final writing next.
// Dispatch: (1, 1, 1); invocation 0 does the advance (a few words); the others take part in mode 2's argmax.
// Push:  next (u32 [1], read; written in mode 2)  ids, pos (u32 [1], readwrite)  state (u32 [4 + stops],
//        readwrite)  out (u32 [chunk], write)  args (u32 [3 * n_args], write)  tmpl (u32 [3 * n_args], read)
//        part_val (f32 [n_chunks]), part_idx (u32 [n_chunks]) (mode 2; any buffer otherwise)  n_args, mode,
//        n_chunks (mode 2)
// Spec:  WG  workgroup size, a power of two (1; mode 2: argmax_final's)
// state: [0] stopped (0 running, 1 stop id, 2 length limit, 3 no candidate), [1] ids emitted so far this
//        chunk, [2] the most ids this chunk may emit, [3] number of stop ids, [4..] the stop ids
// The host reads only the out ring (4 bytes per generated token): a stop it cannot infer (a stop id, no
// candidate) leaves the marker STOP_MARK + reason in the slot after the last emitted id, which the host reads
// in place of a next id; a full ring (running) or the length limit it infers from the count it asked for.
// Ids are vocabulary indices, far below STOP_MARK.
#include "dp_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 1;

layout(push_constant) uniform Push {
    U32Buf  next;
    U32Buf  ids;
    U32Buf  pos;
    U32Buf  state;
    U32Out  out_ids;
    U32Out  args;
    U32In   tmpl;
    F32In   part_val;
    U32In   part_idx;
    uint    n_args;
    uint    mode;
    uint    n_chunks;
} p;

#include "../argmax/argmax_reduce.glsl"

const uint STOP_MARK = 0xfffffff0u;

void stop(uint why)
{
    p.state.v[0] = why;
    if (why != 2u) p.out_ids.v[p.state.v[1]] = STOP_MARK + why;   // slot n < the ring's length: see loop.lua
    for (uint i = 0; i < 3u * p.n_args; i++) p.args.v[i] = 0u;
}

void main()
{
    const bool lead = gl_LocalInvocationID.x == 0u;
    if (p.mode == 0u) {
        if (lead) for (uint i = 0; i < 3u * p.n_args; i++) p.args.v[i] = p.tmpl.v[i];
        return;
    }
    // Every invocation reads the word before invocation 0 can change it (after the argmax's barriers), so
    // the workgroup returns as one.
    if (p.state.v[0] != 0u) return;
    uint id;
    if (p.mode == 2u) {
        id = argmax_reduce(p.part_val, p.part_idx, 0u, p.n_chunks);
        if (lead) p.next.v[0] = id;
    }
    if (!lead) return;
    if (p.mode != 2u) id = p.next.v[0];
    if (id == 0xffffffffu) { stop(3u); return; }
    uint n_stops = p.state.v[3];
    for (uint i = 0; i < n_stops; i++)
        if (p.state.v[4u + i] == id) { stop(1u); return; }
    uint n = p.state.v[1];
    p.out_ids.v[n] = id;
    p.state.v[1] = n + 1u;
    if (n + 1u >= p.state.v[2]) { stop(2u); return; }
    p.ids.v[0] = id;
    p.pos.v[0] = p.pos.v[0] + 1u;
}
