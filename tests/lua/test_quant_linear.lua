-- Quantised linears through the planner (doppler.lower R.linear): a Q8_0 weight of known blocks, the
-- fused kernels (gemv_q for T <= 4, gemm_q above) and q_matmul=dequant_f16 (f16 copy + gemv/gemm), against
-- a Lua matmul; and projections of one x in Q8_0 and Q4_0 (the qkv fusion on their f16 copies). The blocks use d = 1/64 and small integer codes, so every value is exact in f16 and f32 and
-- the sums are exact: the comparison can be tight (1e-5).
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"

local dev = doppler.device()
local N, K = 10, 96          -- 3 Q8_0 blocks per row

local codes, bytes = {}, {}
for n = 0, N - 1 do
  for b = 0, K // 32 - 1 do
    bytes[#bytes + 1] = string.pack("<I2", 0x2400)         -- f16 1/64
    for j = 0, 31 do
      local q = ((n * 7 + b * 5 + j * 3) % 17) - 8
      codes[n * K + b * 32 + j] = q
      bytes[#bytes + 1] = string.pack("<i1", q)
    end
  end
end
local w = dev:tensor { dtype = "q8_0", shape = { N, K } }
w:upload(table.concat(bytes))

-- A quantised model's bias is f32 (GGUF keeps 1-D tensors in f32), whatever the weight becomes on the device.
local bias = dev:tensor { dtype = "f32", shape = { N } }
local bias_v = {}
for n = 1, N do bias_v[n] = (n % 5 - 2) * 0.375 + 1 / 1024 end   -- 1/1024: not a value an f16 read could hit
bias:upload(bias_v)

local function run(T, mode, with_bias, matmul)
  local g = Graph.new { name = "qlinear" }
  local x = g:input("x", { "T", K }, "f32")
  local wn = g:weight { name = "w", shape = { N, K }, dtype = "q8_0" }
  local bn = with_bias and g:weight { name = "b", shape = { N }, dtype = "f32" } or nil
  g:output("y", g:linear(x, wn, bn))
  local xv = {}
  for i = 1, T * K do xv[i] = ((i * 13) % 11 - 5) / 4 end
  local xt = dev:tensor { dtype = "f32", shape = { T, K } }
  xt:upload(xv)
  local h = hints.new()
  h:set("q_matmul", mode, "test")
  if matmul then h:set("matmul", matmul, "test") end
  local p = plan.compile(dev, g, { T = T, act = "f32", kv = "f32", hints = h, weights = { w = w, b = bias },
                                   inputs = { x = xt }, states = {}, constants = function() end })
  p:run()
  local y = p:output("y"):download()
  for t = 0, T - 1 do
    for n = 0, N - 1 do
      local s = with_bias and bias_v[n + 1] or 0
      for k = 0, K - 1 do s = s + xv[t * K + k + 1] * codes[n * K + k] / 64 end
      check.near(y[t * N + n + 1], s, 1e-5, ("T=%d %s y[%d,%d]"):format(T, mode, t, n))
    end
  end
end

for _, mode in ipairs { "fused", "dequant_f16" } do
  for _, T in ipairs { 1, 3, 9 } do
    check.case(("q8_0 linear T=%d q_matmul=%s"):format(T, mode), function() run(T, mode) end)
    -- dequant_f16 once read the f32 bias as f16 (the f16 copy's type): every output was off
    check.case(("q8_0 linear + f32 bias T=%d q_matmul=%s"):format(T, mode), function() run(T, mode, true) end)
  end
end
check.case("q8_0 linear + f32 bias T=9 q_matmul=dequant_f16 matmul=gemm (the tiled kernel)", function()
  run(9, "dequant_f16", true, "gemm")
end)
-- Q, K and V of different block types (Q4_K_M gives some layers' v more bits than q and k): on their f16
-- copies the qkv fusion takes them as one gemv_multi pass (the kernels see one type, lower.kernel_dtype);
-- decoded in the kernel (fused) they stay one gemv_q each. Both against the Lua matmul.
local function q4_0_weight(rows, seed)   -- Q4_0 blocks with d = 1/64: value = (nibble - 8) / 64, exact
  local cs, bs = {}, {}
  for n = 0, rows - 1 do
    for b = 0, K // 32 - 1 do
      bs[#bs + 1] = string.pack("<I2", 0x2400)
      local nib = {}
      for j = 0, 31 do
        nib[j] = (n * 5 + b * 3 + j * seed) % 16
        cs[n * K + b * 32 + j] = nib[j] - 8
      end
      for j = 0, 15 do bs[#bs + 1] = string.char(nib[j] | (nib[j + 16] << 4)) end
    end
  end
  local t = dev:tensor { dtype = "q4_0", shape = { rows, K } }
  t:upload(table.concat(bs))
  return t, cs
end

local function run_qkv(T, mode)
  local wk, ck = q4_0_weight(N, 7)
  local wv, cv = q4_0_weight(4, 11)
  local g = Graph.new { name = "qkv_mixed" }
  local x = g:input("x", { "T", K }, "f32")
  local ws = { q = { w, codes, N, "q8_0" }, k = { wk, ck, N, "q4_0" }, v = { wv, cv, 4, "q4_0" } }
  for _, name in ipairs { "q", "k", "v" } do
    local e = ws[name]
    local y = g:linear(x, g:weight { name = "w" .. name, shape = { e[3], K }, dtype = e[4] })
    g:output(name, y + y)   -- a reader: the fusion takes projections that something reads, not outputs
  end
  local xv = {}
  for i = 1, T * K do xv[i] = ((i * 13) % 11 - 5) / 4 end
  local xt = dev:tensor { dtype = "f32", shape = { T, K } }
  xt:upload(xv)
  local h = hints.new()
  h:set("q_matmul", mode, "test")
  local p = plan.compile(dev, g, { T = T, act = "f32", kv = "f32", hints = h,
                                   weights = { wq = w, wk = wk, wv = wv }, inputs = { x = xt }, states = {},
                                   constants = function() end })
  p:run()
  local count = {}
  for _, k in ipairs(p.kernel_log) do count[k:name()] = (count[k:name()] or 0) + 1 end
  for _, name in ipairs { "q", "k", "v" } do
    local e = ws[name]
    local y = p:output(name):download()
    for t = 0, T - 1 do
      for n = 0, e[3] - 1 do
        local s = 0
        for k = 0, K - 1 do s = s + xv[t * K + k + 1] * e[2][n * K + k] / 64 end
        check.near(y[t * e[3] + n + 1], 2 * s, 1e-5, ("T=%d %s %s[%d,%d]"):format(T, mode, name, t, n))
      end
    end
  end
  return count
end

for _, T in ipairs { 1, 3 } do
  check.case(("q8_0 q, q4_0 k and v, T=%d: one gemv_multi on the f16 copies, three gemv_q fused"):format(T), function()
    local c = run_qkv(T, "dequant_f16")
    check.eq(c.gemv_multi, 1, "one gemv_multi for q, k and v")
    check.truthy(not c.gemv and not c.gemv_q, "no separate projection")
    c = run_qkv(T, "fused")
    check.eq(c.gemv_q, 3, "one gemv_q per type's projection")
    check.truthy(not c.gemv_multi, "no gemv_multi on blocks")
  end)
end

check.case("weight_quant hint values", function()
  local h = hints.new()
  check.eq(h:get("weight_quant"), "keep", "default")
  check.truthy(not pcall(h.set, h, "weight_quant", "maybe", "test"), "bad value rejected")
end)
check.done()
