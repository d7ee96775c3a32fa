-- doppler.session: a loaded model on the device, ready to run passes.
--
--   local s = session.open(recipe, model, { hints = h, context = 4096 })
--   s:feed(ids)               -- the prompt, in chunks of hints.prefill_chunk (progress: s.on_prefill)
--   local id = s:decode(tok)  -- one token in, logits -> the sampler -> the next id (4 bytes read back)
--   local ids, why = s:decode_chunk(id, steps, limit, stops)  -- many steps in one submit (doppler.loop)
--   s:logits()                -- the last pass's logits rows (host floats), when asked for
--   s:reset()                 -- forget the context (positions restart at 0)
--   s.passes, s.upload_bytes, s.readback_bytes   -- counters since open (doppler.profile, benchmarks)
--
-- A pass is a compiled plan (doppler.plan): recorded once per shape, then replayed. The
-- recipe's forward() is called once per graph kind (all logits rows, or the last only).
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local weights = require "doppler.weights"
local lower = require "doppler.lower"
local rope = require "doppler.rope"
local loop = require "doppler.loop"

local M = {}
local Session = {}

-- Positions a session can take back (Session:rewind) at the cost of that many extra slots per
-- sliding-window cache.
M.REWIND = 128
Session.__index = Session

local function resolve_types(h)
  local f32 = h:get("precision") == "f32"
  local act = h:get("act_dtype")
  if act == "auto" then act = f32 and "f32" or "f16" end
  local kv = h:get("kv_dtype")
  if kv == "auto" then kv = f32 and "f32" or "f16" end
  return act, kv
end

-- Logits are read by the sampler and by --logits-out: produce them in f32 whatever the
-- activation type, by marking the node that makes them (through in-place ops such as softcap).
-- The linear that makes them is marked as the LM head (attrs.lm_head): its x takes the fused LM head's
-- mode whether or not the fusion applies (lower.gemv_q_x), so that the two give the same logits.
local function logits_in_f32(node)
  local n = node
  while n do
    n.dtype = "f32"
    if n.op == "softcap" then n = n.inputs[1] else break end
  end
  if n and n.op == "linear" then n.attrs.lm_head = true end
end

-- The clock warm-up (gpu/warmup.h, hint clock_warmup) while the host works alone, loading weights or compiling
-- a plan: an idle GPU lowers its clock, and the first passes after a pause ran ~4x slower on the H100 until it
-- rose again (docs/BENCHMARKS.md, session 31). It ends when a recording is replayed or the side prefetcher
-- starts, or after WARM_POLLS polls of its quit word: 2.4-3.5 s on the H100 (0.15-0.22 us a poll, run 38b/38c),
-- after which the driver keeps the clock up for another 1.5-3 s; a longer load starts it again per tensor.
local WARM_POLLS = 16000000

-- Starts it where the hint lets it; returns whether it runs.
local function warm_up(dev, h)
  local mode = h:get("clock_warmup")
  if mode == "off" then return false end
  local caps = dev:caps()
  if mode == "auto" and (not caps.side_queue or caps.type == "cpu") then return false end
  local started = dev:warmup_start(WARM_POLLS)
  if not started and mode == "on" then
    error(("clock_warmup=on, but %s has no second compute queue (DOPPLER_SIDE_QUEUE=main runs it on the main one)")
          :format(caps.name), 0)
  end
  return started
end

