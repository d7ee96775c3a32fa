-- doppler tune --model PATH: times kernel variants and workgroup sizes on this device for this model and
-- stores the winners in the per-device tuning cache (doppler.tune), where every later run finds them as
-- its hint defaults (docs/TUNING.md).
--
-- Method: greedy coordinate descent over the tunable hints (KNOBS below), in order: each candidate value
-- of one knob is timed with the others at their best so far, and the fastest stays. A measurement is the
-- real model: a prefill of --prompt-tokens ids and --tokens decode steps (the GPU loop when decode_chunk
-- > 1), recorded with GPU timestamps around every dispatch (gpu/profiler, as recipes/bench/ does): the
-- score is GPU milliseconds per generated token plus the prefill's per --tokens. decode_chunk changes
-- submits rather than kernels, so it is scored by wall-clock time instead. The best of --runs
-- measurements counts. A candidate that fails (a workgroup the device cannot take) is reported and skipped.
-- A knob's winner must beat its default by tune.MARGIN, and a winner other than the default is measured again
-- after the default, where it must beat it once more (tune.decide).
--
-- --prefill tunes the prefill kernels instead (PREFILL_KNOBS: the tiled matrix kernel's tiles, K slices and
-- splits; the flash attention's tiles), scored by the GPU milliseconds of one prefill of --prompt-tokens (512
-- unless set: prefill_chunk's default, so the matrix kernels see the shapes of every full chunk). The cache
-- keeps the other knobs' winners (tune.write merges), so a decode tune and a prefill tune add up.
local doppler = require "doppler"
local cli = require "doppler.cli"
local hints = require "doppler.hints"
local session = require "doppler.session"
local sampler = require "doppler.sampler"
local recipes = require "doppler.recipes"
local profile = require "doppler.profile"
local json = require "doppler.json"
local tune = require "doppler.tune"
local lower = require "doppler.lower"

local spec = {
  usage = "doppler tune --model PATH [options]",
  about = "Times kernel variants on this device (GPU timestamps, the real model's decode step and prefill)\n" ..
          "and writes the winners to the tune cache (docs/TUNING.md); later runs use them as hint defaults.\n" ..
          "A value wins only if it beats the knob's default by 1 %, and again when both are measured once\n" ..
          "more; measured at the context a session with the same hints gets (hint context, 4096 unless set:\n" ..
          "the KV caches' size decides the plan).",
  options = {
    { "--model", "PATH", "model directory or GGUF file (required)" },
    { "--quick", nil, "a small candidate set (a few values of the main knobs)" },
    { "--json", nil, "print the result as one JSON object instead of a table" },
    { "--prefill", nil, "tune the prefill's kernels instead, scored by one prefill's GPU time" },
    { "--prompt-tokens", "N", "prompt length of a measurement (default 32; 512 with --prefill)", type = "int", min = 1 },
    { "--tokens", "N", "decode steps of a measurement (none with --prefill)", type = "int", default = 32, min = 1 },
    { "--runs", "N", "measurements per candidate (the best counts)", type = "int", default = 2, min = 1 },
    { "--warmup-ms", "MS", "untimed runs before each candidate is timed, at least this long (default: 300 " ..
      "on a GPU, 0 on a CPU device)", type = "int", min = 0 },
    { "--knobs", "LIST", "only these knobs (comma list; default: all that apply)" },
    { "--hint", "KEY=VALUE", "a fixed hint for every measurement (not tuned)", repeat_ = true },
    { "--dry-run", nil, "measure and print, but do not write the cache" },
  },
  epilog = "Knobs: gemv_wg, gemv_rows, gemv_unroll, gemv_multi_rows, gemv_q_wg, gemv_q_rows, gemv_q_unroll,\n" ..
           "gemv_q_x, q_matmul, q_matmul_head, q_matmul_glu, lm_head_groups, glu_down, glu_down_rows,\n" ..
           "attention_heads, attention_splits, attention_min_chunk, attention_unroll, side_prefetch,\n" ..
           "prefetch_groups, prefetch_lead, prefetch_max_mb, decode_chunk (and q_layout for quantised models:\n" ..
           "reloads the weights).\n" ..
           "Knobs with --prefill: gemm_cm_tile, gemm_cm_bk, gemm_cm_splits, attention_prefill_cm_split,\n" ..
           "attention_prefill_cm_rows, attention_prefill_cm_keys (devices with cooperative matrices),\n" ..
           "attention_prefill_lanes, attention_prefill_rows (the others).",
}

-- name -> candidates (full, quick, or for(ctx): this model's); applies(ctx) says whether the knob matters for this model;
-- reload: the weights must be uploaded again; wall: scored by wall-clock time (submits, not kernels), true or a
-- function of c (for this model and device).
local KNOBS = {
  { "q_matmul", full = { "fused", "dequant_f16" }, quick = { "fused", "dequant_f16" },
    applies = function(c) return c.quantised end },
  -- the LM head alone (a Q8_0 head in blocks on int8 x beat its f16 copy on the H100, a Q6_K one did not)
  { "q_matmul_head", full = { "fused", "dequant_f16" }, quick = { "fused", "dequant_f16" },
    applies = function(c) return c.quantised end },
  -- gate+up alone (in blocks on int8 x it beat its f16 copies on the H100, where the other GEMVs did not)
  { "q_matmul_glu", full = { "fused", "dequant_f16" }, quick = { "fused", "dequant_f16" },
    applies = function(c) return c.quantised end },
  { "q_layout", full = { "row_wise", "column_wise", "flat" }, reload = true,
    applies = function(c) return c.quantised end },
  { "gemv_wg", full = { 64, 128, 256, 512 }, quick = { 64, 128, 256 } },
  -- where the side prefetcher runs, GPU timestamps miss how these GEMVs share the GPU with its kernel: on the
  -- H100 gemv_rows=4 made Llama 3.2 1B Q4_K_M's kernels slower by their timestamps (1.145 -> 1.153 ms per
  -- token) and its decode faster (p50 1.259-1.268 -> 1.240-1.241 ms, docs/BENCHMARKS.md 31c): wall clock there
  { "gemv_rows", full = { 1, 2, 4, 8 }, quick = { 2, 4 }, wall = function(c) return c.side_queue end },
  { "gemv_unroll", full = { 1, 2, 4 }, quick = { 1, 2 } },
  -- gemv_multi's rows (q/k/v, float gate+up): on the H100 the built-in 2 was best or within 0.5 % on four
  -- models (docs/BENCHMARKS.md 35c); wall clock where the side prefetcher runs, as gemv_rows
  { "gemv_multi_rows", full = { 1, 2, 4, 8 }, quick = { 2, 4 }, wall = function(c) return c.side_queue end },
  { "gemv_q_wg", full = { 64, 128, 256, 512 }, quick = { 128, 256 }, applies = function(c) return c.quantised end },
  { "gemv_q_rows", full = { 0, 1, 2, 4, 8 }, quick = { 0, 8 }, applies = function(c) return c.quantised end },
  { "gemv_q_unroll", full = { 1, 2, 4 }, quick = { 1, 2 }, applies = function(c) return c.quantised end },
  -- two-plane int8 activations: as accurate as f16 ones, faster or not by device and matrix (auto: per
  -- matrix, lower.gemv_q_x); one plane is lossy: not tuned
  { "gemv_q_x", full = { "auto", "act", "q8x2" }, applies = function(c) return c.quantised and c.integer_dot end },
  -- the LM head's workgroups: all of them resident at once is the aim, and how many are depends on the
  -- device, the head's registers and the side prefetcher's workgroups beside it (H100, 31c: Gemma 3 1B
  -- Q4_K_M's head 0.181 ms per token at 1024, 0.147 at 924; Llama 3.2 1B's best near 528); wall clock where
  -- the side prefetcher runs, as gemv_rows (by timestamps 960 and 2048 tied for Gemma, 31d; by wall clock
  -- 960 won, 31c)
  { "lm_head_groups", full = { 256, 512, 768, 960, 1024, 2048, 4096 }, quick = { 512, 960, 1024 },
    wall = function(c) return c.side_queue end },
  -- the fused MLP (fusion glu_down): on or off, and its rows of h per workgroup (8 lanes each): where the side
  -- prefetcher runs, wall clock, as gemv_rows. Float models: auto leaves them unfused, `on` runs
  -- fused/glu_down_float.comp (as fast as the two dispatches on the H100, docs/BENCHMARKS.md 36c)
  { "glu_down", ["for"] = function(c) return c.quantised and { "auto", "off" } or { "auto", "on" } end,
    wall = function(c) return c.side_queue end },
  { "glu_down_rows", full = { 16, 32, 64 }, quick = { 32, 64 }, wall = function(c) return c.side_queue end,
    applies = function(c) return c.quantised end },
  -- one q head per workgroup (auto) or all of a kv head's in one (the auto before run 21, docs/BENCHMARKS.md)
  { "attention_heads", ["for"] = function(c) return { "auto", tostring(c.kv_group) } end,
    applies = function(c)   -- a group of 6 (Qwen 2 1.5B) has no hint value for "all": not tuned
      if c.kv_group <= 1 then return false end
      for _, v in ipairs(hints.known.attention_heads.values) do if v == tostring(c.kv_group) then return true end end
      return false
    end },
  -- 128 and 256, past the auto's 64: for a tune at a long context (--hint context, --prompt-tokens), where 64 chunks
  -- beat 32 by 1.32x after 16000 tokens (H100, docs/BENCHMARKS.md 55a); more have not been timed there
  { "attention_splits", full = { 0, 8, 16, 32, 64, 128, 256 }, quick = { 0, 16 } },
  { "attention_min_chunk", full = { 0, 16, 32, 64, 128 } },
  { "attention_unroll", full = { "auto", "1", "4" }, quick = { "auto", "1" } },
  -- the side prefetcher (gpu/prefetch.h): its kernel runs beside the main queue's, so wall clock scores it
  { "side_prefetch", full = { "auto", "off" }, quick = { "auto", "off" }, wall = true,
    applies = function(c) return c.side_queue end },
  { "prefetch_groups", full = { 0, 16, 48, 64 }, wall = true, applies = function(c) return c.side_queue end },
  { "prefetch_lead", full = { 0, 1, 2 }, wall = true, applies = function(c) return c.side_queue end },
  { "prefetch_max_mb", full = { 0, 48 }, wall = true, applies = function(c) return c.side_queue end },
  -- not prefetch_skip: on the H200 the side kernel never reached a stage late (docs/BENCHMARKS.md 47a), so its
  -- candidates would only spend the tune's time on decodes that skip nothing
  { "decode_chunk", full = { 1, 8, 16, 32 }, quick = { 1, 16 }, wall = true },
}

-- The prefill's knobs (--prefill). Those of gemm_cm and attention_prefill_cm apply where the lowering can run those
-- kernels (cooperative matrices: lower/linear.lua, lower/attention.lua), the flash kernel's elsewhere. The
-- attention's three are tuned in the order their autos depend on each other: the split first (the auto's rows
-- and keys follow it), then the row tiles, then the keys per tile. A candidate whose tiles do not fit the
-- device's shared memory fails and is skipped. Why tune them: their autos follow the shapes and the shared memory
-- alone, and on the H100 a matrix tile other than the auto made Qwen3 0.6B's 512-token prefill 10 % faster
-- (9.37 against 10.47 GPU ms; docs/BENCHMARKS.md 57a).
local function coopmat(c) return c.coopmat end
local function flash(c) return not c.coopmat end
local PREFILL_KNOBS = {
  { "gemm_cm_tile", full = { "auto", "64x64", "64x128", "128x64", "128x128" }, quick = { "auto", "64x64" },
    applies = coopmat },
  { "gemm_cm_bk", full = { 0, 32, 64 }, applies = coopmat },
  { "gemm_cm_splits", full = { 0, 1, 2, 4 }, applies = coopmat },
  { "attention_prefill_cm_split", full = { 0, 1, 2, 4 }, quick = { 0, 1 }, applies = coopmat },
  { "attention_prefill_cm_rows", full = { 0, 1, 2, 4, 8 }, quick = { 0, 1 }, applies = coopmat },
  { "attention_prefill_cm_keys", full = { 0, 16, 32, 64 }, quick = { 0, 16 }, applies = coopmat },
  { "attention_prefill_lanes", full = { 0, 4, 8, 16, 32 }, quick = { 0, 4 }, applies = flash },
  { "attention_prefill_rows", full = { 0, 4, 8, 16, 32 }, quick = { 0, 8 }, applies = flash },
}

