-- Run 38c (session 31): does the clock warm-up (gpu/warmup.h) bring the clock up after the GPU idled? In one
-- process: the model loaded and its plans recorded (a warm-up run), then for each setting the GPU idles for
-- IDLE s (the host busy-waits), the warm-up spins for W ms (0: none) and a timed run decodes 128 tokens after a
-- 32-token prompt; per-chunk times show how long the first passes stay slow.
--   doppler 38c_idle_warm.lua MODEL [IDLE]
package.path = os.getenv("DOPPLER_HOME") .. "/recipes/bench/?.lua;" .. package.path
local doppler = require "doppler"
local bench = require "bench_lib"
local session = require "doppler.session"
local sampler = require "doppler.sampler"
local recipes = require "doppler.recipes"
local hints = require "doppler.hints"
local path, idle = arg[1], tonumber(arg[2] or "5")
local model = doppler.open_model(path)
local recipe = recipes.for_model(model, path)
local h = hints.new(); h:apply(recipe.hints, "recipe"); h:apply_args({ "clock_warmup=off" })
local s = session.open(recipe, model, { hints = h })
local smp = sampler.new(s, {})
local prompt = bench.prompt_ids(32, s.cfg)
bench.run_once(s, smp, prompt, 2)
local function wait(sec) local t = doppler.clock(); while doppler.clock() - t < sec do end end
for round = 1, 2 do
  for _, w in ipairs({ 0, 100, 300, 1000 }) do
    wait(idle)
    if w > 0 then assert(s.dev:warmup_start(2000000000)); wait(w / 1e3) end
    local r = bench.run_once(s, smp, prompt, 128)
    local st = s.dev:warmup_stats()
    local chunks = {}
    for i = 1, 128, 16 do
      local c = 0
      for j = i, math.min(i + 15, 128) do c = c + r.latencies[j] end
      chunks[#chunks + 1] = ("%.1f"):format(c * 1e3)
    end
    print(("%s round %d warm %4d ms: ttft %.2f ms, decode %.1f tok/s, chunks ms %s (warm-up polls %d)"):format(
      path:match("[^/]+$"), round, w, r.ttft_s * 1e3, 128 / r.decode_s, table.concat(chunks, " "), st.last_polls))
  end
end
