-- gemm_cm (matmul/gemm_cm.comp, cooperative matrices) through the planner (doppler.lower R.linear).
-- Where the device has VK_NV_cooperative_matrix f16 tiles (the H100; scripts/device/h100-bench.sh runs this
-- file there): every tile shape, against a Lua matmul, on shapes with partial tiles in T, N and K, a bias of
-- either type, f32 output and a strided x. The values are small multiples of 1/4 (x) and 1/64 (W), so x, W
-- and every partial sum are exact in f32 whatever the summation order: the only error left is the output's
-- rounding to f16 (one half ulp, checked) or none (f32 output, checked at 1e-6). Split K (partial tiles summed
-- by the last workgroup) is checked the same way, after two runs of the plan (its counters must reset).
-- Where the device has none (lavapipe): auto must not pick gemm_cm, and hint matmul=coopmat must fail
-- with a message that says why.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"

local dev = doppler.device()
local caps = dev:caps()

-- Compiles graph g for T tokens of input x with the gemm_cm hints of opts (matmul, tile, bk, splits; unset:
-- auto) and runs it opts.runs times (a replay checks that split-K counters reset). Returns the plan and the
-- names of the kernels it dispatched.
local function compile_run(g, T, weights, xt, opts)
  local h = hints.new()
  h:set("matmul", opts.matmul or "auto", "test")
  h:set("gemm_cm_tile", opts.tile or "auto", "test")
  h:set("gemm_cm_bk", opts.bk or 0, "test")
  h:set("gemm_cm_splits", opts.splits or 0, "test")
  local p = plan.compile(dev, g, { T = T, act = "f16", kv = "f16", hints = h, weights = weights,
                                   inputs = { x = xt }, states = {}, constants = function() end })
  for _ = 1, opts.runs or 1 do p:run() end
  local names = {}
  for i, k in ipairs(p.kernel_log) do names[i] = k:name() end
  return p, names
end

-- One linear y = x · Wᵀ (+ b) of T tokens; opts: bias = dtype, out = "f32", stride = x row stride (>= K),
-- matmul / tile / bk hints. Returns the output values, the expected ones and the kernel names.
local function run(T, N, K, opts)
  local stride = opts.stride or K
  local xv, wv, bv = {}, {}, {}
  for i = 0, T * stride - 1 do xv[i + 1] = ((i * 13 + 7) % 11 - 5) / 4 end
  for i = 0, N * K - 1 do wv[i + 1] = ((i * 7 + 3) % 17 - 8) / 64 end
  for n = 0, N - 1 do bv[n + 1] = ((n * 5) % 9 - 4) / 8 end

  local g = Graph.new { name = "cm" }
  local x = g:input("x", { "T", stride }, "f16")
  local xs = stride ~= K and g:slice(x, 0, K) or x
  local wn = g:weight { name = "w", shape = { N, K }, dtype = "f16" }
  local bn = opts.bias and g:weight { name = "b", shape = { N }, dtype = opts.bias } or nil
  g:output("y", g:linear(xs, wn, bn, { dtype = opts.out }))

  local xt = dev:tensor { dtype = "f16", shape = { T, stride } }; xt:upload(xv)
  local wt = dev:tensor { dtype = "f16", shape = { N, K } };      wt:upload(wv)
  local weights = { w = wt }
  if opts.bias then
    weights.b = dev:tensor { dtype = opts.bias, shape = { N } }
    weights.b:upload(bv)
  end
  -- replayed (opts.runs): a split-K tile's counter must be back at zero for the second run to merge correctly
  local p, names = compile_run(g, T, weights, xt, opts)
  local y = p:output("y"):download()
  local want = {}
  for t = 0, T - 1 do
    for n = 0, N - 1 do
      local s = opts.bias and bv[n + 1] or 0
      for k = 0, K - 1 do s = s + xv[t * stride + k + 1] * wv[n * K + k + 1] end
      want[t * N + n + 1] = s
    end
  end
  return y, want, names
end

