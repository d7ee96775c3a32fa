-- recipes/bench/compile.lua: where a process's plan compile time goes.
--   doppler recipes/bench/compile.lua --model PATH [--runs N] [--hint KEY=VALUE ...]   (--help: every option)
-- A generation compiles three plans on first use (the prompt's pass, the decode step, the GPU loop's chunk;
-- doppler run reports their total apart from the first token and the decode). This script compiles them in
-- that order, --runs times: run 1 makes every kernel (from the SPIR-V and pipeline cache files where they
-- hold it), later runs drop the plans and compile them again with the kernels already made, so they time the
-- Lua side and the recording alone. One JSON line per plan and run: its seconds, split into the fusion pass,
-- placing values, lowering (kernels made or found, dispatches recorded, the weight preparations' tensors
-- allocated), running the preparations (f16 copies, down's columns: made once per process, by the first plan
-- that needs each) and the loop's steps recorded again, and the kernel build's own split (dev:kernel_times(): hashing and lookup, SPIR-V, reflection, module and
-- layout, the driver's pipeline creation).
package.path = (arg[0]:match("^(.*/)") or "./") .. "?.lua;" .. package.path
local doppler = require "doppler"
local cli = require "doppler.cli"
local session = require "doppler.session"
local json = require "doppler.json"
local bench_lib = require "bench_lib"

local OPTIONS = {
  usage = "doppler recipes/bench/compile.lua --model PATH [options]",
  about = "Plan compile time: the prompt's, the decode step's and the GPU loop's plans, split by phase.\n" ..
          "Prints one JSON object per plan and run (one line each). Run 1 makes the kernels; later runs\n" ..
          "compile the same plans again with the kernels made (the Lua side and the recording alone).",
  options = {
    { "--model", "PATH", "model directory or GGUF file (required)" },
    { "--recipe", "FILE", "recipe file (default: from the model's architecture)" },
    { "--prompt-tokens", "N", "the prompt pass's tokens (capped by hint prefill_chunk)", type = "int", default = 32,
      min = 1 },
    { "--runs", "N", "compile rounds (run 1 makes the kernels)", type = "int", default = 2, min = 1 },
    { "--hint", "KEY=VALUE", "kernel/precision hint (see doppler run --show-hints)", repeat_ = true },
    { "--label", "TEXT", "extra 'label' key in every line (e.g. the machine)" },
  },
}

local KERNEL_KEYS = { "lookup_s", "shader_s", "reflect_s", "layout_s", "pipeline_s" }

-- One plan compiled by `make`, timed: its line's keys.
local function timed(s, make)
  local dev = s.dev
  local k0, t0 = dev:kernel_times(), doppler.clock()
  local p = make()
  local seconds, k1 = doppler.clock() - t0, dev:kernel_times()
  local row = { seconds = seconds, dispatches = p.dispatches, kernels_built = k1.built - k0.built,
                kernel_lookups = k1.lookups - k0.lookups }
  for _, key in ipairs(KERNEL_KEYS) do row["kernel_" .. key] = k1[key] - k0[key] end
  for phase, v in pairs(p.compile_times) do row[phase .. "_s"] = v end
  return row
end

local function main(argv)
  local o = cli.parse(argv, OPTIONS)
  local t_load = doppler.clock()
  local model, recipe, h = bench_lib.model_and_hints(o)
  local s = session.open(recipe, model, { hints = h })
  local load_s = doppler.clock() - t_load
  local caps = s.dev:caps()
  local T = math.min(o.prompt_tokens, s.chunk)
  local steps = h:get("decode_chunk")
  local plans = {
    { "prompt", T, function() return s:plan_for(T, false) end },
    { "step", 1, function() return s:plan_for(1, false) end },
  }
  if steps > 1 then plans[3] = { "loop", steps, function() return s:loop_plan(steps) end } end
  local base = { mode = "compile", model = o.model, recipe = recipe.name, device = caps.name, driver = caps.driver,
                 load_s = load_s, label = o.label, pipeline_cache_loaded_bytes = s.dev:pipeline_cache().loaded_bytes,
                 hints = bench_lib.set_hints(h) }
  for run = 1, o.runs do
    s:drop_plans()
    collectgarbage()
    for _, pl in ipairs(plans) do
      local row = timed(s, pl[3])
      for k, v in pairs(base) do row[k] = v end
      row.run, row.plan, row.tokens = run, pl[1], pl[2]
      print(json.encode(row))
      io.stdout:flush()
    end
  end
  return 0
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("compile: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
