-- Run 40n (session 33): as 40l_prefill_gc.lua, with Lua's generational mode as a choice. 40l: prefill.lua's
-- runs slowed one after another within a process, and stopping the collector removed it. bench_lib.main
-- ("prefill", ...) with the collector as the first argument says: "default", "stop" (no collection during the
-- runs), "gen" (generational mode) or "full" (a full collection before each run, through a wrapped run_once).
-- doppler docs/bench-data/run40/40n_prefill_gc.lua MODE --model PATH [prefill.lua's options]
local doppler = require "doppler"
package.path = doppler.home() .. "/recipes/bench/?.lua;" .. package.path
local bench_lib = require "bench_lib"
local mode = arg[1]
local argv = {}
for i = 2, #arg do argv[#argv + 1] = arg[i] end
if mode == "stop" then
  collectgarbage("stop")
elseif mode == "gen" then
  collectgarbage("generational")
elseif mode == "full" then
  local run_once = bench_lib.run_once
  bench_lib.run_once = function(...) collectgarbage() return run_once(...) end
elseif mode ~= "default" then
  error("mode: default, stop, gen or full", 0)
end
bench_lib.main("prefill", argv)
