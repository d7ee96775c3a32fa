-- doppler.recipes: finding the recipe for a model (by `architectures` in config.json or GGUF
-- `general.architecture`) among recipes/*.lua, so `doppler run --model PATH` needs no recipe name.
local doppler = require "doppler"
local recipe = require "doppler.recipe"

local M = {}

-- Loads a recipe file without running its CLI.
function M.load(path)
  local chunk, err = loadfile(path)
  if not chunk then error(err, 0) end
  local r = chunk()
  if not recipe.is_recipe(r) then error(path .. ": does not return a recipe (require('doppler.recipe').define)", 0) end
  r.path = path
  return r
end

local function list_recipe_files()
  local dir = doppler.home() .. "/recipes"
  local files = {}
  local p = io.popen(("ls '%s'/*.lua 2>/dev/null"):format(dir))
  if p then
    for line in p:lines() do files[#files + 1] = line end
    p:close()
  end
  return files
end

-- The recipe handling any of the names in `archs` (a list). `what` names the model in errors.
function M.for_architectures(archs, what)
  local known = {}
  for _, f in ipairs(list_recipe_files()) do
    local ok, r = pcall(M.load, f)
    if ok then
      for _, a in ipairs(r.architectures) do
        known[#known + 1] = a
        for _, want in ipairs(archs) do if a == want then return r end end
      end
    end
  end
  error(("%s: architecture %s is not handled by any recipe; known: %s"):format(
    what, table.concat(archs, "/"), table.concat(known, ", ")), 0)
end

-- The recipe for a raw config.json table.
function M.for_config(cfg, what)
  local archs = {}
  for _, a in ipairs(cfg.architectures or {}) do archs[#archs + 1] = a end
  if cfg.model_type then archs[#archs + 1] = cfg.model_type end
  if #archs == 0 then error(what .. ": config has neither 'architectures' nor 'model_type'", 0) end
  return M.for_architectures(archs, what)
end

-- The recipe for an open model (doppler.open_model): its config.json when it has one, else the
-- architecture and model type its GGUF metadata gives. `what` names the model in errors.
function M.for_model(model, what)
  local cfg = model:config()
  if not cfg then error(what .. ": the model has no config to name its architecture", 0) end
  if cfg.raw then return M.for_config(cfg.raw, what) end
  local archs = {}
  for _, a in ipairs({ cfg.architecture, cfg.model_type }) do
    if a and a ~= "" then archs[#archs + 1] = a end
  end
  return M.for_architectures(archs, what)
end

return M
