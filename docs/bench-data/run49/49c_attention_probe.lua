-- Session 42's probe of llvmpipe's loop limit in the attention kernels (lavapipe): one attention node through
-- the planner at growing contexts against lib/attention_case.lua's double-precision reference; prints the
-- kernels the plan ran and the worst error in units of the test bound (> 1: wrong). Run from the repository
-- root: build/doppler docs/bench-data/run49/49c_attention_probe.lua MODE D [T]
--   MODE auto | flash | basic (hint attention_prefill; basic also sets attention_decode=basic), D head_dim,
--   T tokens (8: a prefill; 1: a decode step). With 2b912c7's lua/lib/doppler/lower.lua (git show) it shows
--   the old failures; at HEAD, past the bounds, flash and basic are refused (an error, by design).
package.path = "tests/lua/?.lua;" .. package.path
local A = require "lib.attention_case"
local mode, D, T = arg[1] or "auto", tonumber(arg[2] or 256), tonumber(arg[3] or 8)
for _, p0 in ipairs({ 400, 800, 1000, 2000, 2400, 3000, 4000, 6000, 8000, 10000, 14000, 16000 }) do
  local c = { T = T, Hq = 1, Hkv = 1, D = D, p0 = p0, cap = p0 + 8, mode = mode == "basic" and "basic" or mode }
  if mode == "basic" then c.hints = { attention_decode = "basic" } end
  local ok, o, want, vmax, names = pcall(A.run, c)
  if not ok then print(("p0=%d: %s"):format(p0, tostring(o):sub(1, 160))) break end
  local worst = 0
  for i = 1, #want do
    local d = math.abs(o[i] - want[i]) / (2 ^ -10 * (vmax + math.abs(want[i])) + 1e-4)
    if d ~= d then d = math.huge end
    worst = math.max(worst, d)
  end
  print(("T=%d D=%d keys=%d: %s worst err/bound %.3g"):format(T, D, p0 + T, table.concat(names, ","), worst))
end
