-- doppler.graph: the op graph a recipe builds. It computes nothing: the plan compiler
-- (doppler.plan) lowers it to kernels and records command buffers once.
--
-- Shapes are lists of dimensions; a dimension is a number or the symbol "T" (tokens in this
-- pass), so one graph serves a prefill chunk (T = 512) and a decode step (T = 1).
-- Every node remembers the recipe line that made it, and shape errors name that line.
-- The op semantics are listed in docs/OPS.md.

local Graph = {}
Graph.__index = Graph

local Node = {}
Node.__index = Node
Node.__name = "dp.node"

-- The caller's position outside this library, for error messages ("recipes/gemma3.lua:42").
local function where()
  for level = 3, 12 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if not info.short_src:find("doppler/graph.lua", 1, true) and info.currentline > 0 then
      return info.short_src .. ":" .. info.currentline
    end
  end
  return "?"
end

local function fail(fmt, ...)
  error(where() .. ": " .. string.format(fmt, ...), 0)
end

local function shape_str(shape)
  local parts = {}
  for i, d in ipairs(shape) do parts[i] = tostring(d) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

local function same_dim(a, b) return a == b end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if not same_dim(a[i], b[i]) then return false end end
  return true
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

function Graph.new(opts)
  opts = opts or {}
  return setmetatable({
    nodes = {},        -- in creation order, which is a topological order
    inputs = {},       -- name -> node
    outputs = {},      -- name -> node
    output_order = {},
    states = {},       -- name -> node (tensors that persist across passes: KV caches)
    name = opts.name or "graph",
  }, Graph)
end

