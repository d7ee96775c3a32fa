-- `doppler tune` and the tune cache (doppler.tune, docs/TUNING.md) on the gemma3-tiny fixture, in a
-- private cache directory (the shared one must not hand tuned hints to other tests):
--   tune --quick writes the cache file; a second process's --show-hints shows the tuned values with source
--   "tune (FILE)", below --hint; tune=off ignores the cache; generation with tuned (non-default) hints
--   gives the ids of the defaults; a corrupt, stale or invalid cache file is a warning naming the file,
--   the run goes on with the defaults; --help and a bad --knobs value; --warmup-ms (the untimed decode before
--   each candidate, scored by wall clock or by GPU timestamps); a winner beats the knob's default by 1 %
--   (tune.pick), and a winner other than the default beats it again when both are measured once more
--   (tune.decide); the context the candidates run at (hint context's, or longer if they need it); --prefill (the
--   prefill's knobs, scored by one prefill's GPU time); a tune keeps the cache's other winners, a stale file is
--   replaced.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local tune = require "doppler.tune"

local MODEL = check.fixtures .. "/models/gemma3-tiny"
local dir = os.tmpname()
os.remove(dir)
assert(os.execute(("mkdir -p '%s/tune'"):format(dir)))
-- compiled kernels from the shared cache, so that this test compiles little
local shared = os.getenv("DOPPLER_CACHE_DIR")
if shared then os.execute(("cp '%s'/*.spv '%s'/ 2>/dev/null"):format(shared, dir)) end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function run(args)
  local err = os.tmpname()
  local parts = { "DOPPLER_CACHE_DIR=" .. q(dir), q(check.bin) }
  for _, a in ipairs(args) do parts[#parts + 1] = q(a) end
  local p = assert(io.popen(table.concat(parts, " ") .. " 2>" .. err, "r"))
  local out = p:read("a")
  local ok = p:close()
  local e = check.read_file(err)
  os.remove(err)
  return ok, out, e
end
local function must(args)
  local ok, out, e = run(args)
  if not ok then error("doppler " .. table.concat(args, " ") .. " failed:\n" .. e, 2) end
  return out, e
end

local function tune_files()
  local p = assert(io.popen(("ls '%s/tune'"):format(dir)))
  local l = {}
  for f in p:lines() do if f:match("%.json$") then l[#l + 1] = dir .. "/tune/" .. f end end
  p:close()
  return l
end

local function hint_line(out, key)
  return out:match("\n" .. key .. "%s*=[^\n]*") or out:match("^" .. key .. "%s*=[^\n]*")
end

-- tune --json's one object as tables
local function json_of(out)
  local f = os.tmpname()
  local h = assert(io.open(f, "w"))
  h:write(out)
  h:close()
  local t = doppler.read_json(f)
  os.remove(f)
  return t
end

check.case("a knob's winner must beat the value it started from by the margin (tune.pick)", function()
  local function rows(t)
    local r = {}
    for i = 1, #t, 2 do r[#r + 1] = { value = t[i], score = t[i + 1] } end
    return r
  end
  check.eq(tune.MARGIN, 0.01, "1 %")
  local v, kept = tune.pick(0, rows({ 0, 1.000, 8, 0.995, 16, 1.020 }))
  check.eq(v, 0, "0.5 % faster is not enough")
  check.eq(kept, true, "and says so")
  v, kept = tune.pick(0, rows({ 0, 1.000, 8, 0.985, 16, 0.989 }))
  check.eq(v, 8, "1.5 % faster wins")
  check.eq(kept, false, "nothing kept")
  check.eq(tune.pick("auto", rows({ "auto", 1.000, "1", 0.990 })), "1", "exactly the margin wins")
  check.eq(tune.pick(0, rows({ 0, 0.900, 8, 0.950 })), 0, "the start itself is best")
  check.eq(tune.pick(0, { { value = 0 }, { value = 8, score = 0.999 } }), 8, "the start failed: the best measured")
  check.eq(tune.pick(4, rows({ 8, 1.1, 16, 1.0 })), 16, "the start not measured: the best measured")
  check.eq(tune.pick(4, { { value = 8 }, { value = 16 } }), 4, "none measured: the start")
end)

check.case("a winner other than the start is measured again after the start, and must win again (tune.decide)",
           function()
  local function rows(t)
    local r = {}
    for i = 1, #t, 2 do r[#r + 1] = { value = t[i], score = t[i + 1] } end
    return r
  end
  -- remeasure from a table of new scores, recording the order it was asked in
  local function again(scores)
    local asked = {}
    return function(v) asked[#asked + 1] = v; return scores[tostring(v)] end, asked
  end
  local re, asked = again({ ["0"] = 1.000, ["128"] = 0.985 })
  local v, kept, checked = tune.decide(0, rows({ 0, 1.012, 64, 1.000, 128, 0.998 }), re)
  check.eq(v, 128, "the winner holds its lead in the check")
  check.eq(kept, false, "nothing kept")
  check.eq(#asked, 2, "two measurements")
  check.eq(asked[1], 0, "the start first")
  check.eq(asked[2], 128, "then the winner")
  check.eq(#checked, 2, "the check's rows")
  check.eq(checked[1].score, 1.000, "the start's new score")
  check.eq(checked[2].score, 0.985, "the winner's new score")
  re, asked = again({ ["0"] = 1.000, ["128"] = 0.995 })
  v, kept, checked = tune.decide(0, rows({ 0, 1.012, 64, 1.000, 128, 0.998 }), re)
  check.eq(v, 0, "a lead of 1.4 % that shrinks to 0.5 % in the check: the start stays")
  check.eq(kept, true, "and says so")
  check.eq(#checked, 2, "with the check's rows")
  re, asked = again({ ["auto"] = 1.000, ["fused"] = 1.003 })
  v, kept = tune.decide("auto", rows({ "auto", 1.020, "fused", 1.000 }), re)
  check.eq(v, "auto", "the winner slower than the start in the check: the start stays")
  check.eq(kept, true, "kept")
  re, asked = again({})
  v, kept, checked = tune.decide(0, rows({ 0, 1.000, 8, 0.995 }), re)
  check.eq(v, 0, "the start wins by the margin rule: no check")
  check.eq(kept, true, "a faster candidate lost to the margin")
  check.eq(#asked, 0, "nothing measured again")
  check.eq(#checked, 0, "no check rows")
  v, kept, checked = tune.decide(0, rows({ 0, 0.900, 8, 0.950 }), re)
  check.eq(v, 0, "the start is best: no check")
  check.eq(kept, false, "nothing lost")
  check.eq(#asked, 0, "nothing measured again")
  v = tune.decide(0, { { value = 0 }, { value = 8, score = 0.999 } }, re)
  check.eq(v, 8, "the start failed: the best measured, unchecked")
  check.eq(#asked, 0, "nothing measured again")
  v, kept = tune.decide(0, rows({ 0, 1.000, 8, 0.980 }), (again({ ["8"] = 0.970 })))
  check.eq(v, 8, "the start fails in the check: the winner as measured")
  check.eq(kept, false, "nothing kept")
  v, kept = tune.decide(0, rows({ 0, 1.000, 8, 0.980 }), (again({ ["0"] = 1.000 })))
  check.eq(v, 0, "the winner fails in the check: the start stays")
  check.eq(kept, true, "kept")
end)

local cache_file
check.case("tune --quick --json writes the cache file", function()
  local out, e = must({ "tune", "--model", MODEL, "--quick", "--tokens", "4", "--prompt-tokens", "6", "--runs", "1", "--json" })
  check.truthy(out:match('^{.*"hints":{') ~= nil, "one JSON object with the hints")
  check.truthy(e:match("%[1/%d+%]") ~= nil, "progress lines on stderr")
  local files = tune_files()
  check.eq(#files, 1, "cache files")
  cache_file = files[1]
  check.truthy(e:find(cache_file, 1, true) ~= nil, "names the file it wrote")
  local t = doppler.read_json(cache_file)
  check.eq(t.version, tune.VERSION, "version")
  check.truthy(t.hints.gemv_wg ~= nil and t.hints.decode_chunk ~= nil, "winners stored")
  check.eq(t.key.arch, "Gemma3ForCausalLM", "key: architecture")
  check.eq(t.key.hidden, 64, "key: hidden size")
  -- the KV caches' size decides the plan (a sliding layer's attention prologue is fused only where its cache
  -- holds the window): the candidates are timed at the context a session with these hints gets
  local res = json_of(out)
  check.eq(res.context, 4096, "measured at hint context's default, not at prompt + tokens")
  check.truthy(e:find("context 4096", 1, true) ~= nil, "the context on stderr")
  -- every knob's rows: its candidates (the start first), then the check's two rows where a candidate other than
  -- the start won; the hint stored is what tune.decide makes of them
  local knobs, order = {}, {}
  for _, r in ipairs(res.results) do
    if not knobs[r.knob] then knobs[r.knob] = { first = {}, check = {} }; order[#order + 1] = r.knob end
    local k = knobs[r.knob]
    check.eq(order[#order], r.knob, "a knob's rows are together")
    if r.check then k.check[#k.check + 1] = r
    else check.eq(#k.check, 0, r.knob .. ": the check comes after the candidates"); k.first[#k.first + 1] = r end
  end
  local n_checks = 0
  for _, name in ipairs(order) do
    local k = knobs[name]
    local start = k.first[1].value
    local winner = tune.pick(start, k.first)
    if #k.check > 0 then
      n_checks = n_checks + 1
      check.eq(#k.check, 2, name .. ": the check measures two values")
      check.eq(tostring(k.check[1].value), tostring(start), name .. ": the start first")
      check.eq(tostring(k.check[2].value), tostring(winner), name .. ": then the winner")
    end
    local scores = {}
    for _, r in ipairs(k.check) do scores[tostring(r.value)] = r.score end
    local expect = tune.decide(start, k.first, function(v) return scores[tostring(v)] end)
    check.eq(tostring(res.hints[name]), tostring(expect), name .. ": the stored value is tune.decide's")
  end
  check.eq(select(2, e:gsub("%[check%]", "")), 2 * n_checks, "a [check] line per measurement of a check")
end)

check.case("the tuned session's context: hint context, or what the measurements need where that is longer", function()
  for _, c in ipairs({ { 64, 64 }, { 16, 18 } }) do
    local out = must({ "tune", "--model", MODEL, "--knobs", "decode_chunk", "--quick", "--tokens", "4",
                       "--prompt-tokens", "6", "--runs", "1", "--dry-run", "--json", "--hint", "context=" .. c[1] })
    check.eq(json_of(out).context, c[2], "context=" .. c[1])
  end
end)

check.case("a table by default; --help; an unknown knob is an error listing the knobs", function()
  local out = must({ "tune", "--model", MODEL, "--quick", "--tokens", "2", "--prompt-tokens", "4", "--runs", "1",
                     "--knobs", "gemv_rows", "--dry-run" })
  check.truthy(out:match("| knob | value |") ~= nil, "a markdown table")
  check.truthy(out:match("tuned: gemv_rows=%d") ~= nil, "the summary line")
  -- gemv_rows is scored by wall clock where the side prefetcher runs (a side queue, not a CPU device)
  local caps = doppler.device():caps()
  if caps.side_queue and caps.type ~= "cpu" then
    check.truthy(out:match("| gemv_rows | %d | [%d.]+ | %- | %- | [%d.]+ |") ~= nil, "scored by wall clock here")
  else
    check.truthy(out:match("| gemv_rows | %d | [%d.]+ | [%d.]+ | [%d.]+ | %- |") ~= nil, "scored by GPU timestamps")
  end
  local help = must({ "tune", "--help" })
  check.truthy(help:match("doppler tune %-%-model PATH") ~= nil, "--help")
  check.truthy(help:match("%-%-warmup%-ms MS") ~= nil, "--help names --warmup-ms")
  local ok, _, e = run({ "tune", "--model", MODEL, "--knobs", "warp_speed" })
  check.truthy(not ok, "bad knob fails")
  check.truthy(e:match("no knob 'warp_speed'") and e:match("gemv_wg"), "names the knob and lists the valid ones")
end)

check.case("a candidate decodes untimed for --warmup-ms first (one run at 0, the default on a CPU), whether " ..
           "scored by wall clock or by GPU timestamps", function()
  local function rows(knob, extra)
    local args = { "tune", "--model", MODEL, "--quick", "--tokens", "2", "--prompt-tokens", "4", "--runs", "1",
                   "--knobs", knob, "--dry-run", "--json" }
    for _, a in ipairs(extra) do args[#args + 1] = a end
    local tmp = os.tmpname()                     -- doppler.read_json reads files
    local f = assert(io.open(tmp, "wb"))
    f:write((must(args)))                       -- stdout only
    f:close()
    local t = doppler.read_json(tmp)
    os.remove(tmp)
    check.truthy(#t.results >= 2, knob .. "'s candidates")
    return t.results
  end
  local cpu = doppler.device():caps().type == "cpu"
  -- decode_chunk is scored by wall clock, attention_splits by GPU timestamps (the kernels' time)
  for _, knob in ipairs({ "decode_chunk", "attention_splits" }) do
    local wall = knob == "decode_chunk"
    for _, r in ipairs(rows(knob, {})) do
      check.eq(r.wall_ms ~= nil, wall, knob .. (wall and " is scored by wall clock" or " is scored by GPU time"))
      check.truthy(r.warmup_runs ~= nil, knob .. ": the untimed runs are reported")
      if cpu then check.eq(r.warmup_runs, 1, knob .. ": the CPU device's default: no warm-up beyond the one run")
      else check.truthy(r.warmup_runs >= 2, knob .. ": the default's untimed runs: the recording one, the warm-up") end
    end
    for _, r in ipairs(rows(knob, { "--warmup-ms", "0" })) do
      check.eq(r.warmup_runs, 1, knob .. ", --warmup-ms 0: the one run")
    end
    -- the warm-up's clock starts after the run that records the shapes, so any positive time adds a run
    for _, r in ipairs(rows(knob, { "--warmup-ms", "1" })) do
      check.truthy(r.warmup_runs >= 2, ("%s, --warmup-ms 1: %d untimed runs"):format(knob, r.warmup_runs))
    end
  end
  local ok, _, e = run({ "tune", "--model", MODEL, "--warmup-ms", "-1" })
  check.truthy(not ok and e:match("%-%-warmup%-ms") ~= nil, "a negative --warmup-ms is refused, naming it")
end)

-- A cache with values that are surely not the built-in ones.
local TUNED = { gemv_wg = 32, gemv_rows = 8, attention_splits = 8, attention_min_chunk = 8, decode_chunk = 5,
                lm_head_groups = 3 }
local function write_cache(mutate)
  local t = doppler.read_json(cache_file)
  t.hints = {}
  for k, v in pairs(TUNED) do t.hints[k] = v end
  if mutate then mutate(t) end
  local f = assert(io.open(cache_file, "wb"))
  f:write(require("doppler.json").encode(t))
  f:close()
end

check.case("--show-hints in another process: tuned values, source tune (FILE), below --hint; tune=off", function()
  write_cache()
  local out = must({ "run", "--model", MODEL, "--show-hints" })
  for k, v in pairs(TUNED) do
    local line = hint_line(out, k)
    check.truthy(line and line:match("= " .. v .. "%s") and line:find("(tune (" .. cache_file .. "))", 1, true),
                 k .. " from the cache: " .. tostring(line))
  end
  local over = must({ "run", "--model", MODEL, "--show-hints", "--hint", "gemv_wg=256" })
  check.truthy(hint_line(over, "gemv_wg"):match("= 256%s+%(%-%-hint%)"), "--hint wins over the cache")
  check.truthy(hint_line(over, "gemv_rows"):find("tune (", 1, true), "the other tuned values stay")
  local off = must({ "run", "--model", MODEL, "--show-hints", "--hint", "tune=off" })
  check.truthy(hint_line(off, "gemv_wg"):match("= 0%s+%(default%)"), "tune=off: the built-in value")
end)

check.case("generation with tuned hints gives the ids of the defaults", function()
  write_cache()
  local args = { "run", "--model", MODEL, "--ids", "2,10,20,30,7", "--max-tokens", "24", "--print-ids", "--quiet" }
  local tuned = must(args)
  local off = table.move(args, 1, #args, 1, {})
  off[#off + 1], off[#off + 2] = "--hint", "tune=off"
  local default = must(off)
  local ids = check.parse_ids(tuned)
  check.eq(#ids, 24, "ids generated")
  check.eq(check.join(ids), check.join(check.parse_ids(default)), "ids, tuned vs default")
end)

local function expect_warning(mutate_text, want, what)
  local f = assert(io.open(cache_file, "wb"))
  f:write(mutate_text)
  f:close()
  local ok, out, e = run({ "run", "--model", MODEL, "--show-hints" })
  check.truthy(ok, what .. ": the run goes on")
  check.truthy(e:find("warning: " .. cache_file, 1, true) ~= nil, what .. ": a warning naming the file: " .. e)
  check.truthy(e:find(want, 1, true) ~= nil, what .. ": says why (" .. want .. "): " .. e)
  check.truthy(hint_line(out, "gemv_wg"):match("%(default%)"), what .. ": defaults apply")
end

check.case("a corrupt, stale or invalid cache file: a warning naming it, then the defaults", function()
  write_cache()
  local good = check.read_file(cache_file)
  expect_warning("{ not json", "invalid JSON", "corrupt")
  expect_warning("[1, 2]", "JSON object", "not an object")
  expect_warning(good:gsub('"version":1', '"version":99'), "version 99", "another version")
  expect_warning(good:gsub('"hidden":64', '"hidden":65'), "stale tune cache: hidden", "another model shape")
  expect_warning(good:gsub('"gemv_wg":32', '"gemv_wg":33'), "gemv_wg=33 is not valid", "a bad value")
  expect_warning(good:gsub('"gemv_wg":32', '"warp":1'), "unknown hint 'warp'", "an unknown hint")
  -- generation goes on with a broken file too
  local ok = run({ "run", "--model", MODEL, "--ids", "2,10", "--max-tokens", "2", "--quiet" })
  check.truthy(ok, "generation with a broken cache file")
end)

-- The prefill's knobs as `doppler tune --prefill` takes them on this device (cmd/tune.lua's PREFILL_KNOBS): all
-- of them, those with a --quick set, and the attention's row knob.
local function prefill_knobs()
  local c = doppler.device():caps()
  if c.coopmat_nv and c.subgroup_size == 32 and c.coopmat_shape then
    return { "gemm_cm_tile", "gemm_cm_bk", "gemm_cm_splits", "attention_prefill_cm_split",
             "attention_prefill_cm_rows", "attention_prefill_cm_keys" }, "attention_prefill_cm_rows",
           { "gemm_cm_tile", "attention_prefill_cm_split", "attention_prefill_cm_rows", "attention_prefill_cm_keys" }
  end
  return { "attention_prefill_lanes", "attention_prefill_rows" }, "attention_prefill_rows",
         { "attention_prefill_lanes", "attention_prefill_rows" }
end

check.case("tune --prefill: the prefill's knobs, scored by the GPU time of one prefill of --prompt-tokens", function()
  local out, e = must({ "tune", "--model", MODEL, "--prefill", "--quick", "--prompt-tokens", "24", "--runs", "1",
                        "--dry-run", "--json" })
  local res = json_of(out)
  check.eq(res.mode, "prefill", "mode")
  check.eq(res.prompt_tokens, 24, "the prompt measured")
  local want = {}
  for _, k in ipairs((prefill_knobs())) do want[k] = true end
  local seen = {}
  for _, r in ipairs(res.results) do
    check.truthy(want[r.knob], r.knob .. " is a prefill knob on this device")
    seen[r.knob] = true
    if r.ok then
      check.truthy(r.prefill_ms and r.prefill_ms > 0, r.knob .. ": a prefill's GPU time")
      check.eq(r.score, r.prefill_ms, r.knob .. ": the score is the prefill's GPU ms")
      check.eq(r.decode_ms, nil, r.knob .. ": no decode measured")
    end
  end
  local quick = select(3, prefill_knobs())
  for _, k in ipairs(quick) do check.truthy(seen[k], k .. " measured (it has a --quick set)") end
  local n_seen = 0
  for _ in pairs(seen) do n_seen = n_seen + 1 end
  check.eq(n_seen, #quick, "--quick measures exactly the knobs with a --quick set")
  check.truthy(e:find("prefill knobs", 1, true) ~= nil, "stderr names the mode")
  check.truthy(e:find("a prefill of 24 tokens", 1, true) ~= nil, "progress lines name the prompt")
  local table_out = must({ "tune", "--model", MODEL, "--prefill", "--quick", "--prompt-tokens", "24", "--runs", "1",
                           "--dry-run", "--knobs", select(2, prefill_knobs()) })
  check.truthy(table_out:find("| knob | value | score ms (a prefill of 24 tokens) |", 1, true) ~= nil, "the table's score")
  local ok, _, err = run({ "tune", "--model", MODEL, "--prefill", "--knobs", "gemv_wg" })
  check.truthy(not ok, "a decode knob with --prefill fails")
  check.truthy(err:find("no knob 'gemv_wg' with --prefill", 1, true) and err:find(select(2, prefill_knobs()), 1, true),
               "names the knob and lists the prefill ones: " .. err)
end)

check.case("a tune keeps the cache's other winners (a decode tune, then a prefill tune); a stale file is replaced",
           function()
  write_cache()
  local knob = select(2, prefill_knobs())
  local args = { "tune", "--model", MODEL, "--prefill", "--quick", "--prompt-tokens", "24", "--runs", "1", "--json",
                 "--knobs", knob }
  local out, e = must(args)
  local res = json_of(out)
  local t = doppler.read_json(cache_file)
  check.truthy(t.hints[knob] ~= nil, "the prefill knob's winner stored")
  check.eq(tostring(t.hints[knob]), tostring(res.hints[knob]), "as the run printed it")
  local names = {}
  for k, v in pairs(TUNED) do
    check.eq(t.hints[k], v, k .. ": the decode tune's winner kept")
    names[#names + 1] = k
  end
  table.sort(names)
  check.eq(table.concat(res.kept, ","), table.concat(names, ","), "the kept hints, listed")
  check.truthy(e:find("kept from the file there: " .. names[1], 1, true) ~= nil, "and said on stderr: " .. e)
  -- a file of another model shape is stale: replaced whole
  local stale = check.read_file(cache_file):gsub('"hidden":64', '"hidden":65')
  local f = assert(io.open(cache_file, "wb"))
  f:write(stale)
  f:close()
  res = json_of((must(args)))
  t = doppler.read_json(cache_file)
  check.eq(#res.kept, 0, "nothing kept from a stale file")
  check.eq(t.key.hidden, 64, "the key is this model's again")
  for k in pairs(TUNED) do check.eq(t.hints[k], nil, k .. ": not carried over from the stale file") end
  check.truthy(t.hints[knob] ~= nil, "the new winner stored")
end)

os.execute(("rm -rf '%s'"):format(dir))
check.done()
