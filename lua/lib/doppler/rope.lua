-- doppler.rope: RoPE inverse-frequency tables for a recipe. The arithmetic is core/ref/rope.c's
-- (HF modeling_rope_utils, f32, same order); scaling kinds are only different tables, so the
-- GPU kernel is the same for default, linear and llama3 RoPE.
local doppler = require "doppler"
local M = {}

-- spec = { theta = number, scaling = nil | { type|rope_type = "linear"|"llama3"|"default", factor, ... },
--          dim = rotated dims (default: cfg.head_dim * (cfg.partial_rotary_factor or 1)) }
-- scaling = { rope_type = "freq_factors", factors = {...} }: the default table, frequency i divided by
-- factors[i]. llama.cpp's converter stores Llama 3.1+'s "llama3" scaling that way (the GGUF tensor
-- rope_freqs.weight, see doppler.session), not as parameters.
function M.inv_freq(cfg, spec)
  local dim = spec.dim or math.floor(cfg.head_dim * (cfg.partial_rotary_factor or 1) + 0.5)
  local sc = spec.scaling
  if sc and (sc.rope_type or sc.type) == "freq_factors" then
    local inv = doppler.rope_inv_freq(spec.theta, dim, nil)
    if #sc.factors ~= #inv then
      error(("rope frequency factors: %d given for %d frequencies"):format(#sc.factors, #inv), 0)
    end
    for i = 1, #inv do inv[i] = doppler.round_to("f32", inv[i] / sc.factors[i]) end
    return inv
  end
  return doppler.rope_inv_freq(spec.theta, dim, sc)
end

function M.describe(scaling)
  if not scaling then return "default" end
  local kind = scaling.type or scaling.rope_type or "default"
  if kind == "default" then return "default" end
  if kind == "freq_factors" then
    local f = {}
    for i, v in ipairs(scaling.factors) do f[i] = ("%.9g"):format(v) end
    return "freq_factors:" .. table.concat(f, ",")
  end
  return ("%s:%s:%s:%s:%s"):format(kind, tostring(scaling.factor), tostring(scaling.low_freq_factor),
                                   tostring(scaling.high_freq_factor), tostring(scaling.original_max_position_embeddings))
end

return M
