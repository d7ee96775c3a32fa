-- doppler.fusions: rewrite rules the plan compiler applies before lowering. A rule is Lua:
--   { name = "...", op = "mul", apply = function(node, ctx) ... end, lower = function(ctx, node) ... end }
-- `apply` looks at a node of kind `op` (and its inputs) and either returns nothing (no match)
-- or rewrites the node in place into a fused op. A built-in rule's fused op has its lowering in
-- doppler.lower; a rule that brings `lower` (a user's fusion: a Lua file plus a shader, no recompile)
-- rewrites the node into op = rule.name, and `lower` records its kernels (ctx as in doppler.lower:
-- ctx.kernel(file, defines, constants) takes an absolute shader path; a fusion file gets its own directory
-- as its first argument, ...). Rules run on a copy of the graph's nodes, so one graph still compiles for any T.
-- Loading: M.load(FILE) (the CLI's --fusions FILE). Switching off: hint fusion=off | a list of names to
-- keep | "-name,..." to skip (docs/OPS.md, Fusions).
local lower = require "doppler.lower"

local M = { rules = {} }

-- Registers (or, under the same name, replaces) a rule. Rules run in registration order, each over
-- every node, so a later rule sees what an earlier one fused (qkv_linear after glu, for example).
function M.register(rule)
  if type(rule) ~= "table" or type(rule.name) ~= "string" or type(rule.op) ~= "string"
     or type(rule.apply) ~= "function" then
    error("fusions.register: a rule needs name (string), op (string) and apply (function)", 2)
  end
  if rule.lower ~= nil then
    if type(rule.lower) ~= "function" then error("fusions.register: " .. rule.name .. ": lower must be a function", 2) end
    local existing = lower.rules[rule.name]
    if existing and not M.owns_lowering(rule.name) then
      error("fusions.register: " .. rule.name .. " names a built-in op; give the fused op another name", 2)
    end
    lower.rules[rule.name] = rule.lower
    lower.strided[rule.name] = rule.strided
  end
  for i, r in ipairs(M.rules) do
    if r.name == rule.name then M.rules[i] = rule; return rule end
  end
  M.rules[#M.rules + 1] = rule
  return rule
end

function M.owns_lowering(name)
  for _, r in ipairs(M.rules) do if r.name == name and r.lower then return true end end
  return false
end

function M.names()
  local t = {}
  for i, r in ipairs(M.rules) do t[i] = r.name end
  return t
end

-- Runs a user's fusion file: a Lua chunk that calls require("doppler.fusions").register{...}; its
-- first argument (...) is the file's directory, for shader paths next to it. Errors name the file.
function M.load(path)
  local chunk, err = loadfile(path)
  if not chunk then error("--fusions: " .. tostring(err), 0) end
  local dir = path:match("^(.*)/[^/]*$") or "."
  if dir:sub(1, 1) ~= "/" then
    local cwd = os.getenv("PWD")
    if cwd then dir = cwd .. "/" .. dir end
  end
  local ok, e = pcall(chunk, dir)
  if not ok then error(("--fusions %s: %s"):format(path, tostring(e)), 0) end
end

-- The rules the hint `fusion` lets run: on (all), off (none), "a,b" (only those), "-a,-b" (all but those).
-- A name no rule has is an error listing the registered ones.
local function enabled_rules(env)
  local v = env and env.hints and env.hints.values and env.hints.values.fusion or "on"
  if v == "on" then return M.rules end
  if v == "off" then return {} end
  local known = {}
  for _, r in ipairs(M.rules) do known[r.name] = true end
  local only, skip = {}, {}
  local any_only = false
  for item in tostring(v):gmatch("[^,%s]+") do
    local neg, name = item:match("^(%-?)(.+)$")
    if not known[name] then
      error(("hint fusion: no fusion named '%s'; registered: %s"):format(name, table.concat(M.names(), ", ")), 0)
    end
    if neg == "-" then skip[name] = true else only[name] = true; any_only = true end
  end
  local out = {}
  for _, r in ipairs(M.rules) do
    if not skip[r.name] and (not any_only or only[r.name]) then out[#out + 1] = r end
  end
  return out
end

-- ctx helpers given to rules: consumers(n) -> list of nodes reading n; order index. Made afresh for each
-- rule, so a node an earlier rule made dead has no consumers.
-- Live nodes: outputs, kept nodes, inputs and states, and everything they read (transitively). A fused
-- node may read a leaf created after it (the K weight, made by the recipe after the Q linear), so this
-- walks the inputs rather than the order.
-- Why stamps in the nodes (n.fuse_live, n.fuse_rgen = the walk's number) rather than sets keyed by node: these
-- two walks run once per rule over the whole graph, most of a plan's fusion time, and filling a fresh hash
-- table of a thousand nodes per walk (with its rehashes) cost more than the walks themselves.
local function mark_live(nodes, gen)
  local stack, top = {}, 0
  for _, n in ipairs(nodes) do
    if (n.is_output or n.keep or n.op == "input" or n.op == "state") and n.fuse_live ~= gen then
      n.fuse_live = gen
      top = top + 1
      stack[top] = n
    end
  end
  while top > 0 do
    local ins = stack[top].inputs
    stack[top] = nil
    top = top - 1
    for j = 1, #ins do
      local i = ins[j]
      if i.fuse_live ~= gen then i.fuse_live = gen; top = top + 1; stack[top] = i end
    end
  end
end

-- A set of the live nodes (apply's last step: the nodes it keeps).
local function live_nodes(nodes, gen)
  mark_live(nodes, gen)
  local live = {}
  for _, n in ipairs(nodes) do if n.fuse_live == gen then live[n] = true end end
  return live
end

-- Readers count only live nodes: a node an earlier rule left dead reads nothing. `gen` numbers this walk
-- (apply's walks count up from a fresh number per call).
local function make_ctx(nodes, env, dev, gen)
  mark_live(nodes, gen)
  for _, n in ipairs(nodes) do
    if n.fuse_live == gen then
      local ins = n.inputs
      for j = 1, #ins do
        local i = ins[j]
        if i.fuse_rgen == gen then
          local r = i.fuse_readers
          r[#r + 1] = n
        else
          i.fuse_rgen, i.fuse_readers = gen, { n }
        end
      end
    end
  end
  local function readers_of(n)
    if n.fuse_rgen == gen then return n.fuse_readers end
    return nil
  end
  local ctx = {}
  function ctx.consumers(n) return readers_of(n) or {} end
  function ctx.only_reader(n, reader)
    local r = readers_of(n)
    return r ~= nil and #r == 1 and r[1] == reader
  end
  -- True when no node strictly between a and b (in order) reads `value`.
  function ctx.unread_between(value, a, b)
    for _, r in ipairs(readers_of(value) or {}) do
      if r.order > a.order and r.order < b.order then return false end
    end
    return true
  end
  function ctx.is_output(n) return n.is_output end
  ctx.env = env
  ctx.nodes = nodes   -- every node in order (rules that must see all their candidates first: glu_down)
  ctx.dev = dev   -- the device the plan is for (rules that depend on its kernels ask doppler.lower); may be nil
  ctx.hints = env and env.hints and env.hints.values or {}
  -- Marks `n` as memory that the fused node `writer` fills: n keeps its place in the arena and its
  -- readers; it reads nothing itself and moves to just before `writer` in the order (so its memory
  -- is live from the write on, and a writer earlier than n itself is allowed). n may already be another
  -- fused node's output (a later rule moving it on, norm_gate_up taking add_rmsnorm's sum): that node then
  -- stops being kept for it, and with nothing else keeping it or reading it, it is dropped.
  function ctx.produced_by(n, writer)
    local old = n.op == "fused_output" and n.written_by
    if old and old ~= writer then
      old.writes[n] = nil
      if next(old.writes) == nil and not old.keep_own then old.keep = nil end
    end
    n.op = "fused_output"
    n.keep = true
    n.inputs = {}
    n.written_by = writer
    if not writer.writes then writer.writes, writer.keep_own = {}, writer.keep end
    writer.writes[n] = true
    writer.keep = true        -- n is kept, so its writer must run even if nothing reads its own value
  end
  -- Order of the first node that reads n's data, looking through views (a view reads nothing).
  function ctx.first_read(n)
    local first = math.huge
    for _, r in ipairs(readers_of(n) or {}) do
      if r.op == "view" then first = math.min(first, ctx.first_read(r))
      else first = math.min(first, r.order) end
    end
    return first
  end
  return ctx
end

-- Returns fused copies of graph.nodes (the graph itself is not changed) and the map from each
-- original node to its copy.
function M.apply(graph, env, dev)
  local copies, map = {}, {}
  for i, n in ipairs(graph.nodes) do
    local c = setmetatable({}, getmetatable(n))
    for k, v in pairs(n) do c[k] = v end
    c.order = i
    c.inputs = {}
    for j, inp in ipairs(n.inputs) do c.inputs[j] = map[inp] end
    map[n] = c
    copies[i] = c
  end
  for _, name in ipairs(graph.output_order) do map[graph.outputs[name]].is_output = true end
  local rules = enabled_rules(env)
  local gen = 0   -- the walks' numbers (make_ctx): the copies are fresh, so they start unstamped
  for _, rule in ipairs(rules) do
    -- readers as the earlier rules left them; made at the rule's first candidate (a walk of the whole graph:
    -- most of a plan's lowering time, so not for the rules a graph has no candidate for)
    local ctx
    for _, n in ipairs(copies) do
      if n.op == rule.op then
        if not ctx then gen = gen + 1; ctx = make_ctx(copies, env, dev, gen) end
        rule.apply(n, ctx)
      end
    end
  end
  -- Nodes a fusion made dead (nothing live reads them, not an output) are dropped.
  local live = live_nodes(copies, gen + 1)
  local out, before = {}, {}
  for _, n in ipairs(copies) do
    if live[n] and n.written_by then
      before[n.written_by] = before[n.written_by] or {}
      table.insert(before[n.written_by], n)
    end
  end
  for _, n in ipairs(copies) do
    if live[n] and not n.written_by then
      for _, f in ipairs(before[n] or {}) do out[#out + 1] = f end
      out[#out + 1] = n
    end
  end
  return out, map
end

-- act(gate) * up  ->  one GLU kernel (GeGLU for gelu_tanh, SwiGLU for silu).
M.register {
  name = "glu", op = "mul",
  apply = function(n, ctx)
    local a, b = n.inputs[1], n.inputs[2]
    local act, other = nil, nil
    if (a.op == "gelu_tanh" or a.op == "silu") and ctx.only_reader(a, n) and not a.is_output then act, other = a, b
    elseif (b.op == "gelu_tanh" or b.op == "silu") and ctx.only_reader(b, n) and not b.is_output then act, other = b, a end
    if not act then return end
    n.op = "glu"
    n.attrs = { kind = act.op }
    n.inputs = { act.inputs[1], other }
  end,
}

-- r = a + b; y = rmsnorm(r)  ->  one kernel that stores r and writes y (the residual stream).
M.register {
  name = "add_rmsnorm", op = "rmsnorm",
  apply = function(n, ctx)
    local sum = n.inputs[1]
    if sum.op ~= "add" or not ctx.unread_between(sum, sum, n) then return end
    n.op = "add_rmsnorm"
    n.inputs = { sum.inputs[1], sum.inputs[2], n.inputs[2], sum }
    ctx.produced_by(sum, n)   -- keeps its memory; the add_rmsnorm kernel writes it
  end,
}


-- Weights the fused projections take: float ones (fused/gemv_multi.comp) and quantised ones (gemv_q.comp with
-- DP_GLU for gate_up; with q_matmul=dequant_f16 their f16 copies go through gemv_multi too; doppler.lower).
local FLOAT_W = { f32 = true, f16 = true, bf16 = true }
local function fusable_weight(dtype) return FLOAT_W[dtype] or lower.is_quant(dtype) end

-- A linear the fused projections can take: such a weight, output in the activation type, read by someone.
local function plain_linear(l, ctx)
  return l.op == "linear" and fusable_weight(l.inputs[2].dtype) and l.dtype == "act" and not l.is_output
         and #ctx.consumers(l) > 0
end

-- The projection fusions are for decode-sized passes (T <= 4): with the GPU loop on, a 512-token prefill
-- and a 32-token prompt were slower fused than unfused on the H100 (docs/BENCHMARKS.md). nil: T unknown.
local function decode_sized(ctx)
  local T = ctx.env and ctx.env.T
  if type(T) ~= "number" then return nil end
  return T <= 4
end

-- glu(linear(h, Wg), linear(h, Wu))  ->  one GEMV pass reading both weight rows, the activation applied
-- (fused/gemv_multi.comp with DP_GLU). Not with hint matmul=gemm, which asks for the tiled kernel.
-- Prefill-sized passes too where gemm_cm can take both products with the activation in its epilogue
-- (lower.cm_prefill_ok: cooperative matrices, f16): on the H100 that saved the glu kernel's pass and the
-- gate and up outputs' round trip through memory (docs/BENCHMARKS.md).
M.register {
  name = "gate_up", op = "glu",
  apply = function(n, ctx)
    local g, u = n.inputs[1], n.inputs[2]
    if ctx.hints.matmul == "gemm" then return end
    if decode_sized(ctx) == false then
      local w = g.op == "linear" and g.inputs[2]
      if not (w and lower.cm_prefill_ok(ctx.dev, ctx.env, w.dtype, w.shape[2])) then return end
    end
    if not (plain_linear(g, ctx) and plain_linear(u, ctx)) then return end
    if #g.inputs ~= 2 or #u.inputs ~= 2 or g.inputs[1] ~= u.inputs[1] then return end
    if lower.kernel_dtype(ctx, g.inputs[2]) ~= lower.kernel_dtype(ctx, u.inputs[2]) then return end
    if not (ctx.only_reader(g, n) and ctx.only_reader(u, n)) then return end
    n.op = "glu_linear"
    n.attrs = { kind = n.attrs.kind }
    n.inputs = { g.inputs[1], g.inputs[2], u.inputs[2] }
  end,
}

-- Two or three linears of one input (Q, K and V projections; also gate and up where gate_up is off)
-- -> one GEMV pass writing each output (fused/gemv_multi.comp). The first linear becomes the fused node;
-- the others keep their memory and readers as fused_output nodes it writes. All must share the weight
-- type the kernels see (lower.kernel_dtype: a quantised weight's f16 copy is f16) and either all have a
-- bias or none.
-- Prefill-sized passes too where gemm_cm takes them as one grid over the concatenated columns (DP_MULTI:
-- lower.cm_prefill_ok, no biases, every output but the last a multiple of 128 columns, so that no column
-- tile straddles two weights): on the H100 that merged the small k / v GEMMs into q's (docs/BENCHMARKS.md).
M.register {
  name = "qkv", op = "linear",
  apply = function(n, ctx)
    if ctx.hints.matmul == "gemm" or not plain_linear(n, ctx) then return end
    local prefill = decode_sized(ctx) == false
    local w0 = n.inputs[2]
    if prefill and not (#n.inputs == 2 and lower.cm_prefill_ok(ctx.dev, ctx.env, w0.dtype, w0.shape[2])) then
      return
    end
    local x = n.inputs[1]
    local group = { n }
    for _, r in ipairs(ctx.consumers(x)) do
      if #group == 3 then break end
      if r ~= n and r.order > n.order and r.inputs[1] == x and plain_linear(r, ctx)
         and lower.kernel_dtype(ctx, r.inputs[2]) == lower.kernel_dtype(ctx, n.inputs[2]) and #r.inputs == #n.inputs then
        group[#group + 1] = r
      end
    end
    if #group < 2 then return end
    if prefill then
      for i = 1, #group - 1 do
        if group[i].inputs[2].shape[1] % 128 ~= 0 then return end
      end
    end
    local outs, ws, bs = {}, {}, (#n.inputs == 3) and {} or nil
    local inputs = { x }
    for i, l in ipairs(group) do
      outs[i], ws[i] = l, l.inputs[2]
      inputs[#inputs + 1] = l.inputs[2]
      if bs then bs[i] = l.inputs[3]; inputs[#inputs + 1] = l.inputs[3] end
    end
    for i = 2, #group do ctx.produced_by(group[i], n) end
    n.op = "qkv_linear"
    n.attrs = { outputs = outs, weights = ws, biases = bs }
    n.inputs = inputs
  end,
}

-- ---- fuse2: attention prologue (rope_kv) and Gemma's sandwich norm (norm_add_norm) ---------------------

-- attention(rope(norm?(q)), rope(norm?(k)), v, pos, cache)  ->  one rope_kv kernel (shaders/rope/rope_kv.comp)
-- doing the per-head q/k RMSNorm (where both have one, with one eps and offset: Gemma 3, Qwen 3), RoPE on q
-- and k in place, and the KV-cache append of k and v; attention then skips its own kv_append. Appending
-- before attention is allowed where no slot a query still needs is overwritten (attention.comp's header):
-- global layers, a sliding cache with cap >= window + T - 1 (every decode step; prefill chunks up to the
-- session's REWIND slots), or a sliding cache with a slot for every position of the context (attrs.whole,
-- doppler.session: a context shorter than window + REWIND; no slot is reused, as in a global layer. Why:
-- Gemma 3's 512-key window left 22 of its 26 layers unfused at such contexts: on the H100 Gemma 3 1B Q4_K_M
-- decoded at ~1.40 ms per token at a context of 72 (doppler tune's wall clock) against ~1.14 at 4096
-- (decode.lua), docs/BENCHMARKS.md 44f). Elsewhere the chain stays unfused. The q rope node becomes the fused
-- node (in place on q's projection); the k rope node a view of k's projection, which the kernel rotates in
-- place.
local function rope_source(r, ctx)
  local x = r.inputs[1]
  if x.op == "rmsnorm" and ctx.only_reader(x, r) and not x.is_output then return x.inputs[1], x end
  return x, nil
end

M.register {
  name = "rope_kv", op = "attention",
  apply = function(n, ctx)
    local T = ctx.env and ctx.env.T
    if type(T) ~= "number" or n.attrs.kv_appended then return end
    local q, k, v, pos, kc, vc = table.unpack(n.inputs)
    if q.op ~= "rope" or k.op ~= "rope" or q.is_output or k.is_output then return end
    if not (ctx.only_reader(q, n) and ctx.only_reader(k, n)) then return end
    if q.inputs[2] ~= pos or k.inputs[2] ~= pos or q.inputs[3] ~= k.inputs[3] then return end
    local window, cap = n.attrs.window or 0, kc.shape[2]
    local whole = kc.op == "state" and kc.attrs.whole and vc.op == "state" and vc.attrs.whole
    if type(cap) ~= "number" or (window > 0 and cap < window + T - 1 and not whole) then
      return
    end
    local xq, nq = rope_source(q, ctx)
    local xk, nk = rope_source(k, ctx)
    if (nq == nil) ~= (nk == nil) then return end
    -- q and k are rotated in place: nothing else may read their projections
    if not (ctx.only_reader(xq, nq or q) and ctx.only_reader(xk, nk or k)) or xq.is_output or xk.is_output then return end
    if nq and (nq.attrs.eps ~= nk.attrs.eps or nq.attrs.offset ~= nk.attrs.offset
               or nq.inputs[2].dtype ~= nk.inputs[2].dtype) then return end
    -- q's node runs the kernel: everything it reads must come before it
    for _, x in ipairs { xq, xk, v, nq and nq.inputs[2] or xq, nk and nk.inputs[2] or xk } do
      if x.order > q.order then return end
    end
    local freq = q.inputs[3]
    q.op = "rope_kv"
    q.attrs = { norm = nq ~= nil, eps = nq and nq.attrs.eps, offset = nq and nq.attrs.offset }
    q.inputs = { xq, xk, v, pos, freq, kc, vc }
    if nq then q.inputs[8], q.inputs[9] = nq.inputs[2], nk.inputs[2] end
    k.op, k.inputs, k.attrs = "view", { xk }, {}
    local attrs = {}
    for key, val in pairs(n.attrs) do attrs[key] = val end
    attrs.kv_appended = true
    n.attrs = attrs
  end,
}

-- ---- attention_rope: rope_kv folded into attention_decode (one dependent dispatch less per layer) ----------
-- attention(rope_kv(q, k, v, ...), view(k), v, pos, cache)  ->  one attention node whose kernel
-- (attention_decode.comp with DP_ROPE_QK) does rope_kv's work itself: each workgroup norms and rotates its q
-- rows and the new keys it reads in registers / shared memory, and chunk 0's workgroup of each (kv head,
-- token) appends k, v to the caches. Decode-sized passes only (T <= 4, the attention_decode kernel); runs after
-- rope_kv and needs it (so the append-before-attention order is already known safe: no query reads a slot
-- of this call's tokens). Not where attention would not take attention_decode (hint attention_decode=basic,
-- head_dim not a multiple of 8 or above 256, heads not a multiple of the kv heads).
M.register {
  name = "attention_rope", op = "attention",
  apply = function(n, ctx)
    if decode_sized(ctx) ~= true or not n.attrs.kv_appended or n.attrs.rope then return end
    if (ctx.hints.attention_decode or "auto") == "basic" then return end
    local r, kview, v, pos, kc, vc = table.unpack(n.inputs)
    if r.op ~= "rope_kv" or kview.op ~= "view" or r.is_output or kview.is_output then return end
    if not (ctx.only_reader(r, n) and ctx.only_reader(kview, n)) then return end
    local xq, xk, rv, rpos, freq, rkc, rvc, qw, kw = table.unpack(r.inputs)
    if kview.inputs[1] ~= xk or rv ~= v or rpos ~= pos or rkc ~= kc or rvc ~= vc then return end
    local D, Hq, Hkv = n.shape[3], n.shape[2], xk.shape[2]
    if type(D) ~= "number" or type(Hq) ~= "number" or type(Hkv) ~= "number" then return end
    if D % 8 ~= 0 or D > 256 or Hq % Hkv ~= 0 then return end
    local attrs = {}
    for key, val in pairs(n.attrs) do attrs[key] = val end
    attrs.rope = { norm = r.attrs.norm, eps = r.attrs.eps, offset = r.attrs.offset }
    n.attrs = attrs
    n.inputs = { xq, xk, v, pos, kc, vc, freq, qw, kw }
  end,
}

-- x + rmsnorm(a; w1) feeding add_rmsnorm (Gemma's post-norm, residual add and the next pre-norm)  ->  one
-- norm_add_norm kernel (shaders/norm/norm_add_norm.comp) writing the residual stream y and the normed h.
-- Runs after add_rmsnorm (it rewrites that rule's nodes); both norm weights must share a dtype.
M.register {
  name = "norm_add_norm", op = "add_rmsnorm",
  apply = function(n, ctx)
    local a, b, w2, sum = table.unpack(n.inputs)
    local r, x = nil, nil
    if b.op == "rmsnorm" and ctx.only_reader(b, n) and not b.is_output then r, x = b, a
    elseif a.op == "rmsnorm" and ctx.only_reader(a, n) and not a.is_output then r, x = a, b end
    if not r or r.inputs[2].dtype ~= w2.dtype then return end
    n.op = "norm_add_norm"
    n.inputs = { x, r.inputs[1], r.inputs[2], w2, sum }
    n.attrs = { eps1 = r.attrs.eps, offset1 = r.attrs.offset, eps = n.attrs.eps, offset = n.attrs.offset }
  end,
}

-- rmsnorm(embed(ids, table)), the first layer's input norm over the token embeddings (which the residual
-- stream reads too)  ->  one kernel (embed/embed_norm.comp, op embed_norm) that looks the rows up, stores them
-- (the embed node becomes its second output) and normalises them, as gather / gather_q and rmsnorm.comp do
-- (bit for bit on lavapipe; on the H100 h within one f16 ulp, embed_norm.comp says why). Why: the norm was
-- a single-workgroup dispatch right after the lookup on the decode's critical path (~4-5 us on the H100,
-- docs/BENCHMARKS.md session 23). Rows up to lower.EMBED_NORM_MAX_C (the workgroup's rows live in shared
-- memory); a quantised table needs rows of a multiple of 8 (gather_q's); a float norm weight.
M.register {
  name = "embed_norm", op = "rmsnorm",
  apply = function(n, ctx)
    local e, w = n.inputs[1], n.inputs[2]
    if e.op ~= "embed" or #e.shape ~= 2 then return end
    local C = e.shape[2]
    if type(C) ~= "number" or C > lower.EMBED_NORM_MAX_C or not FLOAT_W[w.dtype] then return end
    local ids, tab = e.inputs[1], e.inputs[2]
    if lower.quant_types[tab.dtype] and C % 8 ~= 0 then return end
    n.op = "embed_norm"
    n.attrs = { eps = n.attrs.eps, offset = n.attrs.offset, scale = e.attrs.scale }
    n.inputs = { ids, tab, w, e }
    ctx.produced_by(e, n)   -- the looked-up rows, which the residual stream reads: this kernel stores them
  end,
}

-- The norm's nodes as the prenorm fusions take them: residual x, branch output a, the norm weights, the
-- residual sum node, and the attributes the kernels' DP_PRENORM reads (gemv_q.comp's header).
local function prenorm_parts(h)
  if h.op == "add_rmsnorm" then
    local x, a, w2, sum = table.unpack(h.inputs)
    return x, a, nil, w2, sum, { kind = 1, eps = h.attrs.eps, offset = h.attrs.offset }
  end
  local x, a, w1, w2, sum = table.unpack(h.inputs)
  return x, a, w1, w2, sum, { kind = 2, eps1 = h.attrs.eps1, offset1 = h.attrs.offset1, eps = h.attrs.eps,
                              offset = h.attrs.offset }
end

-- glu_linear(h), h the normed output of add_rmsnorm or norm_add_norm read by nothing else  ->  the glu_linear
-- computes the norm itself while it stages x (gemv_q.comp, DP_PRENORM) and writes the residual stream y that
-- the norm kernel wrote: one dependent dispatch less per layer. Decode-sized passes where the pair goes to
-- gemv_q with int8 x, and one-token passes of Gemma's form whose float gate+up goes to gemv_multi (its
-- DP_PRENORM=2, as norm_qkv; lower.glu_prenorm_ok). Why: on the H100 a decode norm costs ~4-5 us as a dispatch of
-- its own, most of it the ordering (docs/BENCHMARKS.md 29b). Unlike the other fusions this one changes
-- roundings (h is not rounded to the activation type, the sums of squares run in another order).
M.register {
  name = "norm_gate_up", op = "glu_linear",
  apply = function(n, ctx)
    if decode_sized(ctx) ~= true or n.attrs.prenorm or #n.inputs ~= 3 then return end
    local h, wg, wu = n.inputs[1], n.inputs[2], n.inputs[3]
    if h.is_output or not ctx.only_reader(h, n) then return end
    if h.op ~= "add_rmsnorm" and h.op ~= "norm_add_norm" then return end
    local N, K = wg.shape[1], wg.shape[2]
    if type(N) ~= "number" or type(K) ~= "number" then return end
    local x, a, w1, w2, sum, pre = prenorm_parts(h)
    if not lower.glu_prenorm_ok(ctx.dev, ctx.env, wg, wu, N, K, pre.kind) then return end
    if not ctx.unread_between(sum, h, n) then return end
    n.attrs = { kind = n.attrs.kind, prenorm = pre }
    n.inputs = { x, wg, wu, a, w2, sum, w1 }
    ctx.produced_by(sum, n)   -- the residual stream, which the norm kernel wrote: the GEMV's staging now
  end,
}

-- qkv_linear(h) without biases, h the normed output of norm_add_norm (Gemma's sandwich norm) read by nothing
-- else  ->  the q/k/v pass computes the norm itself (fused/gemv_multi.comp, DP_PRENORM=2: each thread forms
-- its chunks of the normed row from x and a, and the sums are scaled by 1 / rms(y) at the end) and writes the
-- residual stream. One-token passes where the projections go to gemv_multi (lower.qkv_prenorm_ok). Changes
-- roundings as norm_gate_up does. Not after add_rmsnorm (Llama's form): on the H100 the fold cost Llama 3.2
-- 1B's q/k/v pass ~2.9 us per call, as much as the add_rmsnorm dispatch it removed (docs/BENCHMARKS.md 29g),
-- while Gemma 3 1B's two-norm kernel cost ~4.7 us.
M.register {
  name = "norm_qkv", op = "qkv_linear",
  apply = function(n, ctx)
    if n.attrs.prenorm or n.attrs.biases then return end
    local h = n.inputs[1]
    if h.is_output or not ctx.only_reader(h, n) or h.op ~= "norm_add_norm" then return end
    if not lower.qkv_prenorm_ok(ctx.dev, ctx.env, n.attrs.weights) then return end
    local x, a, w1, w2, sum, pre = prenorm_parts(h)
    if not ctx.unread_between(sum, h, n) then return end
    pre.a, pre.w1, pre.w2, pre.sum = a, w1, w2, sum
    local attrs = {}
    for key, val in pairs(n.attrs) do attrs[key] = val end
    attrs.prenorm = pre
    n.attrs = attrs
    local inputs = { x }
    for i = 2, #n.inputs do inputs[i] = n.inputs[i] end
    inputs[#inputs + 1], inputs[#inputs + 2], inputs[#inputs + 3] = a, w2, sum
    if w1 then inputs[#inputs + 1] = w1 end
    n.inputs = inputs
    ctx.produced_by(sum, n)   -- the residual stream, which the norm kernel wrote: the q/k/v pass now
  end,
}

-- ---- lm_head: final norm + LM head + argmax / draw (fused/lm_head.comp, lm_head_q.comp) ------------------
-- argmax(softcap?(linear(rmsnorm(x1), W)))  ->  one kernel that normalises the single row in every
-- workgroup, computes the logits as the unfused kernels do and keeps each workgroup's best (value, index),
-- then argmax_final: the ids are those of the unfused path, and the logits are never written. The same for
-- a Gumbel-max draw (sample without repetition penalty, top-k/top-p or min-p: those need every logit or
-- the row maximum before any key). The logits: with env.keep_logits (the session's step passes, for
-- Session:last_logits) the kernel writes them besides the id (1 MB for Gemma, against the 600 MB it
-- reads); otherwise (the GPU decode loop) they are not written and the plan has no logits output. An
-- all-rows graph (--logits-out: the row is a last_row of every position's logits) keeps the plain path.
local function lm_head_row(row, reader, ctx)
  if ctx.hints.matmul == "gemm" then return nil end      -- the unfused LM head would be the tiled GEMM
  if not ctx.only_reader(row, reader) then return nil end
  local lin, cap = row, nil
  if row.op == "softcap" then
    lin, cap = row.inputs[1], row.attrs.arg
    if not ctx.only_reader(lin, row) or lin.is_output then return nil end
  end
  if lin.op ~= "linear" or #lin.inputs ~= 2 or lin.dtype ~= "f32" then return nil end
  local xn, w = lin.inputs[1], lin.inputs[2]
  if xn.op ~= "rmsnorm" or xn.is_output or not ctx.only_reader(xn, lin) then return nil end
  if #xn.shape ~= 2 or xn.shape[1] ~= 1 or type(xn.shape[2]) ~= "number" then return nil end
  if xn.shape[2] > lower.LM_HEAD_MAX_K then return nil end
  if not (FLOAT_W[w.dtype] or lower.quant_types[w.dtype]) then return nil end
  return { x = xn.inputs[1], wn = xn.inputs[2], w = w, eps = xn.attrs.eps, offset = xn.attrs.offset,
           softcap = cap, logits = row }
end

local function lm_head_rewrite(n, m, extra, sample, ctx)
  local keep = ctx.env and ctx.env.keep_logits
  n.op = "lm_head"
  n.attrs = { eps = m.eps, offset = m.offset, softcap = m.softcap, sample = sample, logits = keep and m.logits or nil }
  n.inputs = { m.x, m.wn, m.w, extra }
  if keep then
    ctx.produced_by(m.logits, n)    -- the kernel writes them (DP_LMH_LOGITS)
  else
    m.logits.is_output = false      -- nobody reads them: not written, and no output of the plan
  end
end

M.register {
  name = "lm_head", op = "argmax",
  apply = function(n, ctx)
    local m = lm_head_row(n.inputs[1], n, ctx)
    if m then lm_head_rewrite(n, m, nil, nil, ctx) end
  end,
}

M.register {
  name = "lm_head_sample", op = "sample",
  apply = function(n, ctx)
    local sp = n.attrs.spec
    if sp.repeat_penalty ~= 1 or not (sp.greedy or (sp.k == 0 and not (sp.min_p > 0))) then return end
    local m = lm_head_row(n.inputs[1], n, ctx)
    if m then lm_head_rewrite(n, m, n.inputs[2], sp, ctx) end
  end,
}

-- lm_head(last_row(y)) in a one-token pass, y = x + a or x + rmsnorm(a; w1) the last layer's residual sum,
-- read by the head only  ->  the head forms y itself (fused/lm_head_common.glsl, DP_LMH_PRE): one dispatch
-- less for Llama's form (the add), two for Gemma's (its post-norm and the add; the norm weights must share a
-- dtype). The kernel computes y as those kernels store it, so the ids and logits stay those of the unfused
-- path. Why: each was a tiny dispatch of its own on the decode's critical path (~4-5 us on the H100,
-- docs/BENCHMARKS.md, session 23).
local function plain_row(v, y)   -- an operand the kernel can read as a contiguous row of y's length
  return v.op ~= "slice" and #v.shape == 2 and v.shape[2] == y.shape[2]
end

M.register {
  name = "lm_head_pre", op = "lm_head",
  apply = function(n, ctx)
    local row, wn = n.inputs[1], n.inputs[2]
    if n.attrs.pre or not (ctx.env and ctx.env.T == 1) then return end
    if row.op ~= "last_row" or row.is_output or not ctx.only_reader(row, n) then return end
    local y = row.inputs[1]
    if y.op ~= "add" or y.is_output or not ctx.only_reader(y, row) then return end
    if type(y.shape[2]) ~= "number" or not (plain_row(y.inputs[1], y) and plain_row(y.inputs[2], y)) then return end
    local function normed(v)
      return v.op == "rmsnorm" and not v.is_output and ctx.only_reader(v, y) and v.inputs[2].dtype == wn.dtype
             and plain_row(v.inputs[1], y)
    end
    local x, a, r = y.inputs[1], y.inputs[2], nil
    if normed(a) then r = a elseif normed(x) then x, r = a, x end
    local pre = { kind = r and 2 or 1 }
    local inputs = { n.inputs[1], n.inputs[2], n.inputs[3] }
    if n.attrs.sample then inputs[4] = n.inputs[4] end
    inputs[1] = x
    pre.a_at = #inputs + 1
    inputs[pre.a_at] = r and r.inputs[1] or a
    if r then
      pre.w1_at = #inputs + 1
      inputs[pre.w1_at] = r.inputs[2]
      pre.eps1, pre.offset1 = r.attrs.eps, r.attrs.offset
    end
    local attrs = {}
    for key, val in pairs(n.attrs) do attrs[key] = val end
    attrs.pre = pre
    n.attrs = attrs
    n.inputs = inputs
  end,
}

-- ---- glu_down: the fused MLP (gemv_q.comp's DP_DOWN) -----------------------------------------------------
-- linear(glu_linear(h), Wd) in a one-token pass, the glu read by that linear only  ->  one gemv_q dispatch
-- that makes h and adds each workgroup's share of Wd h to a 64-bit fixed-point sum with atomics. The sum is
-- not an activation, so every reader must take it as its `a` operand (DP_A_FIX64, dp_types.glsl): the
-- branch output of Gemma's norm_add_norm or norm_qkv, of Llama's add_rmsnorm, or of the head's lm_head_pre;
-- with any other reader the pair stays as it is. Runs last, on the readers the other rules made. Where
-- lower.glu_down_ok allows (auto: GPUs). Why: the gate+up and down dispatches are two dependent steps of
-- ~23 us per layer on the H100; the probe recipes/bench/glu_down.lua made them one at 1.2-1.35x less
-- (docs/BENCHMARKS.md 34c). Changes roundings: the sum goes in another order (exact in fixed point, each
-- workgroup's share truncated to 2^-32), and D is read as its f16 values.
local function fix_reader(r, v)
  local seen = 0
  for _, i in ipairs(r.inputs) do if i == v then seen = seen + 1 end end
  if seen ~= 1 then return false end
  if r.op == "norm_add_norm" then return r.inputs[2] == v end
  if r.op == "add_rmsnorm" then return r.inputs[1] == v or r.inputs[2] == v end
  if r.op == "qkv_linear" then return r.attrs.prenorm ~= nil and r.attrs.prenorm.a == v end
  if r.op == "lm_head" then return r.attrs.pre ~= nil and r.inputs[r.attrs.pre.a_at] == v end
  return false
end

-- n, if glu_down may take it (its glu and down weight, and the readers of its sum), else nil.
local function glu_down_candidate(n, ctx)
  if n.op ~= "linear" or #n.inputs ~= 2 or n.is_output or n.dtype ~= "act" then return nil end
  local g, wd = n.inputs[1], n.inputs[2]
  if g.op ~= "glu_linear" or g.is_output or not ctx.only_reader(g, n) then return nil end
  local readers = ctx.consumers(n)
  if #readers == 0 then return nil end
  for _, r in ipairs(readers) do if not fix_reader(r, n) then return nil end end
  local wg, wu = g.inputs[2], g.inputs[3]
  local N, K = wg.shape[1], wg.shape[2]
  if type(N) ~= "number" or type(K) ~= "number" then return nil end
  if not lower.glu_down_ok(ctx.dev, ctx.env, wg, wu, wd, N, K, g.attrs.prenorm ~= nil) then return nil end
  return { g = g, wd = wd, readers = readers }
end

-- The candidates of a pass, all or none: each fused MLP zeroes the sum of the one before (plan.lua), so there
-- must be two or more, and every reader of one sum must come before the next fused MLP (a chain of layers).
local function glu_down_set(ctx)
  local list = {}
  for _, n in ipairs(ctx.nodes) do
    local c = glu_down_candidate(n, ctx)
    if c then c.node = n; list[#list + 1] = c end
  end
  if #list < 2 then return {} end
  for i = 2, #list do
    for _, r in ipairs(list[i - 1].readers) do
      if r.order > list[i].node.order then return {} end
    end
  end
  local set = {}
  for _, c in ipairs(list) do set[c.node] = c end
  return set
end

M.register {
  name = "glu_down", op = "linear",
  apply = function(n, ctx)
    if not (ctx.env and ctx.env.T == 1) then return end
    ctx.glu_down = ctx.glu_down or glu_down_set(ctx)
    local c = ctx.glu_down[n]
    if not c then return end
    local g = c.g
    for _, r in ipairs(c.readers) do   -- add_rmsnorm reads the sum as a (a + b = b + a, bit for bit)
      if r.op == "add_rmsnorm" and r.inputs[2] == n then r.inputs[1], r.inputs[2] = r.inputs[2], r.inputs[1] end
    end
    local inputs = { g.inputs[1], g.inputs[2], g.inputs[3], c.wd }
    for i = 4, #g.inputs do inputs[#inputs + 1] = g.inputs[i] end   -- norm_gate_up's a, w2, sum, w1
    n.op = "glu_down"
    n.attrs = { kind = g.attrs.kind, prenorm = g.attrs.prenorm }
    n.inputs = inputs
    if g.attrs.prenorm then ctx.produced_by(g.inputs[6], n) end   -- the residual stream the staging writes
  end,
}

return M
