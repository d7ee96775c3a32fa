-- doppler.recipe: what a recipe file returns. A recipe is a table:
--   name, architectures (HF class names and GGUF general.architecture values), chat_template,
--   weights(cfg) -> { {name, shape, norm = bool}, ... }, forward(g, cfg, w, io) -> logits node,
--   optional norm_offset (number, or function({ kind = "gguf" | "safetensors" }) -> number), prepare(cfg, model) for
--   family-specific config defaults.
-- Running a recipe file as a script (`doppler recipes/gemma3.lua ...`) hands it to doppler.run.
local M = {}

local recipe_mt = { __name = "dp.recipe" }

function M.define(r)
  for _, field in ipairs({ "name", "architectures", "weights", "forward" }) do
    if r[field] == nil then error(("recipe: field '%s' is missing"):format(field), 2) end
  end
  return setmetatable(r, recipe_mt)
end

function M.is_recipe(v) return getmetatable(v) == recipe_mt end

return M
