#version 460
// advance: the step between two decode steps of a GPU-resident decode loop (lua/lib/doppler/loop.lua). It
// consumes the id the step just sampled, as the host's step-by-step loop does (doppler.generate): a stop id
// (or no candidate, 0xffffffff) stops; otherwise the id is emitted into the out ring and, unless that was
// the last token allowed, becomes the next step's input (ids[0], pos[0] + 1). Once stopped, every later
// step of the chunk is skipped: the steps' kernels are dispatched indirectly from `args`, whose group
// counts this kernel zeroes, and this kernel itself changes nothing more.
// mode 0 (at the start of a chunk): args = tmpl (the normal group counts), nothing else.
// Dispatch: (1, 1, 1); one invocation does everything (a few words).
// Push:  next (u32 [1], read)  ids, pos (u32 [1], readwrite)  state (u32 [4 + stops], readwrite)
//        out (u32 [chunk], write)  args (u32 [3 * n_args], write)  tmpl (u32 [3 * n_args], read)  n_args, mode
// state: [0] stopped (0 running, 1 stop id, 2 length limit, 3 no candidate), [1] ids emitted so far this
//        chunk, [2] the most ids this chunk may emit, [3] number of stop ids, [4..] the stop ids
// The host reads only the out ring (4 bytes per generated token): a stop it cannot infer (a stop id, no
// candidate) leaves the marker STOP_MARK + reason in the slot after the last emitted id, which the host reads
// in place of a next id; a full ring (running) or the length limit it infers from the count it asked for.
// Ids are vocabulary indices, far below STOP_MARK.
#include "dp_common.glsl"

layout(local_size_x = 1) in;

layout(push_constant) uniform Push {
    U32In   next;
    U32Buf  ids;
    U32Buf  pos;
    U32Buf  state;
    U32Out  out_ids;
    U32Out  args;
    U32In   tmpl;
    uint    n_args;
    uint    mode;
} p;

const uint STOP_MARK = 0xfffffff0u;

void stop(uint why)
{
    p.state.v[0] = why;
    if (why != 2u) p.out_ids.v[p.state.v[1]] = STOP_MARK + why;   // slot n < the ring's length: see loop.lua
    for (uint i = 0; i < 3u * p.n_args; i++) p.args.v[i] = 0u;
}

void main()
{
    if (p.mode == 0u) {
        for (uint i = 0; i < 3u * p.n_args; i++) p.args.v[i] = p.tmpl.v[i];
        return;
    }
    if (p.state.v[0] != 0u) return;
    uint id = p.next.v[0];
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
