-- Run 46e (session 39), the probe as run: which part of a process does the bimodal decode of Gemma 3 1B F16 with
-- glu_down=on (46b-46d) come with? In one process: --sessions times, a session opened afresh (the weights uploaded
-- again, into the slices the device's pool gives: most likely those the last session released), 2 timed runs
-- after a warm-up; then the plans dropped (a new recording, and so a new side
-- kernel on the second queue) and 2 more timed runs. One JSON line per session.
--   doppler docs/bench-data/run46/46e_reload.lua --model DIR [--sessions 5] [--hint K=V]...
package.path = "recipes/bench/?.lua;" .. package.path
local doppler = require "doppler"
local cli = require "doppler.cli"
local json = require "doppler.json"
local session = require "doppler.session"
local sampler = require "doppler.sampler"
local lib = require "bench_lib"

local o = cli.parse(arg, {
  usage = "doppler docs/bench-data/run46/46e_reload.lua --model DIR [options]",
  about = "Decode tok/s of sessions opened one after another in one process.",
  options = {
    { "--model", "PATH", "model (required)" },
    { "--sessions", "N", "sessions opened one after another", type = "int", default = 5, min = 1 },
    { "--tokens", "N", "decode steps per timed run", type = "int", default = 128, min = 1 },
    { "--hint", "KEY=VALUE", "hint", repeat_ = true },
    { "--label", "TEXT", "label" },
  },
})
local model, recipe, h = lib.model_and_hints(o)
local s
local function timed(smp, prompt)
  local r = {}
  for i = 1, 2 do r[i] = o.tokens / lib.run_once(s, smp, prompt, o.tokens).decode_s end
  return r
end
for i = 1, o.sessions do
  if s then s = nil; collectgarbage(); collectgarbage() end
  s = session.open(recipe, model, { hints = h })
  local smp = sampler.new(s, { temperature = 0 })
  local prompt = lib.prompt_ids(32, s.cfg)
  lib.run_once(s, smp, prompt, 2)
  lib.warm_up(s, smp, prompt, o.tokens, 300)
  local first = timed(smp, prompt)
  s:drop_plans()
  lib.run_once(s, smp, prompt, 2)
  lib.warm_up(s, smp, prompt, o.tokens, 300)
  local again = timed(smp, prompt)
  print(json.encode { label = o.label, session = i, tok_s = first, after_new_recording = again })
  io.stdout:flush()
end
