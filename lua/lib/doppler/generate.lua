-- doppler.generate: the default decode loop a recipe uses (or replaces with its own):
-- prefill the prompt, then step -> sample -> stop check. With hint decode_chunk = N > 1 the GPU runs
-- N steps per submit by itself (doppler.loop: the same steps, sampling and stop checks, recorded N
-- times), and the ids come back chunk by chunk; with 1 (or when every logits row is wanted) each step
-- is one submit and the host checks each id. Both produce the same ids.
local M = {}

local function stop_list(stops)
  local l = {}
  for id, on in pairs(stops) do if on then l[#l + 1] = id end end
  table.sort(l)
  return l
end

-- An iterator over the generated ids (stop ids excluded), in lists, after s:feed(prompt):
--   for ids in generate.chunks(s, opts) do ... end
-- opts: max_tokens, sampler, stops (id -> true). It alternates between the pick of the last pass (one
-- id, known before the next submit: the first token is not held back) and the ids a chunk of
-- decode_chunk steps emitted on the GPU (up to decode_chunk - 1, possibly none).
function M.chunks(s, opts)
  local steps = s.hints:get("decode_chunk")
  local stops = stop_list(opts.stops)
  local left, done, pending = opts.max_tokens, false, nil
  return function()
    if done then return nil end
    if not pending then
      if left <= 0 then return nil end
      local id = opts.sampler:next()   -- the pick of the last pass (or of the last chunk's last step)
      if opts.stops[id] then done = true; return nil end
      left = left - 1
      if left == 0 then done = true else pending = id end
      return { id }
    end
    local ids, why = s:decode_chunk(pending, steps, left, stops)
    pending = nil
    if why == 3 then error("sampling: the last logits row has no candidate (all NaN or -inf)", 0) end
    left = left - #ids
    if why ~= 0 then done = true end
    return ids
  end
end

-- The step-by-step loop: one pass per token (every logits row, when opts.all_logits).
function M.steps(s, opts, emit)
  for i = 1, opts.max_tokens do
    local id = opts.sampler:next()
    if opts.stops[id] then break end
    emit(id)
    -- The last generated token is only fed when its logits row is wanted (--logits-out).
    if i == opts.max_tokens and not opts.all_logits then break end
    s:feed({ id }, opts.all_logits, opts.on_logits)
  end
end

-- Whether the chunked loop applies: more than one step a chunk, and no per-step logits rows wanted.
function M.chunked(s, opts)
  return s.hints:get("decode_chunk") > 1 and not opts.all_logits
end

-- s: session; prompt: ids; opts: max_tokens, sampler, stops (id -> true), all_logits, on_logits;
-- emit(id) is called for every generated token (not for the stop token).
function M.decode(s, prompt, opts, emit)
  s:feed(prompt, opts.all_logits, opts.on_logits)
  if not M.chunked(s, opts) then return M.steps(s, opts, emit) end
  for ids in M.chunks(s, opts) do
    for _, id in ipairs(ids) do emit(id) end
  end
end

return M
