-- Quantised linears through the planner (doppler.lower R.linear): a Q8_0 weight of known blocks, the
-- fused kernels (gemv_q for T <= 4, gemm_q above) and q_matmul=dequant_f16 (f16 copy + gemv/gemm), against
-- a Lua matmul. The blocks use d = 1/64 and small integer codes, so every value is exact in f16 and f32 and
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
check.case("weight_quant hint values", function()
  local h = hints.new()
  check.eq(h:get("weight_quant"), "keep", "default")
  check.truthy(not pcall(h.set, h, "weight_quant", "maybe", "test"), "bad value rejected")
end)
check.done()