function Graph:node(op, inputs, attrs, shape, dtype)
  local n = setmetatable({
    id = #self.nodes + 1, op = op, inputs = inputs or {}, attrs = attrs or {},
    shape = shape, dtype = dtype or "act", graph = self, where = where(),
  }, Node)
  self.nodes[#self.nodes + 1] = n
  for _, i in ipairs(n.inputs) do
    if getmetatable(i) ~= Node then fail("%s: an input is not a graph node (%s)", op, type(i)) end
    if i.graph ~= self then fail("%s: an input belongs to another graph", op) end
  end
  return n
end

local function check_node(x, op, what)
  if getmetatable(x) ~= Node then fail("%s: %s must be a graph node, got %s", op, what, type(x)) end
  return x
end

-- ---- leaves -------------------------------------------------------------------------------

-- A per-pass input the engine fills: token ids, positions. dtype "u32".
function Graph:input(name, shape, dtype)
  local n = self:node("input", {}, {name = name}, copy(shape), dtype or "u32")
  self.inputs[name] = n
  return n
end

-- A weight: `w` is a descriptor {name=, shape=, dtype=} from doppler.weights. Its dtype is
-- the one it will have on the device ("f32", "f16", "bf16", or a quantised block type).
function Graph:weight(w)
  if type(w) ~= "table" or not w.name or not w.shape then
    fail("weight: expected a weight descriptor, got %s", type(w))
  end
  return self:node("weight", {}, {name = w.name, source = w}, copy(w.shape), w.dtype)
end

-- A persistent buffer (a KV cache): survives between passes, owned by the session.
function Graph:state(name, shape, dtype)
  local n = self:node("state", {}, {name = name}, copy(shape), dtype)
  self.states[name] = n
  return n
end

-- A small constant table computed on the host (RoPE inverse frequencies).
function Graph:constant(name, values)
  return self:node("constant", {}, {name = name, values = values}, {#values}, "f32")
end

function Graph:output(name, x)
  check_node(x, "output", "the value")
  if not self.outputs[name] then self.output_order[#self.output_order + 1] = name end
  self.outputs[name] = x
  return x
end

-- ---- ops ----------------------------------------------------------------------------------

-- Rows of `table` picked by `ids` (u32 [T]), times `scale`: [T, C].
function Graph:embed(ids, table_, opts)
  check_node(ids, "embed", "ids"); check_node(table_, "embed", "the table")
  if #table_.shape ~= 2 then fail("embed: the table must be 2-D, got %s", shape_str(table_.shape)) end
  return self:node("embed", {ids, table_}, {scale = (opts and opts.scale) or 1.0},
                  {ids.shape[1], table_.shape[2]})
end

-- y = x * rsqrt(mean(x^2) + eps) * (offset + w), over the last dimension.
function Graph:rmsnorm(x, w, opts)
  check_node(x, "rmsnorm", "x"); check_node(w, "rmsnorm", "the weight")
  opts = opts or {}
  local d = x.shape[#x.shape]
  if #w.shape ~= 1 or w.shape[1] ~= d then
    fail("rmsnorm: weight %s has shape %s but x %s normalises over %s", w.attrs.name or "?",
         shape_str(w.shape), shape_str(x.shape), tostring(d))
  end
  if not opts.eps then fail("rmsnorm: eps is required") end
  return self:node("rmsnorm", {x, w}, {eps = opts.eps, offset = opts.offset or 0}, copy(x.shape))
end

-- y = x · Wᵀ (+ b): x [..., K], W [N, K] -> [..., N]. opts.dtype = "f32" makes y f32 whatever the
-- activation type (router logits, whose ranking decides which experts run).
function Graph:linear(x, w, b, opts)
  check_node(x, "linear", "x"); check_node(w, "linear", "the weight")
  local k = x.shape[#x.shape]
  if #w.shape ~= 2 or w.shape[2] ~= k then
    fail("linear: %s has shape %s but x %s has %s columns", w.attrs.name or "weight",
         shape_str(w.shape), shape_str(x.shape), tostring(k))
  end
  local shape = copy(x.shape)
  shape[#shape] = w.shape[1]
  local inputs = {x, w}
  if b then
    check_node(b, "linear", "the bias")
    if #b.shape ~= 1 or b.shape[1] ~= w.shape[1] then
      fail("linear: bias %s has shape %s, expected [%d]", b.attrs.name or "?", shape_str(b.shape), w.shape[1])
    end
    inputs[3] = b
  end
  local dtype = opts and opts.dtype
  if dtype and dtype ~= "f32" then fail("linear: opts.dtype must be \"f32\" (or absent), got %s", tostring(dtype)) end
  return self:node("linear", inputs, {}, shape, dtype)
end

-- Rows of a fused projection: columns [from, from + n) of x's last dimension (a view, no copy).
function Graph:slice(x, from, n)
  check_node(x, "slice", "x")
  local d = x.shape[#x.shape]
  if from < 0 or n <= 0 or from + n > d then fail("slice: [%d, %d) is outside %d columns", from, from + n, d) end
  local shape = copy(x.shape)
  shape[#shape] = n
  return self:node("slice", {x}, {from = from, n = n}, shape, x.dtype)
end

-- [T, H*D] -> [T, H, D] (a view).
function Node:heads(h)
  local d = self.shape[#self.shape]
  if type(d) ~= "number" or d % h ~= 0 then
    fail("heads: %s columns do not split into %d heads", tostring(d), h)
  end
  return self.graph:node("view", {self}, {}, {self.shape[1], h, d // h}, self.dtype)
end

-- [T, H, D] -> [T, H*D] (a view).
function Node:merge_heads()
  if #self.shape ~= 3 then fail("merge_heads: expected [T, H, D], got %s", shape_str(self.shape)) end
  return self.graph:node("view", {self}, {}, {self.shape[1], self.shape[2] * self.shape[3]}, self.dtype)
end

-- Rotary embedding on [T, H, D]: pairs (i, i + rotary/2), angle pos[t] * inv_freq[i].
function Graph:rope(x, pos, inv_freq)
  check_node(x, "rope", "x"); check_node(pos, "rope", "positions"); check_node(inv_freq, "rope", "inv_freq")
  if #x.shape ~= 3 then fail("rope: expected [T, H, D], got %s", shape_str(x.shape)) end
  if inv_freq.shape[1] * 2 > x.shape[3] then
    fail("rope: %d frequencies need head_dim >= %d, got %d", inv_freq.shape[1], inv_freq.shape[1] * 2, x.shape[3])
  end
  return self:node("rope", {x, pos, inv_freq}, {}, copy(x.shape))
end

-- Causal grouped-query attention over a KV cache. q [T, Hq, D], k/v [T, Hkv, D]; k and v are
-- appended to the cache at pos[t] first. opts: cache = {k=state, v=state} (capacity in the
-- state's shape), window (keys within the last `window` positions, nil = all), scale, softcap.
function Graph:attention(q, k, v, pos, opts)
  for _, p in ipairs({{q, "q"}, {k, "k"}, {v, "v"}, {pos, "positions"}}) do check_node(p[1], "attention", p[2]) end
  opts = opts or {}
  if #q.shape ~= 3 or #k.shape ~= 3 or not same_shape(k.shape, v.shape) then
    fail("attention: q %s, k %s, v %s are not [T, H, D] with k and v alike",
         shape_str(q.shape), shape_str(k.shape), shape_str(v.shape))
  end
  if q.shape[3] ~= k.shape[3] then fail("attention: q head_dim %d ~= k head_dim %d", q.shape[3], k.shape[3]) end
  if q.shape[2] % k.shape[2] ~= 0 then
    fail("attention: %d query heads are not a multiple of %d KV heads", q.shape[2], k.shape[2])
  end
  local cache = opts.cache
  if not cache or not cache.k or not cache.v then fail("attention: opts.cache = {k=, v=} is required") end
  if not opts.scale then fail("attention: opts.scale is required") end
  return self:node("attention", {q, k, v, pos, cache.k, cache.v},
                  {window = opts.window, scale = opts.scale, softcap = opts.softcap}, copy(q.shape))
end

local function unary(op)
  return function(self, x, arg)
    check_node(x, op, "x")
    return self:node(op, {x}, {arg = arg}, copy(x.shape), x.dtype)
  end
end
Graph.gelu_tanh = unary("gelu_tanh")   -- 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
Graph.silu = unary("silu")             -- x * sigmoid(x)
Graph.softcap = unary("softcap")       -- arg * tanh(x / arg)
Graph.scale = unary("scale")           -- x * arg

local function binary(op)
  return function(self, a, b)
    check_node(a, op, "a"); check_node(b, op, "b")
    if not same_shape(a.shape, b.shape) then
      fail("%s: shapes %s and %s differ", op, shape_str(a.shape), shape_str(b.shape))
    end
    return self:node(op, {a, b}, {}, copy(a.shape), a.dtype)
  end
end
Graph.add = binary("add")
Graph.mul = binary("mul")

-- ---- mixture of experts --------------------------------------------------------------------

-- Routing: for each row of logits [T, E], p = softmax over the E experts (f32), ids = the k largest
-- (descending; lowest index on ties), weights = those k probabilities divided by their sum.
-- Returns weights (f32 [T, k]) and ids (u32 [T, k]); one kernel makes both.
function Graph:topk_softmax(logits, k)
  check_node(logits, "topk_softmax", "logits")
  if #logits.shape ~= 2 then fail("topk_softmax: expected logits [T, E], got %s", shape_str(logits.shape)) end
  local E = logits.shape[2]
  if math.type(k) ~= "integer" or k < 1 or k > 8 or k > E then
    fail("topk_softmax: k = %s must be an integer in 1..min(8, %s)", tostring(k), tostring(E))
  end
  if E > 256 then fail("topk_softmax: %d experts (at most 256)", E) end
  local ids = self:node("topk_ids", {}, { k = k }, { logits.shape[1], k }, "u32")   -- written by the next node
  local weights = self:node("topk_softmax", { logits, ids }, { k = k }, { logits.shape[1], k }, "f32")
  weights.keep = true   -- its kernel also writes ids, which live nodes read
  return weights, ids
end

-- The selected experts' linear layers: W stacks E experts [E, N, K]; ids [T, k] picks k of them per
-- token. x [T, K] (every expert of token t reads x[t]) or [T, k, K] (slot j reads x[t, j]).
-- y[t, j] = W[ids[t, j]] · x[t(, j)]: [T, k, N]. Only the selected experts' weights are read.
function Graph:expert_linear(x, w, ids)
  check_node(x, "expert_linear", "x"); check_node(w, "expert_linear", "the weight"); check_node(ids, "expert_linear", "ids")
  if #w.shape ~= 3 then fail("expert_linear: %s must be stacked [E, N, K], got %s", w.attrs.name or "weight", shape_str(w.shape)) end
  if #ids.shape ~= 2 or ids.dtype ~= "u32" then fail("expert_linear: ids must be u32 [T, k], got %s", shape_str(ids.shape)) end
  local T, k = ids.shape[1], ids.shape[2]
  local K = x.shape[#x.shape]
  local ok = x.shape[1] == T and K == w.shape[3] and (#x.shape == 2 or (#x.shape == 3 and x.shape[2] == k))
  if not ok then
    fail("expert_linear: x %s does not fit weight %s %s with ids %s", shape_str(x.shape), w.attrs.name or "?",
         shape_str(w.shape), shape_str(ids.shape))
  end
  return self:node("expert_linear", { x, w, ids }, {}, { T, k, w.shape[2] })
end

-- y[t] = sum_j weights[t, j] * x[t, j]: x [T, k, N], weights [T, k] -> [T, N] (the experts' combine).
function Graph:weighted_sum(x, weights)
  check_node(x, "weighted_sum", "x"); check_node(weights, "weighted_sum", "weights")
  if #x.shape ~= 3 or #weights.shape ~= 2 or x.shape[1] ~= weights.shape[1] or x.shape[2] ~= weights.shape[2] then
    fail("weighted_sum: x %s and weights %s are not [T, k, N] and [T, k]", shape_str(x.shape), shape_str(weights.shape))
  end
  if weights.dtype ~= "f32" then fail("weighted_sum: weights must be f32 (topk_softmax makes them)") end
  return self:node("weighted_sum", { x, weights }, {}, { x.shape[1], x.shape[3] })
end

-- The last row of x ([T, C] -> [1, C]): only the last position's logits are needed in generation.
function Graph:last_row(x)
  check_node(x, "last_row", "x")
  return self:node("last_row", {x}, {}, {1, x.shape[2]}, x.dtype)
end

-- Index of the largest value of each row of x [rows, V] (lowest index on ties): u32 [rows].
function Graph:argmax(x)
  check_node(x, "argmax", "x")
  if #x.shape ~= 2 then fail("argmax: expected [rows, V], got %s", shape_str(x.shape)) end
  return self:node("argmax", {x}, {}, {x.shape[1]}, "u32")
end

-- Writes a pass's token ids into the context buffer `ctx` (a u32 state [cap]) at their positions:
-- ctx[pos[t]] = ids[t]. Its value (u32 [1]) is the context length after the pass, pos[T-1] + 1, which
-- g:sample uses as the repetition penalty's extent and as its draw counter.
function Graph:context_ids(ids, pos, ctx)
  for _, p in ipairs({{ids, "ids"}, {pos, "positions"}, {ctx, "the context buffer"}}) do check_node(p[1], "context_ids", p[2]) end
  if ctx.op ~= "state" or ctx.dtype ~= "u32" then fail("context_ids: the context buffer must be a u32 state") end
  return self:node("context_ids", {ids, pos, ctx}, {}, {1}, "u32")
end

-- One token id drawn from a logits row x ([1, V] or [V], f32) as core/sample.h defines it: u32 [1].
-- n_ctx comes from g:context_ids (context length = draw counter), ctx is the context buffer it fills.
-- spec (doppler.sampler.spec): temperature, top_k, top_p, min_p, repeat_penalty, seed_lo, seed_hi, and
-- the derived f32 constants greedy, k, inv_penalty, log_min_p.
function Graph:sample(x, n_ctx, ctx, spec)
  check_node(x, "sample", "the logits row"); check_node(n_ctx, "sample", "n_ctx"); check_node(ctx, "sample", "ctx")
  if #x.shape > 2 or (#x.shape == 2 and x.shape[1] ~= 1) then
    fail("sample: expected one logits row [1, V] or [V], got %s", shape_str(x.shape))
  end
  for _, f in ipairs({ "temperature", "top_p", "repeat_penalty", "seed_lo", "seed_hi", "k", "inv_penalty", "log_min_p" }) do
    if type(spec[f]) ~= "number" then fail("sample: spec.%s is missing (build it with doppler.sampler.spec)", f) end
  end
  return self:node("sample", {x, n_ctx, ctx}, {spec = spec}, {1}, "u32")
end

-- ---- operators on nodes: a recipe writes x + y, gelu(g) * u ---------------------------------
Node.__add = function(a, b) return a.graph:add(a, b) end
Node.__mul = function(a, b)
  if type(b) == "number" then return a.graph:scale(a, b) end
  if type(a) == "number" then return b.graph:scale(b, a) end
  return a.graph:mul(a, b)
end
Node.__tostring = function(n)
  return string.format("node#%d %s %s %s (%s)", n.id, n.op, shape_str(n.shape), n.dtype, n.where)
end

Graph.Node = Node
Graph.shape_str = shape_str
Graph.fail = fail

return Graph