function M.open(recipe, model, opts)
  local h = opts.hints
  local dev = opts.device or doppler.device()
  local cfg = model:config()
  -- llama.cpp stores Llama 3.1+'s rope scaling as the divisor of each frequency it computed
  -- (rope_freqs.weight, [rotated dims / 2]), not as config parameters.
  if model:kind() == "gguf" and model:tensor("rope_freqs.weight") then
    local t = dev:upload_model_tensor(model, "rope_freqs.weight", "f32")
    cfg.rope_scaling = { rope_type = "freq_factors", factors = t:download() }
    t:release()
  end
  if recipe.prepare then recipe.prepare(cfg, model) end
  local act, kv = resolve_types(h)
  local s = setmetatable({
    recipe = recipe, model = model, cfg = cfg, hints = h, dev = dev,
    act = act, kv = kv, context = opts.context or h:get("context"),
    chunk = h:get("prefill_chunk"), pos = 0, plans = {}, graphs = {}, constants = {},
    passes = 0, upload_bytes = 0, readback_bytes = 0,
    plans_compiled = 0, plan_seconds = 0,   -- what building graphs and compiling plans took (doppler run reports it apart)
  }, Session)
  s.chunk = math.min(s.chunk, s.context)
  s.norm_offset = recipe.norm_offset
  -- the recipe sees { kind = "gguf" | "safetensors", model = the dp.model } (doppler synth passes a kind only)
  if type(s.norm_offset) == "function" then s.norm_offset = s.norm_offset({ kind = model:kind(), model = model }) end
  s.norm_offset = s.norm_offset or 0

  local warm = warm_up(dev, h)
  local progress = function(i, n, name)
    -- a no-op while it runs; starts it again if it ran out during a long load
    if warm then dev:warmup_start(WARM_POLLS) end
    if opts.progress then opts.progress(i, n, name) end
  end
  local t0 = os.clock()
  s.weights, s.weight_info = weights.load(dev, recipe, model, cfg, h, progress)
  s.load_seconds = os.clock() - t0

  -- KV caches: global layers hold the whole context; a sliding layer holds its window (plus a
  -- prefill chunk: attention reads the chunk's own k, v directly, so the window alone suffices).
  s.states = {}
  s.cache_spec = {}
  s.kv_bytes = 0
  return s
end

-- The io table a recipe's forward() sees.
function Session:io(g, all_rows)
  local s = self
  local io = {
    ids = g:input("ids", { "T" }, "u32"),
    pos = g:input("pos", { "T" }, "u32"),
    norm_offset = s.norm_offset,
  }
  function io.rope_table(spec)
    local inv = rope.inv_freq(s.cfg, spec)
    local name = ("rope:%s:%s"):format(tostring(spec.theta), rope.describe(spec.scaling))
    return g:constant(name, inv)
  end
  function io.kv_cache(layer, window)
    local D, Hkv = s.cfg.head_dim, s.cfg.num_key_value_heads
    -- A sliding layer keeps its window plus REWIND slots, so that the last REWIND positions can
    -- be taken back (Session:rewind) without losing keys the window still needs.
    local cap = window and math.min(window + M.REWIND, s.context) or s.context
    local kname, vname = ("kv%d.k"):format(layer), ("kv%d.v"):format(layer)
    if not s.states[kname] then
      s.states[kname] = s.dev:tensor { dtype = s.kv, shape = { Hkv, cap, D } }
      s.states[vname] = s.dev:tensor { dtype = s.kv, shape = { Hkv, cap, D } }
      s.kv_bytes = s.kv_bytes + 2 * s.states[kname]:nbytes()
    end
    local k, v = g:state(kname, { Hkv, cap, D }, s.kv), g:state(vname, { Hkv, cap, D }, s.kv)
    -- whole: a slot per position of the context, so no slot is ever reused (fusions.lua's rope_kv may then
    -- append before attention whatever the window)
    local whole = cap >= s.context
    k.attrs.whole, v.attrs.whole = whole, whole
    return { k = k, v = v }
  end
  function io.round_to_weight_dtype(x)
    -- a quantised table is dequantised exactly to f32 by reference implementations
    local dt = s.weight_info.embed_file_dtype
    if dt ~= "f16" and dt ~= "bf16" then dt = "f32" end
    return doppler.round_to(dt, x)
  end
  function io.logits_rows(x)
    if all_rows then return x end
    return g:last_row(x)
  end
  return io
end

local weight_node_cache_mt = { __mode = "k" }

-- The graph of the forward pass, built once per kind (all logits rows or the last one). Its build counts in
-- plan_seconds: like a plan's compile, a one-off of the process before its first pass (7-24 ms for Gemma 3 1B on
-- the H100's host, docs/BENCHMARKS.md 39d), which doppler run reports apart from the first token.
function Session:graph(all_rows)
  local key = all_rows and "all" or "last"
  if self.graphs[key] then return self.graphs[key] end
  local t0 = doppler.clock()
  local g = Graph.new { name = self.recipe.name }
  local nodes = setmetatable({}, weight_node_cache_mt)
  local s = self
  local function w(name)
    local n = nodes[name]
    if not n then
      local t = s.weights[name]
      if not t then Graph.fail("weight '%s' is not in the model (%s)", name, s.model:path()) end
      n = g:weight { name = name, shape = lower.logical_shape(t), dtype = t:dtype() }
      nodes[name] = n
    end
    return n
  end
  local io = self:io(g, all_rows)
  local logits = self.recipe.forward(g, self.cfg, w, io)
  logits_in_f32(logits)
  g:output("logits", logits)
  -- Decoding reads back only this id, computed in the pass from the last row.
  g:output("next", self:next_node(g, io, all_rows and g:last_row(logits) or logits))
  self.graphs[key] = g
  self.plan_seconds = self.plan_seconds + (doppler.clock() - t0)
  return g
end

-- The id a pass ends with: the argmax, or a draw of the sampler given to use_sampler (docs/SAMPLING.md).
-- Every pass records its ids in the context buffer, which the repetition penalty reads; its length is
-- the sampler's draw counter.
function Session:next_node(g, io, row)
  if not self.states["sample.context"] then
    self.states["sample.context"] = self.dev:tensor { dtype = "u32", shape = { self.context } }
  end
  local ctx = g:state("sample.context", { self.context }, "u32")
  local n_ctx = g:context_ids(io.ids, io.pos, ctx)
  if not self.sample_spec then return g:argmax(row) end
  return g:sample(row, n_ctx, ctx, self.sample_spec)
end

-- spec: nil (argmax) or doppler.sampler.spec(...). Passes are recompiled when it changes.
function Session:use_sampler(spec, key)
  if key == self.sample_key then return end
  self.sample_spec, self.sample_key = spec, key
  self.graphs, self.plans = {}, {}
end

function Session:constant(name, values)
  local t = self.constants[name]
  if not t then
    t = self.dev:tensor { dtype = "f32", shape = { #values } }
    t:upload(values)
    self.constants[name] = t
  end
  return t
end

-- plan.compile, timed (plans_compiled, plan_seconds), with the clock warm-up running while the host works.
function Session:compile(g, env)
  warm_up(self.dev, self.hints)
  local t = doppler.clock()
  local p = plan.compile(self.dev, g, env)
  self.plans_compiled = self.plans_compiled + 1
  self.plan_seconds = self.plan_seconds + (doppler.clock() - t)
  return p
end

-- Per-pass inputs and the sampled id for passes of up to T tokens. They live in mapped host memory: writing
-- them before a pass and reading the id after it are memory copies, not submits (one submit per pass).
function Session:ensure_inputs(T)
  if self.inputs and self.inputs.cap >= T then return end
  local cap = math.max(T, self.chunk)
  self.inputs = {
    cap = cap,
    ids = self.dev:tensor { dtype = "u32", shape = { cap }, host = true },
    pos = self.dev:tensor { dtype = "u32", shape = { cap }, host = true },
    next = self.dev:tensor { dtype = "u32", shape = { 1 }, host = true },
  }
  self.plans = {}   -- plans recorded against the old input buffers are stale
end

-- The plan for a pass of T tokens.
function Session:plan_for(T, all_rows)
  local key = T .. (all_rows and "a" or "l")
  local p = self.plans[key]
  if p then return p end
  local g = self:graph(all_rows)
  self:ensure_inputs(T)
  local env = {
    T = T, act = self.act, kv = self.kv, hints = self.hints,
    weights = self.weights, states = self.states,
    keep_logits = true,   -- Session:last_logits reads them (the lm_head fusion writes them besides the id)
    inputs = {
      ids = self.inputs.ids:view { offset = 0, dtype = "u32", shape = { T } },
      pos = self.inputs.pos:view { offset = 0, dtype = "u32", shape = { T } },
    },
    constants = function(name, values) return self:constant(name, values) end,
    arena = self.arena,
    bound_outputs = { next = self.inputs.next },
  }
  p = self:compile(g, env)
  if p.arena ~= self.arena then
    -- A larger arena: earlier plans keep their own (still valid) arena; later ones share this.
    self.arena = p.arena
  end
  self.plans[key] = p
  return p
end

-- The plan of a chunk of `steps` decode steps run by the GPU itself (doppler.loop).
function Session:loop_plan(steps)
  local key = "L" .. steps .. self.hints:get("loop_skip")   -- a chunk is recorded for one skip mode
  local p = self.plans[key]
  if p then return p end
  -- Only the inputs, not the step's plan: a generation that runs in chunks may never need that plan, and
  -- compiling it took ~60 ms before Gemma 3 1B's decode began on the H100 (docs/BENCHMARKS.md 39b). The loop's plan
  -- shares the session's arena, or makes a larger one, as any plan does.
  self:ensure_inputs(1)
  local bufs = loop.buffers(self.dev, steps)
  local env = {
    T = 1, act = self.act, kv = self.kv, hints = self.hints,
    weights = self.weights, states = self.states,
    inputs = {
      ids = self.inputs.ids:view { offset = 0, dtype = "u32", shape = { 1 } },
      pos = self.inputs.pos:view { offset = 0, dtype = "u32", shape = { 1 } },
    },
    constants = function(name, values) return self:constant(name, values) end,
    arena = self.arena,
    bound_outputs = { next = self.inputs.next },
  }
  env.loop = { steps = steps, record = loop.record, next = self.inputs.next, ids = env.inputs.ids,
               pos = env.inputs.pos, state = bufs.state, out = bufs.out, skip = self.hints:get("loop_skip") }
  p = self:compile(self:graph(false), env)
  if p.arena ~= self.arena then self.arena = p.arena end
  p.loop_bufs = bufs
  self.plans[key] = p
  return p
end

-- One submit for many tokens: feeds `id` at self.pos, then lets the GPU go on by itself (sample, stop
-- check, next step) for at most steps - 1 more tokens, of which at most `limit` are emitted; `stops` is a
-- list of stop ids. Returns the ids the GPU emitted (not `id`, not a stop id) and why it ended
-- (doppler.loop: RUNNING = the last step's pick is pending, as after a pass: s:next_argmax(); STOP_ID;
-- LIMIT; NO_CANDIDATE). Exactly the ids the step-by-step loop (pass, next_argmax, ...) produces.
function Session:decode_chunk(id, steps, limit, stops)
  if steps <= 1 or limit < 1 or #stops > loop.MAX_STOPS or self.pos + steps > self.context then
    -- a single step (also near the end of the context, where the step reports a full context)
    self:pass({ id }, 1, 1, false)
    return {}, loop.RUNNING
  end
  if id < 0 or id >= self.cfg.vocab_size then
    error(("token id %d is outside the vocabulary (0..%d)"):format(id, self.cfg.vocab_size - 1), 0)
  end
  local p = self:loop_plan(steps)
  local state = { 0, 0, limit, #stops }
  for i, s in ipairs(stops) do state[4 + i] = s end
  p.loop_bufs.state:upload(state)
  self.inputs.ids:upload({ id })
  self.inputs.pos:upload({ self.pos })
  self.upload_bytes = self.upload_bytes + 8 + 4 * #state
  p:run()
  self.passes = self.passes + 1
  self.last_plan = p
  -- The out ring, word by word up to the end marker (advance.comp): 4 bytes per emitted id, plus one word
  -- when a stop id or a missing candidate ended the chunk. At most min(steps - 1, limit) ids: the last
  -- step's pick is pending (RUNNING), and the limit's stop leaves no marker (its count says it).
  local most = math.min(steps - 1, limit)
  local ids, why = {}, loop.RUNNING
  for i = 1, most do
    local w = p.loop_bufs.out:download({ dtype = "u32", offset = i - 1, count = 1 })[1]
    self.readback_bytes = self.readback_bytes + 4
    if w >= loop.STOP_MARK then why = w - loop.STOP_MARK; break end
    ids[i] = w
  end
  local n = #ids
  if why == loop.RUNNING and n == limit then why = loop.LIMIT end
  -- steps skipped by conditional rendering also skipped their prefetch signals (gpu/recorder.h)
  if why ~= loop.RUNNING and p.loop_skip == "conditional" then p.recorder:side_restart() end
  -- fed: `id`, then every emitted id but one that reached the limit
  self.pos = self.pos + 1 + n - (why == loop.LIMIT and 1 or 0)
  return ids, why
end

-- Runs ids[first..last] at positions self.pos.. as one pass; returns the plan (its outputs).
function Session:pass(ids, first, last, all_rows)
  local T = last - first + 1
  if self.pos + T > self.context then
    error(("context full: %d positions + %d tokens exceed the context of %d (hint context=N)"):format(
      self.pos, T, self.context), 0)
  end
  local p = self:plan_for(T, all_rows)
  local idv, posv = {}, {}
  for i = 1, T do
    local id = ids[first + i - 1]
    if id < 0 or id >= self.cfg.vocab_size then
      error(("token id %d is outside the vocabulary (0..%d)"):format(id, self.cfg.vocab_size - 1), 0)
    end
    idv[i], posv[i] = id, self.pos + i - 1
  end
  self.inputs.ids:upload(idv)
  self.inputs.pos:upload(posv)
  self.upload_bytes = self.upload_bytes + 8 * T
  p:run()
  self.passes = self.passes + 1
  self.pos = self.pos + T
  self.last_plan = p
  return p
end

-- Feeds ids (a list) in chunks of the prefill size. With all_rows, on_rows(list of strings)
-- receives every position's logits (f32 little-endian rows) as they are computed. When ids take more
-- than one pass, self.on_prefill(done, total), if set, is called after each (each pass waits for the GPU):
-- `doppler run` shows a long prompt's progress with it.
function Session:feed(ids, all_rows, on_rows)
  local i = 1
  while i <= #ids do
    local last = math.min(#ids, i + self.chunk - 1)
    local p = self:pass(ids, i, last, all_rows)
    if all_rows and on_rows then
      local rows = p:output("logits"):read()
      self.readback_bytes = self.readback_bytes + #rows
      on_rows({ rows })
    end
    if self.on_prefill and #ids > self.chunk then self.on_prefill(last, #ids) end
    i = last + 1
  end
end

-- The last pass's last logits row as a Lua array of numbers.
function Session:last_logits()
  local t = self.last_plan:output("logits")
  if not t then error("last_logits: the last pass was a GPU decode loop's chunk, which keeps no logits", 2) end
  local V = self.cfg.vocab_size
  local rows = t:numel() // V
  self.readback_bytes = self.readback_bytes + 4 * V
  return t:download { offset = (rows - 1) * V * 4, count = V }
end

-- The id the last pass's argmax picked (4 bytes read back).
function Session:next_argmax()
  self.readback_bytes = self.readback_bytes + 4
  return self.last_plan:output("next"):download({ dtype = "u32" })[1]
end

function Session:reset()
  self.pos = 0
end

-- Forgets every position from `pos` on, keeping the cache before it: a chat turn that re-renders
-- the last reply differently (templates trim whitespace) continues from the common prefix.
-- Returns false (and changes nothing) when that is further back than the caches allow.
function Session:rewind(pos)
  if pos > self.pos or pos < 0 then error(("rewind to %d: only %d positions are held"):format(pos, self.pos), 2) end
  if self.pos - pos > M.REWIND then return false end
  self.pos = pos
  return true
end

-- Forgets the recorded passes: the next pass of each shape is recorded again. For switching the
-- GPU profiler (dev:profile), which applies to recordings made after it is switched.
function Session:drop_plans()
  self.plans = {}
end

function Session:stats()
  local pool = self.dev:pool_stats()
  return { kv_bytes = self.kv_bytes, pool = pool, weights_bytes = self.weight_info.bytes,
           plans_compiled = self.plans_compiled, plan_seconds = self.plan_seconds }
end

return M
