-- doppler.sampler: picks the next token from the last logits row, on the GPU, inside the recorded pass:
-- only the 4-byte id is read back. Greedy (temperature 0 or top-k 1, no penalty) is the pass's argmax;
-- anything else is the graph op `sample` (core/sample.h semantics, docs/SAMPLING.md): llama.cpp's order,
-- repetition penalty -> top-k -> top-p -> min-p -> temperature, then a Gumbel-max draw from a
-- counter-based generator over (seed, step, id), step = the context length. doppler.sample_cpu is the
-- CPU reference of the same draw (bit-identical ids).
local doppler = require "doppler"
local M = {}
local Sampler = {}
Sampler.__index = Sampler

M.CAP = 1024   -- DP_SAMPLE_CAP: candidates sorted for top-k / top-p

local function f32(x) return doppler.round_to("f32", x) end

-- The kernel parameters for opts {temperature, top_k, top_p, min_p, repeat_penalty, seed}: each f32
-- value is rounded exactly as core/sample.c's dp_sample_derive rounds it, so the GPU draws its ids.
function M.spec(opts)
  local t, k = f32(opts.temperature or 0), math.tointeger(opts.top_k or 0)
  local p, mp, r = f32(opts.top_p or 1), f32(opts.min_p or 0), f32(opts.repeat_penalty or 1)
  local seed = math.tointeger(opts.seed or 0)
  if not k then error("sampler: top_k must be an integer", 0) end
  if not seed then error("sampler: seed must be an integer", 0) end
  if not (r > 0) then error(("sampler: repeat_penalty must be > 0, got %g"):format(r), 0) end
  if p ~= p or mp ~= mp or t ~= t then error("sampler: NaN parameter", 0) end
  return {
    temperature = t, top_k = k, top_p = p, min_p = mp, repeat_penalty = r,
    seed_lo = seed & 0xffffffff, seed_hi = (seed >> 32) & 0xffffffff,
    greedy = t <= 0 or k == 1,
    k = k > 0 and math.min(k, M.CAP) or (p < 1 and M.CAP or 0),
    inv_penalty = f32(1.0 / r),
    log_min_p = mp > 0 and f32(math.log(mp)) or -math.huge,
  }
end

local function spec_key(s)
  return ("%.9g|%d|%.9g|%.9g|%.9g|%d|%d"):format(s.temperature, s.top_k, s.top_p, s.min_p, s.repeat_penalty,
                                                 s.seed_lo, s.seed_hi)
end

-- Sets the session's passes up for these options (call before the first pass, or between passes).
function M.new(s, opts)
  local spec = M.spec(opts)
  local o = {
    session = s, spec = spec, temperature = spec.temperature, top_k = spec.top_k, top_p = spec.top_p,
    min_p = spec.min_p, repeat_penalty = spec.repeat_penalty, seed = opts.seed or 0,
  }
  o.greedy = spec.greedy and spec.repeat_penalty == 1
  if o.greedy then s:use_sampler(nil, nil) else s:use_sampler(spec, spec_key(spec)) end
  return setmetatable(o, Sampler)
end

-- Kept for callers of the earlier API: every fed id already reaches the GPU's context buffer.
function Sampler:observe(_) end

-- The id the last pass drew (4 bytes read back).
function Sampler:next()
  local id = self.session:next_argmax()
  if id == 0xffffffff then error("sampling: the last logits row has no candidate (all NaN or -inf)", 0) end
  return id
end

return M
