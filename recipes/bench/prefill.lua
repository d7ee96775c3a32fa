-- recipes/bench/prefill.lua: prefill tok/s for a 512-token prompt.
--   doppler recipes/bench/prefill.lua --model PATH [--table] [--hint KEY=VALUE ...]   (--help: every option)
-- One JSON line per timed run; the loop and the keys are in bench_lib.lua and docs/BENCHMARKS.md.
package.path = (arg[0]:match("^(.*/)") or "./") .. "?.lua;" .. package.path
local ok, err = pcall(require("bench_lib").main, "prefill", arg)
if not ok then
  io.stderr:write("prefill: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
