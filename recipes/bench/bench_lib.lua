-- recipes/bench/bench_lib.lua: the measuring loop behind decode.lua, prefill.lua and ttft.lua (and the
-- children of hints.lua). One process loads the model once, then:
--   1. a profiled pass (unless --no-profile): the passes are recorded with GPU timestamps around every
--      dispatch; after the recording run, runs go on untimed for --warmup-ms, then one prompt and
--      --profile-tokens decode steps give GPU ms per kernel;
--   2. --warmup unprofiled runs (records the plans of every shape the runs use: the prompt's chunks
--      and the T = 1 decode step, so no timed run compiles anything), then runs for --warmup-ms more;
--   3. --runs timed runs. A run = reset the context, feed a pseudo-random prompt of --prompt-tokens ids
--      (prefill), read back the first id (TTFT), then --tokens decode steps (feed the last id, read back
--      the next; with hint decode_chunk = N > 1 up to N steps per submit, the GPU-resident loop). Stop
--      tokens are ignored so that every run decodes exactly --tokens steps.
-- Each timed run prints one JSON line (sorted keys; docs/BENCHMARKS.md lists them), or with --table
-- one row of a markdown table printed at the end. Times are wall clock on the host (doppler.clock):
-- each pass is submitted and waited for, so they include submission and read-back latency.
local doppler = require "doppler"
local cli = require "doppler.cli"
local hints = require "doppler.hints"
local session = require "doppler.session"
local sampler = require "doppler.sampler"
local recipes = require "doppler.recipes"
local profile = require "doppler.profile"
local json = require "doppler.json"

local M = {}

-- Defaults per mode: what issue 4 asks each script to measure.
M.modes = {
  decode  = { prompt = 32, tokens = 256, runs = 3,
              about = "Decode speed: tok/s over 256 decode steps after a 32-token prompt (and per-token latency)." },
  prefill = { prompt = 512, tokens = 16, runs = 3,
              about = "Prefill speed: tok/s for a 512-token prompt (in chunks of hint prefill_chunk)." },
  ttft    = { prompt = 32, tokens = 16, runs = 5,
              about = "Time to first token for a 32-token prompt: prefill + reading back the first id." },
}

function M.options(mode)
  local d = M.modes[mode]
  return {
    usage = ("doppler recipes/bench/%s.lua --model PATH [options]"):format(mode),
    about = d.about .. "\nPrints one JSON object per timed run (one line each), or a markdown table with --table.\n" ..
            "Load time and plan compilation are excluded from the timings (load_s reports the load).\n" ..
            "Hints: the built-in defaults, the recipe's and --hint; doppler tune's cache is not read, so a\n" ..
            "figure does not depend on what was tuned before (pass tuned values as --hint).",
    options = {
      { "--model", "PATH", "model directory or GGUF file (required)" },
      { "--recipe", "FILE", "recipe file (default: from the model's architecture)" },
      { "--prompt-tokens", "N", "prompt length in tokens", type = "int", default = d.prompt, min = 1 },
      { "--tokens", "N", "decode steps per run (after the first token)", type = "int", default = d.tokens, min = 0 },
      { "--runs", "N", "timed runs (one JSON line each)", type = "int", default = d.runs, min = 1 },
      { "--warmup", "N", "untimed runs first", type = "int", default = 1, min = 0 },
      { "--warmup-ms", "MS", "then untimed runs for at least this long, before the profiled pass is timed and\n" ..
        "before the timed runs (the GPU's clock rises under load; default: 300 on a GPU, 0 on a CPU device)",
        type = "int", min = 0 },
      { "--profile-tokens", "N", "decode steps of the profiled pass", type = "int", default = 32, min = 1 },
      { "--no-profile", nil, "skip the profiled pass (gpu_ms_per_kernel is then {})" },
      { "--hint", "KEY=VALUE", "kernel/precision hint (see doppler run --show-hints)", repeat_ = true },
      { "--temperature", "T", "sampling temperature (0 = greedy, the default)", type = "number", default = 0 },
      { "--top-k", "K", "sampling top-k (0 = all)", type = "int", default = 0, min = 0 },
      { "--top-p", "P", "sampling top-p (1 = off)", type = "number", default = 1 },
      { "--seed", "S", "sampling seed", type = "int", default = 0 },
      { "--label", "TEXT", "extra 'label' key in every line (e.g. the machine)" },
      { "--table", nil, "print a markdown table instead of JSON lines" },
      { "--latencies", nil, "add latencies_ms: every decode step's ms (a chunk's wall time shared by its steps)" },
    },
  }
