-- doppler.sampler: picks the next token from the last logits row.
-- Greedy (temperature 0, or top-k 1) runs on the GPU inside the recorded pass (argmax), so only
-- the 4-byte id is read back. Other settings follow llama.cpp's order, which local-inference
-- users expect: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
local doppler = require "doppler"
local M = {}
local Sampler = {}
Sampler.__index = Sampler

function M.new(s, opts)
  local o = {
    session = s, temperature = opts.temperature or 0, top_k = opts.top_k or 0, top_p = opts.top_p or 1,
    min_p = opts.min_p or 0, repeat_penalty = opts.repeat_penalty or 1, seed = opts.seed or 0,
    history = {}, step = 0,
  }
  o.greedy = o.temperature <= 0 or o.top_k == 1
  -- A greedy sampler with a repetition penalty needs the logits on the host (penalty then argmax).
  if o.repeat_penalty ~= 1 then o.greedy = false end
  s.want_argmax = o.greedy
  return setmetatable(o, Sampler)
end

-- Every token the model has seen (prompt and generated), for the repetition penalty.
function Sampler:observe(ids)
  for _, id in ipairs(ids) do self.history[id] = true end
end

function Sampler:next()
  self.step = self.step + 1
  local id
  if self.greedy then
    id = self.session:next_argmax()
  else
    local logits = self.session:last_logits()
    id = doppler.sample_cpu(logits, {
      temperature = self.temperature, top_k = self.top_k, top_p = self.top_p, min_p = self.min_p,
      repeat_penalty = self.repeat_penalty, seed = self.seed, step = self.step, history = self.history,
    })
  end
  self.history[id] = true
  return id
end

return M
