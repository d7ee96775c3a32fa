-- Run 38b (session 31): how long a poll of the clock warm-up takes (gpu/warmup.h) on this device, so that its
-- limit in polls means a known time: stopped after a measured wait, and run out by itself.
local doppler = require "doppler"
local dev = doppler.device()
local function wait(s) local t = doppler.clock(); while doppler.clock() - t < s do end end
for _, ms in ipairs({ 100, 300, 1000 }) do
  assert(dev:warmup_start(2000000000))
  local t = doppler.clock()
  wait(ms / 1e3)
  dev:warmup_stop()
  local dt = doppler.clock() - t
  local s = dev:warmup_stats()
  print(("stopped after %.1f ms: %d polls, %.3f us per poll"):format(dt * 1e3, s.last_polls, dt * 1e6 / s.last_polls))
end
assert(dev:warmup_start(1000000))
local t = doppler.clock()
while dev:warmup_stats().running do end
local dt = doppler.clock() - t
print(("1000000 polls ran out after %.1f ms (%d polls)"):format(dt * 1e3, dev:warmup_stats().last_polls))
