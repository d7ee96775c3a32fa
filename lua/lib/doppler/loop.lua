-- doppler.loop: a GPU-resident decode loop. One recording (one submit) runs a chunk of decode steps:
--
--   step, advance, step, advance, ..., step          (`steps` steps, steps - 1 advances)
--
-- A step is the T = 1 decode pass (the recipe's graph, compiled by doppler.plan); it reads the token and
-- its position from the session's input buffers and leaves the sampled id in `next`. The advance kernel
-- (shaders/loop/advance.comp) does what the host's step-by-step loop (doppler.generate) does between two
-- passes: a stop id ends the chunk; otherwise the id is emitted into an out ring and, unless it was the
-- last token allowed, written to the inputs as the next step's token at the next position. Everything
-- position-dependent already comes from those buffers (that is what lets one recorded pass replay token
-- after token), so the chunk is the step's dispatches recorded `steps` times.
--
-- Work after a stop is skipped on the GPU, one of two ways (hint loop_skip), and no shader had to learn an
-- early-exit flag:
--   conditional (where the device has VK_EXT_conditional_rendering): each step after the first is a
--     conditional block that runs while the state word "stopped" is 0, which the advance kernel sets; the
--     kernels are dispatched directly. One read of that word per step.
--   indirect: every kernel of the steps is dispatched indirectly, its group counts read from `args` (one
--     entry per distinct group shape), which the advance kernel zeroes when it stops; the chunk begins by
--     restoring them from a template. Why not by default: on the H100 each indirect dispatch made its
--     kernel wait for the front end to fetch the counts, ~0.1 ms per token in all (decode 1.08-1.14x with
--     direct dispatches, docs/BENCHMARKS.md 31j).
-- The host reads back the out ring once per chunk, up to the ids emitted (plus the end marker after a stop).
-- Where a step ends with argmax_final writing `next` (the fused LM head's second stage), the advance
-- between two steps runs that stage itself (advance.comp's mode 2): one dependent dispatch less per token.
-- The chunk's last step keeps its argmax_final (the host reads that pick).
local M = {}

-- Most stop ids the advance kernel checks (state words 4..); more fall back to the step-by-step loop.
M.MAX_STOPS = 60

-- Stop reasons (state word 0).
M.RUNNING, M.STOP_ID, M.LIMIT, M.NO_CANDIDATE = 0, 1, 2, 3
-- The out ring's end marker: STOP_MARK + reason after the last emitted id, for a stop by id or for no
-- candidate (shaders/loop/advance.comp); the host reads the ring up to it and never the state words.
M.STOP_MARK = 0xfffffff0

-- Buffers a session's loop plans share: lp = { state = u32 [4 + MAX_STOPS], out = u32 [steps] }, host-mapped.
function M.buffers(dev, steps)
  return {
    state = dev:tensor { dtype = "u32", shape = { 4 + M.MAX_STOPS }, host = true },
    out = dev:tensor { dtype = "u32", shape = { steps }, host = true },
  }
end

-- Records plan p's calls (p.calls, collected by doppler.lower in loop mode) as a chunk.
-- L = { steps, next, ids, pos (tensors the step reads/writes), state, out (from M.buffers) }.
function M.record(dev, p, L)
  local slot, counts = {}, {}
  for _, c in ipairs(p.calls) do
    local key = table.concat(c.groups, ",")
    if not slot[key] then
      slot[key] = #counts // 3
      for i = 1, 3 do counts[#counts + 1] = c.groups[i] end
    end
    c.offset = slot[key] * 12
  end
  local n_args = #counts // 3
  p.loop_args = dev:tensor { dtype = "u32", shape = { #counts } }
  p.loop_tmpl = dev:tensor { dtype = "u32", shape = { #counts } }
  p.loop_tmpl:upload(counts)
  local last = p.calls[#p.calls]
  local fold = last and last.kernel:name() == "argmax_final" and rawequal(last.push.ids, L.next)
               and last.groups[1] == 1 and last.groups[2] == 1 and last.groups[3] == 1
  local skip = L.skip or "auto"
  local caps = dev:caps()
  if skip == "auto" then skip = caps.conditional_rendering and "conditional" or "indirect" end
  if skip == "conditional" and not caps.conditional_rendering then
    error(("hint loop_skip=conditional: %s has no VK_EXT_conditional_rendering (use auto or indirect)"):format(
      caps.name), 0)
  end
  local adv = dev:kernel { file = "loop/advance.comp", constants = { WG = 1 } }
  local adv_argmax = fold and dev:kernel { file = "loop/advance.comp", constants = { WG = 256 } }
  local function advance(mode)
    p.recorder:dispatch(mode == 2 and adv_argmax or adv, { 1, 1, 1 }, {
      next = L.next, ids = L.ids, pos = L.pos, state = L.state, out_ids = L.out,
      args = p.loop_args, tmpl = p.loop_tmpl, n_args = n_args, mode = mode,
      part_val = mode == 2 and last.push.part_val or L.state, part_idx = mode == 2 and last.push.part_idx or L.state,
      n_chunks = mode == 2 and last.push.n_chunks or 0,
    })
  end
  advance(0)
  for s = 1, L.steps do
    local between = s < L.steps
    -- the first step always runs (the host starts a chunk running); state word 0 is "stopped"
    local cond = skip == "conditional" and s > 1
    if cond then p.recorder:begin_conditional(L.state, 0, true) end
    for i, c in ipairs(p.calls) do
      if not (fold and between and i == #p.calls) then
        if skip == "conditional" then p.recorder:dispatch(c.kernel, c.groups, c.push)
        else p.recorder:dispatch_indirect(c.kernel, p.loop_args, c.offset, c.push) end
      end
    end
    if cond then p.recorder:end_conditional() end
    if between then advance(fold and 2 or 1) end
  end
  p.loop_skip = skip
  p.loop_steps = L.steps
  p.loop_argmax_folded = fold or false
  p.dispatches = p.dispatches * L.steps + L.steps - (fold and L.steps - 1 or 0)
end

return M
