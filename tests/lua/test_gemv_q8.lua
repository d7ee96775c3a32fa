-- gemv_q with int8 activations (hint gemv_q_x=q8 / q8x2, DP_XQ8: each workgroup quantises x per 16 values into
-- shared memory, one int8 plane or two (the second holding the remainder), and takes each half-unit's dot
-- product with packed integer dot products; shaders/include/dp_quant_x8.glsl) through plan.compile, on every
-- quantised type, row_wise and flat layouts, 1 to 4 tokens, f16 and f32 activations, the fused gate/up pair
-- (DP_GLU) and rows padded past K, each with one plane and with two. Two references in double precision from
-- the weights as the kernel sees them (doppler.dequantize):
--  (1) W · x8, x8 being x quantised as the kernel does it (d = amax / 127, q = roundEven(x * 127 / amax); the
--      second plane q2 = roundEven((x - d q) * 127 * 254 / amax) at d / 254):
--      |y - ref8| <= 2^-16 * sum |W x8| (f32 sums) + |y| * 2^-11 with f16 outputs, plus a step times |W_k|
--      for a code whose product lies within 1e-3 (1e-2 for the second plane) of a rounding boundary (the
--      GPU's division may round it the other way; such codes are rare). This pins the kernel's scales,
--      offsets, codes and planes to the scheme: dropping the second plane, or a scale off by 2 %, fails.
--  (2) W · x: |y - ref| <= sum |W_k| * h_g(k) * 1.002 + the same float terms, h being half a step of the
--      group (max|x| / 254 with one plane, / 64516 with two): x8 is within half a step of x.
-- With f32 activations the kernel's error against W · x8 must also be < 1/4 of that against W · x (the q8
-- path ran, not the f32 one). Then: auto is act; a staging that does not fit in shared memory is refused
-- with a message.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"
local lower = require "doppler.lower"
local f32 = require "doppler.f32"

local dev = doppler.device()
local caps = dev:caps()
local QK = lower.Q_BLOCK

-- A [N, K] weight of dtype in `layout` (rows zero-padded to whole blocks, as doppler convert --pad-k
-- stores them) and its values as the kernel decodes them, row-major [N][K].
local function make_weight(dtype, N, K, layout, salt)
  math.randomseed(7, salt)
  local Ks = (K + QK[dtype] - 1) // QK[dtype] * QK[dtype]
  local v = {}
  for n = 0, N - 1 do
    for k = 1, Ks do v[n * Ks + k] = k <= K and (2 * math.random() - 1) * math.sqrt(3 / K) or 0 end
  end
  local bytes = doppler.quantize(dtype, f32.bytes(v), Ks)
  local d = f32.values(doppler.dequantize(dtype, bytes, N * Ks), N * Ks)
  local seen = {}
  for n = 0, N - 1 do table.move(d, n * Ks + 1, n * Ks + K, n * K + 1, seen) end
  local t = dev:tensor { dtype = dtype, shape = { N, Ks } }
  t:upload(layout == "row_wise" and bytes or doppler.quant_pack(bytes, dtype, N, Ks, layout))
  lower.set_layout(t, layout)
  if Ks ~= K then lower.set_padded(t, K) end
  return t, seen
end

local function round_even(v)
  local f = math.floor(v)
  local r = v - f
  if r ~= 0.5 then return r > 0.5 and f + 1 or f end
  return f % 2 == 0 and f or f + 1
end

-- x quantised as x8_quantise16 does, with `planes` int8 planes: per value the value held and the allowance for
-- a code the GPU may round the other way (its product lies within 1e-3 of a rounding boundary here).
local function quantise(xv, T, K, planes)
  local x8, flip = {}, {}
  for t = 0, T - 1 do
    for g = 0, K // 16 - 1 do
      local o = t * K + 16 * g
      local amax = 0
      for i = 1, 16 do amax = math.max(amax, math.abs(xv[o + i])) end
      local d, id = amax / 127, amax > 0 and 127 / amax or 0
      for i = 1, 16 do
        local s = xv[o + i] * id
        local q = math.max(-127, math.min(127, round_even(s)))
        local held, allow = d * q, math.abs(math.abs(s - math.floor(s)) - 0.5) < 1e-3 and d or 0
        if planes == 2 then
          local s2 = (xv[o + i] - d * q) * id * 254
          local q2 = math.max(-127, math.min(127, round_even(s2)))
          held = held + d / 254 * q2
          if math.abs(math.abs(s2 - math.floor(s2)) - 0.5) < 1e-2 then allow = allow + d / 254 end
        end
        x8[o + i], flip[o + i] = held, allow
      end
    end
  end
  return x8, flip
