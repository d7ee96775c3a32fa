-- Run 40m (session 33, this machine: lavapipe): Lua memory a prefill allocates, the collector stopped around it.
-- doppler docs/bench-data/run40/40m_prefill_alloc.lua MODEL [PROMPT_TOKENS]   (output: 40m_prefill_alloc.txt)
local doppler = require "doppler"
package.path = doppler.home() .. "/recipes/bench/?.lua;" .. package.path
local bench_lib = require "bench_lib"
local session = require "doppler.session"
local sampler = require "doppler.sampler"
local model, recipe, h = bench_lib.model_and_hints({ model = arg[1], hint = {} })
local s = session.open(recipe, model, { hints = h })
local smp = sampler.new(s, { temperature = 0 })
local prompt = {}
for i = 1, tonumber(arg[2] or 64) do prompt[i] = 2 + (i * 7) % 100 end
for r = 1, 4 do
  collectgarbage()
  collectgarbage("stop")
  local k0 = collectgarbage("count")
  s:reset()
  s:feed(prompt)
  smp:next()
  local k1 = collectgarbage("count")
  collectgarbage("restart")
  print(("run %d: prefill of %d tokens allocated %.1f KiB of Lua memory"):format(r, #prompt, k1 - k0))
end
