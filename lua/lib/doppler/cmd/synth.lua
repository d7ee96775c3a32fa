-- doppler synth: a synthetic model — seeded random weights at the exact shapes a config names,
-- with a real tokenizer — so that doppler runs end to end where no checkpoint can be downloaded.
-- Its text is noise by design. The recipe for the config's architecture lists the tensors.
local doppler = require "doppler"
local cli = require "doppler.cli"
local recipes = require "doppler.recipes"

local spec = {
  usage = "doppler synth --config CONFIG.json --tokenizer TOKENIZER --out DIR [options]",
  about = "Writes DIR/config.json, DIR/model.safetensors and DIR/tokenizer.json: random weights\n" ..
          "(normal, std 0.02; norms at their identity value) at the shapes CONFIG names.",
  options = {
    { "--config", "PATH", "a Hugging Face config.json (e.g. models/configs/gemma-3-270m.config.json)" },
    { "--tokenizer", "PATH", "tokenizer.json or tokenizer.json.gz to copy beside the weights" },
    { "--out", "DIR", "output directory (created)" },
    { "--dtype", "TYPE", "weight dtype", default = "f16", choices = { "f16", "bf16", "f32" } },
    { "--seed", "S", "random seed", type = "int", default = 0 },
    { "--std", "X", "standard deviation of matrix weights", type = "number", default = 0.02 },
  },
}

local function main(argv)
  local o = cli.parse(argv, spec)
  for _, req in ipairs({ "config", "tokenizer", "out" }) do
    if not o[req] then error(("synth: --%s is required (see --help)"):format(req), 0) end
  end
  local hf = doppler.read_config(o.config)
  local recipe = recipes.for_config(hf.raw, o.config)
  assert(os.execute(("mkdir -p '%s'"):format(o.out:gsub("'", "'\\''"))), "synth: cannot create " .. o.out)

  -- Norm weights at identity: 0 where the recipe scales by (1 + w), 1 where it scales by w.
  local offset = recipe.norm_offset
  if type(offset) == "function" then offset = offset({ kind = "safetensors" }) end
  local norm_init = (offset == 1) and 0.0 or 1.0
  local tensors, params = {}, 0
  for _, w in ipairs(recipe.weights(hf)) do
    local n = 1
    for _, d in ipairs(w[2]) do n = n * d end
    params = params + n
    tensors[#tensors + 1] = {
      name = w[1], dtype = o.dtype, shape = w[2],
      init = w.norm and { "const", norm_init } or { "normal", o.std },
    }
  end
  io.stderr:write(("synth: %s, %d tensors, %.1fM parameters, %s, seed %d -> %s\n"):format(
    recipe.name, #tensors, params / 1e6, o.dtype, o.seed, o.out))
  doppler.write_safetensors(o.out .. "/model.safetensors", tensors,
                            { seed = o.seed, metadata = ('{"format":"pt","doppler_synthetic":"seed %d"}'):format(o.seed) })
  doppler.copy_file(o.config, o.out .. "/config.json")
  doppler.copy_file(o.tokenizer, o.out .. "/tokenizer.json", { gunzip = o.tokenizer:match("%.gz$") ~= nil })
  io.stderr:write("synth: done\n")
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("doppler synth: ", tostring(err), "\n")
  os.exit(1)
end
