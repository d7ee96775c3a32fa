-- doppler.fusions: rewrite rules the plan compiler applies before lowering. A rule is Lua:
--   { name = "...", op = "mul", apply = function(node, ctx) ... end }
-- `apply` looks at a node of kind `op` (and its inputs) and either returns nothing (no match)
-- or rewrites the node in place into a fused op whose lowering rule (doppler.lower) names its
-- kernel. Rules run on a copy of the graph's nodes, so one graph still compiles for any T.
-- A user adds a fusion with a Lua file that calls fusions.register{...} and a lowering rule.
local M = { rules = {} }

function M.register(rule)
  assert(rule.name and rule.op and rule.apply, "fusion rule needs name, op and apply")
  M.rules[#M.rules + 1] = rule
end

-- ctx helpers given to rules: consumers(n) -> list of nodes reading n; order index.
local function make_ctx(nodes)
  local readers = {}
  for _, n in ipairs(nodes) do
    for _, i in ipairs(n.inputs) do
      readers[i] = readers[i] or {}
      table.insert(readers[i], n)
    end
  end
  local ctx = {}
  function ctx.consumers(n) return readers[n] or {} end
  function ctx.only_reader(n, reader)
    local r = readers[n] or {}
    return #r == 1 and r[1] == reader
  end
  -- True when no node strictly between a and b (in order) reads `value`.
  function ctx.unread_between(value, a, b)
    for _, r in ipairs(readers[value] or {}) do
      if r.order > a.order and r.order < b.order then return false end
    end
    return true
  end
  function ctx.is_output(n) return n.is_output end
  return ctx
end

-- Returns fused copies of graph.nodes (the graph itself is not changed) and the map from each
-- original node to its copy.
function M.apply(graph, env)
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
  if env and env.hints and env.hints.values and env.hints.values.fusion == "off" then return copies, map end
  local ctx = make_ctx(copies)
  for _, rule in ipairs(M.rules) do
    for _, n in ipairs(copies) do
      if n.op == rule.op then rule.apply(n, ctx) end
    end
  end
  -- Nodes a fusion made dead (nothing live reads them, not an output) are dropped. Readers are
  -- recomputed: the rules rewired inputs.
  local readers = {}
  for _, n in ipairs(copies) do
    for _, i in ipairs(n.inputs) do
      readers[i] = readers[i] or {}
      table.insert(readers[i], n)
    end
  end
  local live = {}
  for i = #copies, 1, -1 do
    local n = copies[i]
    local used = n.is_output or n.keep or n.op == "input" or n.op == "state"
    if not used then
      for _, r in ipairs(readers[n] or {}) do if live[r] then used = true; break end end
    end
    live[n] = used or nil
  end
  local out = {}
  for _, n in ipairs(copies) do
    if live[n] then out[#out + 1] = n end
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
    sum.op = "fused_output"   -- keeps its memory; the add_rmsnorm kernel writes it
    sum.keep = true
    sum.inputs = {}
  end,
}

return M
