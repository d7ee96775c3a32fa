-- doppler.rope: RoPE inverse-frequency tables for a recipe. The arithmetic is core/ref/rope.c's
-- (HF modeling_rope_utils, f32, same order); scaling kinds are only different tables, so the
-- GPU kernel is the same for default, linear and llama3 RoPE.
local doppler = require "doppler"
local M = {}

-- spec = { theta = number, scaling = nil | { type|rope_type = "linear"|"llama3"|"default", factor, ... },
--          dim = rotated dims (default: cfg.head_dim * (cfg.partial_rotary_factor or 1)) }
function M.inv_freq(cfg, spec)
  local dim = spec.dim or math.floor(cfg.head_dim * (cfg.partial_rotary_factor or 1) + 0.5)
  return doppler.rope_inv_freq(spec.theta, dim, spec.scaling)
end

function M.describe(scaling)
  if not scaling then return "default" end
  local kind = scaling.type or scaling.rope_type or "default"
  if kind == "default" then return "default" end
  return ("%s:%s:%s:%s:%s"):format(kind, tostring(scaling.factor), tostring(scaling.low_freq_factor),
                                   tostring(scaling.high_freq_factor), tostring(scaling.original_max_position_embeddings))
end

return M
