-- doppler run --model PATH [options]: generation with the recipe the model's own metadata names
-- (config.json `architectures` / `model_type`, or GGUF general.architecture), so no recipe file
-- has to be given. Everything after that is doppler.run's command line, the same as
-- `doppler recipes/NAME.lua --model PATH ...`.
local doppler = require "doppler"
local recipes = require "doppler.recipes"

-- The value of --model (as "--model PATH" or "--model=PATH"), or nil.
local function model_arg(argv)
  for i = 1, #argv do
    if argv[i] == "--model" then return argv[i + 1] end
    local v = argv[i]:match("^%-%-model=(.*)$")
    if v then return v end
  end
end

local function recipe_for(path)
  local model = doppler.open_model(path)
  local cfg = model:config()
  model:close()
  if not cfg then error(path .. ": the model has no config to name its architecture", 0) end
  if cfg.raw then return recipes.for_config(cfg.raw, path) end
  local archs = {}
  for _, a in ipairs({ cfg.architecture, cfg.model_type }) do
    if a and a ~= "" then archs[#archs + 1] = a end
  end
  return recipes.for_architectures(archs, path)
end

local function main(argv)
  local path = model_arg(argv)
  local recipe
  local run = require "doppler.run"
  if run.is_manifest(path) then
    -- a manifest names its recipe (else the recipe comes from its model's metadata)
    local m = run.read_manifest(path)
    if m.recipe then
      local rpath = doppler.home() .. "/recipes/" .. m.recipe .. ".lua"
      local f = io.open(rpath)
      if not f then error(("%s: recipe '%s' does not exist (%s)"):format(path, m.recipe, rpath), 0) end
      f:close()
      recipe = recipes.load(rpath)
    else recipe = recipe_for(m.model_path) end
  elseif path then
    recipe = recipe_for(path)
  else
    for _, a in ipairs(argv) do
      if a == "--help" or a == "-h" then
        -- the options are every recipe's; the family comes from --model
        recipe = require("doppler.recipe").define { name = "run", architectures = {}, weights = function() return {} end,
                                                    forward = function() end }
      end
    end
    if not recipe then error("--model PATH is required (the recipe is chosen from the model's architecture)", 0) end
  end
  return require("doppler.run").main(recipe, argv)
end

local ok, rc = pcall(main, arg)
if not ok then
  io.stderr:write("doppler run: ", tostring(rc), "\n")
  os.exit(1, true)
end
if rc ~= 0 then os.exit(rc, true) end
