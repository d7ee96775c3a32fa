-- tests/lua/lib/tiny_session.lua: a session on a fixture model (tests/fixtures/models/NAME) with hints set for the
-- test, and the greedy ids of the recipe's decode loop: what tests of an engine option compare with it on and off
-- (test_side_prefetch, test_warmup).
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"
local sampler = require "doppler.sampler"
local generate = require "doppler.generate"
local check = require "lib.check"

local M = {}

-- { s, h, recipe, model } for fixture NAME on dev (nil: the default device), with set = { hint = value, ... }.
function M.open(name, dev, set)
  local path = check.fixtures .. "/models/" .. name
  local m = doppler.open_model(path)
  local recipe = recipes.for_config(doppler.read_json(path .. "/config.json"), path)
  local h = hints.new()
  for k, v in pairs(set or {}) do h:set(k, v, "test") end
  local s = session.open(recipe, m, { hints = h, context = 128, device = dev })
  return { s = s, h = h, recipe = recipe, model = m }
end

-- n greedy ids after `prompt` from a fresh context, with hint decode_chunk = chunk.
function M.greedy(T, prompt, chunk, n)
  T.h:set("decode_chunk", chunk, "test")
  T.s:reset()
  local ids = {}
  local decode = T.recipe.decode or generate.decode
  decode(T.s, prompt, { max_tokens = n, sampler = sampler.new(T.s, { temperature = 0 }), stops = {} },
         function(id) ids[#ids + 1] = id end)
  return ids
end

return M
