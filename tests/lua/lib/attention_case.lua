-- tests/lua/lib/attention_case.lua: one attention node through the planner (doppler.lower R.attention), against
-- a Lua reference in double precision (test_attention_cm.lua, test_attention_long.lua).
--   local A = require "lib.attention_case"
--   local o, want, vmax, names, groups = A.run { T, Hq, Hkv, D, p0, cap, window, softcap, split, keys, rows, mode,
--                                                hints }
--   (names: the plan's kernels in order, groups: their dispatches' group counts)
--   A.compare(o, want, vmax, what); A.used(names, "attention_decode")
-- T tokens at positions p0 .. p0 + T - 1 after p0 cached positions (those a ring of cap slots still holds; every
-- other slot NaN, so reading one poisons the output), f16 q, k, v and caches, values multiples of 2^-10.
-- mode: hint attention_prefill (default coopmat); hints: any others. Bound (compare): the kernels may round the
-- softmax weights to f16 before P V (2^-11 relative each: 2^-11 max|v| on an output) and round the output to
-- f16 (2^-11 |o|); with 2x headroom for the f32 sums: 2^-10 (max|v| + |o|) + 1e-4. A wrong key, mask or head
-- moves outputs by ~0.1 with these values.
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"

local M = {}
local dev = doppler.device()

local rng_state = 4242
local function rand()   -- deterministic, uniform in [-1, 1), a multiple of 2^-10 (exact in f16)
  rng_state = (rng_state * 1103515245 + 12345) % 2147483648
  return (rng_state >> 8) % 2048 / 1024 - 1
end

-- c = { T, Hq, Hkv, D, p0, cap, window, softcap, split, keys, rows, mode }
function M.run(c)
  local T, Hq, Hkv, D, p0, cap = c.T, c.Hq, c.Hkv, c.D, c.p0 or 0, c.cap or 256
  local window = c.window or 0
  local scale = 1 / math.sqrt(D)
  local qv, kv, vv, kcv, vcv = {}, {}, {}, {}, {}
  for i = 1, T * Hq * D do qv[i] = rand() * 2 end
  for i = 1, T * Hkv * D do kv[i] = rand() * 2; vv[i] = rand() end
  -- cache: positions p0 - cap .. p0 - 1 (those a ring of cap slots still holds) are real, every other slot NaN
  for i = 1, Hkv * cap * D do kcv[i] = 0 / 0; vcv[i] = 0 / 0 end
  local cached = {}   -- [h][j] = { k row, v row } for j < p0
  for h = 0, Hkv - 1 do
    cached[h] = {}
    for j = math.max(0, p0 - cap), p0 - 1 do
      local kr, vr = {}, {}
      local base = (h * cap + j % cap) * D
      for d = 1, D do
        kr[d], vr[d] = rand() * 2, rand()
        kcv[base + d], vcv[base + d] = kr[d], vr[d]
      end
      cached[h][j] = { kr, vr }
    end
  end

  local g = Graph.new { name = "attn_cm" }
  local q = g:input("q", { T, Hq, D }, "f16")
  local k = g:input("k", { T, Hkv, D }, "f16")
  local v = g:input("v", { T, Hkv, D }, "f16")
  local pos = g:input("pos", { T }, "u32")
  local kc = g:state("kc", { Hkv, cap, D }, "f16")
  local vc = g:state("vc", { Hkv, cap, D }, "f16")
  g:output("o", g:attention(q, k, v, pos, { cache = { k = kc, v = vc }, scale = scale,
                                            window = window > 0 and window or nil, softcap = c.softcap }))
  local function tensor(dtype, shape, values)
    local t = dev:tensor { dtype = dtype, shape = shape }
    t:upload(values)
    return t
  end
  local posv = {}
  for t = 1, T do posv[t] = p0 + t - 1 end
  local inputs = { q = tensor("f16", { T, Hq, D }, qv), k = tensor("f16", { T, Hkv, D }, kv),
                   v = tensor("f16", { T, Hkv, D }, vv), pos = tensor("u32", { T }, posv) }
  local states = { kc = tensor("f16", { Hkv, cap, D }, kcv), vc = tensor("f16", { Hkv, cap, D }, vcv) }
  local h = hints.new()
  h:set("attention_prefill", c.mode or "coopmat", "test")
  h:set("attention_prefill_cm_split", c.split or 0, "test")
  h:set("attention_prefill_cm_keys", c.keys or 0, "test")
  h:set("attention_prefill_cm_rows", c.rows or 0, "test")
  for key, val in pairs(c.hints or {}) do h:set(key, val, "test") end
  local p = plan.compile(dev, g, { T = T, act = "f16", kv = "f16", hints = h, weights = {}, inputs = inputs,
                                   states = states, constants = function() end })
  p:run()
  local names, groups = {}, {}
  for i, kn in ipairs(p.kernel_log) do names[i], groups[i] = kn:name(), p.kernel_groups[i] end
  local o = p:output("o"):download()

  -- the reference, in double precision
  local want, vmax = {}, 0
  for i = 1, #vv do vmax = math.max(vmax, math.abs(vv[i])) end
  local G = Hq // Hkv
  for t = 0, T - 1 do
    local qp = p0 + t
    local lo = (window > 0 and qp >= window) and qp - window + 1 or 0
    for hq = 0, Hq - 1 do
      local hk = hq // G
      local s, m = {}, -math.huge
      local function key(j)
        if j >= p0 then
          local b = ((j - p0) * Hkv + hk) * D
          return function(d) return kv[b + d] end, function(d) return vv[b + d] end
        end
        local e = cached[hk][j]
        return function(d) return e[1][d] end, function(d) return e[2][d] end
      end
      for j = lo, qp do
        local kf = key(j)
        local acc = 0
        local qb = (t * Hq + hq) * D
        for d = 1, D do acc = acc + qv[qb + d] * kf(d) end
        acc = acc * scale
        if c.softcap then acc = c.softcap * math.tanh(acc / c.softcap) end
        s[j] = acc
        m = math.max(m, acc)
      end
      local l, ov = 0, {}
      for d = 1, D do ov[d] = 0 end
      for j = lo, qp do
        local w = math.exp(s[j] - m)
        l = l + w
        local _, vf = key(j)
        for d = 1, D do ov[d] = ov[d] + w * vf(d) end
      end
      for d = 1, D do want[(t * Hq + hq) * D + d] = ov[d] / l end
    end
  end
  return o, want, vmax, names, groups
end

function M.used(names, kernel)
  for _, n in ipairs(names) do if n == kernel then return true end end
  return false
end

function M.compare(o, want, vmax, what)
  check.eq(#o, #want, what .. ": element count")
  for i = 1, #want do
    local tol = 2 ^ -10 * (vmax + math.abs(want[i])) + 1e-4
    check.near(o[i], want[i], tol, ("%s o[%d]"):format(what, i - 1))
  end
end

return M
