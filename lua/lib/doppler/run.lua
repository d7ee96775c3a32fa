-- doppler.run: the generation command line shared by every recipe:
--   doppler recipes/gemma3.lua --model PATH --prompt "..."     (the recipe file names the family)
--   doppler run --model PATH ...                               (the family from the model's metadata:
--                                                               M.for_model; lua/lib/doppler/cmd/run.lua)
-- Loads the model, applies hints, tokenises, runs the recipe's decode loop, streams text.
local doppler = require "doppler"
local cli = require "doppler.cli"
local hints = require "doppler.hints"
local session = require "doppler.session"
local sampler = require "doppler.sampler"
local recipes = require "doppler.recipes"

local M = {}

local function options(recipe_name)
  return {
    usage = ("doppler %s [--model PATH] [--prompt TEXT | --ids 1,2,3] [options]"):format(recipe_name),
    about = "Generates text on the GPU (Vulkan). PATH is a Hugging Face model directory (config.json,\n" ..
            "*.safetensors, tokenizer.json) or a GGUF file. Without --model, the synthetic default model\n" ..
            "made by the README's set-up command is used: random weights, so its text is noise by design.",
    options = {
      { "--model", "PATH", "model directory, GGUF file or manifest (models/NAME.yaml)" },
      { "--prompt", "TEXT", "prompt text (needs a tokenizer)" },
      { "--ids", "LIST", "prompt as comma-separated token ids (no tokenizer needed)" },
      { "--max-tokens", "N", "tokens to generate", type = "int", default = 128, min = 0 },
      { "--temperature", "T", "sampling temperature (0 = greedy)", type = "number", default = 0 },
      { "--top-k", "K", "keep the K most likely tokens (0 = all)", type = "int", default = 0, min = 0 },
      { "--top-p", "P", "nucleus sampling: smallest set with probability >= P (1 = off)", type = "number", default = 1 },
      { "--min-p", "P", "drop tokens below P x the top probability (0 = off)", type = "number", default = 0 },
      { "--repeat-penalty", "R", "divide positive logits of seen tokens by R (1 = off)", type = "number", default = 1 },
      { "--seed", "S", "sampling seed", type = "int", default = 0 },
      { "--chat", nil, "interactive multi-turn chat with the model's chat template" },
      { "--system", "TEXT", "system prompt (chat templates that have one)" },
      { "--print-ids", nil, "print the generated ids as one JSON array" },
      { "--logits-out", "FILE", "write f32 logits [T, V] for every position of prompt + generated ids" },
      { "--hints", "FILE", "a YAML mapping of hints (applied after the manifest's, before --hint)" },
      { "--hint", "KEY=VALUE", "kernel/precision hint (see --show-hints)", repeat_ = true },
      { "--fusions", "FILE", "a Lua file registering fusion rules (docs/OPS.md, Fusions)", repeat_ = true },
      { "--show-hints", nil, "print every hint's effective value and its source, then exit" },
      { "--quiet", nil, "no progress or speed report on stderr" },
      { "--profile", nil, "report GPU time per kernel per token, submits, bytes read back, device memory (stderr)" },
    },
  }
end

local function parse_ids(s)
  local ids = {}
  for tok in s:gmatch("[^,%s]+") do
    local v = math.tointeger(tonumber(tok))
    if not v or v < 0 then error(("--ids: '%s' is not a token id"):format(tok), 0) end
    ids[#ids + 1] = v
  end
  if #ids == 0 then error("--ids: no token ids given", 0) end
  return ids
end

local function default_model(recipe)
  local path = recipe.default_model and (doppler.home() .. "/" .. recipe.default_model)
  if not path then error(recipe.name .. ": --model is required (this recipe has no default model)", 0) end
  local f = io.open(path .. "/config.json")
  if not f then
    error(("no --model given and the default synthetic model is missing at %s;\n" ..
           "create it with the README's set-up command (bash scripts/setup.sh), or pass --model PATH"):format(path), 0)
  end
  f:close()
  return path
end

local function now() return doppler.clock() end

-- ---- manifests (models/NAME.yaml) and hint files ----

local function file_exists(p)
  local f = io.open(p)
  if f then f:close() end
  return f ~= nil
end

-- Reads a manifest; .model_path is its model resolved against the manifest's directory, then
-- doppler's home (the repository). The path is kept as written when neither exists (the error then
-- comes from opening it, naming the manifest).
function M.read_manifest(path)
  local m = doppler.read_manifest(path)
  m.name = m.name or path:match("([^/]+)%.ya?ml$")
  local p = m.model
  if p:sub(1, 1) ~= "/" then
    local dir = path:match("^(.*)/[^/]*$") or "."
    local candidates = { dir .. "/" .. p, doppler.home() .. "/" .. p }
    p = candidates[1]
    for _, c in ipairs(candidates) do
      if file_exists(c) or file_exists(c .. "/config.json") then p = c; break end
    end
  end
  m.model_path = p
  return m
