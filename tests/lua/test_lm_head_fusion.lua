-- The lm_head fusion (fusions.lua; shaders/fused/lm_head.comp, lm_head_q.comp): final RMSNorm + LM head +
-- softcap + argmax (or a Gumbel-max draw) in one kernel must give exactly the ids of the unfused kernels.
-- A graph like a recipe's ending (last_row -> rmsnorm -> linear -> softcap? -> argmax | sample) is compiled
-- with the fusion on and off, on random weights of every LM-head type (f32, f16, bf16, Q8_0, Q6_K, and a
-- quantised head through q_matmul=dequant_f16), f16 and f32 activations, vocabularies that are not a
-- multiple of a workgroup's rows, hidden sizes on the vector and the element path; with planted ties
-- (identical rows, and softcap saturating to equal values) and a NaN row. The unfused logits are the CPU
-- check: the fused id is their argmax (NaN first, lowest index among equal values) and, for draws, the id
-- doppler.sample_cpu (core/sample.c) draws from them. With keep_logits the fused kernel also writes the
-- logits, which must equal the unfused ones bit for bit with f32 activations (the strongest check that it
-- computes as they do); with f16 activations within one f16 rounding of the normalised row (see case).
-- The auto workgroup count (lm_head_groups: 16 on a CPU device, up to 1024 on a GPU) reaches the dispatch.
-- lm_head_pre (the head forming its row from the last layer's residual add, x + a or x + rmsnorm(a), in a
-- one-token pass): the same checks against the unfused add and norm kernels, which must be gone from the plan
-- (and there with fusion=-lm_head_pre), and not taken where the sum is read elsewhere.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"
local sampler = require "doppler.sampler"

local dev = doppler.device()

local rng_state = 777
local function rand()   -- deterministic, uniform in [-1, 1)
  rng_state = (rng_state * 1103515245 + 12345) % 2147483648
  return rng_state / 1073741824 - 1
end
local function randbyte() return math.floor((rand() + 1) * 128) % 256 end

local QBLOCK = { q8_0 = { qk = 32, bytes = 34, d_at = 0 }, q6_k = { qk = 256, bytes = 210, d_at = 208 } }

-- W [N, K] of dtype; rows listed in `same` are copies of row same.of; row `nan` (float types) is NaN.
local function weight(dtype, N, K, opt)
  local t = dev:tensor { dtype = dtype, shape = { N, K } }
  local q = QBLOCK[dtype]
  if q then
    local per_row = K // q.qk
    local rows = {}
    for n = 1, N do
      local blocks = {}
      for b = 1, per_row do
        local by = {}
        for i = 1, q.bytes do by[i] = string.char(randbyte()) end
        -- a sane f16 scale: 2^-7 .. 2^-6 (exponent bits 0x20.., random mantissa)
        local d = string.pack("<I2", 0x2000 + randbyte() * 4)
        by[q.d_at + 1], by[q.d_at + 2] = d:sub(1, 1), d:sub(2, 2)
        blocks[b] = table.concat(by)
      end
      rows[n] = table.concat(blocks)
    end
    for _, j in ipairs(opt.same or {}) do rows[j + 1] = rows[opt.same.of + 1] end
    t:upload(table.concat(rows))
    return t
  end
  local v = {}
  for i = 1, N * K do v[i] = rand() * (opt.scale or 1) end
  for _, j in ipairs(opt.same or {}) do
    for k = 1, K do v[j * K + k] = v[opt.same.of * K + k] end
  end
  if opt.nan then v[opt.nan * K + 1] = 0 / 0 end
  t:upload(v)
  return t
end

local function act_tensor(act, T, K)
  local t = dev:tensor { dtype = act, shape = { T, K } }
  local v = {}
  for i = 1, T * K do v[i] = rand() * 2 end
  t:upload(v)
  return t
end