local function prompt_ids(n, cfg)
  local ids = {}
  for i = 1, n do ids[i] = (i * 7919 + 104729) % cfg.vocab_size end
  return ids
end

local function sum(t)
  local x = 0
  for _, v in pairs(t) do x = x + v end
  return x
end

-- Feeds the prompt, then `steps` decode steps (the GPU loop with decode_chunk > 1).
-- The prompt fed from an empty cache and the first id sampled.
local function start(s, smp, prompt)
  s:reset()
  s:feed(prompt)
  return smp:next()
end

-- `steps` tokens decoded after id: chunks of the hint decode_chunk (the GPU loop), or one step at a time.
local function decode(s, smp, id, steps)
  local chunk = s.hints:get("decode_chunk")
  local done = 0
  while done < steps do
    if chunk > 1 then
      local ids, why = s:decode_chunk(id, chunk, steps - done, {})
      if why == 2 then done = done + #ids; id = ids[#ids] or id
      else done = done + #ids + 1; id = smp:next() end
    else
      s:feed({ id })
      id = smp:next()
      done = done + 1
    end
  end
end

local function generate(s, smp, prompt, steps) decode(s, smp, start(s, smp, prompt), steps) end

-- Untimed decode before a candidate is timed: one run has recorded every shape (the CPU builds the plans, the
-- GPU idles), then runs go on for warmup_ms, so that a GPU whose clock fell meanwhile times the candidate at
-- full clock. Returns the untimed runs, the recording one included. Why: the first wall-clock candidate of a
-- tune once read 1.95 ms per token against <= 1.55 for every later one (Gemma 3 1B Q4_K_M on the H100,
-- docs/BENCHMARKS.md 33f), and so lost its knob; and candidates scored by GPU timestamps depend on the clock
-- as much (the first of a tune read 3.94 ms per token, the same plan two candidates later 1.60, and the next
-- knobs' defaults 5-7 % above their second candidates: H200, docs/BENCHMARKS.md 45f), while each knob's
-- default is measured first.
local function warm_up(s, smp, prompt, o)
  local warm_until, runs = doppler.clock() + o.warmup_ms / 1000, 1
  while doppler.clock() < warm_until do
    generate(s, smp, prompt, o.steps)
    runs = runs + 1
  end
  return runs
end

-- One measurement: { score, decode_ms (GPU per token), prefill_ms (GPU), wall_ms (per decode token),
-- warmup_runs }. o.steps decode steps follow the prompt; with none (--prefill) the score is prefill_ms.
local function measure(s, smp, o, wall)
  local dev = s.dev
  local prompt = prompt_ids(o.prompt_tokens, s.cfg)
  if wall then
    generate(s, smp, prompt, o.steps)
    local warmup_runs = warm_up(s, smp, prompt, o)
    local best = math.huge
    for _ = 1, o.runs do
      local id = start(s, smp, prompt)
      local t0 = doppler.clock()
      decode(s, smp, id, o.tokens)
      best = math.min(best, (doppler.clock() - t0) * 1000 / o.tokens)
    end
    return { score = best, wall_ms = best, warmup_runs = warmup_runs }
  end
  dev:profile(true)
  s:drop_plans()
  generate(s, smp, prompt, math.min(o.steps, 1))  -- records every shape with timestamp queries
  local warmup_runs = warm_up(s, smp, prompt, o)
  local best
  for _ = 1, o.runs do
    profile.clear(dev)
    local id = start(s, smp, prompt)
    local pre = sum(profile.kernel_ms(dev, 1))
    local r = { prefill_ms = pre, score = pre, warmup_runs = warmup_runs }
    if o.steps > 0 then
      profile.clear(dev)
      decode(s, smp, id, o.steps)
      r.decode_ms = sum(profile.kernel_ms(dev, o.steps))
      r.score = r.decode_ms + pre / o.steps
    end
    if not best or r.score < best.score then best = r end
  end
  dev:profile(false)
  s:drop_plans()
  collectgarbage()
  return best
end

local function fmt_ms(x) return x and ("%.4f"):format(x) or "-" end

local function main(argv)
  local o = cli.parse(argv, spec)
  if not o.model then error("tune: --model PATH is required (see --help)", 0) end
  o.prompt_tokens = o.prompt_tokens or (o.prefill and 512 or 32)
  o.steps = o.prefill and 0 or o.tokens            -- decode steps after each measurement's prompt
  local knobs = o.prefill and PREFILL_KNOBS or KNOBS
  local model = doppler.open_model(o.model)
  local recipe = recipes.for_model(model, o.model)
  local dev = doppler.device()
  local caps = dev:caps()
  local key = tune.key(caps, model)
  if o.warmup_ms == nil then o.warmup_ms = caps.type == "cpu" and 0 or 300 end   -- a clock to raise: a GPU's
  local quantised = false
  for _, t in ipairs(model:tensors()) do
    if #t.shape >= 2 and lower.quant_types[t.dtype] then quantised = true end
  end
  local only
  if o.knobs then
    only = {}
    for k in o.knobs:gmatch("[^,%s]+") do
      local found = false
      for _, kn in ipairs(knobs) do if kn[1] == k then found = true end end
      if not found then
        local names = {}
        for i, kn in ipairs(knobs) do names[i] = kn[1] end
        error(("tune: --knobs: no knob '%s'%s; knobs: %s"):format(k, o.prefill and " with --prefill" or "",
              table.concat(names, ", ")), 0)
      end
      only[k] = true
    end
  end

  local h = hints.new()
  h:apply(recipe.hints, "recipe " .. recipe.name)
  h:apply_args(o.hint)
  local fixed = {}
  for _, kv in ipairs(o.hint or {}) do fixed[kv:match("^([%w_]+)=")] = true end
  h:set("tune", "off", "doppler tune")           -- measure from the built-in defaults, never an old cache
  local kv_heads = key.kv_heads > 0 and key.kv_heads or key.heads
  local c = { quantised = quantised, integer_dot = caps.integer_dot,
              coopmat = caps.coopmat_nv and caps.subgroup_size == 32 and caps.coopmat_shape ~= nil,
              side_queue = caps.side_queue and caps.type ~= "cpu",
              kv_group = kv_heads > 0 and key.heads // kv_heads or 1 }
  local plan = {}
  for _, kn in ipairs(knobs) do
    local cands = kn["for"] and kn["for"](c) or o.quick and kn.quick or (not o.quick and kn.full)
    if cands and (not kn.applies or kn.applies(c)) and not fixed[kn[1]] and (not only or only[kn[1]]) then
      -- the value it starts from (its default) is measured first, so that a winner must beat it (tune.pick)
      local start = h:get(kn[1])
      local with = { start }
      for _, v in ipairs(cands) do
        if tostring(v) ~= tostring(start) then with[#with + 1] = v end
      end
      cands = with
      local wall = kn.wall
      if type(wall) == "function" then wall = wall(c) end
      plan[#plan + 1] = { name = kn[1], cands = cands, reload = kn.reload, wall = wall }
    end
  end
  local total = 0
  for _, k in ipairs(plan) do total = total + #k.cands end
  local log = function(...) io.stderr:write(string.format(...)) end
  -- The context of a session that runs with these hints (hint context, 4096 unless set), or a longer one if a
  -- measurement needs it. Why not just what the measurements need: the KV caches' size decides the plan. A
  -- sliding-window layer keeps min(window + 128, context) slots, and below window + T - 1 the attention
  -- prologue stays unfused (fusions.lua, attention_rope). Gemma 3 1B's 512-key window made a tune with
  -- prompt + tokens + 8 positions time 22 of its 26 layers with another plan than the user's: ~1.40 ms per
  -- token where `doppler run` decodes at ~1.14 (H100, docs/BENCHMARKS.md 44f).
  local context = math.max(h:get("context"), o.prompt_tokens + o.steps + 8)
  log("tune: %s on %s (%s), %d %sknobs, %d candidates, context %d%s\n", o.model, key.device, key.driver, #plan,
      o.prefill and "prefill " or "", total, context, o.quick and " (--quick)" or "")

  local s
  local function open_session()
    if s then s = nil; collectgarbage() end
    s = session.open(recipe, model, { hints = h, context = context })
  end
  open_session()
  local smp = sampler.new(s, { temperature = 0 })

  local rows, n_done = {}, 0
  local best_values = {}
  -- knob k at value v measured: its row (ok, score, ...; check marks a check's) is added to rows and returned;
  -- progress(row) writes the line on stderr
  local function measure_value(k, v, progress, check)
    h:set(k.name, v, "doppler tune")
    local ok, r = pcall(function()
      if k.reload then open_session(); smp = sampler.new(s, { temperature = 0 }) end
      s:drop_plans()
      return measure(s, smp, o, k.wall)
    end)
    local row = { knob = k.name, value = v, ok = ok, check = check }
    if ok then
      row.score, row.decode_ms, row.prefill_ms, row.wall_ms = r.score, r.decode_ms, r.prefill_ms, r.wall_ms
      row.warmup_runs = r.warmup_runs
    else
      row.error = tostring(r)
    end
    rows[#rows + 1] = row
    progress(row)
    return row
  end
  local function outcome(k, row)
    if not row.ok then return "failed: " .. row.error end
    if o.prefill then return ("%s ms GPU (a prefill of %d tokens)"):format(fmt_ms(row.score), o.prompt_tokens) end
    return ("%s ms/token%s"):format(fmt_ms(row.score), k.wall and " wall" or " GPU")
  end
  for _, k in ipairs(plan) do
    local start = h:get(k.name)
    local knob_rows = {}
    for _, v in ipairs(k.cands) do
      n_done = n_done + 1
      measure_value(k, v, function(row)
        if row.ok then knob_rows[#knob_rows + 1] = row end
        log("[%d/%d] %s=%s: %s%s\n", n_done, total, k.name, tostring(v), outcome(k, row),
            row.ok and (" (best %s=%s)"):format(k.name, tostring((tune.pick(start, knob_rows)))) or "")
      end)
    end
    -- a winner other than the start is measured again after the start (tune.decide says why)
    local function remeasure(v)
      return measure_value(k, v, function(row)
        log("[check] %s=%s: %s\n", k.name, tostring(v), outcome(k, row))
      end, true).score
    end
    local best_v, kept, checked = tune.decide(start, knob_rows, remeasure)
    if kept and #checked > 0 then
      log("%s: kept %s, %s was not %d %% faster when both were measured again\n", k.name, tostring(start),
          tostring(checked[2].value), math.floor(tune.MARGIN * 100 + 0.5))
    elseif kept then
      log("%s: kept %s, no candidate %d %% faster\n", k.name, tostring(start), math.floor(tune.MARGIN * 100 + 0.5))
    elseif #checked > 0 then
      log("%s: picked %s, at least %d %% faster than %s when both were measured again\n", k.name,
          tostring(best_v), math.floor(tune.MARGIN * 100 + 0.5), tostring(start))
    end
    h:set(k.name, best_v, "doppler tune")
    if k.reload then open_session(); smp = sampler.new(s, { temperature = 0 }) end
    best_values[k.name] = best_v
  end

  local path, kept
  if not o.dry_run and next(best_values) then
    path, kept = tune.write(key, best_values, { model = o.model, results = rows })
  end
  if o.json then
    print(json.encode({ key = key, hints = best_values, results = rows, cache = path, context = context,
                        mode = o.prefill and "prefill" or "decode", prompt_tokens = o.prompt_tokens, kept = kept },
                      { digits = 6 }))
  else
    print(("| knob | value | score %s | decode GPU ms/token | prefill GPU ms | wall ms/token | |"):format(
          o.prefill and ("ms (a prefill of %d tokens)"):format(o.prompt_tokens) or "ms/token"))
    print("|---|---|---|---|---|---|---|")
    for _, r in ipairs(rows) do
      local win = best_values[r.knob] == r.value and "best" or ""
      if not r.ok then win = "failed" end
      if r.check then win = "check" .. (win ~= "" and ", " .. win or "") end
      print(("| %s | %s | %s | %s | %s | %s | %s |"):format(r.knob, tostring(r.value), fmt_ms(r.score),
            fmt_ms(r.decode_ms), fmt_ms(r.prefill_ms), fmt_ms(r.wall_ms), win))
    end
    local keys = {}
    for k in pairs(best_values) do keys[#keys + 1] = k end
    table.sort(keys)
    for i, k in ipairs(keys) do keys[i] = k .. "=" .. tostring(best_values[k]) end
    print("")
    print("tuned: " .. (#keys > 0 and table.concat(keys, " ") or "nothing"))
  end
  if path then
    log("tune: wrote %s%s\n", path, #kept > 0 and (" (kept from the file there: %s)"):format(table.concat(kept, ", "))
        or "")
  end
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("doppler tune: ", tostring(err), "\n")
  os.exit(1)
end