end

local function is_manifest(path) return path and (path:match("%.ya?ml$") ~= nil) end
M.is_manifest = is_manifest

-- --model may name a manifest: its recipe must be the one running, its kernel_hints apply (source
-- "manifest NAME"), its model is what opens. --hints FILE applies next. Precedence, lowest first:
-- recipe < manifest < --hints FILE < --hint KEY=VALUE (the caller applies --hint after this); the tune
-- cache (doppler.tune) sits below the recipe: it only fills hints still at their built-in default.
-- Returns the model path (nil when none was given).
local function resolve_model(o, h, recipe)
  local path = o.model
  if is_manifest(path) then
    local m = M.read_manifest(path)
    if m.recipe and m.recipe ~= recipe.name and recipe.name ~= "run" then
      error(("%s: the manifest is for the %s recipe, not %s"):format(path, m.recipe, recipe.name), 0)
    end
    h:apply_pairs(m.kernel_hints, "manifest " .. m.name, path)
    path = m.model_path
    if not o.show_hints and not file_exists(path) and not file_exists(path .. "/config.json") then
      error(("%s: model %s does not exist (%s); the manifest's comments say how to make it"):format(
        o.model, m.model, path), 0)
    end
  end
  if o.hints then h:apply_pairs(doppler.read_hints_file(o.hints), "--hints " .. o.hints, o.hints) end
  return path
end