-- Builds and runs the graph; returns next id, the logits (unfused only) and the kernel names.
local function run(c, fused, keep, fusion)
  local g = Graph.new { name = "lm_head_test" }
  local h = g:input("h", { "T", c.K }, "act")
  local nw = g:weight { name = "nw", shape = { c.K }, dtype = c.nw_dtype }
  local W = g:weight { name = "W", shape = { c.N, c.K }, dtype = c.w_dtype }
  local row = h
  if c.pre then      -- the last layer's residual sum (lm_head_pre): h + a, or h + rmsnorm(a; nw1) (Gemma)
    local a = g:input("a", { "T", c.K }, "act")
    if c.pre == 2 then
      local nw1 = g:weight { name = "nw1", shape = { c.K }, dtype = c.nw_dtype }
      row = h + g:rmsnorm(a, nw1, { eps = 1e-5, offset = c.offset })
    else
      row = h + a
    end
    if c.sum_output then g:output("sum", row) end
  end
  local xn = g:rmsnorm(g:last_row(row), nw, { eps = 1e-6, offset = c.offset })
  local logits = g:linear(xn, W)
  logits.dtype = "f32"                     -- as doppler.session makes the logits, and marks the head
  logits.attrs.lm_head = true
  if c.softcap then logits = g:softcap(logits, c.softcap); logits.dtype = "f32" end
  g:output("logits", logits)
  local nxt
  if c.sample then
    local ids, pos = g:input("ids", { "T" }, "u32"), g:input("pos", { "T" }, "u32")
    local ctxs = g:state("ctx", { 64 }, "u32")
    nxt = g:sample(logits, g:context_ids(ids, pos, ctxs), ctxs, c.sample)
  else
    nxt = g:argmax(logits)
  end
  g:output("next", nxt)
  local hs = hints.new()
  hs:set("fusion", fusion or (fused and "on" or "-lm_head,-lm_head_sample"), "test")
  for k, v in pairs(c.hints or {}) do hs:set(k, v, "test") end
  local T = c.T
  local idt, post = dev:tensor { dtype = "u32", shape = { T } }, dev:tensor { dtype = "u32", shape = { T } }
  local iv, pv = {}, {}
  for i = 1, T do iv[i], pv[i] = i, c.pos0 + i - 1 end
  idt:upload(iv); post:upload(pv)
  local p = plan.compile(dev, g, {
    T = T, act = c.act, kv = c.act, hints = hs, weights = { nw = c.nw, W = c.W, nw1 = c.nw1 },
    inputs = { h = c.h, a = c.a, ids = idt, pos = post }, states = { ctx = c.ctx },
    constants = function() end, keep_logits = keep,
  })
  p:run()
  local r = { next = p:output("next"):download({ dtype = "u32" })[1], kernels = {}, groups = {} }
  if p:output("logits") then r.logits = p:output("logits"):download() end
  for i, k in ipairs(p.kernel_log) do r.kernels[i], r.groups[i] = k:name(), p.kernel_groups[i] end
  r.plan = p
  return r
end

-- torch.argmax order on the host: NaN first, then larger, then the lower index.
local function host_argmax(z)
  local bi = 1
  for i = 2, #z do
    local a, b = z[i], z[bi]
    if (a ~= a and b == b) or (a == a and b == b and a > b) then bi = i end
  end
  return bi - 1
end

local has = check.has

-- The int8 planes a quantised head's x takes (lower.gemv_q_x: the hint, or under auto two where the
-- device's packed dot products are accelerated), 0 for x as it is.
local function x_planes(c)
  if not QBLOCK[c.w_dtype] or (c.hints or {}).q_matmul == "dequant_f16" then return 0 end
  local mode = (c.hints or {}).gemv_q_x or "auto"
  if mode == "auto" then mode = dev:caps().integer_dot_fast and "q8x2" or "act" end
  return ({ q8 = 1, q8x2 = 2 })[mode] or 0
end