-- y = act(x · Wgᵀ) * (x · Wuᵀ) of T tokens as a recipe writes it (linear, linear, activation, mul: the glu and
-- gate_up fusions make it one glu_linear). Returns the output, the expected values with each one's
-- tolerance, and the kernel names. g and u are exact (as in run); the expected value is evaluated in
-- double precision, and the kernel's f32 activation may differ from it by ~1e-6 relative of g before the
-- output's f16 rounding (half an ulp): tol = 2^-11 |y| + 1e-5 (1 + |g|) |u|. The unfused path also rounds g and
-- u to f16 first (half an ulp each; |act'(g)| <= 1.2): tol2 = tol + 2^-11 (1.2 |g| + |act(g)|) |u|.
local function run_glu(T, N, K, act, opts)
  local xv, gv, uv = {}, {}, {}
  for i = 0, T * K - 1 do xv[i + 1] = ((i * 13 + 7) % 11 - 5) / 4 end
  for i = 0, N * K - 1 do gv[i + 1] = ((i * 7 + 3) % 17 - 8) / 64; uv[i + 1] = ((i * 5 + 1) % 13 - 6) / 64 end
  local g = Graph.new { name = "cm_glu" }
  local x = g:input("x", { "T", K }, "f16")
  local wg = g:weight { name = "wg", shape = { N, K }, dtype = "f16" }
  local wu = g:weight { name = "wu", shape = { N, K }, dtype = "f16" }
  local gate = g:linear(x, wg)
  g:output("y", g:mul(act == "silu" and g:silu(gate) or g:gelu_tanh(gate), g:linear(x, wu)))
  local xt = dev:tensor { dtype = "f16", shape = { T, K } }; xt:upload(xv)
  local gt = dev:tensor { dtype = "f16", shape = { N, K } }; gt:upload(gv)
  local ut = dev:tensor { dtype = "f16", shape = { N, K } }; ut:upload(uv)
  local p, names = compile_run(g, T, { wg = gt, wu = ut }, xt, opts)
  local y = p:output("y"):download()
  local want, tol, tol2 = {}, {}, {}
  for t = 0, T - 1 do
    for n = 0, N - 1 do
      local a, b = 0, 0
      for k = 0, K - 1 do
        a = a + xv[t * K + k + 1] * gv[n * K + k + 1]
        b = b + xv[t * K + k + 1] * uv[n * K + k + 1]
      end
      local f = act == "silu" and a / (1 + math.exp(-a))
                or 0.5 * a * (1 + math.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))
      want[t * N + n + 1] = f * b
      tol[t * N + n + 1] = 2 ^ -11 * math.abs(f * b) + 1e-5 * (1 + math.abs(a)) * math.abs(b)
      tol2[t * N + n + 1] = tol[t * N + n + 1] + 2 ^ -11 * (1.2 * math.abs(a) + math.abs(f)) * math.abs(b)
    end
  end
  return y, want, tol, names, tol2
end

-- Two or three linears of one x (the qkv fusion), each read by an add (y_j = l_j + l_j: a graph output is not
-- fused, and doubling is exact): returns each output's values and expected values (exact, as in run) and the
-- kernel names.
local function run_multi(T, Ns, K, opts)
  local xv = {}
  for i = 0, T * K - 1 do xv[i + 1] = ((i * 13 + 7) % 11 - 5) / 4 end
  local g = Graph.new { name = "cm_multi" }
  local x = g:input("x", { "T", K }, "f16")
  local weights, wv = {}, {}
  for j, N in ipairs(Ns) do
    wv[j] = {}
    for i = 0, N * K - 1 do wv[j][i + 1] = ((i * 7 + 3 * j) % 17 - 8) / 64 end
    local name = "w" .. j
    weights[name] = dev:tensor { dtype = "f16", shape = { N, K } }
    weights[name]:upload(wv[j])
    local l = g:linear(x, g:weight { name = name, shape = { N, K }, dtype = "f16" })
    g:output("y" .. j, g:add(l, l))
  end
  local xt = dev:tensor { dtype = "f16", shape = { T, K } }; xt:upload(xv)
  local p, names = compile_run(g, T, weights, xt, opts)
  local ys, wants = {}, {}
  for j, N in ipairs(Ns) do
    ys[j] = p:output("y" .. j):download()
    wants[j] = {}
    for t = 0, T - 1 do
      for n = 0, N - 1 do
        local s = 0
        for k = 0, K - 1 do s = s + xv[t * K + k + 1] * wv[j][n * K + k + 1] end
        wants[j][t * N + n + 1] = 2 * s
      end
    end
  end
  return ys, wants, names
end

local function used(names, kernel)
  for _, n in ipairs(names) do if n:find(kernel, 1, true) then return true end end
  return false
