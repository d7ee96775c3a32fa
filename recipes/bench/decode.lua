-- recipes/bench/decode.lua: decode tok/s over 256 decode steps (32-token prompt), per-token latency.
--   doppler recipes/bench/decode.lua --model PATH [--table] [--hint KEY=VALUE ...]   (--help: every option)
-- One JSON line per timed run; the loop and the keys are in bench_lib.lua and docs/BENCHMARKS.md.
package.path = (arg[0]:match("^(.*/)") or "./") .. "?.lua;" .. package.path
local ok, err = pcall(require("bench_lib").main, "decode", arg)
if not ok then
  io.stderr:write("decode: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