-- Per row n: 2^-10 sum_k |W_nk| |x̂_k| (+ 1e-6 |.| for f32 summation order), x̂ the last row of h normalised
-- on the host from the values on the device (see case). With x in int8 planes each path holds x̂_k within
-- amax_g / 254 (one plane) or amax_g / 64516 (two) of what it quantised (amax_g: the largest |x̂| of k's group
-- of 16; dp_quant_x8.glsl), so the two paths' values differ by up to twice that more (+1 % for the rounding of
-- the scales and the host's x̂).
local function lm_bounds(c)
  local h, nw = c.h:download(), c.nw:download()
  local K, N = c.K, c.N
  if c.pre then      -- the row the head normalises: h + a or h + rmsnorm(a; nw1), as a scale for the bound
    local a, an = c.a:download(), {}
    local w1 = c.pre == 2 and c.nw1:download()
    local sa = 0
    for k = 1, K do sa = sa + a[k] ^ 2 end
    local inv1 = 1 / math.sqrt(sa / K + 1e-5)
    for k = 1, K do an[k] = w1 and a[k] * inv1 * (c.offset + w1[k]) or a[k] end
    for k = 1, K do h[k] = h[k] + an[k] end
  end
  local base, ss = (c.T - 1) * K, 0
  for k = 1, K do ss = ss + h[base + k] ^ 2 end
  local inv = 1 / math.sqrt(ss / K + 1e-6)
  local xa = {}
  for k = 1, K do xa[k] = math.abs(h[base + k] * inv * (c.offset + nw[k])) end
  local w
  if QBLOCK[c.w_dtype] then
    local raw = doppler.dequantize(c.w_dtype, c.W:read(), N * K)
    w = {}
    for i = 1, N * K do w[i] = string.unpack("<f", raw, 4 * i - 3) end
  else
    w = c.W:download()
  end
  local planes = x_planes(c)
  local qe = {}   -- per k: the bound on the difference of the two paths' quantised x̂_k
  for k = 1, K do
    local g0, amax = (k - 1) // 16 * 16, 0
    if planes > 0 then for j = g0 + 1, g0 + 16 do amax = math.max(amax, xa[j]) end end
    qe[k] = planes == 0 and 0 or 2.02 * amax / (planes == 2 and 64516 or 254)
  end
  local out = {}
  for n = 1, N do
    local s, q, o = 0, 0, (n - 1) * K
    for k = 1, K do
      s = s + math.abs(w[o + k]) * xa[k]
      q = q + math.abs(w[o + k]) * qe[k]
    end
    out[n] = s * 2 ^ -10 + 1e-6 * s + q
  end
  return out
end

