-- Run 38e (session 31): where a process's time before its first token goes. `doppler run` on the H100 read a
-- first token after 150-265 ms (8-token prompt) against 4.6 ms in decode.lua's warmed-up runs: the session's
-- plans are compiled in the process (Lua lowering, kernels from the SPIR-V and driver caches, recording).
-- Times the session's open, then the prompt's, the step's and the GPU loop's plans three times: round 1 makes
-- the kernels (pipelines), rounds 2-3 find them in the process's kernel cache (s:drop_plans() in between).
--   doppler 38e_plan_time.lua MODEL
local doppler = require "doppler"
local session = require "doppler.session"
local recipes = require "doppler.recipes"
local hints = require "doppler.hints"
local path = arg[1]
local t = doppler.clock()
local model = doppler.open_model(path)
local recipe = recipes.for_model(model, path)
local h = hints.new(); h:apply(recipe.hints, "recipe")
local s = session.open(recipe, model, { hints = h })
local name = path:match("[^/]+$")
print(("%s: open %.1f ms"):format(name, (doppler.clock() - t) * 1e3))
for round = 1, 3 do
  t = doppler.clock(); s:plan_for(8, false); local a = doppler.clock() - t
  t = doppler.clock(); s:plan_for(1, false); local b = doppler.clock() - t
  t = doppler.clock(); s:loop_plan(16); local c = doppler.clock() - t
  print(("%s round %d: prompt plan %.1f ms, step plan %.1f ms, loop plan %.1f ms"):format(name, round, a * 1e3,
        b * 1e3, c * 1e3))
  s:drop_plans()
end
