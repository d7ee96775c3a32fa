-- The clock warm-up (gpu/warmup.h, hint clock_warmup): one workgroup spinning on a second queue while the host
-- loads weights or compiles a plan, so that the GPU's clock is up when the passes run. lavapipe has one queue,
-- so these tests run it on the main queue (doppler.open_device{ side_queue = "main" }), where every main-queue
-- submit stops it first: what they check is what must hold on any device. The kernel runs and counts its polls
-- up to its limit; it is stopped on request and by a main-queue submit; a session starts it at open and at each
-- plan it compiles, and its ids are the bits of the same model without it; a device without a second queue
-- never starts it (auto) or refuses clock_warmup=on with a message. Whether it raises the clock is for the
-- H100 (docs/BENCHMARKS.md, session 31).
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local tiny = require "lib.tiny_session"

local PROMPT = { 2, 10, 20, 30, 7, 11, 3, 5 }
local side_dev = doppler.open_device { side_queue = "main" }
local plain_dev = doppler.device()
-- lavapipe: no second queue, a CPU; the H100 (its test stage runs this file too): both the other way
local plain_side = plain_dev:caps().side_queue
local plain_auto = plain_side and plain_dev:caps().type ~= "cpu"

-- Until the warm-up has ended by itself (its fence), or `seconds` pass.
local function wait_end(dev, seconds)
  local t = doppler.clock()
  while dev:warmup_stats().running and doppler.clock() - t < seconds do end
  return dev:warmup_stats()
end

check.case("the kernel runs and counts its polls up to its limit", function()
  local before = side_dev:warmup_stats().starts
  check.truthy(side_dev:warmup_start(100), "a device with a side queue (here the main one) starts it")
  local st = wait_end(side_dev, 10)
  check.eq(st.running, false, "it ends by itself")
  check.eq(st.starts, before + 1, "one start")
  check.eq(st.last_polls, 100, "its polls: exactly the limit (nobody stopped it)")
  check.truthy(side_dev:warmup_start(37), "started again after it ended")
  check.eq(wait_end(side_dev, 10).last_polls, 37, "the second run's polls")
end)

check.case("stop ends it, and a main-queue submit does not wait for its limit", function()
  check.truthy(side_dev:warmup_start(2000000000), "started with a limit of 2e9 polls")
  side_dev:warmup_stop()
  local st = side_dev:warmup_stats()
  check.eq(st.running, false, "stopped")
  -- llvmpipe ends a loop after 65535 trips (LP_MAX_TGSI_LOOP_ITERATIONS), long before 2e9 polls: only a GPU
  -- shows that the quit word ended it (the H100 stage runs this file too)
  if side_dev:caps().type ~= "cpu" then
    check.truthy(st.last_polls < 2000000000, "it left at the quit word: " .. st.last_polls .. " polls")
  end
  check.truthy(side_dev:warmup_start(2000000000), "started again")
  local t = side_dev:tensor { dtype = "f32", shape = { 4 } }
  t:upload({ 1, 2, 3, 4 })   -- a main-queue submit: it stops the warm-up on this queue first
  check.eq(side_dev:warmup_stats().running, false, "the upload's submit stopped it")
  check.eq(t:download()[3], 3, "and the upload went through")
  side_dev:warmup_stop()   -- none runs: a no-op
  check.eq(plain_dev:warmup_start(100), plain_side, "started only where the device has a second queue")
  check.eq(plain_dev:warmup_stats().starts, plain_side and 1 or 0, "launches")
  plain_dev:warmup_stop()
  local ok, err = pcall(side_dev.warmup_start, side_dev, -1)
  check.truthy(not ok and tostring(err):find("polls out of range"), "a negative limit is refused: " .. tostring(err))
end)

local function open(name, dev, mode) return tiny.open(name, dev, { clock_warmup = mode }) end
local function run(M, chunk, n) return tiny.greedy(M, PROMPT, chunk, n) end

for _, name in ipairs({ "gemma3-tiny", "llama3-tiny" }) do
  check.case(name .. ": a session starts it at open and per plan compiled; the same ids as without it", function()
    local p0 = plain_dev:warmup_stats().starts
    local A = open(name, plain_dev, "auto")
    check.eq(plain_dev:warmup_stats().starts > p0, plain_auto, "auto: started only on a GPU with a second queue")
    local s0 = side_dev:warmup_stats().starts
    local B = open(name, side_dev, "on")
    -- on the main queue each upload's submit stops it and the next tensor starts it again; on a second queue
    -- it runs through the load
    check.truthy(side_dev:warmup_stats().starts > s0, "started while the weights loaded")
    for round, chunk in ipairs({ 16, 1, 1 }) do
      local before = side_dev:warmup_stats().starts
      local want, got = run(A, chunk, 20), run(B, chunk, 20)
      check.eq(#got, 20, "tokens")
      for i = 1, #want do check.eq(got[i], want[i], ("chunk %d, token %d"):format(chunk, i)) end
      -- chunk 16 compiles the prompt's and the GPU loop's plans, the first chunk 1 the step's; the second
      -- chunk 1 only replays them
      local started = side_dev:warmup_stats().starts - before
      if round < 3 then check.truthy(started >= 1, "started again for the plans compiled")
      else check.eq(started, 0, "no plan compiled, no start") end
      check.eq(side_dev:warmup_stats().running, false, "not running after the decode's submits")
    end
    local C = open(name, side_dev, "off")
    local s1 = side_dev:warmup_stats().starts
    run(C, 16, 4)
    check.eq(side_dev:warmup_stats().starts, s1, "off: never started")
  end)
end

if plain_side then
  check.case("clock_warmup=on on a device with a second queue: started with the session", function()
    local p0 = plain_dev:warmup_stats().starts
    open("gemma3-tiny", plain_dev, "on")
    check.truthy(plain_dev:warmup_stats().starts > p0, "started")
  end)
else
  check.case("clock_warmup=on on a device without a second queue: an error naming the device", function()
    local ok, err = pcall(open, "gemma3-tiny", plain_dev, "on")
    check.truthy(not ok, "refused")
    check.truthy(tostring(err):find("clock_warmup=on") and tostring(err):find(plain_dev:caps().name, 1, true),
                 "the message: " .. tostring(err))
  end)
end

check.done()