local function case(c)
  c.T = c.T or (c.pre and 1 or 3)
  c.pos0 = c.pos0 or 5
  c.nw_dtype = c.nw_dtype or "f32"
  c.offset = c.offset or 0
  c.h = act_tensor(c.act, c.T, c.K)
  c.nw = dev:tensor { dtype = c.nw_dtype, shape = { c.K } }
  local nv = {}
  for i = 1, c.K do nv[i] = rand() * 0.5 end
  c.nw:upload(nv)
  if c.pre then
    c.a = act_tensor(c.act, c.T, c.K)
    c.nw1 = dev:tensor { dtype = c.nw_dtype, shape = { c.K } }
    for i = 1, c.K do nv[i] = rand() * 0.5 end
    c.nw1:upload(nv)
  end
  c.W = weight(c.w_dtype, c.N, c.K, c.wopt or {})
  c.ctx = dev:tensor { dtype = "u32", shape = { 64 } }
  local plain = run(c, false)
  local fused = run(c, true, false)
  local both = run(c, true, true)
  for _, r in ipairs({ fused, both }) do
    check.truthy(has(r.kernels, "lm_head") or has(r.kernels, "lm_head_q"), "the fused kernel ran")
    check.truthy(not has(r.kernels, "argmax_partial") and not has(r.kernels, "sample_gumbel")
                 and not has(r.kernels, "rmsnorm") and not has(r.kernels, "softcap"), "no unfused kernel left")
    if c.pre then check.truthy(not has(r.kernels, "eltwise"), "lm_head_pre: the residual add is in the head") end
  end
  if c.pre then
    local head_only = run(c, true, false, "-lm_head_pre")
    check.truthy(has(head_only.kernels, "eltwise"), "fusion=-lm_head_pre: the add runs")
    check.eq(has(head_only.kernels, "rmsnorm"), c.pre == 2, "fusion=-lm_head_pre: the post-norm runs (Gemma's form)")
  end
  check.truthy(fused.logits == nil, "without keep_logits the fused plan writes no logits")
  check.truthy(plain.logits ~= nil and #plain.logits == c.N, "unfused logits")
  check.eq(#both.logits, c.N, "fused logits written besides")
  check.eq(fused.next, both.next, "fused id with and without the logits kept")
  local ref = plain.logits
  if c.act == "f32" then
    for i = 1, c.N do   -- bit for bit (NaN included: string.pack compares the bits)
      if string.pack("<f", both.logits[i]) ~= string.pack("<f", plain.logits[i]) then
        error(("logit %d: fused %.9g, unfused %.9g"):format(i - 1, both.logits[i], plain.logits[i]))
      end
    end
    check.eq(fused.next, plain.next, "fused id = unfused id")
  else
    -- f16 activations: the normalised row is rounded to f16 in both paths, but on the H100 the fused kernel's
    -- logits differ from the unfused ones by up to 3e-3 relative (lavapipe: bit for bit); the f32 cases above
    -- show the dot products and the norm's sum agree exactly, so what differs is the f16 rounding of x̂, at
    -- most one f16 ulp (2^-10 |x̂_k|) per element: |Δ logit_n| <= 2^-10 sum_k |W_nk| |x̂_k| (softcap's slope
    -- is at most 1). The ids are then checked against the fused logits themselves.
    local bound = lm_bounds(c)
    for i = 1, c.N do
      local d = math.abs(both.logits[i] - plain.logits[i])
      if not (d <= bound[i]) then
        error(("logit %d: fused %.9g, unfused %.9g differ by %.3g > %.3g"):format(i - 1, both.logits[i], plain.logits[i], d, bound[i]))
      end
    end
    ref = both.logits
  end
  if c.sample then
    local sp = c.sample
    local want = doppler.sample_cpu(ref, { temperature = sp.temperature, top_k = sp.top_k, top_p = sp.top_p,
      min_p = sp.min_p, repeat_penalty = 1, seed = c.seed, step = c.pos0 + c.T, history = {} })
    check.eq(fused.next, want, "fused id = sample_cpu's draw from the logits")
  else
    check.eq(fused.next, host_argmax(ref), "fused id = host argmax of the logits")
  end
  return plain, fused
end

local FLOAT = { "f32", "f16", "bf16" }
for _, act in ipairs({ "f16", "f32" }) do
  for _, wd in ipairs(FLOAT) do
    for _, K in ipairs({ 64, 100, 1152 }) do
      check.case(("argmax: act %s, W %s, K %d, N 1001"):format(act, wd, K), function()
        case { act = act, w_dtype = wd, K = K, N = 1001, nw_dtype = (wd == "f32") and "f32" or wd, offset = 1 }
      end)
    end
  end
end

check.case("ties: identical rows in several workgroups -> the lowest index", function()
  -- rows 700, 333 and 5 copy row 999, scaled so that it wins: the three copies tie with it
  local c = { act = "f16", w_dtype = "f16", K = 64, N = 1003, hints = { lm_head_groups = 7 } }
  c.wopt = { same = { 5, 333, 700, of = 999 } }
  local plain = case(c)
  local best = host_argmax(plain.logits)
  local n_best = 0
  for _, z in ipairs(plain.logits) do if z == plain.logits[best + 1] then n_best = n_best + 1 end end
  -- whichever row wins, the copies tie: if the winner is the copied row, it must be row 5
  if plain.logits[1000] == plain.logits[best + 1] then check.eq(best, 5, "lowest index of the tie") end
  check.truthy(plain.logits[6] == plain.logits[1000] and plain.logits[334] == plain.logits[1000], "copies tie")
  check.truthy(n_best >= 1, "a maximum")
end)

check.case("ties: softcap saturates many logits to the same value", function()
  local c = { act = "f32", w_dtype = "f32", K = 128, N = 2050, softcap = 0.5, wopt = { scale = 40 },
              hints = { lm_head_groups = 3 } }
  local plain = case(c)
  local best = host_argmax(plain.logits)
  local n_best = 0
  for _, z in ipairs(plain.logits) do if z == plain.logits[best + 1] then n_best = n_best + 1 end end
  check.truthy(n_best >= 2, ("the test has ties at the maximum (%d)"):format(n_best))
end)

check.case("NaN: the first NaN logit wins, as torch.argmax", function()
  local plain, fused = case { act = "f32", w_dtype = "f32", K = 64, N = 600, wopt = { nan = 411 } }
  check.eq(fused.next, 411, "the NaN row")
  check.truthy(plain.logits[412] ~= plain.logits[412], "row 411 is NaN")
end)

check.case("Gemma-like: softcap 30, offset 1, f16 W and norm, draws and greedy sampling", function()
  case { act = "f16", w_dtype = "f16", nw_dtype = "f16", offset = 1, K = 256, N = 2047, softcap = 30 }
  for _, seed in ipairs({ 1, 2, 3, 99 }) do
    local sp = sampler.spec { temperature = 1.5, seed = seed }
    case { act = "f16", w_dtype = "f16", K = 256, N = 2047, softcap = 30, sample = sp, seed = seed,
           wopt = { scale = 0.2 } }
  end
  local g = sampler.spec { temperature = 0, seed = 4 }
  case { act = "f32", w_dtype = "bf16", K = 96, N = 999, sample = g, seed = 4 }
end)

for _, qt in ipairs({ "q8_0", "q6_k" }) do
  for _, act in ipairs({ "f16", "f32" }) do
    check.case(("quantised head %s, act %s (gemv_q and dequant_f16)"):format(qt, act), function()
      local K = 512
      case { act = act, w_dtype = qt, K = K, N = 1001, hints = { q_matmul = "fused" } }
      case { act = act, w_dtype = qt, K = K, N = 777, hints = { q_matmul = "fused" }, softcap = 2,
             wopt = { same = { 3, 400, of = 776 } } }
      case { act = act, w_dtype = qt, K = K, N = 1001, hints = { q_matmul = "dequant_f16" } }
      local sp = sampler.spec { temperature = 0.8, seed = 12 }
      case { act = act, w_dtype = qt, K = K, N = 1001, hints = { q_matmul = "fused" }, sample = sp, seed = 12 }
    end)
  end
end

check.case("tuned GEMV parameters: the fused head follows gemv_wg / gemv_rows / gemv_q_rows", function()
  case { act = "f16", w_dtype = "f16", K = 256, N = 1001, hints = { gemv_wg = 64, gemv_rows = 4 } }
  case { act = "f16", w_dtype = "f16", K = 64, N = 1001, hints = { gemv_wg = 256, gemv_rows = 1 } }
  -- 8 rows x 2 chunks per thread: more than lm_head.comp prefetches (PF), so its plain loop runs; the cases
  -- above and those before take the prefetching loop (lm_head_groups = 7 and 3: many row blocks per workgroup)
  case { act = "f32", w_dtype = "f16", K = 1024, N = 1001, hints = { gemv_wg = 64, gemv_rows = 8 } }
  case { act = "f32", w_dtype = "q8_0", K = 256, N = 1001, hints = { q_matmul = "fused", gemv_q_wg = 64, gemv_q_rows = 8 } }
end)

-- The workgroups of the plan's fused head dispatch.
local function head_groups(r)
  for i, k in ipairs(r.kernels) do
    if k == "lm_head" or k == "lm_head_q" then return r.groups[i][1] end
  end
end

check.case("lm_head_groups: at most 16 workgroups on a CPU device, 1024 on a GPU; one row block each by the hint", function()
  local cpu = dev:caps().type == "cpu"
  local _, fused = case { act = "f32", w_dtype = "f16", K = 256, N = 1001 }
  if cpu then check.eq(head_groups(fused), 16, "auto on a CPU device: 16 workgroups, many row blocks each")
  else check.truthy(head_groups(fused) > 16, "auto on a GPU: up to 1024 workgroups") end
  -- 1024 allowed: every workgroup takes one row block (the loop runs once; with 16 it runs many times)
  local lower = require "doppler.lower"
  local _, rows = lower.gemv_params({ dev = dev, env = { hints = hints.new() } }, false, nil, 1001, 256, nil, true)
  _, fused = case { act = "f32", w_dtype = "f16", K = 256, N = 1001, hints = { lm_head_groups = 1024 } }
  local blocks = (1001 + rows - 1) // rows
  if cpu then check.eq(head_groups(fused), blocks, "lm_head_groups=1024: one row block per workgroup")
  else check.truthy(head_groups(fused) * 2 > blocks, "lm_head_groups=1024: a row block per team of lanes") end
end)

-- The quantised head's row-block queue (DP_LMH_QUEUE): every row's logit written once per dispatch, and the
-- queue set back to zero by the dispatch for the next one. The logits are cleared to NaN before each replay,
-- so a row that no workgroup took (or a queue left past its end) shows as a NaN logit.
check.case("lm_head_q's queue: every row once per replay, the queue reset by each; lm_head_queue=off", function()
  local c = { act = "f32", w_dtype = "q8_0", K = 256, N = 1001,
              hints = { q_matmul = "fused", gemv_q_x = "act", lm_head_groups = 5, lm_head_ticket = 1 } }
  local plain = case(c)
  local function defines(r)
    for i, k in ipairs(r.kernels) do
      if k == "lm_head_q" then return table.concat(r.plan.kernel_specs[i].defines, " ") end
    end
  end
  local function same_logits(z, what)
    for i = 1, c.N do
      if string.pack("<f", z[i]) ~= string.pack("<f", plain.logits[i]) then
        error(("%s: logit %d is %.9g, the unfused head's %.9g"):format(what, i - 1, z[i], plain.logits[i]))
      end
    end
  end
  local nan = {}
  for i = 1, c.N do nan[i] = 0 / 0 end
  local cpu = dev:caps().type == "cpu"
  local auto = run(c, true, true)
  check.eq(defines(auto):find("DP_LMH_QUEUE", 1, true) ~= nil, not cpu, "auto: the queue on a GPU, fixed shares on a CPU device")
  c.hints.lm_head_queue = "on"
  local r = run(c, true, true)
  check.truthy(defines(r):find("DP_LMH_QUEUE", 1, true), "lm_head_queue=on: the head takes its rows from the queue")
  for rep = 1, 3 do
    r.plan:output("logits"):upload(nan)
    r.plan:run()
    same_logits(r.plan:output("logits"):download(), "replay " .. rep)
    check.eq(r.plan:output("next"):download({ dtype = "u32" })[1], plain.next, "replay " .. rep .. ": the unfused id")
  end
  c.hints.lm_head_queue = "off"
  local off = run(c, true, true)
  check.truthy(not defines(off):find("DP_LMH_QUEUE", 1, true), "lm_head_queue=off: fixed shares")
  same_logits(off.logits, "lm_head_queue=off")
  check.eq(off.next, plain.next, "lm_head_queue=off: the unfused id")
end)

-- Heads past llvmpipe's loop limit (lower.cpu_loop_blocks): asked for one workgroup, the f16 head (K = 640)
-- and the Q8_0 head (K = 512) gave wrong logits on lavapipe from row ~10,500 / ~11,500 on before the rule
-- (their workgroups' invocations looped past 65535 iterations, and llvmpipe ended their loops). With the rule
-- every logit must be the unfused one bit for bit, with fixed shares and with the queue (its ticket bound),
-- and on a CPU device the dispatch has more workgroups than asked for.
check.case("heads of 12,000-14,000 rows in one workgroup asked: every logit the unfused one (llvmpipe's loop limit)", function()
  local cpu = dev:caps().type == "cpu"
  for _, cf in ipairs({ { "f16", 640, 12000, {} }, { "q8_0", 512, 14000, { lm_head_queue = "off" } },
                        { "q8_0", 512, 14000, { lm_head_queue = "on", lm_head_ticket = 1 } } }) do
    local hs = { lm_head_groups = 1 }
    if cf[1] ~= "f16" then hs.q_matmul, hs.gemv_q_x = "fused", "act" end
    for k, v in pairs(cf[4]) do hs[k] = v end
    local c = { act = "f32", w_dtype = cf[1], K = cf[2], N = cf[3], hints = hs }
    local _, fused = case(c)   -- the ids, and with kept logits every logit bit for bit
    if cpu then check.truthy(head_groups(fused) > 1, cf[1] .. ": more workgroups than the one asked for") end
  end
end)

check.case("quantised head with int8 x (gemv_q_x q8x2, q8): fused/lm_head_q.comp = gemv_q's DP_XQ8", function()
  -- the head stages x once per workgroup and uses it for every row block (lm_head_groups: many per
  -- workgroup; a last block past N), as gemv_q stages it per workgroup: bit for bit with f32 activations
  for _, mode in ipairs({ "q8x2", "q8" }) do
    local function h(t) t.q_matmul, t.gemv_q_x = "fused", mode return t end
    case { act = "f32", w_dtype = "q8_0", K = 576, N = 1001, hints = h { gemv_q_wg = 64, gemv_q_rows = 8, lm_head_groups = 5 } }
    case { act = "f32", w_dtype = "q6_k", K = 768, N = 999, hints = h { lm_head_groups = 3 }, softcap = 2 }
    case { act = "f16", w_dtype = "q8_0", K = 512, N = 1003, hints = h { lm_head_groups = 7 } }
    local sp = sampler.spec { temperature = 0.8, seed = 5 }
    case { act = "f16", w_dtype = "q6_k", K = 512, N = 1001, hints = h {}, sample = sp, seed = 5 }
  end
end)

check.case("lm_head_pre: the head forms the last layer's sum (x + a, x + rmsnorm(a)) as the unfused kernels", function()
  for _, c in ipairs {
    { act = "f32", w_dtype = "f32", K = 256, N = 1001, pre = 1 },
    { act = "f32", w_dtype = "f16", K = 1152, N = 1001, pre = 2, offset = 1 },
    { act = "f32", w_dtype = "bf16", K = 100, N = 999, pre = 2, nw_dtype = "bf16" },     -- element path
    { act = "f16", w_dtype = "f16", K = 256, N = 2047, pre = 2, nw_dtype = "f16", offset = 1, softcap = 30 },
    { act = "f16", w_dtype = "f32", K = 512, N = 1001, pre = 1 },
    { act = "f32", w_dtype = "q8_0", K = 576, N = 1001, pre = 2, hints = { q_matmul = "fused", gemv_q_x = "q8x2" } },
    { act = "f32", w_dtype = "q6_k", K = 768, N = 999, pre = 1, hints = { q_matmul = "fused" } },
    { act = "f16", w_dtype = "q8_0", K = 512, N = 1003, pre = 2, hints = { q_matmul = "dequant_f16" } },
    { act = "f16", w_dtype = "f16", K = 256, N = 1001, pre = 2, sample = sampler.spec { temperature = 0.8, seed = 9 },
      seed = 9 },
  } do case(c) end
end)

check.case("lm_head_pre: not taken where the sum is read elsewhere, or for more than one token", function()
  local function kernels(c, T)
    c.T, c.pos0, c.nw_dtype, c.offset = T, 5, "f32", 0
    c.h, c.a = act_tensor("f32", T, 64), act_tensor("f32", T, 64)
    c.nw = dev:tensor { dtype = "f32", shape = { 64 } }
    c.nw1 = dev:tensor { dtype = "f32", shape = { 64 } }
    local ones = {}
    for i = 1, 64 do ones[i] = 1 end
    c.nw:upload(ones); c.nw1:upload(ones)
    c.W = weight("f32", 300, 64, {})
    c.ctx = dev:tensor { dtype = "u32", shape = { 64 } }
    return run(c, true, false).kernels
  end
  local k = kernels({ act = "f32", w_dtype = "f32", K = 64, N = 300, pre = 2, sum_output = true }, 1)
  check.truthy(has(k, "lm_head") and has(k, "eltwise"), "the sum is an output: the add stays")
  k = kernels({ act = "f32", w_dtype = "f32", K = 64, N = 300, pre = 1 }, 3)
  check.truthy(has(k, "lm_head") and has(k, "eltwise"), "3 tokens: the add stays")
end)

check.case("not fused: top-k draws and the repetition penalty (they need every logit)", function()
  local c = { act = "f32", w_dtype = "f32", K = 64, N = 300, T = 1, pos0 = 0 }
  c.h = act_tensor("f32", 1, 64)
  c.nw = dev:tensor { dtype = "f32", shape = { 64 } }
  c.nw:upload((function() local t = {} for i = 1, 64 do t[i] = 1 end return t end)())
  c.nw_dtype = "f32"
  c.offset = 0
  c.W = weight("f32", 300, 64, {})
  c.ctx = dev:tensor { dtype = "u32", shape = { 64 } }
  c.sample = sampler.spec { temperature = 1, top_k = 5, seed = 3 }
  local r = run(c, true, false)
  check.truthy(not has(r.kernels, "lm_head"), "top-k draws keep the sorting path")
  c.sample = sampler.spec { temperature = 1, repeat_penalty = 1.3, seed = 3 }
  r = run(c, true, false)
  check.truthy(not has(r.kernels, "lm_head"), "the repetition penalty needs the logits")
end)

-- End to end: the recipes' decode loops give the same ids with the fusion on and off, step by step
-- (decode_chunk = 1: logits kept besides) and in the GPU loop (decode_chunk = 16: no logits written).
local session = require "doppler.session"
local recipes = require "doppler.recipes"
local generate = require "doppler.generate"
for _, name in ipairs({ "gemma3-tiny", "llama3-tiny" }) do
  check.case(name .. ": generated ids with fusion lm_head on and off (greedy and seeded draws)", function()
    local path = check.fixtures .. "/models/" .. name
    local m = doppler.open_model(path)
    local recipe = recipes.for_config(doppler.read_json(path .. "/config.json"), path)
    local function gen(fusion, chunk, sopts)
      local h = hints.new()
      h:set("fusion", fusion, "test")
      h:set("decode_chunk", chunk, "test")
      local s = session.open(recipe, m, { hints = h, context = 64 })
      local smp = sampler.new(s, sopts)
      local ids = {}
      local decode = recipe.decode or generate.decode
      decode(s, { 2, 10, 20, 30, 7 }, { max_tokens = 20, sampler = smp, stops = {} }, function(id) ids[#ids + 1] = id end)
      local names = {}
      for i, k in ipairs(s.last_plan.kernel_log) do names[i] = k:name() end
      return table.concat(ids, ","), names
    end
    for _, sopts in ipairs({ { temperature = 0 }, { temperature = 6, seed = 3 } }) do
      local want = gen("-lm_head,-lm_head_sample", 1, sopts)
      for _, chunk in ipairs({ 1, 16 }) do
        local got, names = gen("on", chunk, sopts)
        check.eq(got, want, ("ids, decode_chunk %d, temperature %g"):format(chunk, sopts.temperature))
        check.truthy(has(names, "lm_head"), "the fused kernel ran")
        check.truthy(not has(names, "eltwise"), "lm_head_pre: the last residual add is in the head")
      end
    end
  end)
end

check.done()