end

-- Row n, token t: (W · x8, its bound) and (W · x, its bound), the float terms excluded; `half` is the
-- half step of the quantisation, per group: max|x| / 254 (one plane) or / 64516 (two).
local function references(w, xv, x8, flip, step, K, t, n)
  local r8, a8, bflip, r, bhalf = 0, 0, 0, 0, 0
  for k = 1, K do
    local wk, i = w[n * K + k], t * K + k
    r8, a8 = r8 + wk * x8[i], a8 + math.abs(wk * x8[i])
    bflip = bflip + math.abs(wk) * flip[i]
    r, bhalf = r + wk * xv[i], bhalf + math.abs(wk) * step[i] * 1.002
  end
  return r8, a8 * 2 ^ -16 + bflip, r, bhalf + a8 * 2 ^ -16
end

-- per value: half a step of its group's quantisation
local function half_steps(xv, T, K, planes)
  local out = {}
  for o = 0, T * K - 1, 16 do
    local amax = 0
    for i = 1, 16 do amax = math.max(amax, math.abs(xv[o + i])) end
    for i = 1, 16 do out[o + i] = planes == 2 and amax / 64516 or amax / 254 end
  end
  return out
end

local gelu = require("doppler.act").gelu_tanh

-- Runs one case; returns the largest errors against ref8 and ref (for the assertion that q8 ran).
local function run_case(c)
  local g = Graph.new { name = "gemv_q8" }
  local x = g:input("x", { "T", c.K }, c.act)
  local w1 = g:weight { name = "w1", shape = { c.N, c.K }, dtype = c.dtype }
  if c.glu then
    local w2 = g:weight { name = "w2", shape = { c.N, c.K }, dtype = c.dtype }
    g:output("y", g:gelu_tanh(g:linear(x, w1)) * g:linear(x, w2))
  else
    g:output("y", g:linear(x, w1))
  end
  local t1, v1 = make_weight(c.dtype, c.N, c.K, c.layout, 1)
  local t2, v2
  if c.glu then t2, v2 = make_weight(c.dtype, c.N, c.K, c.layout, 2) end
  math.randomseed(11, c.T * 1000 + c.K)
  local xv = {}
  for i = 1, c.T * c.K do xv[i] = doppler.round_to("f16", (2 * math.random() - 1) * (i % 7 == 0 and 4 or 1)) end
  local xt = dev:tensor { dtype = c.act, shape = { c.T, c.K } }
  xt:upload(xv)
  local h = hints.new()
  h:set("q_matmul", "fused", "test")
  h:set("gemv_q_x", c.mode, "test")
  local env = { T = c.T, act = c.act, kv = c.act, hints = h, weights = { w1 = t1, w2 = t2 }, inputs = { x = xt },
                states = {}, constants = function() end }
  local p = plan.compile(dev, g, env)
  p:run()
  local y = p:output("y"):download()

  local planes = c.mode == "q8x2" and 2 or 1
  local x8, flip = quantise(xv, c.T, c.K, planes)
  local step = half_steps(xv, c.T, c.K, planes)
  local out_ulp = c.act == "f16" and 2 ^ -11 or 2 ^ -20
  local worst8, worst = 0, 0
  for t = 0, c.T - 1 do
    for n = 0, c.N - 1 do
      local got = y[t * c.N + n + 1]
      local want8, tol8, want, tol
      if c.glu then
        -- act(g) * u with each dot product's bound carried through (|act'| <= 1.13 for gelu_tanh)
        local g8, tg8, gx, tgx = references(v1, xv, x8, flip, step, c.K, t, n)
        local u8, tu8, ux, tux = references(v2, xv, x8, flip, step, c.K, t, n)
        want8, tol8 = gelu(g8) * u8, 1.13 * tg8 * (math.abs(u8) + tu8) + math.abs(gelu(g8)) * tu8
        want, tol = gelu(gx) * ux, 1.13 * tgx * (math.abs(ux) + tux) + math.abs(gelu(gx)) * tux
      else
        want8, tol8, want, tol = references(v1, xv, x8, flip, step, c.K, t, n)
      end
      local slack = math.abs(got) * out_ulp + 1e-30
      local e8, e = math.abs(got - want8), math.abs(got - want)
      if not (e8 <= tol8 + slack) then
        error(("token %d row %d: %.9g against W·x8 %.9g (bound %.3g)"):format(t, n, got, want8, tol8 + slack))
      end
      if not (e <= tol + slack) then
        error(("token %d row %d: %.9g against W·x %.9g (half-step bound %.3g)"):format(t, n, got, want, tol + slack))
      end
      worst8, worst = math.max(worst8, e8), math.max(worst, e)
    end
  end
  t1:release()
  if t2 then t2:release() end
  xt:release()
  return worst8, worst
