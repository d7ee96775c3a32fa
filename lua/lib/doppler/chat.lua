-- doppler.chat: `--chat`, a multi-turn conversation with the model's chat template.
-- The KV cache is reused across turns: each turn renders the whole conversation, and only the
-- ids after what the cache already holds are fed (if the rendering no longer starts with them,
-- the context is rebuilt from scratch). Commands: /reset, /stats, /help; Ctrl-D leaves;
-- Ctrl-C stops the reply being generated and returns to the prompt.
local doppler = require "doppler"
local generate = require "doppler.generate"

local M = {}

local HELP = [[
commands: /reset  forget the conversation      /stats  context and speed
          /help   this text                    Ctrl-D  leave      Ctrl-C  stop a reply]]

-- The conversation rendered with the chat template the model's metadata names (tokenizer_config
-- chat_template, then the architecture), or the recipe's if the metadata names none.
local function render(tok, messages, recipe, cfg)
  local ok, text, has_bos = pcall(tok.chat, tok, messages, { add_generation_prompt = true, arch = cfg.model_type })
  if not ok then
    text, has_bos = tok:chat(messages, { add_generation_prompt = true, template = recipe.chat_template })
  end
  return tok:encode(text, { bos = not has_bos })
end

-- Length of the common prefix of two id lists.
local function common_prefix(a, b)
  local n = 0
  while n < #a and n < #b and a[n + 1] == b[n + 1] do n = n + 1 end
  return n
end

-- s: session; tok: tokenizer; smp: sampler; stops: {id = true}; o: CLI options.
function M.repl(recipe, s, tok, smp, stops, o)
  local messages, fed = {}, {}
  if o.system then messages[1] = { role = "system", content = o.system } end
  local last = { tokens = 0, seconds = 0, prompt = 0 }
  io.stderr:write(("chat with %s (%s); /help for commands, Ctrl-D to leave\n"):format(s.model:path(), recipe.name))
  while true do
    local line = doppler.readline("> ")
    if line == nil then io.stdout:write("\n"); break end
    if line == "/help" then
      print(HELP)
    elseif line == "/reset" then
      messages, fed = {}, {}
      if o.system then messages[1] = { role = "system", content = o.system } end
      s:reset()
      print("[conversation cleared]")
    elseif line == "/stats" then
      local st = s:stats()
      print(("[context %d / %d tokens; last reply %d tokens in %.2f s (%.1f tok/s) after %d new prompt tokens%s; KV cache %.1f MB]"):format(
        s.pos, s.context, last.tokens, last.seconds, last.seconds > 0 and last.tokens / last.seconds or 0,
        last.prompt, (last.compile or 0) > 0 and (", besides %.1f ms compiling plans"):format(last.compile * 1e3) or "",
        (st.kv_bytes or 0) / 1e6))
    elseif line:match("^/") then
      print("unknown command " .. line .. "; /help lists them")
    elseif line:match("%S") then
      messages[#messages + 1] = { role = "user", content = line }
      local ids = render(tok, messages, recipe, s.cfg)
      -- Keep what the cache holds up to where the new rendering departs from it (templates may
      -- trim the last reply); start over only if that is further back than the cache can rewind.
      local keep = common_prefix(ids, fed)
      if keep == #ids then keep = keep - 1 end   -- always feed at least one id: its logits draw the reply
      if not s:rewind(keep) then
        s:reset()
        keep = 0
      end
      for i = #fed, keep + 1, -1 do fed[i] = nil end
      local new = {}
      for i = #fed + 1, #ids do new[#new + 1] = ids[i] end
      local reply, detok = {}, tok:decoder()
      local t0, c0 = doppler.clock(), s.plan_seconds
      doppler.catch_interrupts()
      local ok, err = pcall(function()
        s:feed(new)
        local gen = { max_tokens = o.max_tokens, sampler = smp, stops = stops }
        if generate.chunked(s, gen) then
          -- the GPU-resident loop: decode_chunk steps per submit, streamed chunk by chunk (Ctrl-C between chunks)
          for ids in generate.chunks(s, gen) do
            for _, id in ipairs(ids) do
              reply[#reply + 1] = id
              io.stdout:write(detok:push(id))
            end
            io.stdout:flush()
          end
        else
          for _ = 1, o.max_tokens do
            local id = smp:next()
            if stops[id] then break end
            reply[#reply + 1] = id
            io.stdout:write(detok:push(id))
            io.stdout:flush()
            s:feed({ id })
          end
        end
      end)
      io.stdout:write(detok:finish(), "\n")
      -- plans compiled for this turn's new shapes are a one-off, not the reply's speed
      local compile = s.plan_seconds - c0
      last = { tokens = #reply, seconds = doppler.clock() - t0 - compile, prompt = #new, compile = compile }
      if not ok then
        if tostring(err):find("interrupted!") then
          print("[stopped]")
        else
          io.stderr:write("error: ", tostring(err), "\n")
        end
      end
      messages[#messages + 1] = { role = "assistant", content = tok:decode(reply, { skip_special = true }) }
      -- What the cache holds now: the prompt and the reply, up to s.pos (not a trailing stop token; the GPU
      -- loop leaves the last id unfed when the token limit ended the reply).
      for _, id in ipairs(new) do fed[#fed + 1] = id end
      for _, id in ipairs(reply) do fed[#fed + 1] = id end
      while #fed > s.pos do fed[#fed] = nil end
      if not ok then s:reset(); fed = {} end   -- an interrupted pass leaves the cache unknown
    end
  end
  return 0
end

return M