function M.main(recipe, argv)
  local o = cli.parse(argv, options(recipe.path or recipe.name))
  local h = hints.new()
  h:apply(recipe.hints, "recipe " .. recipe.name)
  local path = resolve_model(o, h, recipe)
  h:apply_args(o.hint)
  for _, f in ipairs(o.fusions or {}) do require("doppler.fusions").load(f) end
  if o.show_hints then
    -- the tune cache (doppler.tune) needs the device and the model's shape: only when --model is given
    if path and (file_exists(path) or file_exists(path .. "/config.json")) then
      require("doppler.tune").apply(h, doppler.device():caps(), doppler.open_model(path))
    end
    print(h:describe())
    return 0
  end
  if o.prompt and o.ids then error("--prompt and --ids exclude each other", 0) end
  path = path or default_model(recipe)
  local log = o.quiet and function() end or function(...) io.stderr:write(string.format(...)) end

  local t_load = now()
  local model = doppler.open_model(path)
  -- tuned defaults for this device and model (doppler tune): below the recipe, manifest and hint options
  require("doppler.tune").apply(h, doppler.device():caps(), model)
  local last_pct = -1
  local show_progress = not o.quiet and doppler.isatty(2)
  local s = session.open(recipe, model, { hints = h, progress = function(i, n)
    local pct = (100 * i) // n
    if show_progress and pct ~= last_pct and (pct % 10 == 0) then
      io.stderr:write(("\rloading %s: %3d%%"):format(path, pct)); last_pct = pct
      if i == n then io.stderr:write("\n") end
    end
  end })
  log("loaded %s (%s, %.1f MB on the device) in %.2f s\n", path, recipe.name, s.weight_info.bytes / 1e6, now() - t_load)
  if show_progress then   -- a prompt of several prefill passes (hint prefill_chunk): tokens done so far
    s.on_prefill = function(done, total)
      io.stderr:write(("\rprefill: %d/%d tokens"):format(done, total))
      if done == total then io.stderr:write("\n") end
    end
  end

  local tok
  if o.prompt or o.chat then
    local tpath = model:tokenizer_path()
    if not tpath then error(path .. ": no tokenizer found (tokenizer.json); use --ids instead of --prompt", 0) end
    tok = doppler.tokenizer(tpath)
  end
  local smp = sampler.new(s, { temperature = o.temperature, top_k = o.top_k, top_p = o.top_p,
                               min_p = o.min_p, repeat_penalty = o.repeat_penalty, seed = o.seed })
  -- Stop on the config's EOS ids and on the tokenizer's end-of-sequence / end-of-turn tokens.
  local stops = {}
  for _, id in ipairs(s.cfg.eos_token_ids or {}) do stops[id] = true end
  if tok then for _, id in ipairs(tok:eos()) do stops[id] = true end end

  if o.chat then
    return require("doppler.chat").repl(recipe, s, tok, smp, stops, o)
  end

  local prompt
  if o.ids then prompt = parse_ids(o.ids)
  elseif o.prompt then prompt = tok:encode(o.prompt, { bos = true })
  else error("give --prompt TEXT, --ids LIST or --chat (see --help)", 0) end

  local logits_file
  if o.logits_out then
    logits_file = io.open(o.logits_out, "wb")
    if not logits_file then error("--logits-out: cannot create " .. o.logits_out, 0) end
  end
  local detok = tok and tok:decoder()
  local generated = {}
  local prof = o.profile and require("doppler.profile").start(s)
  local t0, c0 = now(), s.plan_seconds
  local t_first, c_first
  local decode = recipe.decode or require("doppler.generate").decode
  decode(s, prompt, {
    max_tokens = o.max_tokens, sampler = smp, stops = stops, all_logits = logits_file ~= nil,
    on_logits = logits_file and function(rows) for _, r in ipairs(rows) do logits_file:write(r) end end,
  }, function(id)
    if not t_first then
      t_first, c_first = now(), s.plan_seconds
      if prof then prof:first_token() end
    end
    generated[#generated + 1] = id
    if detok then
      io.stdout:write(detok:push(id))
      io.stdout:flush()
    end
  end)
  local t_end = now()
  if prof then prof:report(io.stderr) end
  if logits_file then logits_file:close() end
  if detok then io.stdout:write("\n") end
  if o.print_ids then
    local parts = {}
    for i, id in ipairs(generated) do parts[i] = tostring(id) end
    print("[" .. table.concat(parts, ",") .. "]")
  end
  local n = #generated
  if n > 0 and t_first then
    -- Plans are compiled on first use (the prompt's before its first token, the decode step's and the GPU
    -- loop's after it): a one-off of each process, reported apart so that tok/s is the decoding's.
    local compile_first, compile_decode = c_first - c0, s.plan_seconds - c_first
    local decode_s = t_end - t_first - compile_decode
    local function plans(fmt, sec) return sec > 0 and fmt:format(sec * 1e3) or "" end
    log("%d prompt tokens, %d generated; time to first token %.1f ms%s; %.2f tok/s decode%s\n", #prompt, n,
        (t_first - t0) * 1e3, plans(", %.1f of it compiling plans", compile_first),
        n > 1 and (n - 1) / decode_s or 0, plans(", after %.1f ms compiling its plans", compile_decode))
  end
  return 0, generated   -- the exit code, and the ids for a caller in this process (tests/lua/lib/check.lua)
end

-- ---- `doppler run`: the recipe from the model ----

-- The value of --model (as "--model PATH" or "--model=PATH"), or nil.
local function model_arg(argv)
  for i = 1, #argv do
    if argv[i] == "--model" then return argv[i + 1] end
    local v = argv[i]:match("^%-%-model=(.*)$")
    if v then return v end
  end
end

-- Errors name the model, not this file: called through pcall, open_model's message carries no position.
local function recipe_for(path)
  local ok, model = pcall(doppler.open_model, path)
  if not ok then error(model, 0) end
  local r
  ok, r = pcall(recipes.for_model, model, path)
  model:close()
  if not ok then error(r, 0) end
  return r
end

-- `doppler run ARGS` (lua/lib/doppler/cmd/run.lua): M.main with the recipe the model's metadata names,
-- or the one its manifest names. Returns what M.main returns (the exit code, then the ids it generated);
-- errors are Lua errors.
function M.for_model(argv)
  local path = model_arg(argv)
  local recipe
  if is_manifest(path) then
    -- a manifest names its recipe (else the recipe comes from its model's metadata)
    local m = M.read_manifest(path)
    if m.recipe then
      local rpath = doppler.home() .. "/recipes/" .. m.recipe .. ".lua"
      local f = io.open(rpath)
      if not f then error(("%s: recipe '%s' does not exist (%s)"):format(path, m.recipe, rpath), 0) end
      f:close()
      recipe = recipes.load(rpath)
    else recipe = recipe_for(m.model_path) end
  elseif path then
    recipe = recipe_for(path)
  else
    for _, a in ipairs(argv) do
      if a == "--help" or a == "-h" then
        -- the options are every recipe's; the family comes from --model
        recipe = require("doppler.recipe").define { name = "run", architectures = {}, weights = function() return {} end,
                                                    forward = function() end }
      end
    end
    if not recipe then error("--model PATH is required (the recipe is chosen from the model's architecture)", 0) end
  end
  return M.main(recipe, argv)
end

return M