end

local cases = {}
for _, dt in ipairs { "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k" } do
  local K = QK[dt] == 256 and 512 or 96
  cases[#cases + 1] = { dtype = dt, N = 24, K = K, T = 1, act = "f16", layout = "row_wise" }
  cases[#cases + 1] = { dtype = dt, N = 20, K = K, T = 3, act = "f32", layout = "row_wise" }
end
for _, dt in ipairs { "q8_0", "q4_k", "q6_k" } do
  cases[#cases + 1] = { dtype = dt, N = 24, K = QK[dt] == 256 and 512 or 128, T = 2, act = "f16", layout = "flat" }
end
cases[#cases + 1] = { dtype = "q4_k", N = 16, K = 272, T = 1, act = "f32", layout = "row_wise" }   -- padded rows
cases[#cases + 1] = { dtype = "q6_k", N = 16, K = 528, T = 4, act = "f32", layout = "flat" }       -- padded, 4 tokens
cases[#cases + 1] = { dtype = "q4_0", N = 12, K = 2048, T = 4, act = "f16", layout = "row_wise" }  -- several rounds
cases[#cases + 1] = { dtype = "q4_k", N = 24, K = 512, T = 1, act = "f16", layout = "flat", glu = true }
cases[#cases + 1] = { dtype = "q8_0", N = 20, K = 96, T = 2, act = "f32", layout = "row_wise", glu = true }
cases[#cases + 1] = { dtype = "q5_1", N = 20, K = 160, T = 3, act = "f16", layout = "row_wise", glu = true }

local n_cases = #cases
for i = 1, n_cases do                -- each case with one plane and with two
  local c2 = {}
  for k, v in pairs(cases[i]) do c2[k] = v end
  cases[i].mode, c2.mode = "q8", "q8x2"
  cases[#cases + 1] = c2
end

for _, c in ipairs(cases) do
  local name = ("%s %s %s %dx%d T=%d act=%s%s"):format(c.mode, c.dtype, c.layout, c.N, c.K, c.T, c.act, c.glu and " glu" or "")
  check.case(name .. ": within both bounds", function()
    local e8, e = run_case(c)
    if c.act == "f32" then
      check.truthy(e8 < e / 4, ("error against W·x8 %.3g is not well below that against W·x %.3g: did q8 run?"):format(e8, e))
    end
  end)
end

check.case("q_matmul_head / q_matmul_glu auto: blocks beside the f16 copies only where q_matmul's auto gives copies and dot products are fast", function()
  -- a device like the H100 (80 GiB, fast packed dot products), one with slow dot products, one with 2 GiB
  local function c(gib, fast, set)
    local h = hints.new()
    for k, v in pairs(set or {}) do h:set(k, v, "test") end
    return { dev = { caps = function() return { name = "fake", integer_dot = true, integer_dot_fast = fast,
                                                 device_local_bytes = gib << 30, max_shared_memory = 49152 } end },
             env = { act = "f16", hints = h }, t = function(w) return w end }   -- the node is its tensor here
  end
  local function vals(ctx) return ctx.env.hints.values end
  local q8, q6, q4, q6flat = { etype = "q8_0" }, { etype = "q6_k" }, { etype = "q4_k" }, { etype = "q6_k" }
  lower.set_layout(q6flat, "flat")
  local big = c(80, true)
  check.eq(lower.q_matmul_head_mode(big, vals(big), q8), "fused", "Q8_0 head on the big device: blocks")
  check.eq(lower.q_matmul_head_mode(big, vals(big), q6), "dequant_f16", "Q6_K head read row_wise: its copy")
  check.eq(lower.q_matmul_head_mode(big, vals(big), q6flat), "fused", "Q6_K head stored flat: blocks")
  check.eq(lower.q_matmul_glu_mode(big, vals(big), q4, q4, 1), "fused", "gate+up, one type, decode: blocks")
  check.eq(lower.q_matmul_glu_mode(big, vals(big), q4, q4, 4), "fused", "... up to 4 tokens")
  check.eq(lower.q_matmul_glu_mode(big, vals(big), q4, q4, 5), "dequant_f16", "prefill: the copies")
  check.eq(lower.q_matmul_glu_mode(big, vals(big), q4, q6, 1), "dequant_f16", "gate and up of two types: the copies")
  local slow = c(80, false)
  check.eq(lower.q_matmul_head_mode(slow, vals(slow), q8), "dequant_f16", "slow dot products: the head's copy")
  check.eq(lower.q_matmul_head_mode(slow, vals(slow), q6flat), "dequant_f16", "slow dot products: a flat Q6_K head's copy")
  check.eq(lower.q_matmul_glu_mode(slow, vals(slow), q4, q4, 1), "dequant_f16", "slow dot products: gate+up's copies")
  local small = c(2, true)
  check.eq(lower.q_matmul_head_mode(small, vals(small), q6), "fused", "small memory: fused as q_matmul")
  check.eq(lower.q_matmul_glu_mode(small, vals(small), q4, q4, 5), "fused", "small memory, prefill: fused as q_matmul")
  local pinned = c(80, true, { q_matmul = "dequant_f16" })
  check.eq(lower.q_matmul_head_mode(pinned, vals(pinned), q8), "dequant_f16", "explicit q_matmul: the head follows")
  check.eq(lower.q_matmul_glu_mode(pinned, vals(pinned), q4, q4, 1), "dequant_f16", "explicit q_matmul: gate+up follows")
  local own = c(80, true, { q_matmul_head = "dequant_f16", q_matmul_glu = "fused" })
  check.eq(lower.q_matmul_head_mode(own, vals(own), q8), "dequant_f16", "explicit q_matmul_head wins")
  check.eq(lower.q_matmul_glu_mode(own, vals(own), q4, q6, 9), "fused", "explicit q_matmul_glu wins at any T")
end)

check.case("auto: q8x2 where dot products are fast and >= 16 row dot products share a staging, and for the LM head; explicit modes; a staging that does not fit is refused", function()
  local ctx = { dev = dev, env = { act = "f16", hints = hints.new() } }
  -- A device whose packed dot products are accelerated (the H100's caps) and one where they are not.
  local function fake(fast)
    return { caps = function() return { name = "fake", integer_dot = true, integer_dot_fast = fast,
                                         max_shared_memory = 49152 } end }
  end
  local fctx = { dev = fake(true), env = ctx.env }
  check.eq(table.concat(lower.gemv_q_x(fctx, 1152, 1, 128, 2, 8), " "), "DP_XQ8 DP_XQ8_PLANES=2",
           "auto, Gemma's gate+up (8 rows x 2 weights): q8x2")
  check.eq(#lower.gemv_q_x(fctx, 1152, 1, 128, 1, 8), 0, "auto, 8 rows x 1 weight: act")
  check.eq(#lower.gemv_q_x(fctx, 6912, 1, 128, 1, 1), 0, "auto, down (1 row): act")
  check.eq(#lower.gemv_q_x(fctx, 2048, 1, 128, 2, 4), 0, "auto, 4 rows x 2 weights: act")
  check.eq(#lower.gemv_q_x({ dev = fake(false), env = ctx.env }, 1152, 1, 128, 2, 8), 0,
           "auto without accelerated dot products: act")
  check.eq(#lower.gemv_q_x(fctx, 40000, 4, 128, 2, 8), 0, "auto where two planes do not fit: act")
  check.eq(#lower.gemv_q_x(ctx, 1024, 1, 128, 1, 1), 0, "auto on this device, 1 row: x as it is")
  -- the LM head (head = { N }): q8x2 for its 8 rows too (the fused head stages x for hundreds), act where
  -- the fused head's shared memory would not fit or the dot products are slow
  check.eq(table.concat(lower.gemv_q_x(fctx, 1152, 1, 128, 1, 8, { N = 262144 }), " "), "DP_XQ8 DP_XQ8_PLANES=2",
           "auto, Gemma's LM head: q8x2")
  check.eq(lower.lm_head_q_shared(fctx, 262144, 1152, 2), 4 * 1152 + 16 * 256 + 48 * 72, "lm_head_q's shared memory")
  local small = { dev = { caps = function() return { name = "small", integer_dot = true, integer_dot_fast = true,
                                                     max_shared_memory = 16384 } end }, env = ctx.env }
  check.eq(lower.lm_head_q_shared(small, 128256, 2048, 2), 18432, "Llama's head: 18432 bytes")
  check.eq(#lower.gemv_q_x(small, 2048, 1, 128, 1, 8, { N = 128256 }), 0,
           "auto, a head whose fused kernel would need 18432 bytes of 16384: act")
  check.eq(#lower.gemv_q_x({ dev = fake(false), env = ctx.env }, 1152, 1, 128, 1, 8, { N = 262144 }), 0,
           "auto, the LM head without accelerated dot products: act")
  -- gate+up (nw = 2): 256 invocations where that gives 8 rows and 128 does not, so that q8x2 qualifies
  local function params(c, N, K, nw) local wg, rows = lower.gemv_params(c, true, 1, N, K, nw) return wg .. "x" .. rows end
  check.eq(params(fctx, 8192, 2048, 2), "256x8", "Llama's gate+up: 256 invocations, 8 rows")
  check.eq(table.concat(lower.gemv_q_x(fctx, 2048, 1, 256, 2, 8), " "), "DP_XQ8 DP_XQ8_PLANES=2", "... and q8x2")
  check.eq(params(fctx, 8192, 2048, nil), "128x4", "a plain linear of that shape keeps 128 x 4")
  check.eq(params(fctx, 6912, 1152, 2), "128x8", "Gemma's gate+up: 8 rows at 128 already")
  check.eq(params({ dev = fake(false), env = ctx.env }, 8192, 2048, 2), "128x4", "slow dot products: 128 x 4")
  local hw = hints.new()
  hw:set("gemv_q_wg", 128, "test")
  check.eq(params({ dev = fctx.dev, env = { act = "f16", hints = hw } }, 8192, 2048, 2), "128x4", "hint gemv_q_wg wins")
  -- a CPU device (lavapipe): 8 rows of one subgroup-wide vector of lanes each, for every shape; a hint still wins
  local cpu = { caps = function() return { name = "cpu", type = "cpu", subgroup_size = 8, integer_dot = true,
                                           integer_dot_fast = false, max_shared_memory = 32768 } end }
  check.eq(params({ dev = cpu, env = ctx.env }, 512, 256, 2), "64x8", "CPU device, a tiny gate+up: 64 x 8")
  check.eq(params({ dev = cpu, env = ctx.env }, 1152, 6912, nil), "64x8", "CPU device, Gemma's down: 64 x 8")
  check.eq(params({ dev = cpu, env = { act = "f16", hints = hw } }, 512, 256, nil), "128x1", "CPU device, hint gemv_q_wg=128")
  -- float weights: 128 invocations and 1 row on a GPU (2 for the LM head and gemv_multi), the CPU rule on a
  -- CPU device; a hint wins
  local function fparams(c, N, K, head)
    local wg, rows = lower.gemv_params(c, false, 1, N, K, nil, head)
    return wg .. "x" .. rows
  end
  check.eq(fparams(fctx, 1152, 6912), "128x1", "float linear on a GPU: 128 x 1")
  check.eq(fparams(fctx, 262144, 1152, true), "128x2", "float LM head on a GPU: 128 x 2")
  local hwf = hints.new()
  hwf:set("gemv_wg", 256, "test")
  check.eq(fparams({ dev = fctx.dev, env = { act = "f16", hints = hwf } }, 1152, 6912), "256x1",
           "GPU, hint gemv_wg=256 alone: the linear keeps its row")
  check.eq(fparams({ dev = fctx.dev, env = { act = "f16", hints = hwf } }, 262144, 1152, true), "256x2",
           "GPU, hint gemv_wg=256 alone: the head keeps its two")
  check.eq(fparams({ dev = cpu, env = ctx.env }, 1152, 6912), "64x8", "float GEMV on a CPU device: 64 x 8")
  check.eq(table.concat({ lower.gemv_float_default({ dev = cpu }) }, "x"), "64x8", "gemv_multi's on a CPU device")
  check.eq(table.concat({ lower.gemv_float_default(fctx) }, "x"), "128x2", "gemv_multi's on a GPU")
  local hf = hints.new()
  hf:set("gemv_rows", 4, "test")
  check.eq(fparams({ dev = cpu, env = { act = "f16", hints = hf } }, 1152, 6912), "128x4", "CPU device, hint gemv_rows=4")
  -- the tiled GEMM's tile (gemm.comp, gemm_q.comp): 64 x 64 at 4 x 4 on a GPU whatever T; on a CPU device 64
  -- invocations and the least BM of 16, 32, 64 that holds T (all tiles give the same bits: test_k_quant)
  local function tile(c, T)
    local t = lower.gemm_tile(c, T)
    return ("%d:%dx%d/%dx%d"):format(t.WG, t.BM, t.BN, t.TM, t.TN)
  end
  check.eq(tile(fctx, 7), "256:64x64/4x4", "GEMM tile on a GPU, T = 7")
  check.eq(tile(fctx, 512), "256:64x64/4x4", "GEMM tile on a GPU, T = 512")
  check.eq(tile({ dev = cpu }, 12), "64:16x64/2x8", "GEMM tile on a CPU device, T = 12")
  check.eq(tile({ dev = cpu }, 24), "64:32x64/4x8", "GEMM tile on a CPU device, T = 24")
  check.eq(tile({ dev = cpu }, 56), "64:64x64/8x8", "GEMM tile on a CPU device, T = 56")
  check.eq(tile({ dev = cpu }, 512), "64:64x64/8x8", "GEMM tile on a CPU device, T = 512")
  -- the quantised LM head (head = true): 128 invocations, 8 rows on a GPU; the CPU rule on a CPU device
  local function hparams(c, N, K) local wg, rows = lower.gemv_params(c, true, nil, N, K, nil, true) return wg .. "x" .. rows end
  check.eq(params(fctx, 128256, 2048, nil), "128x4", "Llama's head shape as a plain linear: 128 x 4")
  check.eq(hparams(fctx, 128256, 2048), "128x8", "... as the LM head: 128 x 8")
  check.eq(hparams(fctx, 262144, 1152), "128x8", "Gemma's LM head: 128 x 8")
  check.eq(hparams({ dev = cpu, env = ctx.env }, 128256, 2048), "64x8", "the LM head on a CPU device: 64 x 8")
  check.eq(hparams({ dev = fctx.dev, env = { act = "f16", hints = hw } }, 128256, 2048), "128x4", "the head, hint gemv_q_wg=128")
  local h = hints.new()
  h:set("gemv_q_x", "q8", "test")
  ctx.env = { act = "f32", hints = h }
  local defs, spec = lower.gemv_q_x(ctx, 1000, 1, 128, 1, 1)
  check.eq(table.concat(defs, " "), "DP_XQ8 DP_XQ8_PLANES=1", "explicit q8, also with f32 activations")
  check.eq(spec.XK, 1008, "XK: K rounded up to 16")
  local K = (caps.max_shared_memory // 32 + 1) * 16       -- one token's staging alone exceeds shared memory
  local ok, err = pcall(lower.gemv_q_x, ctx, K, 1, 128, 1, 1)
  check.truthy(not ok and tostring(err):find("shared memory", 1, true), "refused: " .. tostring(err))
end)

check.done()