end

local function count(names, kernel)
  local c = 0
  for _, n in ipairs(names) do if n:find(kernel, 1, true) then c = c + 1 end end
  return c
end

local function compare(y, want, out, what)
  check.eq(#y, #want, what .. ": element count")
  for i = 1, #want do
    -- f16 output: one rounding of the exact sum, half an ulp (2^-11 relative, 2^-25 absolute near 0)
    local tol = out == "f32" and 1e-6 or math.max(math.abs(want[i]) * 2 ^ -11, 2 ^ -25)
    check.near(y[i], want[i], tol, ("%s y[%d]"):format(what, i - 1))
  end
end

if caps.coopmat_nv then
  check.case("device reports a cooperative-matrix shape", function()
    local s = caps.coopmat_shape
    check.truthy(s and s[1] == 16 and s[3] == 16 and (s[2] == 16 or s[2] == 8), "shape 16 x (8|16) x 16")
  end)
  local shapes = {
    { 5, 72, 40 },          -- one partial tile in every direction; K below one slice
    { 37, 200, 1152 },      -- Gemma's hidden size as K
    { 130, 64, 264 },       -- K a multiple of 8 but not of the 32-wide slice
    { 256, 136, 96 },       -- several token tiles
  }
  for _, tile in ipairs { "32x32", "32x64", "64x32", "64x64", "64x128", "128x64", "128x128" } do
    for _, sh in ipairs(shapes) do
      local T, N, K = sh[1], sh[2], sh[3]
      check.case(("gemm_cm %s T=%d N=%d K=%d"):format(tile, T, N, K), function()
        local y, want, names = run(T, N, K, { matmul = "coopmat", tile = tile })
        check.truthy(used(names, "gemm_cm"), "gemm_cm ran")
        compare(y, want, "f16", tile)
      end)
    end
  end
  -- every K slice, with K shorter than one slice, a whole number of slices, and a partial last slice
  for _, bk in ipairs { 32, 64, 128 } do
    for _, K in ipairs { 24, bk, bk + 40 } do
      check.case(("gemm_cm 64x64 gemm_cm_bk=%d K=%d"):format(bk, K), function()
        local y, want = run(21, 80, K, { matmul = "coopmat", tile = "64x64", bk = bk })
        compare(y, want, "f16", "bk " .. bk)
      end)
    end
  end
  -- split K: parts of whole slices, an uneven last part, every tile shape's merge, and a replay
  for _, c in ipairs {
    { 64, 72, 1152, 2, "64x64" }, { 37, 200, 1152, 4, "64x128" }, { 70, 40, 264, 4, "32x32" },
    { 130, 136, 1024, 16, "128x64" }, { 9, 300, 96, 8, "64x64" },
  } do
    local T, N, K, S, tile = table.unpack(c)
    check.case(("gemm_cm split K: %s T=%d N=%d K=%d splits=%d, run twice"):format(tile, T, N, K, S), function()
      local y, want = run(T, N, K, { matmul = "coopmat", tile = tile, splits = S, bk = 32, runs = 2,
                                     bias = "f32" })
      compare(y, want, "f16", "split " .. S)
    end)
  end
  check.case("gemm_cm: f16 bias, f32 output, strided x", function()
    local y, want = run(33, 100, 64, { matmul = "coopmat", bias = "f16", out = "f32", stride = 72 })
    compare(y, want, "f32", "bias f16")
  end)
  check.case("gemm_cm: f32 bias (a quantised model's)", function()
    local y, want = run(20, 48, 32, { matmul = "coopmat", bias = "f32" })
    compare(y, want, "f16", "bias f32")
  end)
  -- the gate_up fusion in prefill: both products and the activation in one gemm_cm (DP_GLU), no glu kernel
  for _, c in ipairs {
    { 37, 200, 1152, "gelu_tanh" }, { 130, 72, 264, "silu" }, { 512, 136, 96, "gelu_tanh", "64x64", 64 },
    { 9, 300, 40, "silu", "128x64" }, { 70, 64, 128, "gelu_tanh", "32x32", 128 },
    { 1024, 2048, 16, "silu", nil, 64 },   -- a K slice of 64 the auto 128 x 128 tile cannot hold: 64 x 64 instead
  } do
    local T, N, K, act, tile, bk = table.unpack(c)
    check.case(("gemm_cm DP_GLU %s T=%d N=%d K=%d tile=%s bk=%s"):format(act, T, N, K, tile or "auto", tostring(bk or "auto")), function()
      local y, want, tol, names = run_glu(T, N, K, act, { tile = tile, bk = bk })
      check.truthy(used(names, "gemm_cm") and not used(names, "glu") and #names == 1, "one gemm_cm: " .. table.concat(names, ","))
      check.eq(#y, #want, "element count")
      for i = 1, #want do check.near(y[i], want[i], tol[i], ("glu y[%d]"):format(i - 1)) end
    end)
  end
  -- the qkv fusion in prefill: one gemm_cm over the concatenated columns (DP_MULTI)
  for _, c in ipairs {
    { 37, { 1024, 256, 256 }, 1152 }, { 130, { 256, 128, 72 }, 96, "64x64" }, { 9, { 128, 200 }, 64, "32x32" },
    { 70, { 256, 128, 40 }, 520, "64x64", 4 },
  } do
    local T, Ns, K, tile, splits = table.unpack(c)
    check.case(("gemm_cm DP_MULTI T=%d N=%s K=%d tile=%s splits=%s"):format(T, table.concat(Ns, "+"), K, tile or "auto",
                                                                        tostring(splits or "auto")), function()
      local ys, wants, names = run_multi(T, Ns, K, { tile = tile, splits = splits, runs = 2 })
      check.eq(count(names, "gemm_cm"), 1, "gemm_cm dispatches (" .. table.concat(names, ",") .. ")")
      for j = 1, #Ns do compare(ys[j], wants[j], "f16", "multi y" .. j) end
    end)
  end
  check.case("gemm_cm DP_MULTI: a first weight of 72 rows stays unfused (a tile would straddle two weights)", function()
    local ys, wants, names = run_multi(20, { 72, 128 }, 64, {})
    check.eq(count(names, "gemm_cm"), 2, "gemm_cm dispatches (" .. table.concat(names, ",") .. ")")
    for j = 1, 2 do compare(ys[j], wants[j], "f16", "y" .. j) end
  end)
  check.case("auto picks gemm_cm for T > 4 only", function()
    local _, _, n9 = run(9, 32, 64, {})
    check.truthy(used(n9, "gemm_cm"), "T = 9: gemm_cm")
    local _, _, n4 = run(4, 32, 64, {})
    check.truthy(not used(n4, "gemm_cm") and used(n4, "gemv"), "T = 4: gemv")
  end)
else
  check.case("no cooperative matrices: auto keeps the other kernels", function()
    check.truthy(caps.coopmat_shape == nil, "no shape reported")
    local y, want, names = run(9, 40, 64, {})
    check.truthy(not used(names, "gemm_cm"), "gemm_cm not used")
    compare(y, want, "f16", "auto")
  end)
  check.case("no cooperative matrices: a prefill GLU MLP stays unfused (linears + glu)", function()
    local y, want, _, names, tol2 = run_glu(9, 40, 64, "gelu_tanh", {})
    check.truthy(used(names, "glu") and not used(names, "gemm_cm"), "glu kernel: " .. table.concat(names, ","))
    for i = 1, #want do check.near(y[i], want[i], tol2[i], ("glu y[%d]"):format(i - 1)) end
  end)
  check.case("no cooperative matrices: prefill q / k / v linears stay unfused", function()
    local ys, wants, names = run_multi(20, { 128, 128 }, 64, {})
    check.eq(count(names, "gemv"), 2, "gemv dispatches (" .. table.concat(names, ",") .. ")")
    for j = 1, 2 do compare(ys[j], wants[j], "f16", "y" .. j) end
  end)
  check.case("no cooperative matrices: matmul=coopmat fails and says why", function()
    local ok, err = pcall(run, 9, 40, 64, { matmul = "coopmat" })
    check.truthy(not ok, "matmul=coopmat refused")
    check.truthy(tostring(err):find("cannot use gemm_cm", 1, true), "message: " .. tostring(err))
    check.truthy(tostring(err):find("VK_NV_cooperative_matrix", 1, true), "message names the missing extension")
  end)
end
check.case("gemm_cm_tile values", function()
  local h = hints.new()
  check.eq(h:get("gemm_cm_tile"), "auto", "default")
  check.truthy(not pcall(h.set, h, "gemm_cm_tile", "16x16", "test"), "16x16 rejected")
end)
check.done()
