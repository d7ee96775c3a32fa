-- Run 44a: the side prefetcher's schedule of a model's GPU-loop chunk (stages, weight ranges, stages whose reads
-- start at a light stage before their depth, and the stage signals recorded), after a short greedy run records it.
--   doppler docs/bench-data/run44/44a_sched.lua --model PATH [--hint k=v ...]
package.path = (os.getenv("DOPPLER_HOME") or ".") .. "/recipes/bench/?.lua;" .. package.path
local bench = require "bench_lib"
local cli = require "doppler.cli"
local session = require "doppler.session"
local sampler = require "doppler.sampler"
local json = require "doppler.json"
local o = cli.parse(arg, bench.options("decode"))
local model, recipe, h = bench.model_and_hints(o)
local s = session.open(recipe, model, { hints = h })
local smp = sampler.new(s, {})
bench.run_once(s, smp, bench.prompt_ids(8, s.cfg), 40)
local st = s:loop_plan(h:get("decode_chunk")):stats()
print(json.encode({ model = o.model, hints = o.hint, prefetch = st.prefetch, prefetch_stages = st.prefetch_stages,
                    prefetch_ranges = st.prefetch_ranges, prefetch_led = st.prefetch_led,
                    prefetch_signals = st.prefetch_signals }))
