-- doppler.weights: a model's tensors onto the device, checked against what the recipe expects.
-- Every weight the recipe lists must exist with that shape (a missing or mis-shaped tensor is
-- named). Float weights take the device type the hints ask for; quantised GGUF types whose blocks
-- a GPU kernel decodes (doppler.lower's quant_types) stay as they are (weight_quant=keep), others
-- are dequantised on the way (CPU reference).
local lower = require "doppler.lower"

local M = {}

-- Tables the gather kernel reads (it takes float tables only): dequantised whatever weight_quant says.
local FLOAT_ONLY = { ["model.embed_tokens.weight"] = true }

-- The device dtype of a float weight: precision=f32 -> f32; weight_dtype=X -> X; auto -> f16 for
-- f32 files (half the bytes, as a user running in f16 expects) and as stored for f16/bf16.
-- Norm weights (1-D) stay f32: they are small and sit inside an f32 computation.
local function device_dtype(file_dtype, ndim, h, name)
  if ndim == 2 and lower.quant_types[file_dtype] and h:get("weight_quant") == "keep" and not FLOAT_ONLY[name] then
    return file_dtype
  end
  if h:get("precision") == "f32" then return "f32" end
  if ndim == 1 then return "f32" end
  local want = h:get("weight_dtype")
  if want ~= "auto" then return want end
  if file_dtype == "f16" or file_dtype == "bf16" then return file_dtype end
  return "f16"
end

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

function M.load(dev, recipe, model, cfg, h, progress)
  local expected = recipe.weights(cfg)
  local out, info = {}, { bytes = 0, count = 0 }
  local problems = {}
  for _, e in ipairs(expected) do
    local name, shape = e[1], e[2]
    local t = model:tensor(name)
    if not t then
      problems[#problems + 1] = ("missing tensor %s %s"):format(name, shape_str(shape))
    else
      local ok = #t.shape == #shape
      for i = 1, #shape do ok = ok and t.shape[i] == shape[i] end
      if not ok then
        problems[#problems + 1] = ("tensor %s has shape %s, the config implies %s"):format(name, shape_str(t.shape), shape_str(shape))
      end
    end
  end
  if #problems > 0 then
    local shown = {}
    for i = 1, math.min(#problems, 8) do shown[i] = "  " .. problems[i] end
    if #problems > 8 then shown[#shown + 1] = ("  ... and %d more"):format(#problems - 8) end
    error(("%s: does not match the %s recipe:\n%s"):format(model:path(), recipe.name, table.concat(shown, "\n")), 0)
  end
  for i, e in ipairs(expected) do
    local name = e[1]
    local t = model:tensor(name)
    local dt = device_dtype(t.dtype, #t.shape, h, name)
    out[name] = dev:upload_model_tensor(model, name, dt)
    info.bytes = info.bytes + out[name]:nbytes()
    info.count = info.count + 1
    if name == "model.embed_tokens.weight" or i == 1 then info.embed_file_dtype = t.dtype end
    if progress then progress(i, #expected, name) end
  end
  return out, info
end

return M
