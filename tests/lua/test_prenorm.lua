-- The prenorm fusion (fusions.lua; shaders/include/dp_prenorm.glsl): in the T = 1 decode step the norm in
-- front of a GEMV (rmsnorm, add_rmsnorm, norm_add_norm) is computed in the GEMV's prologue, so no norm
-- dispatch is left in the layer body (Gemma 3 and Llama: 6 dispatches a layer instead of 8). Checked on the
-- tiny fixtures, fed one token at a time (every step is a T = 1 plan):
--   - the rule fires: no norm_add_norm / add_rmsnorm / rmsnorm dispatch between the embedding and the
--     last layer's down projection, 6 dispatches per layer; fusion=-prenorm brings the norms back;
--   - precision=f32: the logits of every step equal the unfused plan's within 1e-4 relative (the kernels
--     are bit-exact on lavapipe, tests/unit/test_k_prenorm.c; see test_fuse_attn.lua's same_logits for why
--     plans are compared in f32);
--   - default mode: every step's logits within 5e-2 (max abs) of the fixture's reference row (the bound of
--     test_gemma3_fixtures / test_families_fixtures);
--   - qwen2-tiny (Q, K, V with biases: the qkv GEMV keeps its norm, gate_up takes it) and a quantised Q8_0
--     graph, whose gemv_q has no prologue (the lowering runs the norm first), give the unfused values too.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"

local F = check.fixtures .. "/models/"

