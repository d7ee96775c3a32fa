-- Fusions as scripts (docs/OPS.md, Fusions): a user fusion registered from a Lua file plus a shader outside
-- shaders/ (fixtures/fusion_plugin.lua, fixtures/scale_add.comp) is applied by the plan compiler, runs its
-- own kernel and matches the unfused plan; the hint `fusion` switches rules off (all, a list, or "-name").
-- The shipped projection fusions (gate_up: act(x·Wg) * (x·Wu) in one GEMV pass; qkv: two or three linears
-- of one input in one pass) are checked the same way against their unfused plans, at decode and prefill T.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"
local fusions = require "doppler.fusions"

local dev = doppler.device()
local here = arg[0]:match("^(.*)/[^/]*$")

local rng_state = 4242
local function rand()   -- deterministic, uniform in [-1, 1)
  rng_state = (rng_state * 1103515245 + 12345) % 2147483648
  return rng_state / 1073741824 - 1
end
local function tensor(dtype, shape, scale)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local v = {}
  for i = 1, n do v[i] = rand() * (scale or 1) end
  local t = dev:tensor { dtype = dtype, shape = shape }
  t:upload(v)
  return t
end

-- Compiles graph g with the given fusion hint, runs it, returns { outputs = {name = values}, kernels = names }.
local function run_plan(g, env, fusion)
  local h = hints.new()
  h:set("fusion", fusion, "test")
  env.hints = h
  env.states = env.states or {}
  env.constants = function() end
  local p = plan.compile(dev, g, env)
  p:run()
  local r = { outputs = {}, kernels = {} }
  for _, name in ipairs(g.output_order) do r.outputs[name] = p:output(name):download() end
  for i, k in ipairs(p.kernel_log) do r.kernels[i] = k:name() end
  r.dispatches = p.dispatches
  return r
end

