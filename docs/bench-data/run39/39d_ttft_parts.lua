-- Run 39d (session 32): where `doppler run`'s first token goes, part by part, in a fresh process: the graph's
-- build (recipe.forward), the prompt plan's compile, its first replay (s:feed), the first pick (the sampler),
-- then a second prompt of the same length (plan cached) and the decode's loop plan.
--   build-h100/doppler docs/bench-data/run39/39d_ttft_parts.lua MODEL
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"
local sampler = require "doppler.sampler"
local path = arg[1]
local clock = doppler.clock
local t = clock()
local m = doppler.open_model(path)
local recipe = recipes.for_model(m, path)
local h = hints.new()
h:apply(recipe.hints, "recipe")
local s = session.open(recipe, m, { hints = h })
local smp = sampler.new(s, { temperature = 0 })
local parts = { { "open", clock() - t } }
local function timed(name, f)
  local t0 = clock()
  f()
  parts[#parts + 1] = { name, clock() - t0 }
end
local prompt = { 2, 10, 20, 30, 40, 50, 60, 70 }
timed("graph", function() s:graph(false) end)
timed("prompt_plan", function() s:plan_for(#prompt, false) end)
timed("feed", function() s:feed(prompt) end)
timed("pick", function() smp:next() end)
timed("feed_again", function() s:reset(); s:feed(prompt) end)
timed("pick_again", function() smp:next() end)
timed("loop_plan", function() s:loop_plan(h:get("decode_chunk")) end)
local out = {}
for _, p in ipairs(parts) do out[#out + 1] = ("%s %.1f ms"):format(p[1], p[2] * 1e3) end
print(path, table.concat(out, ", "))