-- Feeds ids one at a time; returns every step's logits and the kernel names of the last (T = 1) plan.
local function steps(name, ids, hint_list)
  local h = hints.new()
  for k, v in pairs(hint_list) do h:set(k, v, "test") end
  local m = doppler.open_model(F .. name)
  local recipe = recipes.for_config(doppler.read_json(F .. name .. "/config.json"), F .. name)
  local s = session.open(recipe, m, { hints = h, context = #ids + 8 })
  local rows = {}
  for i = 1, #ids do
    s:feed({ ids[i] })
    rows[i] = s:last_logits()
  end
  local names = {}
  for i, k in ipairs(s.last_plan.kernel_log) do names[i] = k:name() end
  m:close()
  return rows, names
end

local NORMS = { rmsnorm = true, add_rmsnorm = true, norm_add_norm = true }

-- Norm dispatches from the embedding to the last layer's down projection (the final norm is the LM head's);
-- and the dispatches from the first GEMV to that projection.
local function body_norms(names)
  local first, last = nil, nil
  for i, k in ipairs(names) do
    if k == "gemv_multi" or k == "gemv" then first = first or i; last = i end
  end
  local n = 0
  for i = 1, #names do if NORMS[names[i]] and i > 1 and i < last then n = n + 1 end end
  return n, last - first + 1
end

local function same_logits(a, b, what)
  for i = 1, #a do
    for j = 1, #a[i] do
      check.near(b[i][j], a[i][j], 1e-4 * math.max(1, math.abs(a[i][j])), ("%s step %d logit %d"):format(what, i, j - 1))
    end
  end
end

for _, name in ipairs { "gemma3-tiny", "llama3-tiny" } do
  local ref = doppler.read_json(F .. name .. "/reference.json")
  local expected = check.read_f32(F .. name .. "/" .. ref.logits_file)
  local V = ref.logits_shape[2]
  local layers = doppler.read_json(F .. name .. "/config.json").num_hidden_layers
  local ids = ref.all_ids

  check.case(name .. ": no norm dispatch in the layers, 6 a layer; fusion=-prenorm brings them back", function()
    local _, kf = steps(name, { ids[1], ids[2] }, {})
    local _, kp = steps(name, { ids[1], ids[2] }, { fusion = "-prenorm" })
    local nf, span = body_norms(kf)
    check.eq(nf, 0, "norm dispatches in the layers")
    check.eq(span, 6 * layers, "dispatches from the first GEMV to the last down projection")
    local np = body_norms(kp)
    check.eq(np, 2 * layers, "unfused: norms before the GEMVs")
    check.eq(#kp - #kf, 2 * layers, "dispatches saved")
  end)

  check.case(name .. ": precision=f32, every step = the unfused plan's (1e-4)", function()
    local sub = { table.unpack(ids, 1, 12) }
    local fused = steps(name, sub, { precision = "f32" })
    local plain = steps(name, sub, { precision = "f32", fusion = "-prenorm" })
    same_logits(plain, fused, name .. " (f32)")
  end)

  check.case(name .. ": default mode, every step within 5e-2 of the reference", function()
    local rows = steps(name, ids, {})
    for t = 1, #ids do
      local worst = 0
      for j = 1, V do worst = math.max(worst, math.abs(rows[t][j] - expected[(t - 1) * V + j])) end
      if not (worst <= 5e-2) then error(("step %d: max abs %.4g"):format(t, worst)) end
    end
  end)
end

check.case("qwen2-tiny (biased Q, K, V): gate_up takes the norm, qkv keeps it; same logits (f32)", function()
  local ids = { 2, 17, 5, 33, 8, 11 }
  local fused, kf = steps("qwen2-tiny", ids, { precision = "f32" })
  local plain, kp = steps("qwen2-tiny", ids, { precision = "f32", fusion = "-prenorm" })
  local layers = doppler.read_json(F .. "qwen2-tiny/config.json").num_hidden_layers
  check.eq(#kp - #kf, layers, "one norm a layer folded (the post-attention one)")
  same_logits(plain, fused, "qwen2-tiny (f32)")
end)

-- A residual block by hand: y = x + a; h = rmsnorm(y); z = linear(h, W) with W Q8_0 (gemv_q: the lowering
-- dispatches the norm first) or its f16 copy (q_matmul=dequant_f16: the gemv prologue), against the plan
-- without the rule. The residual y is an output too, written by the fused kernel.
check.case("quantised weights: gemv_q after the norm kernel, the f16 copy with the prologue; same values", function()
  local dev = doppler.device()
  local N, K = 20, 96
  local bytes = {}
  for n = 0, N - 1 do
    for b = 0, K // 32 - 1 do
      bytes[#bytes + 1] = string.pack("<I2", 0x2400)
      for j = 0, 31 do bytes[#bytes + 1] = string.pack("<i1", ((n * 7 + b * 5 + j * 3) % 17) - 8) end
    end
  end
  local w = dev:tensor { dtype = "q8_0", shape = { N, K } }
  w:upload(table.concat(bytes))
  local nw = dev:tensor { dtype = "f32", shape = { K } }
  local nv, xv, av = {}, {}, {}
  for i = 1, K do nv[i] = 0.5 + (i % 7) / 8; xv[i] = ((i * 13) % 11 - 5) / 4; av[i] = ((i * 7) % 5 - 2) / 3 end
  nw:upload(nv)
  local function run(act, mode, fusion)
    local g = Graph.new { name = "prenorm_q" }
    local x = g:input("x", { "T", K }, "act")
    local a = g:input("a", { "T", K }, "act")
    local wn = g:weight { name = "w", shape = { N, K }, dtype = "q8_0" }
    local nwn = g:weight { name = "nw", shape = { K }, dtype = "f32" }
    local y = g:add(x, a)
    g:output("z", g:linear(g:rmsnorm(y, nwn, { eps = 1e-6 }), wn))
    g:output("y", y)
    local xt = dev:tensor { dtype = act, shape = { 1, K } }
    local at = dev:tensor { dtype = act, shape = { 1, K } }
    xt:upload(xv)
    at:upload(av)
    local h = hints.new()
    h:set("q_matmul", mode, "test")
    h:set("fusion", fusion, "test")
    local p = plan.compile(dev, g, { T = 1, act = act, kv = act, hints = h, weights = { w = w, nw = nw },
                                     inputs = { x = xt, a = at } })
    p:run()
    local names = {}
    for i, k in ipairs(p.kernel_log) do names[i] = k:name() end
    return p:output("z"):download(), p:output("y"):download(), table.concat(names, " ")
  end
  for _, act in ipairs { "f32", "f16" } do
    for _, mode in ipairs { "fused", "dequant_f16" } do
      local z1, y1, k1 = run(act, mode, "on")
      local z0, y0, k0 = run(act, mode, "-prenorm")
      -- the f16 copy takes the prologue; gemv_q runs after the norm kernel (the fallback)
      check.eq(k1:find("rmsnorm") ~= nil, mode == "fused", act .. " " .. mode .. ": add_rmsnorm dispatch: " .. k1)
      check.truthy(k0:find("add_rmsnorm"), "unfused: " .. k0)
      for i = 1, N do check.eq(z1[i], z0[i], ("%s %s z[%d]"):format(act, mode, i - 1)) end
      for i = 1, K do check.eq(y1[i], y0[i], ("%s %s y[%d]"):format(act, mode, i - 1)) end
    end
  end
end)

check.done()
