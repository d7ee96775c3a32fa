-- Run 41d (session 34): the interpreter's collector mode, in one process: "gen" (the engine's mode since
-- ecb08de) or "inc" (Lua's incremental mode, the engine's before). Runs bench_lib.main(MODE2, ...) after
-- switching: doppler docs/bench-data/run41/41d_gc.lua inc|gen decode|prefill --model PATH [options]
local doppler = require "doppler"
package.path = doppler.home() .. "/recipes/bench/?.lua;" .. package.path
local bench_lib = require "bench_lib"
local gc, mode = arg[1], arg[2]
if gc == "inc" then collectgarbage("incremental") elseif gc ~= "gen" then error("collector: inc or gen", 0) end
local argv = {}
for i = 3, #arg do argv[#argv + 1] = arg[i] end
bench_lib.main(mode, argv)
