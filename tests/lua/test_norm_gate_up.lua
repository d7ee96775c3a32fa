-- The prenorm fusions (fusions.lua): norm_gate_up (gemv_q.comp's DP_PRENORM: the norm in front of a quantised
-- gate+up pass, computed by that GEMV's staging of int8 x) and norm_qkv (gemv_multi.comp's DP_PRENORM=2: Gemma's
-- norm in front of the float q/k/v pass of a one-token pass, computed per chunk of x), and the residual
-- stream they write. Two forms of the norm:
--   Llama's add_rmsnorm:   r = x + a;                h = rmsnorm(r; w2)
--   Gemma's norm_add_norm: r = x + rmsnorm(a; w1);   h = rmsnorm(r; w2)
-- then y = act(h · Wg) * (h · Wu), or q, k, v = h · Wq, h · Wk, h · Wv. Reference in double precision from the values as stored (x, a, the norm
-- weights rounded to their types, the weights as dequantised):
--   r: rounded to the activation type as the unfused kernels store it. Llama's form is exact (x + a is exact
--      in f32 and rounded once); Gemma's within one unit in the last place of the activation type (two in f32) of |r| + |a's normed
--      value| (the sum of a^2 runs in another order than norm_add_norm's, which can move a rounding).
--   y: h = r / rms(r) * (off + w2) unrounded, each dot product within the int8 quantisation of h (half a step
--      of each 16-value group: max|h| / 64516 with two planes, / 254 with one; none for q/k/v) plus one unit in the last place
--      of the activation type per element (r's, and for Gemma's form r's allowance) and 2e-5 of sum |W h| (the f32 sums and 1 / rms), carried
--      through the activation (|act'| <= 1.13).
-- A norm that is wrong by a scale, an epsilon or a weight misses these by orders of magnitude. The plan must
-- also have dropped the norm kernel (and keep it where the fusion does not apply: x not in int8, prefill).
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"
local act = require "doppler.act"

local dev = doppler.device()

local function weight(dtype, rows, cols, salt) return check.quant_weight(dev, dtype, rows, cols, 17, salt) end

local function vector(dtype, n, gen)
  local v = {}
  for i = 1, n do v[i] = doppler.round_to(dtype, gen(i)) end
  local t = dev:tensor { dtype = dtype, shape = { n } }
  t:upload(v)
  return t, v
end

local function matrix(dtype, T, K, gen)
  local v = {}
  for i = 1, T * K do v[i] = doppler.round_to(dtype, gen(i)) end
  local t = dev:tensor { dtype = dtype, shape = { T, K } }
  t:upload(v)
  return t, v
end

-- The norm in front of the projections: inputs x, a; r (an output) and h as the recipes write them.
local function norm_tail(g, c)
  local x = g:input("x", { "T", c.K }, "act")
  local a = g:input("a", { "T", c.K }, "act")
  local w2 = g:weight { name = "w2", shape = { c.K }, dtype = c.nw }
  local r
  if c.gemma then
    local w1 = g:weight { name = "w1", shape = { c.K }, dtype = c.nw }
    r = x + g:rmsnorm(a, w1, { eps = c.eps1, offset = c.offset })
  else
    r = x + a
  end
  g:output("r", r)
  return g:rmsnorm(r, w2, { eps = c.eps2, offset = c.offset })
end

-- Builds and runs the layer tail; returns y, r and the kernel names.
local function run(c, fused)
  local g = Graph.new { name = "norm_gate_up" }
  local h = norm_tail(g, c)
  local wg = g:weight { name = "wg", shape = { c.N, c.K }, dtype = c.dtype }
  local wu = g:weight { name = "wu", shape = { c.N, c.K }, dtype = c.dtype }
  local f = c.gemma and g:gelu_tanh(g:linear(h, wg)) or g:silu(g:linear(h, wg))
  g:output("y", f * g:linear(h, wu))
  local hs = hints.new()
  hs:set("fusion", fused and "on" or "-norm_gate_up", "test")
  hs:set("q_matmul", "fused", "test")
  for k, v in pairs(c.hints or { gemv_q_x = "q8x2" }) do hs:set(k, v, "test") end
  local p = plan.compile(dev, g, {
    T = c.T, act = c.act, kv = c.act, hints = hs,
    weights = { w1 = c.t.w1, w2 = c.t.w2, wg = c.t.wg, wu = c.t.wu }, inputs = { x = c.t.x, a = c.t.a },
    states = {}, constants = function() end,
  })
  p:run()
  local out = { y = p:output("y"):download(), r = p:output("r"):download(), kernels = {} }
  for i, k in ipairs(p.kernel_log) do out.kernels[i] = k:name() end
  return out
end

local has = check.has

local function float_weight(dtype, N, K, salt)
  math.randomseed(19, salt)
  local v = {}
  for i = 1, N * K do v[i] = doppler.round_to(dtype, (2 * math.random() - 1) * math.sqrt(3 / K)) end
  local t = dev:tensor { dtype = dtype, shape = { N, K } }
  t:upload(v)
  return t, v
end

local function setup(c)
  c.K, c.N, c.eps1, c.eps2 = c.K or 256, c.N or 64, 1e-6, c.gemma and 1e-6 or 1e-5
  c.offset = c.gemma and 1 or 0
  c.t, c.v = {}, {}
  math.randomseed(3, c.K + c.T)
  c.t.x, c.v.x = matrix(c.act, c.T, c.K, function(i) return (2 * math.random() - 1) * (i % 5 == 0 and 6 or 2) end)
  c.t.a, c.v.a = matrix(c.act, c.T, c.K, function() return (2 * math.random() - 1) * 3 end)
  c.t.w1, c.v.w1 = vector(c.nw, c.K, function() return (2 * math.random() - 1) * 0.5 end)
  c.t.w2, c.v.w2 = vector(c.nw, c.K, function() return 0.5 + math.random() end)
  if c.NS then return end          -- q/k/v: check_qkv makes float weights
  local make = (c.dtype == "f16" or c.dtype == "f32") and float_weight or weight
  c.t.wg, c.v.wg = make(c.dtype, c.N, c.K, 1)
  c.t.wu, c.v.wu = make(c.dtype, c.N, c.K, 2)
end

local function release(c)
  for _, t in pairs(c.t) do t:release() end
end

-- r and h of token t in double precision (r rounded as stored); r's per-element allowance.
local function reference_rows(c, t)
  local K, rd = c.K, function(v) return doppler.round_to(c.act, v) end
  -- Gemma's r: an inv1 one or two ulps off (another sum order, the GPU's inversesqrt) moves a's normed value by
  -- as much, and with it a rounding of an or of r
  local ulp = c.act == "f16" and 2 ^ -10 or 2 ^ -21
  local r, ra, h = {}, {}, {}
  local inv1 = 1
  if c.gemma then
    local ss = 0
    for k = 1, K do ss = ss + c.v.a[t * K + k] ^ 2 end
    inv1 = 1 / math.sqrt(ss / K + c.eps1)
  end
  local ss = 0
  for k = 1, K do
    local an = c.v.a[t * K + k]
    if c.gemma then an = rd(an * inv1 * (c.offset + c.v.w1[k])) end
    r[k] = rd(c.v.x[t * K + k] + an)
    ra[k] = c.gemma and (math.abs(r[k]) + math.abs(an)) * ulp or 0
    ss = ss + r[k] ^ 2
  end
  local inv2 = 1 / math.sqrt(ss / K + c.eps2)
  for k = 1, K do h[k] = r[k] * inv2 * (c.offset + c.v.w2[k]) end
  return r, ra, h, inv2
end

-- Token t: checks the r the GPU stored against the reference; returns h, its per-element allowance (r's
-- last place and allowance carried through the norm) and the largest error of r.
local function check_r(c, got, t)
  local r, ra, h, inv2 = reference_rows(c, t)
  local worst = 0
  for k = 1, c.K do
    local e = math.abs(got.r[t * c.K + k] - r[k])
    if e > ra[k] then error(("token %d: r[%d] = %.9g, reference %.9g"):format(t, k - 1, got.r[t * c.K + k], r[k])) end
    worst = math.max(worst, e)
  end
  local hulp, ulp = {}, c.act == "f16" and 2 ^ -10 or 2 ^ -22
  for k = 1, c.K do hulp[k] = (math.abs(r[k]) * ulp + ra[k]) * inv2 * math.abs(c.offset + c.v.w2[k]) end
  return h, hulp, worst
end

-- One dot product of row n of w with h: value and bound (see the header).
local function dot(c, w, n, h, hstep, hulp)
  local s, b, m = 0, 0, 0
  for k = 1, c.K do
    local wk = w[n * c.K + k]
    s, m = s + wk * h[k], m + math.abs(wk * h[k])
    b = b + math.abs(wk) * (hstep[k] * 1.002 + hulp[k])
  end
  return s, b + 2e-5 * m
end

local function check_case(c)
  setup(c)
  local got = run(c, true)
  check.truthy(not has(got.kernels, "add_rmsnorm") and not has(got.kernels, "norm_add_norm"), "the norm kernel is gone")
  local float = c.dtype == "f16" or c.dtype == "f32"
  check.truthy(has(got.kernels, float and "gemv_multi" or "gemv_q"), "gate+up ran on " .. (float and "gemv_multi" or "gemv_q"))
  local plain = run(c, false)
  check.truthy(has(plain.kernels, c.gemma and "norm_add_norm" or "add_rmsnorm"), "fusion off: the norm kernel runs")
  local f = c.gemma and act.gelu_tanh or act.silu
  local planes = (c.hints and c.hints.gemv_q_x == "q8") and 1 or 2
  local worst_r, worst_y = 0, 0
  for t = 0, c.T - 1 do
    local h, hulp, wr = check_r(c, got, t)
    worst_r = math.max(worst_r, wr)
    local hstep = {}
    for g0 = 1, c.K, 16 do
      local amax = 0
      for k = g0, g0 + 15 do amax = math.max(amax, math.abs(h[k])) end
      for k = g0, g0 + 15 do hstep[k] = float and 0 or planes == 2 and amax / 64516 or amax / 254 end
    end
    for n = 0, c.N - 1 do
      local gx, tg = dot(c, c.v.wg, n, h, hstep, hulp)
      local ux, tu = dot(c, c.v.wu, n, h, hstep, hulp)
      local want = f(gx) * ux
      local tol = 1.13 * tg * (math.abs(ux) + tu) + math.abs(f(gx)) * tu
      local y = got.y[t * c.N + n + 1]
      local slack = math.abs(y) * (c.act == "f16" and 2 ^ -11 or 2 ^ -20)
      if not (math.abs(y - want) <= tol + slack) then
        error(("token %d row %d: y = %.9g, reference %.9g (bound %.3g)"):format(t, n, y, want, tol + slack))
      end
      worst_y = math.max(worst_y, math.abs(y - want))
    end
  end
  release(c)
  return worst_r, worst_y
end

local cases = {
  { name = "Llama form (add_rmsnorm), q4_k, silu, f16, 1 token", dtype = "q4_k", act = "f16", nw = "f32", T = 1, K = 512 },
  { name = "Llama form, q8_0, f32, 3 tokens", dtype = "q8_0", act = "f32", nw = "f32", T = 3 },
  { name = "Gemma form (norm_add_norm), q5_0, gelu_tanh, f16, norm weights f16, 1 token", dtype = "q5_0",
    act = "f16", nw = "f16", T = 1, K = 1152, gemma = true },
  { name = "Gemma form, q5_0, f32, 4 tokens", dtype = "q5_0", act = "f32", nw = "f32", T = 4, gemma = true },
  { name = "Gemma form, q6_k, f16, 2 tokens, 128-thread workgroups of 4 rows", dtype = "q6_k", act = "f16",
    nw = "f32", T = 2, K = 512, gemma = true, hints = { gemv_q_x = "q8x2", gemv_q_wg = 128, gemv_q_rows = 4 } },
  { name = "Gemma form, q8_0, f16, 1 token, one int8 plane", dtype = "q8_0", act = "f16", nw = "f16", T = 1,
    gemma = true, hints = { gemv_q_x = "q8" } },
  -- float gate+up (gemv_multi's DP_PRENORM=2): h is not quantised
  { name = "Gemma form, f16 weights (gemv_multi), gelu_tanh, f16, norm weights f16, 1 token", dtype = "f16",
    act = "f16", nw = "f16", T = 1, K = 1152, gemma = true, hints = {} },
  { name = "Gemma form, f32 weights and activations (gemv_multi), 1 token", dtype = "f32", act = "f32", nw = "f32",
    T = 1, gemma = true, hints = {} },
}
for _, c in ipairs(cases) do
  check.case(c.name .. ": y and r against the double-precision chain", function()
    local wr, wy = check_case(c)
    print(("  worst |r - ref| %.3g, |y - ref| %.3g"):format(wr, wy))
  end)
end

-- norm_qkv: the same norm in front of q/k/v projections with float weights (f16 or f32).
local function run_qkv(c, fused)
  local g = Graph.new { name = "norm_qkv" }
  local h = norm_tail(g, c)
  -- each projection read by a node (x 2, exact), as attention reads them: the qkv rule fuses no output
  for i, name in ipairs { "q", "k", "v" } do
    g:output(name, g:linear(h, g:weight { name = "w" .. name, shape = { c.NS[i], c.K }, dtype = c.dtype }) * 2)
  end
  local hs = hints.new()
  hs:set("fusion", fused and "on" or "-norm_qkv", "test")
  local p = plan.compile(dev, g, {
    T = c.T, act = c.act, kv = c.act, hints = hs,
    weights = { w1 = c.t.w1, w2 = c.t.w2, wq = c.t.wq, wk = c.t.wk, wv = c.t.wv }, inputs = { x = c.t.x, a = c.t.a },
    states = {}, constants = function() end,
  })
  p:run()
  local out = { r = p:output("r"):download(), kernels = {} }
  for _, name in ipairs { "q", "k", "v" } do out[name] = p:output(name):download() end
  for i, k in ipairs(p.kernel_log) do out.kernels[i] = k:name() end
  return out
end

local function check_qkv(c)
  c.NS = c.NS or { 64, 32, 32 }
  setup(c)
  for i, name in ipairs { "q", "k", "v" } do c.t["w" .. name], c.v["w" .. name] = float_weight(c.dtype, c.NS[i], c.K, i) end
  local got = run_qkv(c, true)
  local norm = c.gemma and "norm_add_norm" or "add_rmsnorm"
  if c.T == 1 and c.gemma then
    check.truthy(not has(got.kernels, norm), "the norm kernel is gone")
    check.truthy(has(run_qkv(c, false).kernels, norm), "fusion off: the norm kernel runs")
  else
    check.truthy(has(got.kernels, norm), "not fused (Llama's form, or more than one token)")
  end
  local worst_r, worst = 0, 0
  for t = 0, c.T - 1 do
    local h, hulp, wr = check_r(c, got, t)
    worst_r = math.max(worst_r, wr)
    local zero = {}
    for k = 1, c.K do zero[k] = 0 end      -- float weights: no quantisation of h
    for i, name in ipairs { "q", "k", "v" } do
      for n = 0, c.NS[i] - 1 do
        local want, tol = dot(c, c.v["w" .. name], n, h, zero, hulp)
        want, tol = 2 * want, 2 * tol
        local y = got[name][t * c.NS[i] + n + 1]
        tol = tol + math.abs(y) * (c.act == "f16" and 2 ^ -11 or 2 ^ -20)
        if not (math.abs(y - want) <= tol) then
          error(("token %d %s row %d: %.9g, reference %.9g (bound %.3g)"):format(t, name, n, y, want, tol))
        end
        worst = math.max(worst, math.abs(y - want))
      end
    end
  end
  release(c)
  return worst_r, worst
end

for _, c in ipairs {
  { name = "norm_qkv, Gemma form, f16 weights and activations, f32 norm weights", dtype = "f16", act = "f16",
    nw = "f32", T = 1, K = 512 , gemma = true },
  { name = "norm_qkv, Gemma form, f16 weights and activations, f16 norm weights", dtype = "f16", act = "f16",
    nw = "f16", T = 1, K = 1152, gemma = true, NS = { 128, 64, 64 } },
  { name = "norm_qkv, Gemma form, f32 weights and activations", dtype = "f32", act = "f32", nw = "f32", T = 1, gemma = true },
  { name = "norm_qkv, Gemma form, bf16 norm weights, K not a multiple of the vector width (element loads)",
    dtype = "f16", act = "f32", nw = "bf16", T = 1, K = 100, gemma = true },
  { name = "norm_qkv: Llama's form is not fused", dtype = "f16", act = "f16", nw = "f32", T = 1 },
  { name = "norm_qkv: 3 tokens are not fused", dtype = "f16", act = "f16", nw = "f32", T = 3, gemma = true },
} do
  check.case(c.name .. ": q, k, v and r against the double-precision chain", function()
    local wr, w = check_qkv(c)
    print(("  worst |r - ref| %.3g, |q,k,v - ref| %.3g"):format(wr, w))
  end)
end

check.case("hint gemv_multi_rows: the same bits for 1, 2, 4 and 8 rows per workgroup (float gate+up with its norm)", function()
  local c = { dtype = "f16", act = "f16", nw = "f16", T = 1, K = 512, N = 40, gemma = true }
  setup(c)
  local ref
  for _, rows in ipairs { 1, 2, 4, 8 } do
    c.hints = { gemv_multi_rows = rows }
    local got = run(c, true)
    check.truthy(has(got.kernels, "gemv_multi") and not has(got.kernels, "norm_add_norm"), "fused on gemv_multi")
    ref = ref or got
    for _, name in ipairs { "y", "r" } do
      for i = 1, #ref[name] do check.eq(got[name][i], ref[name][i], ("rows %d: %s[%d]"):format(rows, name, i - 1)) end
    end
  end
  release(c)
end)

check.case("not fused where gate+up does not stage int8 x (gemv_q_x=act), the pass is prefill-sized, or float weights have Llama's form or 2 tokens", function()
  for _, c in ipairs {
    { dtype = "q4_k", act = "f32", nw = "f32", T = 1, hints = { gemv_q_x = "act" } },
    { dtype = "q4_k", act = "f32", nw = "f32", T = 5, gemma = true },
    { dtype = "f16", act = "f16", nw = "f32", T = 1, hints = {} },               -- float: Llama's form stays
    { dtype = "f16", act = "f16", nw = "f32", T = 2, gemma = true, hints = {} }, -- float: one token only
  } do
    setup(c)
    local got = run(c, true)
    check.truthy(has(got.kernels, c.gemma and "norm_add_norm" or "add_rmsnorm"), "the norm kernel runs")
    release(c)
  end
end)

check.done()
