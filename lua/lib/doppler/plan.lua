-- doppler.plan: compiles a graph (doppler.graph) into one recorded command buffer.
--
--   local p = plan.compile(dev, graph, env)   -- once per pass shape (decode step, prefill of T)
--   p:run()                                   -- re-submits the recording: no Lua per op
--
-- Steps: bind the symbolic T; apply the fusion rules (doppler.fusions); give every value a
-- place — views alias their source, other values get a slice of one scratch arena whose offsets
-- come from liveness (a value's slice is reused once its last reader has run); lower each op to
-- kernel dispatches (doppler.lower); record them. The recorder adds a barrier only where a
-- dispatch touches memory an earlier one wrote (or writes memory one read).
--
-- env = {
--   T = number,                      tokens in this pass
--   act = "f16" | "f32",             activation type
--   kv = "f16" | "f32",              KV cache type
--   weights = { [name] = tensor },   device tensors (doppler.weights)
--   states  = { [name] = tensor },   KV caches, persistent
--   inputs  = { [name] = tensor },   per-pass inputs (ids, pos), written before each run
--   constants = function(name, values) -> tensor  (small host tables, uploaded once)
--   arena = tensor | nil,            scratch memory to reuse (grown if too small: see p.arena_bytes)
--   bound_outputs = { [name] = tensor }, outputs written straight into the caller's tensors
--   hints = doppler.hints set,
--   loop = nil | { steps = n, record = doppler.loop.record, ... },  a chunk of n decode steps in one
--                                    recording (doppler.loop; the graph is the T = 1 decode step)
-- }
local clock = require("doppler").clock
local Graph = require "doppler.graph"
local lower = require "doppler.lower"
local fusions = require "doppler.fusions"

local M = {}
local Plan = {}
Plan.__index = Plan

local ELT = { f32 = 4, f16 = 2, bf16 = 2, u32 = 4, i32 = 4 }
M.ELT = ELT
local ALIGN = 256

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

local function bind_shape(shape, T)
  local s = {}
  for i, d in ipairs(shape) do s[i] = (d == "T") and T or d end
  return s
end

-- Which ops produce a view of their first input rather than new memory.
local VIEW_OPS = { view = true, last_row = true, slice = true }

-- Ops that update their first input in place (the planner checks nobody else reads it later).
local INPLACE_OPS = { rope = true, softcap = true, rope_kv = true }   -- rope_kv: q (fusions.lua)

local function element_type(node, env)
  if node.dtype == "act" then return env.act end
  return node.dtype
end

-- Assigns arena offsets: values whose lifetimes do not overlap share memory. Greedy first fit
-- over a list of free intervals, in execution order; good enough for a chain of layers, where
-- the peak is a few activations wide.
local function assign_offsets(values)
  local free = { { off = 0, size = math.huge } }
  local top = 0
  local events = {}
  for _, v in ipairs(values) do
    events[#events + 1] = { at = v.first, kind = 1, v = v }
    events[#events + 1] = { at = v.last + 0.5, kind = 0, v = v }
  end
  table.sort(events, function(a, b)
    if a.at ~= b.at then return a.at < b.at end
    return a.kind < b.kind
  end)
  local function release(off, size)
    free[#free + 1] = { off = off, size = size }
    table.sort(free, function(a, b) return a.off < b.off end)
    local merged = {}
    for _, f in ipairs(free) do
      local last = merged[#merged]
      if last and last.off + last.size == f.off then last.size = last.size + f.size
      else merged[#merged + 1] = { off = f.off, size = f.size } end
    end
    free = merged
  end
  for _, e in ipairs(events) do
    local v = e.v
    if e.kind == 1 then
      for i, f in ipairs(free) do
        if f.size >= v.bytes then
          v.offset = f.off
          if f.size == v.bytes then table.remove(free, i)
          else f.off, f.size = f.off + v.bytes, f.size - v.bytes end
          break
        end
      end
      top = math.max(top, v.offset + v.bytes)
    else
      release(v.offset, v.bytes)
    end
  end
  return top
end

function M.compile(dev, graph, env)
  local T = env.T
  local t0 = clock()
  local nodes, copy_of = fusions.apply(graph, env, dev)
  local t_fused = clock()

  -- Shapes with T bound, consumers, and the last reader of each node.
  local last_use, consumers = {}, {}
  for i, n in ipairs(nodes) do
    n.sched = i
    n.bshape = bind_shape(n.shape, T)
    n.etype = element_type(n, env)
    for _, inp in ipairs(n.inputs) do
      last_use[inp] = i
      consumers[inp] = (consumers[inp] or 0) + 1
    end
  end
  for _, name in ipairs(graph.output_order) do last_use[copy_of[graph.outputs[name]]] = #nodes + 1 end

  -- The root (memory owner) of each node: views and in-place ops alias their first input.
  local root = {}
  for _, n in ipairs(nodes) do
    if VIEW_OPS[n.op] or INPLACE_OPS[n.op] then
      local src = n.inputs[1]
      if INPLACE_OPS[n.op] and (consumers[src] or 0) > 1 then
        Graph.fail("%s at %s works in place, but its input is also read elsewhere", n.op, n.where)
      end
      root[n] = root[src] or src
    else
      root[n] = n
    end
  end
  -- Outputs the caller placed itself (env.bound_outputs: e.g. the sampled id in mapped host memory).
  local bound = {}
  for name, t in pairs(env.bound_outputs or {}) do
    local n = graph.outputs[name] and copy_of[graph.outputs[name]]
    if n and root[n] == n then bound[n] = t end
  end
  -- A root lives until the last reader of it or of any alias.
  local values, by_root = {}, {}
  for _, n in ipairs(nodes) do
    local r = root[n]
    local kind = r.op
    if kind ~= "input" and kind ~= "weight" and kind ~= "state" and kind ~= "constant" and kind ~= "glu_down"
       and not bound[r] then
      local v = by_root[r]
      if not v then
        v = { node = r, first = r.sched, last = r.sched,
              bytes = math.max(ALIGN, (numel(r.bshape) * ELT[r.etype] + ALIGN - 1) // ALIGN * ALIGN) }
        by_root[r] = v
        values[#values + 1] = v
      end
      v.last = math.max(v.last, last_use[n] or n.sched)
    end
  end
  local arena_bytes = assign_offsets(values)

  -- Row strides: a slice of a fused projection's output ([T, C] -> columns [from, from + n)) is a
  -- strided view: its rows lie C elements apart. Views and in-place ops of it keep the stride.
  -- Only the inputs a lowering rule lists in lower.strided may be strided (the kernel takes the
  -- stride as a push member); any other reader is an error naming the recipe line.
  for _, n in ipairs(nodes) do
    local src = n.inputs[1]
    if n.op == "slice" then
      n.row_stride = src.row_stride or src.bshape[#src.bshape]
    elseif (VIEW_OPS[n.op] or INPLACE_OPS[n.op]) and src.row_stride then
      n.row_stride = src.row_stride
    end
    local ok = lower.strided[n.op] or {}
    for j, inp in ipairs(n.inputs) do
      if inp.row_stride and not ok[j] and not (VIEW_OPS[n.op] and j == 1 and n.op ~= "last_row") then
        Graph.fail("%s at %s reads a strided slice (input %d), which its kernel cannot: make it contiguous first",
                   n.op, n.where, j)
      end
    end
  end

  local p = setmetatable({ dev = dev, graph = graph, env = env, T = T, nodes = nodes,
                           arena_bytes = arena_bytes, tensors = {}, owned = {}, dispatches = 0 }, Plan)
  if env.arena and env.arena:nbytes() >= arena_bytes then
    p.arena = env.arena
  else
    p.arena = dev:tensor { dtype = "u8", shape = { math.max(arena_bytes, ALIGN) } }
  end

  -- The fused MLPs' sums (fusions.lua's glu_down, gemv_q.comp's DP_DOWN): int64 slots that are zero before a
  -- glu_down adds into its slot, so not arena memory. Slot i belongs to the plan's i-th glu_down; the
  -- dispatch of glu_down i zeroes slot i - 1 (whose readers ran before it) and the first one the last slot
  -- (read by the previous pass's head), so a complete pass leaves only the last slot set, and the next pass
  -- clears it before using it. One buffer per (row length, count), from env.constants (zeros, uploaded once
  -- per session) and shared by the session's plans, which all keep that invariant.
  local fused = {}
  for _, n in ipairs(nodes) do if n.op == "glu_down" then fused[#fused + 1] = n end end
  p.fix_zero = {}
  if #fused > 0 then
    local K = fused[1].bshape[#fused[1].bshape]
    local words, zeros = 2 * K * #fused, {}
    for i = 1, words do zeros[i] = 0 end
    local name = ("doppler.glu_down_sums.%dx%d"):format(K, #fused)
    local buf = env.constants and env.constants(name, zeros)
    if not buf then
      buf = dev:tensor { dtype = "f32", shape = { words } }
      buf:upload(zeros)
      p.owned[#p.owned + 1] = buf
    end
    local slot = {}
    for i, n in ipairs(fused) do
      if n.bshape[#n.bshape] ~= K or #n.bshape ~= 2 or n.bshape[1] ~= 1 then
        Graph.fail("plan: glu_down at %s is not one row of %d values", n.where, K)
      end
      slot[i] = buf:view { offset = (i - 1) * K * 8, dtype = "i64", shape = n.bshape }
    end
    for i, n in ipairs(fused) do
      p.tensors[n] = slot[i]
      p.fix_zero[n] = slot[(i - 2) % #fused + 1]
    end
  end

  -- Device tensors for every node: leaves from env, roots from the arena, aliases as views.
  local function tensor_of(n)
    return p.tensors[n]
  end
  for _, n in ipairs(nodes) do
    local t
    if n.op == "input" then
      t = env.inputs[n.attrs.name] or Graph.fail("plan: input '%s' is not provided", n.attrs.name)
    elseif n.op == "weight" then
      t = env.weights[n.attrs.name] or Graph.fail("plan: weight '%s' is not loaded", n.attrs.name)
    elseif n.op == "state" then
      t = env.states[n.attrs.name] or Graph.fail("plan: state '%s' is not allocated", n.attrs.name)
    elseif n.op == "constant" then
      t = env.constants(n.attrs.name, n.attrs.values)
    elseif bound[n] then
      t = bound[n]
    elseif n.op == "glu_down" then
      t = p.tensors[n]
    elseif root[n] == n then
      t = p.arena:view { offset = by_root[n].offset, dtype = n.etype, shape = n.bshape }
    else
      local src = tensor_of(n.inputs[1])
      local offset = 0
      if n.op == "last_row" then
        offset = (n.inputs[1].bshape[1] - 1) * n.bshape[2] * ELT[n.etype]
      elseif n.op == "slice" then
        offset = n.attrs.from * ELT[n.etype]    -- only the first row is contiguous: users pass strides
      end
      local strides
      if n.row_stride then
        -- a strided view: rows row_stride apart; it spans every byte the kernels touch, so the
        -- recorder's hazard tracking sees them all
        strides = {}
        local inner = 1
        for d = #n.bshape, 2, -1 do strides[d] = inner; inner = inner * n.bshape[d] end
        strides[1] = n.row_stride
      end
      t = src:view { offset = offset, dtype = n.etype, shape = n.bshape, strides = strides }
    end
    p.tensors[n] = t
  end

  -- Lower and record.
  local t_placed = clock()
  local prefetch = lower.side_prefetch(dev, env, T)
  p.recorder = dev:recorder(prefetch)
  if prefetch and (env.hints and env.hints.values.side_prefetch) == "on" and not p.recorder:stats().prefetch then
    Graph.fail("plan: side_prefetch=on, but %s has no side queue (DOPPLER_SIDE_QUEUE=main runs it on the main one)",
               dev:caps().name)
  end
  if env.loop then p.calls = {} end
  local ctx = lower.context(dev, p, env)
  for _, n in ipairs(nodes) do
    local rule = lower.rules[n.op]
    if not rule then Graph.fail("plan: no kernel for op '%s' (%s)", n.op, n.where) end
    rule(ctx, n)
  end
  local t_lowered = clock()
  local prep_alloc = lower.finish(ctx)   -- the weight preparations the rules asked for, in one submit
  local t_prepared = clock()
  p.dispatches = ctx.dispatches
  -- A GPU-resident decode loop: the step's calls recorded env.loop.steps times (doppler.loop).
  if env.loop then env.loop.record(dev, p, env.loop) end
  -- Seconds per phase (recipes/bench/compile.lua): the fusion pass, placing values in the arena, lowering
  -- (its kernels made or found, its dispatches recorded, the weight preparations' tensors allocated: prepare_alloc
  -- of it), running the preparations, and a loop's steps recorded again.
  p.compile_times = { fusions = t_fused - t0, place = t_placed - t_fused, lower = t_lowered - t_placed,
                      prepare_alloc = prep_alloc, prepare = t_prepared - t_lowered, loop = clock() - t_prepared }
  p.outputs = {}
  for name, n in pairs(graph.outputs) do p.outputs[name] = p.tensors[copy_of[n]] end
  return p
end

-- Replays the recorded command buffer and waits for it.
function Plan:run()
  self.recorder:run()
end

function Plan:output(name) return self.outputs[name] end

function Plan:stats()
  local s = self.recorder:stats()
  s.arena_bytes = self.arena_bytes
  return s
end

M.numel = numel
return M