local function same(got, want, tol, what)
  check.eq(#got, #want, what .. " length")
  for i = 1, #want do
    check.near(got[i], want[i], tol * math.max(1, math.abs(want[i])), ("%s[%d]"):format(what, i - 1))
  end
end

local has = check.has

-- ---- a user fusion from a file ----

local function scale_add_graph()
  local g = Graph.new { name = "scale_add" }
  local x = g:input("x", { "T", 37 }, "act")
  local b = g:input("b", { "T", 37 }, "act")
  g:output("y", g:add(g:scale(x, 0.75), b))
  g:output("z", g:mul(x, b))    -- an op no rule touches
  return g
end

check.case("a user fusion file: registered, applied, its kernel run, same result as unfused", function()
  fusions.load(here .. "/fixtures/fusion_plugin.lua")
  check.truthy(has(fusions.names(), "scale_add"), "scale_add registered")
  for _, T in ipairs { 1, 5 } do
    local x, b = tensor("f32", { T, 37 }), tensor("f32", { T, 37 })
    local env = function() return { T = T, act = "f32", kv = "f32", weights = {}, inputs = { x = x, b = b } } end
    local off = run_plan(scale_add_graph(), env(), "off")
    local on = run_plan(scale_add_graph(), env(), "on")
    local skip = run_plan(scale_add_graph(), env(), "-scale_add")
    check.eq(off.dispatches, 3, "unfused: scale, add, mul")
    check.eq(on.dispatches, 2, "fused: scale_add, mul")
    check.eq(on.kernels[1], "scale_add", "the plugin's kernel ran")
    check.truthy(not has(off.kernels, "scale_add") and not has(skip.kernels, "scale_add"), "off and -scale_add skip it")
    same(on.outputs.y, off.outputs.y, 1e-6, "y T=" .. T)
    same(on.outputs.z, off.outputs.z, 0, "z T=" .. T)
  end
end)

check.case("fusion hint and register errors are clear", function()
  local ok, err = pcall(run_plan, scale_add_graph(),
                        { T = 1, act = "f32", kv = "f32", weights = {}, inputs = { x = tensor("f32", { 1, 37 }), b = tensor("f32", { 1, 37 }) } },
                        "no_such_rule")
  check.truthy(not ok and tostring(err):find("no fusion named 'no_such_rule'", 1, true), "unknown name: " .. tostring(err))
  ok, err = pcall(fusions.register, { name = "x", op = "add" })
  check.truthy(not ok and tostring(err):find("needs name", 1, true), "rule without apply: " .. tostring(err))
  ok, err = pcall(fusions.register, { name = "linear", op = "add", apply = function() end, lower = function() end })
  check.truthy(not ok and tostring(err):find("built-in op", 1, true), "lowering a built-in op name: " .. tostring(err))
  ok, err = pcall(fusions.load, here .. "/fixtures/no_such_file.lua")
  check.truthy(not ok and tostring(err):find("no_such_file.lua", 1, true), "missing file named: " .. tostring(err))
  local h = hints.new()
  check.truthy(not pcall(h.set, h, "fusion", "a b", "test"), "hint fusion rejects a malformed list")
end)

-- ---- gate_up and qkv on float weights ----

local function mlp_graph(wdtype, F, K, act, with_bias)
  local g = Graph.new { name = "proj" }
  local x = g:input("x", { "T", K }, "act")
  local function w(name, shape) return g:weight { name = name, shape = shape, dtype = wdtype } end
  local gate = g:linear(x, w("wg", { F, K }))
  local up = g:linear(x, w("wu", { F, K }))
  g:output("m", g[act](g, gate) * up)
  -- q, k, v of the same x, with a reader of q between them (as Gemma's q norm): q scaled early
  local bq = with_bias and w("bq", { 24 }) or nil
  local q = g:linear(x, w("wq", { 24, K }), bq)
  g:output("q", g:scale(q, 0.5))
  local k = g:linear(x, w("wk", { 8, K }), with_bias and w("bk", { 8 }) or nil)
  local v = g:linear(x, w("wv", { 8, K }), with_bias and w("bv", { 8 }) or nil)
  g:output("kv", k + v)
  return g
end

for _, c in ipairs {
  { wdtype = "f32", act = "f32", K = 67, F = 45, fn = "silu", tol = 1e-5 },
  { wdtype = "f32", act = "f32", K = 256, F = 33, fn = "gelu_tanh", tol = 1e-5, bias = true },
  -- f16 activations: the unfused path rounds gate and up to f16 before the activation, the fused one
  -- keeps them in f32: a difference of a few f16 ulps (2^-10 relative each, through act and the product).
  { wdtype = "f16", act = "f16", K = 128, F = 40, fn = "gelu_tanh", tol = 8e-3 },
  { wdtype = "bf16", act = "f16", K = 96, F = 17, fn = "silu", tol = 8e-3, bias = true },
} do
  check.case(("gate_up and qkv fused = unfused: W %s, act %s, K %d, F %d, %s%s"):format(
               c.wdtype, c.act, c.K, c.F, c.fn, c.bias and ", biases" or ""), function()
    local weights = {
      wg = tensor(c.wdtype, { c.F, c.K }, 0.3), wu = tensor(c.wdtype, { c.F, c.K }, 0.3),
      wq = tensor(c.wdtype, { 24, c.K }, 0.3), wk = tensor(c.wdtype, { 8, c.K }, 0.3), wv = tensor(c.wdtype, { 8, c.K }, 0.3),
    }
    if c.bias then
      weights.bq, weights.bk, weights.bv = tensor(c.wdtype, { 24 }), tensor(c.wdtype, { 8 }), tensor(c.wdtype, { 8 })
    end
    for _, T in ipairs { 1, 3, 6 } do
      local x = tensor(c.act, { T, c.K })
      local function env() return { T = T, act = c.act, kv = "f32", weights = weights, inputs = { x = x } } end
      local off = run_plan(mlp_graph(c.wdtype, c.F, c.K, c.fn, c.bias), env(), "off")
      local on = run_plan(mlp_graph(c.wdtype, c.F, c.K, c.fn, c.bias), env(), "on")
      if T <= 4 then   -- the projection fusions are for decode-sized passes (fusions.lua: decode_sized)
        check.truthy(has(on.kernels, "gemv_multi") and not has(off.kernels, "gemv_multi"), "fused kernel only when on")
        -- off: gate, up, act, mul, q, k, v, scale, add (9); on: gemv_multi twice, scale, add (4)
        check.eq(off.dispatches - on.dispatches, 5, table.concat(on.kernels, " ") .. ": " .. "dispatches saved (gate, up, act, mul -> 1; q, k, v -> 1)")
      else
        check.truthy(not has(on.kernels, "gemv_multi"), "no projection fusion for T > 4")
      end
      for _, name in ipairs { "m", "q", "kv" } do
        same(on.outputs[name], off.outputs[name], c.tol, ("%s T=%d"):format(name, T))
      end
      local only_qkv = run_plan(mlp_graph(c.wdtype, c.F, c.K, c.fn, c.bias), env(), "-gate_up")
      same(only_qkv.outputs.m, off.outputs.m, c.tol, ("m (gate and up grouped by qkv) T=%d"):format(T))
      same(only_qkv.outputs.q, off.outputs.q, c.tol, ("q (gate_up off) T=%d"):format(T))
    end
  end)
end

check.done()
