-- doppler.generate: the default decode loop a recipe uses (or replaces with its own):
-- prefill the prompt, then step -> sample -> stop check. Each step replays one recorded
-- command buffer; the sampler reads back only the chosen id.
local M = {}

-- s: session; prompt: ids; opts: max_tokens, sampler, stops (id -> true), all_logits, on_logits;
-- emit(id) is called for every generated token (not for the stop token).
function M.decode(s, prompt, opts, emit)
  s:feed(prompt, opts.all_logits, opts.on_logits)
  for i = 1, opts.max_tokens do
    local id = opts.sampler:next()
    if opts.stops[id] then break end
    emit(id)
    -- The last generated token is only fed when its logits row is wanted (--logits-out).
    if i == opts.max_tokens and not opts.all_logits then break end
    s:feed({ id }, opts.all_logits, opts.on_logits)
  end
end

return M