end

-- A fixed pseudo-random prompt: BOS, then ids spread over the vocabulary (no tokenizer needed).
function M.prompt_ids(n, cfg)
  local V = cfg.vocab_size
  local ids = {}
  for i = 1, n do ids[i] = (i * 7919 + 104729) % V end
  if cfg.bos_token_id and math.type(cfg.bos_token_id) == "integer" then ids[1] = cfg.bos_token_id end
  return ids
end

-- Nearest-rank percentile of a list of numbers (q in [0, 1]).
function M.percentile(xs, q)
  if #xs == 0 then return nil end
  local s = {}
  for i, v in ipairs(xs) do s[i] = v end
  table.sort(s)
  local k = math.max(1, math.min(#s, math.ceil(q * #s)))
  return s[k]
end

-- The hints that differ from the built-in defaults, as { key = value }.
local function set_hints(h)
  local out = {}
  for k, v in pairs(h.values) do
    if h.sources[k] ~= "default" then out[k] = v end
  end
  return out
end
M.set_hints = set_hints

local function hints_text(tbl)
  local keys = {}
  for k in pairs(tbl) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = k .. "=" .. tostring(tbl[k]) end
  return #keys > 0 and table.concat(keys, " ") or "default"
end
M.hints_text = hints_text

-- `steps` decode steps from the pick `id`: feed it, read the next. With hint decode_chunk = N > 1, the
-- GPU-resident loop (doppler.loop) runs up to N steps per submit; a chunk's wall time is shared evenly
-- by its steps in lat (seconds per step) when given.
function M.decode_steps(s, smp, id, steps, lat)
  local chunk = s.hints:get("decode_chunk")
  local done = 0
  while done < steps do
    local t = doppler.clock()
    local n
    if chunk > 1 then
      local ids, why = s:decode_chunk(id, chunk, steps - done, {})
      -- the last id emitted (LIMIT) or the pending pick (RUNNING) is the one fed next
      if why == 3 then error("sampling: the last logits row has no candidate (all NaN or -inf)", 0) end
      if why == 2 then n = #ids; id = ids[#ids] else n = #ids + 1; id = smp:next() end
    else
      s:feed({ id })
      id = smp:next()
      n = 1
    end
    local dt = (doppler.clock() - t) / n
    for i = done + 1, done + n do if lat then lat[i] = dt end end
    done = done + n
  end
  return id
end

-- One run: prefill `prompt`, read the first id, then `steps` decode steps. Returns timings and counters.
function M.run_once(s, smp, prompt, steps)
  s:reset()
  local a = profile.snapshot(s)
  local t0 = doppler.clock()
  s:feed(prompt)
  local t_prefill = doppler.clock()
  local id = smp:next()
  local t_first = doppler.clock()
  local b = profile.snapshot(s)
  local lat = {}
  M.decode_steps(s, smp, id, steps, lat)
  local c = profile.snapshot(s)
  local decode_s = c.t - b.t
  local r = {
    prefill_s = t_prefill - t0, ttft_s = t_first - t0, decode_s = decode_s, latencies = lat,
    prefill_submits = b.submits - a.submits, prefill_readback = b.readback - a.readback,
  }
  if steps > 0 then
    local d = profile.delta(b, c, steps)
    r.submits_per_token, r.readback_per_token, r.upload_per_token = d.submits, d.readback_bytes, d.upload_bytes
    r.prefetch = { stages = d.prefetch_stages, late = d.prefetch_late, skipped = d.prefetch_skipped }
  end
  return r
end

-- Untimed runs of `steps` decode steps for at least `ms` milliseconds; returns how many. Why: a GPU that has
-- idled runs at a low clock and raises it only under load, and the first timed pass of a process came after
-- loading and recording alone: on the H200 one profiled pass read 4.76 GPU ms per token where the same model
-- reads 1.19 (every kernel ~4x slower, docs/BENCHMARKS.md 45a, 45d; the H100 showed it in sessions 31 and
-- 35), and doppler tune's candidates timed that way lost to the same plans timed later (45f).
function M.warm_up(s, smp, prompt, steps, ms)
  local runs, t_end = 0, doppler.clock() + ms / 1000
  while doppler.clock() < t_end do
    M.run_once(s, smp, prompt, steps)
    runs = runs + 1
  end
  return runs
end

-- GPU ms per kernel: the prompt (whole) and per decode step, after `warmup_ms` of untimed runs (returned: how
-- many). Leaves the profiler off and the plans dropped.
function M.profiled(s, smp, prompt, steps, warmup_ms)
  local dev = s.dev
  dev:profile(true)
  s:drop_plans()
  M.run_once(s, smp, prompt, 1)        -- records every shape with timestamp queries
  local warm = M.warm_up(s, smp, prompt, steps, warmup_ms or 0)
  profile.clear(dev)
  s:reset()
  s:feed(prompt)
  local id = smp:next()
  local pre = profile.kernel_ms(dev, 1)
  profile.clear(dev)
  M.decode_steps(s, smp, id, steps)
  local dec = profile.kernel_ms(dev, steps)
  dev:profile(false)
  s:drop_plans()
  collectgarbage()
  return pre, dec, warm
end

local function sum(t)
  local x = 0
  for _, v in pairs(t) do x = x + v end
  return x
end

local function basename(p) return (p:gsub("/+$", ""):match("([^/]+)$")) or p end

local COLUMNS = {
  { "model", function(r) return basename(r.model) end },
  { "quant", "quant" }, { "device", "device" }, { "hints", function(r) return hints_text(r.hints) end },
  { "prompt", "prompt_tokens" }, { "steps", "decode_tokens" },
  { "decode tok/s", "decode_tok_s", "%.1f" }, { "prefill tok/s", "prefill_tok_s", "%.1f" },
  { "TTFT ms", "ttft_ms", "%.2f" }, { "p50 ms", "p50_ms", "%.3f" }, { "p90 ms", "p90_ms", "%.3f" },
  { "submits/tok", "submits_per_token", "%.2f" }, { "readback B/tok", "readback_bytes_per_token", "%.1f" },
  { "GPU ms/tok", "gpu_ms_per_token", "%.3f" }, { "peak VRAM MB", function(r) return r.peak_vram_bytes / 1e6 end, "%.1f" },
}

-- A markdown table of result rows (the JSON objects).
function M.table(rows)
  local head, rule = {}, {}
  for i, c in ipairs(COLUMNS) do head[i], rule[i] = c[1], "---" end
  local lines = { "| " .. table.concat(head, " | ") .. " |", "| " .. table.concat(rule, " | ") .. " |" }
  for _, r in ipairs(rows) do
    local cells = {}
    for i, c in ipairs(COLUMNS) do
      local v = type(c[2]) == "function" and c[2](r) or r[c[2]]
      if v == nil then cells[i] = "-"
      elseif c[3] and type(v) == "number" then cells[i] = c[3]:format(v)
      else cells[i] = tostring(v):gsub("|", "\\|") end
    end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  return table.concat(lines, "\n")
end

-- The model of --model, its recipe (--recipe, else from its architecture) and the hints (the recipe's, then
-- --hint) from parsed options; compile.lua opens its model the same way.
function M.model_and_hints(o)
  if not o.model then error("--model PATH is required", 0) end
  local model = doppler.open_model(o.model)
  local recipe = o.recipe and recipes.load(o.recipe) or recipes.for_model(model, o.model)
  local h = hints.new()
  h:apply(recipe.hints, "recipe " .. recipe.name)
  h:apply_args(o.hint)
  return model, recipe, h
end

function M.main(mode, argv)
  local o = cli.parse(argv, M.options(mode))
  local t_load = doppler.clock()
  local model, recipe, h = M.model_and_hints(o)
  local P, N = o.prompt_tokens, o.tokens
  if P + math.max(N, o.profile_tokens) + 1 > h:get("context") then
    error(("%d prompt + %d decode positions exceed the context of %d (--hint context=N)"):format(
      P, math.max(N, o.profile_tokens), h:get("context")), 0)
  end
  local s = session.open(recipe, model, { hints = h })
  local smp = sampler.new(s, { temperature = o.temperature, top_k = o.top_k, top_p = o.top_p, seed = o.seed })
  local load_s = doppler.clock() - t_load
  local caps = s.dev:caps()
  local prompt = M.prompt_ids(P, s.cfg)
  if o.warmup_ms == nil then o.warmup_ms = caps.type == "cpu" and 0 or 300 end

  local pre_ms, dec_ms, profile_warm = {}, {}, nil
  if not o.no_profile and caps.timestamps then
    pre_ms, dec_ms, profile_warm = M.profiled(s, smp, prompt, o.profile_tokens, o.warmup_ms)
  end
  for _ = 1, o.warmup do M.run_once(s, smp, prompt, math.min(N, 2)) end
  if o.warmup == 0 then s:plan_for(1, false) end   -- at least the decode step is recorded before timing
  local warm = M.warm_up(s, smp, prompt, N, o.warmup_ms)

  local base = {
    mode = mode, model = o.model, recipe = recipe.name, quant = profile.quant(s), device = caps.name,
    driver = caps.driver, hints = set_hints(h), sampler = smp.greedy and "greedy" or
      ("temperature=%g top_k=%d top_p=%g seed=%d"):format(o.temperature, o.top_k, o.top_p, o.seed),
    prompt_tokens = P, decode_tokens = N, runs = o.runs, load_s = load_s, label = o.label,
    weights_bytes = s.weight_info.bytes, kv_bytes = s.kv_bytes, prefill_chunk = s.chunk,
    gpu_ms_per_kernel = dec_ms, gpu_ms_per_token = sum(dec_ms), prefill_gpu_ms_per_kernel = pre_ms,
    prefill_gpu_ms = sum(pre_ms), timestamps = caps.timestamps and not o.no_profile,
    warmup_ms = o.warmup_ms, warmup_runs = warm, profile_warmup_runs = profile_warm,
  }
  local rows = {}
  for run = 1, o.runs do
    local r = M.run_once(s, smp, prompt, N)
    local row = {}
    for k, v in pairs(base) do row[k] = v end
    local ms = {}
    for i, v in ipairs(r.latencies) do ms[i] = v * 1e3 end
    row.run = run
    row.prefill_tok_s = P / r.prefill_s
    row.ttft_ms = r.ttft_s * 1e3
    row.decode_tok_s = N > 0 and N / r.decode_s or nil
    row.p50_ms = M.percentile(ms, 0.5)
    row.p90_ms = M.percentile(ms, 0.9)
    if o.latencies then row.latencies_ms = ms end
    row.submits_per_token = r.submits_per_token
    row.readback_bytes_per_token = r.readback_per_token
    row.upload_bytes_per_token = r.upload_per_token
    if r.prefetch then
      row.prefetch_stages_per_token, row.prefetch_late_per_token = r.prefetch.stages, r.prefetch.late
      row.prefetch_skipped_per_token = r.prefetch.skipped
    end
    row.prefill_submits = r.prefill_submits
    row.peak_vram_bytes = profile.memory(s.dev).peak_bytes
    row.vram_held_bytes = profile.memory(s.dev).held_bytes
    if o.table then rows[#rows + 1] = row else print(json.encode(row)); io.stdout:flush() end
  end
  if o.table then print(M.table(rows)) end
  return 0
end

return M
