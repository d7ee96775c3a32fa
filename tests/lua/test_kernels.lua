-- The first kernels (elementwise add/mul/scale, casts, sum and max reductions, copy), driven from
-- Lua alone through the doppler module and checked against a CPU computation in Lua.
-- This is the "write and test a compute kernel from Lua" path; C tests cover the same kernels
-- (tests/unit/test_gpu_kernels.c) in more depth.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"

local dev = doppler.device()
local rng_state = 12345
local function rand()   -- deterministic, uniform in [-1, 1)
  rng_state = (rng_state * 1103515245 + 12345) % 2147483648
  return rng_state / 1073741824 - 1
end
local function randoms(n) local t = {} for i = 1, n do t[i] = rand() end return t end
local function f32(x) return string.unpack("<f", string.pack("<f", x)) end

local function tensor(values, dtype)
  local t = dev:tensor { dtype = dtype or "f32", shape = { #values } }
  t:upload(values)
  return t
end

local function run(kernel, groups, push)
  local rec = dev:recorder()
  rec:dispatch(kernel, groups, push)
  rec:run()
end

for _, n in ipairs({ 1, 255, 1000, 4099 }) do
  check.case(("add, mul, scale: n = %d, exact in f32"):format(n), function()
    local a, b = randoms(n), randoms(n)
    local ta, tb, ty = tensor(a), tensor(b), dev:tensor { dtype = "f32", shape = { n } }
    local groups = { (n + 255) // 256 }
    run(dev:kernel { file = "elementwise/add.comp" }, groups, { a = ta, b = tb, y = ty, n = n })
    local y = ty:download()
    for i = 1, n do check.eq(y[i], f32(f32(a[i]) + f32(b[i])), "add[" .. i .. "]") end
    run(dev:kernel { file = "elementwise/mul.comp" }, groups, { a = ta, b = tb, y = ty, n = n })
    y = ty:download()
    for i = 1, n do check.eq(y[i], f32(f32(a[i]) * f32(b[i])), "mul[" .. i .. "]") end
    run(dev:kernel { file = "elementwise/scale.comp", constants = { WG = 64 } }, { (n + 63) // 64 },
        { x = ta, y = ty, n = n, s = 0.5 })
    y = ty:download()
    for i = 1, n do check.eq(y[i], f32(a[i]) * 0.5, "scale[" .. i .. "]") end
  end)
end

check.case("casts f32 -> f16 -> bf16 -> f32 match the host rounding (doppler.round_to)", function()
  local n = 777
  local x = randoms(n)
  for i = 1, n do x[i] = x[i] * 1000 end
  local t32 = tensor(x)
  local t16 = dev:tensor { dtype = "f16", shape = { n } }
  local tb = dev:tensor { dtype = "bf16", shape = { n } }
  local back = dev:tensor { dtype = "f32", shape = { n } }
  local g = { (n + 255) // 256 }
  run(dev:kernel { file = "elementwise/cast.comp", defines = { "DP_SRC_F32", "DP_DST_F16" } }, g, { x = t32, y = t16, n = n })
  run(dev:kernel { file = "elementwise/cast.comp", defines = { "DP_SRC_F16", "DP_DST_BF16" } }, g, { x = t16, y = tb, n = n })
  run(dev:kernel { file = "elementwise/cast.comp", defines = { "DP_SRC_BF16", "DP_DST_F32" } }, g, { x = tb, y = back, n = n })
  local y = back:download()
  for i = 1, n do
    check.eq(y[i], doppler.round_to("bf16", doppler.round_to("f16", x[i])), "cast chain [" .. i .. "]")
  end
end)

check.case("sum and max reductions (two stages)", function()
  local n = 100003
  local x = randoms(n)
  local tx = tensor(x)
  local G = 64
  local part = dev:tensor { dtype = "f32", shape = { G } }
  local out = dev:tensor { dtype = "f32", shape = { 1 } }
  local want_sum, want_max = 0, -math.huge
  for i = 1, n do
    local v = f32(x[i])
    want_sum = want_sum + v
    if v > want_max then want_max = v end
  end
  for _, op in ipairs({ "sum", "max" }) do
    local k = dev:kernel { file = "reduce/" .. op .. ".comp" }
    local rec = dev:recorder()
    rec:dispatch(k, { G }, { x = tx, y = part, n = n })
    rec:dispatch(k, { 1 }, { x = part, y = out, n = G })   -- the recorder orders the two stages
    rec:run()
    local got = out:download()[1]
    if op == "sum" then
      -- f32 accumulation of 1e5 values in [-1, 1): a few ulps of the running sums
      check.near(got, want_sum, 1e-2, "sum")
    else
      check.eq(got, want_max, "max")
    end
  end
end)

check.case("copy kernel moves bytes exactly, including an unaligned tail", function()
  local n = 70001
  local src = dev:tensor { dtype = "u8", shape = { n } }
  local bytes = {}
  for i = 1, n do bytes[i] = string.char((i * 7 + 3) % 256) end
  local data = table.concat(bytes)
  src:upload(data)
  local dst = dev:tensor { dtype = "u8", shape = { n } }
  run(dev:kernel { file = "copy/copy.comp" }, { 16 }, { src = src, dst = dst, bytes = n })
  check.eq(dst:read(), data, "copied bytes")
end)

check.case("replaying a recording reuses it: scale twice doubles twice", function()
  local t = tensor({ 1, 2, 3 })
  local rec = dev:recorder()
  rec:dispatch(dev:kernel { file = "elementwise/scale.comp" }, { 1 }, { x = t, y = t, n = 3, s = 2 })
  rec:run()
  rec:run()
  local y = t:download()
  check.eq(y[3], 12.0, "after two runs")
  check.eq(rec:stats().dispatches, 1, "recorded dispatches")
end)

-- Conditional blocks (gpu/recorder.h, what doppler.loop skips its steps with): a dispatch inside one runs only
-- while the predicate word says so, read when the recording runs (a replay sees a new value); a word written
-- by a shader earlier in the same recording counts; nesting and an open block at submit are errors.
check.case("conditional blocks: dispatches run by a word in memory, read at run time", function()
  if not dev:caps().conditional_rendering then
    check.truthy(true, "no VK_EXT_conditional_rendering on " .. dev:caps().name)
    return
  end
  local scale = dev:kernel { file = "elementwise/scale.comp" }
  local t = tensor({ 1, 2, 3 })
  local pred = dev:tensor { dtype = "u32", shape = { 4 } }
  pred:upload({ 7, 0, 0, 0 })
  local rec = dev:recorder()
  rec:begin_conditional(pred, 4, true)        -- word 1: runs while it is 0
  rec:dispatch(scale, { 1 }, { x = t, y = t, n = 3, s = 2 })
  rec:end_conditional()
  rec:begin_conditional(pred, 0, false)       -- word 0: runs while it is not 0
  rec:dispatch(scale, { 1 }, { x = t, y = t, n = 3, s = 3 })
  rec:end_conditional()
  rec:run()
  check.eq(t:download()[3], 18.0, "both ran: 3 * 2 * 3")
  check.eq(rec:stats().conditionals, 2, "two blocks recorded")
  pred:upload({ 0, 5, 0, 0 })
  rec:run()                                   -- a replay: neither runs now
  check.eq(t:download()[3], 18.0, "neither ran on the replay")
  pred:upload({ 1, 5, 0, 0 })
  rec:run()
  check.eq(t:download()[3], 54.0, "only the second ran")
  -- a word a shader wrote earlier in the recording: scale.comp writes y = x * s into the predicate's bytes
  local src = tensor({ 0, 0 })
  local pf = dev:tensor { dtype = "f32", shape = { 2 } }
  local t2 = tensor({ 5 })
  local rec2 = dev:recorder()
  rec2:dispatch(scale, { 1 }, { x = src, y = pf, n = 2, s = 1 })   -- pf = {0, 0}: word 0 is 0
  rec2:begin_conditional(pf, 0, false)
  rec2:dispatch(scale, { 1 }, { x = t2, y = t2, n = 1, s = 2 })
  rec2:end_conditional()
  rec2:run()
  check.eq(t2:download()[1], 5.0, "skipped: the word the first dispatch wrote is 0")
  src:upload({ 1, 0 })
  rec2:run()
  check.eq(t2:download()[1], 10.0, "ran: the word is now 1.0's bits, not 0")
  local function fails(fn, text, what)
    local ok, err = pcall(fn)
    check.truthy(not ok and tostring(err):find(text, 1, true), what .. ": " .. tostring(err))
  end
  local rec3 = dev:recorder()
  rec3:begin_conditional(pred, 0, true)
  fails(function() rec3:begin_conditional(pred, 0, true) end, "do not nest", "nested blocks")
  fails(function() rec3:run() end, "still open", "submit with a block open")
  fails(function() dev:recorder():begin_conditional(pred, 2, true) end, "unaligned", "an unaligned word")
  fails(function() dev:recorder():end_conditional() end, "end without begin", "end without begin")
end)

-- graph/eltwise.comp on strided column slices (lower/eltwise.lua's element-wise rules; Phi-3's gate_up with
-- fusion=off): a [R, C] operand whose rows lie a_stride (b_stride) elements apart gives, bit for bit, what the
-- same values stored contiguously give, for every kind; the padding between rows holds values that would show.
check.case("eltwise: strided inputs (a_stride, b_stride) = the same values contiguous, every kind", function()
  local R, C, SA, SB = 37, 7, 19, 11
  local wide_a, wide_b = randoms(R * SA), randoms(R * SB)
  local a, b = {}, {}
  for r = 0, R - 1 do
    for c = 1, C do a[r * C + c], b[r * C + c] = wide_a[r * SA + c], wide_b[r * SB + c] end
  end
  local twa, twb, ta, tb = tensor(wide_a), tensor(wide_b), tensor(a), tensor(b)
  local y1 = dev:tensor { dtype = "f32", shape = { R * C } }
  local y2 = dev:tensor { dtype = "f32", shape = { R * C } }
  local k = dev:kernel { file = "graph/eltwise.comp", constants = { WG = 64 } }
  local g = { (R * C + 63) // 64 }
  for kind = 0, 4 do
    run(k, g, { a = ta, b = tb, y = y1, n = R * C, kind = kind, s = 0.75, cols = C, a_stride = 0, b_stride = 0 })
    run(k, g, { a = twa, b = twb, y = y2, n = R * C, kind = kind, s = 0.75, cols = C, a_stride = SA, b_stride = SB })
    local want, got = y1:download(), y2:download()
    for i = 1, R * C do check.eq(got[i], want[i], ("kind %d, element %d"):format(kind, i - 1)) end
    if kind == 0 then
      for i = 1, R * C do check.eq(want[i], f32(f32(a[i]) + f32(b[i])), "contiguous add [" .. i .. "]") end
    end
  end
  -- one strided input, one contiguous: Phi-3's silu(gate) * up, with the roles of a and b swapped
  run(k, g, { a = ta, b = tb, y = y1, n = R * C, kind = 1, s = 1, cols = C, a_stride = 0, b_stride = 0 })
  run(k, g, { a = twa, b = tb, y = y2, n = R * C, kind = 1, s = 1, cols = C, a_stride = SA, b_stride = 0 })
  local want, got = y1:download(), y2:download()
  for i = 1, R * C do check.eq(got[i], want[i], ("mul, b contiguous, element %d"):format(i - 1)) end
end)

check.case("errors: unknown push member, bad kernel source name the problem", function()
  local ok, err = pcall(run, dev:kernel { file = "elementwise/add.comp" }, { 1 }, { a = tensor({ 1 }), b = tensor({ 1 }), y = tensor({ 1 }), n = 1, bogus = 1 })
  check.truthy(not ok and tostring(err):find("bogus"), "unknown member named: " .. tostring(err))
  ok, err = pcall(function() return dev:kernel { source = "#version 460\nvoid main() { undefined_call(); }\n", name = "bad" } end)
  check.truthy(not ok and tostring(err):find(":2"), "compile error has a line: " .. tostring(err))
end)

check.done()
