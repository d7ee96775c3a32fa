-- Prints every dispatch of the plans doppler compiles for a model (the prompt's, the decode step's and the GPU
-- loop's): kernel file, defines, spec constants and workgroup counts, one line each. Two trees' lowering
-- rules compared by their output (DOPPLER_HOME picks the tree): a change that moves code and nothing else
-- leaves every line as it was.
-- doppler docs/bench-data/run50/50a_plan_fingerprint.lua --model PATH [--hint KEY=VALUE ...] [--prompt-tokens N]
package.path = (os.getenv("DOPPLER_HOME") or ".") .. "/recipes/bench/?.lua;" .. package.path
local cli = require "doppler.cli"
local session = require "doppler.session"
local bench_lib = require "bench_lib"

local OPTIONS = {
  usage = "doppler docs/bench-data/run50/50a_plan_fingerprint.lua --model PATH [options]",
  about = "Every dispatch of the prompt's, the decode step's and the GPU loop's plans, one line each.",
  options = {
    { "--model", "PATH", "model directory or GGUF file (required)" },
    { "--recipe", "FILE", "recipe file (default: from the model's architecture)" },
    { "--prompt-tokens", "N", "the prompt pass's tokens", type = "int", default = 24, min = 1 },
    { "--hint", "KEY=VALUE", "kernel/precision hint", repeat_ = true },
    { "--label", "TEXT", "unused (bench_lib's options)" },
  },
}

local function sorted_pairs(t)
  local keys, out = {}, {}
  for k in pairs(t or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = k .. "=" .. tostring(t[k]) end
  return table.concat(out, ",")
end

local function show(name, p)
  for i = 1, #p.kernel_specs do
    local d, g = p.kernel_specs[i], p.kernel_groups[i]
    print(("%s %3d %s | %s | %s | %d,%d,%d"):format(name, i, d.file, table.concat(d.defines or {}, ","),
                                                    sorted_pairs(d.constants), g[1], g[2], g[3]))
  end
end

local o = cli.parse(arg, OPTIONS)
local model, recipe, h = bench_lib.model_and_hints(o)
local s = session.open(recipe, model, { hints = h })
local T = math.min(o.prompt_tokens, s.chunk)
show("prompt", s:plan_for(T, false))
show("step", s:plan_for(1, false))
local steps = h:get("decode_chunk")
if steps > 1 then show("loop", s:loop_plan(steps)) end
