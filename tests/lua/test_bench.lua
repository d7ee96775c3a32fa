-- The benchmark scripts (recipes/bench/*.lua) and --profile on lavapipe with the tiny fixture models and
-- small sizes: every JSON line parses and carries the documented keys with sane values (speeds > 0,
-- p50 <= p90, greedy decoding reads back exactly 4 bytes per token, ...), --table prints a markdown
-- table, bad options fail with a message. Timings themselves never decide anything here.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local json = require "doppler.json"
package.path = doppler.home() .. "/recipes/bench/?.lua;" .. package.path
local bench_lib = require "bench_lib"

local GEMMA = check.fixtures .. "/models/gemma3-tiny"
local LLAMA = check.fixtures .. "/models/llama3-tiny"
local tmp = os.tmpname()

-- Each stdout line of a run, parsed (doppler.read_json reads files).
local function json_lines(out)
  local rows = {}
  for line in out:gmatch("[^\n]+") do
    local f = assert(io.open(tmp, "w"))
    f:write(line)
    f:close()
    local ok, v = pcall(doppler.read_json, tmp)
    check.truthy(ok and type(v) == "table", "not a JSON object: " .. line)
    rows[#rows + 1] = v
  end
  return rows
end

local function bench(script, args)
  local a = { "recipes/bench/" .. script .. ".lua" }
  for _, x in ipairs(args) do a[#a + 1] = x end
  return json_lines((check.must_run(a)))
end

local function positive(row, key)
  check.truthy(type(row[key]) == "number" and row[key] > 0, ("%s = %s, want a number > 0"):format(key, tostring(row[key])))
end

local REQUIRED = { "model", "quant", "device", "hints", "decode_tok_s", "prefill_tok_s", "ttft_ms", "p50_ms", "p90_ms",
                   "submits_per_token", "readback_bytes_per_token", "peak_vram_bytes", "gpu_ms_per_kernel" }

local function check_row(row, model, P, N)
  for _, k in ipairs(REQUIRED) do check.truthy(row[k] ~= nil, "key '" .. k .. "' is missing") end
  check.eq(row.model, model, "model")
  check.truthy(type(row.quant) == "string" and #row.quant > 0, "quant is a name")
  check.truthy(type(row.device) == "string" and #row.device > 0, "device is a name")
  check.truthy(type(row.hints) == "table", "hints is an object")
  check.eq(row.prompt_tokens, P, "prompt_tokens")
  check.eq(row.decode_tokens, N, "decode_tokens")
  for _, k in ipairs({ "decode_tok_s", "prefill_tok_s", "ttft_ms", "p50_ms", "p90_ms", "submits_per_token",
                       "peak_vram_bytes", "load_s" }) do positive(row, k) end
  check.truthy(row.p50_ms <= row.p90_ms, "p50 <= p90")
  -- The TTFT includes the prompt's passes: at least the prefill time.
  check.truthy(row.ttft_ms >= 1000 * P / row.prefill_tok_s * 0.999, "ttft >= prefill time")
  -- the ids only, also in the GPU-resident loop (decode_chunk = 16): its out ring is read up to the ids
  -- emitted, never its state words (the bench ignores stop ids, so no end marker is read)
  check.near(row.readback_bytes_per_token, 4, 1e-9, "readback bytes per token (the ids only)")
  -- the side prefetcher's counts per step: numbers, late and skipped ones among those reached
  for _, k in ipairs({ "prefetch_stages_per_token", "prefetch_late_per_token", "prefetch_skipped_per_token" }) do
    check.truthy(type(row[k]) == "number" and row[k] >= 0, ("%s = %s, want a number >= 0"):format(k, tostring(row[k])))
  end
  check.truthy(row.prefetch_late_per_token <= row.prefetch_stages_per_token, "late stages are among those reached")
  check.truthy(row.prefetch_skipped_per_token <= row.prefetch_stages_per_token, "skipped stages are among those reached")
  check.truthy(row.peak_vram_bytes >= row.weights_bytes + row.kv_bytes, "peak VRAM covers weights and KV cache")
  check.truthy(type(row.gpu_ms_per_kernel) == "table", "gpu_ms_per_kernel is an object")
  if row.timestamps then
    local n = 0
    for name, ms in pairs(row.gpu_ms_per_kernel) do
      n = n + 1
      check.truthy(type(ms) == "number" and ms >= 0, "GPU ms of " .. name)
    end
    check.truthy(n >= 3, "several kernels timed, got " .. n)
    check.truthy(row.gpu_ms_per_kernel.argmax_final ~= nil or row.gpu_ms_per_kernel.argmax ~= nil,
                 "the greedy pass's argmax is among the kernels")
    positive(row, "gpu_ms_per_token")
    positive(row, "prefill_gpu_ms")
  end
end

check.case("json.encode: sorted keys, arrays, escapes, integers, null for NaN; read back by read_json", function()
  local v = { b = 1, a = { 1, 2.5, "x" }, c = { z = true, y = false }, e = {}, s = 'q"\\\n\1', n = 0 / 0, big = 2 ^ 40 }
  local s = json.encode(v)
  check.eq(s, '{"a":[1,2.5,"x"],"b":1,"big":1099511627776,"c":{"y":false,"z":true},"e":{},"n":null,' ..
              '"s":"q\\"\\\\\\n\\u0001"}', "encoding")
  local f = assert(io.open(tmp, "w"))
  f:write(s)
  f:close()
  local back = doppler.read_json(tmp)
  check.eq(back.s, v.s, "string round trip")
  check.eq(back.a[2], 2.5, "number round trip")
  check.eq(back.n, nil, "NaN became null")
  local ok = pcall(json.encode, { f = print })
  check.truthy(not ok, "a function cannot be encoded")
  local t = {}
  t.self = t
  check.truthy(not pcall(json.encode, t), "a cycle is an error")
end)

check.case("percentile: nearest rank", function()
  check.eq(bench_lib.percentile({ 5, 1, 4, 2, 3 }, 0.5), 3, "p50")
  check.eq(bench_lib.percentile({ 5, 1, 4, 2, 3 }, 0.9), 5, "p90")
  check.eq(bench_lib.percentile({ 7 }, 0.9), 7, "one value")
  check.eq(bench_lib.percentile({}, 0.5), nil, "no value")
end)

check.case("decode.lua: one JSON line per run with every key (gemma3-tiny)", function()
  local rows = bench("decode", { "--model", GEMMA, "--prompt-tokens", "8", "--tokens", "8", "--runs", "2",
                                 "--profile-tokens", "2" })
  check.eq(#rows, 2, "lines")
  for i, r in ipairs(rows) do
    check_row(r, GEMMA, 8, 8)
    check.eq(r.mode, "decode", "mode")
    check.eq(r.run, i, "run number")
    check.eq(r.recipe, "gemma3", "recipe from the model's architecture")
    check.eq(r.sampler, "greedy", "sampler")
  end
end)

check.case("decode.lua --warmup-ms: untimed runs before the profiled pass is timed and before the timed runs " ..
           "(none by default on a CPU device)", function()
  local cpu = doppler.device():caps().type == "cpu"
  local rows = bench("decode", { "--model", GEMMA, "--prompt-tokens", "4", "--tokens", "2", "--runs", "1",
                                 "--profile-tokens", "2" })
  local r = rows[1]
  check.eq(r.warmup_ms, cpu and 0 or 300, "the default: 0 on a CPU device, 300 on a GPU")
  if cpu then
    check.eq(r.warmup_runs, 0, "no warm-up runs at 0 ms")
    check.eq(r.profile_warmup_runs, 0, "none before the profiled pass either")
  end
  -- any positive time makes at least one run (the clock starts when the warm-up does)
  r = bench("decode", { "--model", GEMMA, "--prompt-tokens", "4", "--tokens", "2", "--runs", "1",
                        "--profile-tokens", "2", "--warmup-ms", "1" })[1]
  check.eq(r.warmup_ms, 1, "--warmup-ms is reported")
  check.truthy(r.warmup_runs >= 1, "untimed runs before the timed ones: " .. tostring(r.warmup_runs))
  check.truthy(r.profile_warmup_runs >= 1, "untimed runs before the profiled pass is timed: " ..
               tostring(r.profile_warmup_runs))
  check_row(r, GEMMA, 4, 2)
  r = bench("decode", { "--model", GEMMA, "--prompt-tokens", "4", "--tokens", "2", "--runs", "1", "--no-profile",
                        "--warmup-ms", "1" })[1]
  check.eq(r.profile_warmup_runs, nil, "--no-profile: no profiled pass to warm up for")
  check.truthy(r.warmup_runs >= 1, "the timed runs still warm up")
  local ok, _, e = check.run({ "recipes/bench/decode.lua", "--model", GEMMA, "--warmup-ms", "-1" })
  check.truthy(not ok and e:match("%-%-warmup%-ms") ~= nil, "a negative --warmup-ms is refused, naming it")
end)

check.case("decode.lua --latencies: every decode step's ms, whose percentiles are p50 and p90", function()
  local rows = bench("decode", { "--model", GEMMA, "--prompt-tokens", "4", "--tokens", "6", "--runs", "1",
                                 "--no-profile", "--latencies" })
  check.eq(#rows, 1, "lines")
  local ms = rows[1].latencies_ms
  check.truthy(type(ms) == "table", "latencies_ms is an array")
  check.eq(#ms, 6, "one latency per decode step")
  for i, v in ipairs(ms) do check.truthy(type(v) == "number" and v > 0, "step " .. i .. " took > 0 ms") end
  check.eq(bench_lib.percentile(ms, 0.5), rows[1].p50_ms, "p50 is the latencies' median")
  check.eq(bench_lib.percentile(ms, 0.9), rows[1].p90_ms, "p90 likewise")
  local plain = bench("decode", { "--model", GEMMA, "--prompt-tokens", "4", "--tokens", "2", "--runs", "1",
                                  "--no-profile" })
  check.eq(plain[1].latencies_ms, nil, "no latencies_ms without the option")
end)

check.case("prefill.lua: chunked prompt, hints reported (llama3-tiny)", function()
  local rows = bench("prefill", { "--model", LLAMA, "--prompt-tokens", "40", "--tokens", "2", "--runs", "1",
                                  "--profile-tokens", "1", "--hint", "prefill_chunk=16" })
  check.eq(#rows, 1, "lines")
  local r = rows[1]
  check_row(r, LLAMA, 40, 2)
  check.eq(r.mode, "prefill", "mode")
  check.eq(r.hints.prefill_chunk, 16, "the --hint is reported")
  check.eq(r.prefill_chunk, 16, "prefill_chunk")
  -- three passes (16 + 16 + 8), each with its run, plus the ids and positions uploads
  check.truthy(r.prefill_submits >= 3, "prefill submits " .. tostring(r.prefill_submits))
end)

check.case("ttft.lua --table: a markdown table, one row per run; sampling keeps 4 bytes per token", function()
  local out = check.must_run({ "recipes/bench/ttft.lua", "--model", GEMMA, "--prompt-tokens", "4", "--tokens", "3",
                               "--runs", "2", "--no-profile", "--table", "--temperature", "2", "--seed", "5" })
  local lines = {}
  for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
  check.eq(#lines, 4, "header + rule + 2 rows")
  check.truthy(lines[1]:match("^| model | quant | device | hints |") and lines[1]:match("TTFT ms"), "header: " .. lines[1])
  check.truthy(lines[2]:match("^| %-%-%- |"), "rule: " .. lines[2])
  local cells = 0
  for _ in lines[1]:gmatch("|") do cells = cells + 1 end
  for i = 3, 4 do
    local n = 0
    for _ in lines[i]:gmatch("|") do n = n + 1 end
    check.eq(n, cells, "cells in row " .. (i - 2))
    check.truthy(lines[i]:match("^| gemma3%-tiny |"), "row names the model: " .. lines[i])
  end
  local rows = bench("ttft", { "--model", GEMMA, "--prompt-tokens", "4", "--tokens", "3", "--runs", "1",
                               "--no-profile", "--temperature", "2", "--seed", "5" })
  check.near(rows[1].readback_bytes_per_token, 4, 1e-9, "sampled decoding reads back the ids only")
  check.truthy(rows[1].sampler:match("temperature=2"), "sampler " .. rows[1].sampler)
  check.eq(next(rows[1].gpu_ms_per_kernel), nil, "--no-profile: no kernel times")
end)

check.case("compile.lua: each plan's compile time split by phase; run 1 makes the kernels, run 2 finds them", function()
  local rows = bench("compile", { "--model", GEMMA, "--prompt-tokens", "5", "--runs", "2", "--hint", "decode_chunk=4" })
  check.eq(#rows, 6, "three plans, two runs")
  local built, by = 0, {}
  for i, r in ipairs(rows) do
    local plan = ({ "prompt", "step", "loop" })[(i - 1) % 3 + 1]
    check.eq(r.plan, plan, "plan order")
    check.eq(r.run, (i - 1) // 3 + 1, "run")
    check.eq(r.tokens, ({ prompt = 5, step = 1, loop = 4 })[plan], "tokens")
    check.eq(r.mode, "compile", "mode")
    check.eq(r.hints.decode_chunk, 4, "hints")
    positive(r, "seconds")
    positive(r, "dispatches")
    positive(r, "kernel_lookups")
    -- the phases are parts of the plan's time, and the kernels' build is inside lowering and the loop
    local parts = r.fusions_s + r.place_s + r.lower_s + r.prepare_s + r.loop_s
    check.truthy(parts <= r.seconds and parts > 0.5 * r.seconds, ("phases %g of %g s"):format(parts, r.seconds))
    local k = r.kernel_lookup_s + r.kernel_shader_s + r.kernel_reflect_s + r.kernel_layout_s + r.kernel_pipeline_s
    check.truthy(k + r.prepare_alloc_s <= r.lower_s + r.loop_s,
                 ("kernel build %g s and allocations %g s within lowering %g s"):format(k, r.prepare_alloc_s, r.lower_s + r.loop_s))
    if r.run == 1 then
      built = built + r.kernels_built
      by[plan] = r
    else
      check.eq(r.kernels_built, 0, plan .. ": run 2 makes no kernel")
      check.eq(r.kernel_pipeline_s + r.kernel_shader_s, 0, plan .. ": nor spends time making one")
      check.eq(r.dispatches, by[plan].dispatches, plan .. ": the same plan")
    end
  end
  check.truthy(built > 0 and rows[1].kernels_built > 0, "run 1 makes the prompt's kernels and more")
  -- the loop records its step 4 times: more dispatches than one step, and time spent recording them again
  check.truthy(by.loop.dispatches > 3 * by.step.dispatches, "loop dispatches " .. by.loop.dispatches)
  positive(by.loop, "loop_s")
  check.eq(rows[2].loop_s < 1e-3 and rows[1].loop_s < 1e-3, true, "plans without a loop record none")
  -- a quantised model on f16 copies: the first plan allocates and runs the preparations, the next compile none
  local q = bench("compile", { "--model", check.fixtures .. "/gguf/gemma3-q/model-Q4_K_M.gguf", "--prompt-tokens", "5",
                               "--hint", "q_matmul=dequant_f16", "--hint", "decode_chunk=1" })
  check.eq(#q, 4, "two plans (no loop), two runs")
  positive(q[1], "prepare_alloc_s")
  positive(q[1], "prepare_s")
  check.eq(q[3].prepare_alloc_s, 0, "run 2: the copies are made")
end)

check.case("hints.lua: one process per setting, the setting in each line", function()
  local rows = bench("hints", { "--model", GEMMA, "--sweep", "matmul=gemv,gemm", "--prompt-tokens", "4",
                                "--tokens", "2", "--runs", "1", "--no-profile" })
  check.eq(#rows, 2, "lines")
  check.eq(rows[1].hints.matmul, "gemv", "first setting")
  check.eq(rows[2].hints.matmul, "gemm", "second setting")
  for _, r in ipairs(rows) do positive(r, "decode_tok_s") end
  local ok, _, e = check.run({ "recipes/bench/hints.lua", "--model", GEMMA, "--sweep", "matmul=bogus" })
  check.truthy(not ok and e:match("matmul=bogus is not valid"), "a bad sweep value fails first: " .. e)
end)

check.case("copy_bandwidth.lua: checked copies, GB/s from timestamps and the wall clock", function()
  local rows = bench("copy_bandwidth", { "--bytes", "100003", "--iters", "2", "--groups", "1,auto", "--per-submit", "2" })
  check.eq(#rows, 2, "one line per --groups value")
  check.eq(rows[1].groups, 1, "groups")
  check.eq(rows[2].groups, (100003 + 4095) // 4096, "auto: never more groups than needed")
  for _, r in ipairs(rows) do
    check.eq(r.bytes, 100003, "bytes")
    positive(r, "wall_gb_s")
    positive(r, "wall_ms_per_copy")
    if r.timestamps then
      positive(r, "gpu_gb_s")
      check.eq(r.gpu_copies_timed, 4, "iters x per-submit copies timed")
      check.near(r.gpu_gb_s, 2 * 100003 / (r.gpu_ms_per_copy * 1e-3) / 1e9, 1e-3 * r.gpu_gb_s, "GB/s counts read + write")
    end
  end
  local out = check.must_run({ "recipes/bench/copy_bandwidth.lua", "--bytes", "33", "--iters", "1", "--table" })
  check.truthy(out:match("^| device | bytes | groups |") and out:match("\n| [^\n]* | 33 | 1 | 256 | 4 |"), "table:\n" .. out)
end)

check.case("read_chain.lua: dependent read-only steps, their sums checked, one line per groups x loads", function()
  -- 65,552 bytes: 4097 16-byte words, so the last trip of every setting has invocations past the end
  local rows = bench("read_chain", { "--bytes", "65552", "--steps", "3", "--groups", "1,5", "--loads", "1,3",
                                     "--runs", "2", "--wg", "64", "--warmup-ms", "0" })
  check.eq(#rows, 4, "one line per --groups x --loads")
  for i, r in ipairs(rows) do
    check.eq(r.groups, ({ 1, 5, 1, 5 })[i], "groups")
    check.eq(r.loads, ({ 1, 1, 3, 3 })[i], "loads")
    check.eq(r.barriers, 2, "a barrier between dependent steps, as the decode's recorder orders them")
    check.eq(r.bytes, 65552, "bytes")
    positive(r, "wall_us_per_step")
    check.near(r.wall_gb_s, 65552 / (r.wall_us_per_step * 1e-6) / 1e9, 1e-3 * r.wall_gb_s, "GB/s of the bytes read")
    if r.gpu_us_per_step then positive(r, "gpu_gb_s") end
  end
  -- --sizes: the steps cycle through the sizes, each its own region; auto workgroups per step
  rows = bench("read_chain", { "--sizes", "32,65552,1600", "--steps", "4", "--groups", "auto,3", "--loads", "2",
                               "--runs", "1", "--warmup-ms", "0" })
  check.eq(#rows, 2, "one line per --groups value")
  for i, r in ipairs(rows) do
    check.eq(r.groups, ({ "auto", 3 })[i], "groups")
    check.eq(r.bytes_per_run, 32 + 65552 + 1600 + 32, "bytes of the 4 steps, the sizes cycled")
    check.eq(r.regions, 4, "a region per step")
    check.eq(r.barriers, 3, "a barrier between dependent steps")
    check.near(r.wall_us_per_step, r.wall_us_per_run / 4, 1e-4 * r.wall_us_per_step,
               "per step = per run / steps (JSON keeps 6 digits)")
  end
  local out = check.must_run({ "recipes/bench/read_chain.lua", "--bytes", "32", "--steps", "1", "--groups", "1",
                               "--loads", "16", "--runs", "1", "--table" })
  check.truthy(out:match("^| device | bytes | groups x WG |") and out:match("\n| [^\n]* | 32 | 1 x 256 | 16 |"),
               "table:\n" .. out)
  local ok, _, e = check.run({ "recipes/bench/read_chain.lua", "--bytes", "40" })
  check.truthy(not ok and e:match("^read_chain: %-%-bytes: 40 is not a multiple of 16"), "bytes not a multiple of 16: " .. e)
  ok, _, e = check.run({ "recipes/bench/read_chain.lua", "--sizes", "32,40" })
  check.truthy(not ok and e:match("%-%-sizes: 40 is not a multiple of 16"), "a size not a multiple of 16: " .. e)
  ok, _, e = check.run({ "recipes/bench/read_chain.lua", "--loads", "17" })
  check.truthy(not ok and e:match("%-%-loads: '17' is not an integer in 1..16"), "too many loads: " .. e)
end)

check.case("read_chain.lua --model: a decode step's kernels as read-only steps, each at the bytes it reads", function()
  local c = doppler.read_json(GEMMA .. "/config.json")
  c = c.text_config or c
  local H, I, L, V = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
  local q = c.num_attention_heads * (c.head_dim or H // c.num_attention_heads)
  local rows = bench("read_chain", { "--model", GEMMA, "--tokens", "2", "--groups", "auto", "--loads", "2",
                                     "--runs", "1", "--warmup-ms", "0" })
  check.eq(#rows, 1, "one line")
  local r, kb = rows[1], rows[1].kernel_bytes_per_token
  check.eq(r.steps, 2 * r.kernels_per_token, "a step per kernel per token")
  check.eq(r.regions, r.kernels_per_token, "a region per kernel")
  check.eq(r.barriers, r.steps - 1, "a barrier between dependent steps")
  -- on lavapipe the float linears read their f16 weights: o and down (gemv) exactly those, once each
  check.eq(kb.gemv, 2 * L * (H * q + H * I), "o and down: their weights' bytes")
  check.truthy(kb.lm_head >= 2 * V * H and kb.lm_head < 2 * V * H + 4096, "the head reads its table: " .. kb.lm_head)
  check.truthy(kb.embed_norm >= 2 * H and kb.embed_norm < 2 * V * H / 8, "the gather counts one row: " .. kb.embed_norm)
  local sum = 0
  for _, b in pairs(kb) do sum = sum + b end
  check.truthy(r.bytes_per_token >= sum and r.bytes_per_token < sum + 16 * r.kernels_per_token,
               "bytes per token: the kernels' (each step rounded up to 16)")
  check.near(r.floor_ms_per_token, r.wall_us_per_run / 2e3, 1e-4 * r.floor_ms_per_token,
             "per token = per run / tokens (JSON keeps 6 digits)")
  positive(r, "floor_tok_s")
  local ok, _, e = check.run({ "recipes/bench/read_chain.lua", "--model", GEMMA, "--sizes", "32" })
  check.truthy(not ok and e:match("%-%-model and %-%-sizes: one of them"), "--model with --sizes: " .. e)
end)

check.case("persistent.lua: a token's GEMV and attention steps as dispatches, as one persistent dispatch and as a chain of dispatches without barriers, against a CPU reference", function()
  -- The persistent mode runs one workgroup here: llvmpipe ends an invocation's loops once their trips together
  -- pass 65535, so a grid barrier's poll between workgroups cannot be relied on (the shader's header; the
  -- H100 runs compare the modes bit for bit). The dispatch mode uses three. The script fails on a wrong output.
  for _, w in ipairs({ "f16", "q4", "q4_k_m" }) do
    -- 3 dispatch-mode workgroups for 4 heads, and 80 positions for 64 invocations: both loops run twice
    local rows = bench("persistent", { "--shape", "tiny", "--weights", w, "--tokens", "3", "--runs", "1", "--wg", "64",
                                      "--groups", "1", "--dispatch-groups", "3", "--modes", "dispatch,persistent,chain,sync",
                                      "--context", "80" })
    check.eq(#rows, 6, "dispatch, persistent, chain, and the sync three")
    local steps = 2 * 5 + 1   -- tiny: 2 layers of 4 GEMVs and an attention step, then the head
    for i, mode in ipairs({ "dispatch", "persistent", "chain", "sync_dispatch", "sync_persistent", "sync_chain" }) do
      local r = rows[i]
      check.eq(r.mode, mode, "mode")
      check.eq(r.weights, w, "weights")
      check.truthy(r.same_bits, mode .. ": the same bits as the first mode")
      positive(r, "ms_per_token")
      if i <= 3 then
        check.eq(r.steps_per_token, steps, "steps per token")
        check.truthy(type(r.check_max_rel_err) == "number" and r.check_max_rel_err <= 1e-3,
                     mode .. ": compared with the CPU reference")
        positive(r, "weight_bytes_per_token")
      end
    end
    if w == "q4_k_m" then
      -- tiny takes every mixed type: per layer q/k/v f16 (128 x 64 x 2 bytes), attention's f16 keys and values
      -- (2 x 80 x 2 x 16 x 2), o q8 (64 x 64 x 34 / 32), gate+up q5 (256 x 64 x 22 / 32), down q4 in layer 0
      -- and q5 in layer 1 (64 x 128 x 18 or 22 / 32); the head q8 (160 x 64 x 34 / 32)
      local layer = 16384 + 10240 + 4352 + 11264
      check.eq(rows[1].weight_bytes_per_token, 2 * layer + 4608 + 5632 + 10880, "q4_k_m: each matrix at its type's bytes")
    end
    check.eq(rows[1].dispatches, 3 * steps, "dispatch mode: one dispatch per step")
    check.eq(rows[1].barriers, 3 * steps - 1, "dispatch mode: a barrier between steps")
    check.eq(rows[2].dispatches, 2, "persistent mode: the counter's reset and one dispatch")
    check.eq(rows[2].groups, 1, "persistent workgroups")
    check.eq(rows[1].groups, 3, "dispatch-mode workgroups")
    -- chain mode (lavapipe runs the dispatches one after another, so its waits pass at once; the chain's
    -- counts still have to add up, or the script reports a wait that gave up)
    check.eq(rows[3].dispatches, 3 * steps + 1, "chain mode: the counter's reset and one dispatch per step")
    check.eq(rows[3].barriers, 1, "chain mode: one barrier, after the reset")
    check.eq(rows[3].groups, 3, "chain-mode workgroups")
  end
  -- every grid barrier's variant computes the same bits (here with one workgroup: see above)
  for _, sync in ipairs({ "acquire", "volatile" }) do
    local rows = bench("persistent", { "--shape", "tiny", "--tokens", "2", "--runs", "1", "--wg", "64", "--sync", sync,
                                      "--context", "8" })
    check.eq(#rows, 2, sync .. ": dispatch and persistent")
    check.eq(rows[2].sync, sync, "sync")
  end
  local rows = bench("persistent", { "--shape", "tiny", "--tokens", "2", "--runs", "1", "--wg", "64", "--no-attention",
                                    "--no-norm" })
  check.truthy(rows[2].norm == false, "--no-norm")
  check.eq(rows[2].steps_per_token, 2 * 4 + 1, "--no-attention: the GEMVs only")
  check.truthy(rows[2].attention == false and type(rows[2].check_max_rel_err) == "number", "checked without attention")
  local out = check.must_run({ "recipes/bench/persistent.lua", "--shape", "tiny", "--tokens", "1", "--runs", "1",
                               "--wg", "64", "--context", "8", "--table" })
  -- the persistent mode's default workgroups: 1 on a CPU device, 132 (one per SM of the H100) elsewhere
  local groups = doppler.device():caps().type == "cpu" and 1 or 132
  check.truthy(out:match("^| device | shape | weights | mode |") and
               out:match("\n| [^\n]* | tiny | f16 | persistent | fence | " .. groups .. " | 64 |"),
               "table:\n" .. out)
  local ok, _, e = check.run({ "recipes/bench/persistent.lua", "--shape", "huge" })
  check.truthy(not ok and e:match("not llama, gemma or tiny"), "bad shape: " .. e)
  ok, _, e = check.run({ "recipes/bench/persistent.lua", "--shape", "tiny", "--modes", "fast" })
  check.truthy(not ok and e:match("not persistent, dispatch, chain or sync"), "bad mode: " .. e)
  ok, _, e = check.run({ "recipes/bench/persistent.lua", "--shape", "tiny", "--sync", "none" })
  check.truthy(not ok and e:match("not acquire, volatile or fence"), "bad sync: " .. e)
  if doppler.device():caps().type == "cpu" then
    ok, _, e = check.run({ "recipes/bench/persistent.lua", "--shape", "tiny", "--groups", "2" })
    check.truthy(not ok and e:match("cannot hold a grid barrier"), "a grid barrier on a CPU device: " .. e)
  end
  ok, _, e = check.run({ "recipes/bench/persistent.lua", "--shape", "tiny", "--context", "5000" })
  check.truthy(not ok and e:match("at most 1024 positions"), "too long a context: " .. e)
end)

check.case("glu_down.lua: a chain of MLPs as two dispatches per layer and as one fused dispatch, against a CPU reference", function()
  -- tiny: 2 layers, x of 64, h of 64. The script fails when a mode's y is not the first mode's bits or is off
  -- the CPU reference; 8 rows per workgroup (f16 columns) make 8 workgroups add into y, in whatever order.
  -- --gate f16: gate and up as f16 rows (a float model's), 1, 2 or 3 chunks per lane in flight
  for _, c in ipairs({ { "q4", "32", "256" }, { "q4", "64", "512" }, { "f16", "8", "64" }, { "f16", "16", "128" },
                       { "f16", "8", "64", "f16", "2" }, { "q4", "32", "256", "f16", "3" },
                       { "f16", "16", "128", "f16", "1" } }) do
    local gate = c[4] or "q4"
    local rows = bench("glu_down", { "--shape", "tiny", "--down", c[1], "--r", c[2], "--wg", c[3], "--tokens", "3",
                                    "--runs", "1", "--modes", "split,fused,fused_nopref,fused_tail,h,down",
                                    "--gate", gate, "--gu", c[5] or "2" })
    check.eq(#rows, 6, "six modes")
    for i, mode in ipairs({ "split", "fused", "fused_nopref", "fused_tail", "h", "down" }) do
      local r = rows[i]
      check.eq(r.mode, mode, "mode")
      check.eq(r.down, c[1], "down")
      check.eq(r.gate, gate, "gate")
      positive(r, "us_per_layer")
      if i <= 4 then
        check.truthy(r.same_bits, mode .. ": the same bits as split")
        check.truthy(type(r.check_max_rel_err) == "number" and r.check_max_rel_err <= 1e-4,
                     mode .. ": compared with the CPU reference")
      end
    end
    -- per token: split zeroes y, then 2 dispatches per layer; fused 1; fused_tail needs no zeroing
    check.eq(rows[1].dispatches, 3 * (1 + 2 * 2), "split: dispatches")
    check.eq(rows[2].dispatches, 3 * (1 + 2), "fused: dispatches")
    check.eq(rows[4].dispatches, 3 * 2, "fused_tail: dispatches")
  end
  local ok, _, e = check.run({ "recipes/bench/glu_down.lua", "--shape", "huge" })
  check.truthy(not ok and e:match("not gemma, llama or tiny"), "bad shape: " .. e)
  ok, _, e = check.run({ "recipes/bench/glu_down.lua", "--shape", "tiny", "--modes", "fast" })
  check.truthy(not ok and e:match("is not split, fused"), "bad mode: " .. e)
  ok, _, e = check.run({ "recipes/bench/glu_down.lua", "--shape", "tiny", "--r", "8" })
  check.truthy(not ok and e:match("multiple of 32"), "4-bit columns need 32 rows: " .. e)
  ok, _, e = check.run({ "recipes/bench/glu_down.lua", "--shape", "tiny", "--wg", "96" })
  check.truthy(not ok and e:match("power of two"), "bad workgroup: " .. e)
  ok, _, e = check.run({ "recipes/bench/glu_down.lua", "--shape", "tiny", "--down", "q8" })
  check.truthy(not ok and e:match("not q4 or f16"), "bad down type: " .. e)
  ok, _, e = check.run({ "recipes/bench/glu_down.lua", "--shape", "tiny", "--gate", "bf16" })
  check.truthy(not ok and e:match("--gate: 'bf16' is not q4 or f16"), "bad gate type: " .. e)
end)

check.case("--profile: GPU time per kernel per token, submits, readback, device memory", function()
  local out, err = check.must_run({ "recipes/gemma3.lua", "--model", GEMMA, "--ids", "2,10,20,30", "--max-tokens", "5",
                                    "--print-ids", "--quiet", "--profile", "--hint", "decode_chunk=1" })
  check.eq(#check.parse_ids(out), 5, "generation is unchanged")
  check.truthy(err:match("prompt: 4 tokens"), "prompt line:\n" .. err)
  check.truthy(err:match("decode: 4 steps") and err:match("1?%d%.%d%d submits, 4%.0 bytes read back"), "decode line:\n" .. err)
  check.truthy(err:match("gemv%s+%d+%.%d+ ms/tok"), "kernel times per token:\n" .. err)
  check.truthy(err:match("device memory: peak %d+%.%d MB"), "memory line:\n" .. err)
  -- the GPU-resident loop (default decode_chunk=16): the same ids, fewer submits than tokens
  local out2, err2 = check.must_run({ "recipes/gemma3.lua", "--model", GEMMA, "--ids", "2,10,20,30", "--max-tokens", "5",
                                      "--print-ids", "--quiet", "--profile" })
  check.eq(check.join(check.parse_ids(out2)), check.join(check.parse_ids(out)), "chunked ids")
  local sub = tonumber(err2:match("decode: 4 steps, [%d.]+ ms wall per token, per token: ([%d.]+) submits"))
  check.truthy(sub and sub < 1, "chunked decode line:\n" .. err2)
end)

check.case("bad options fail with a message", function()
  local ok, _, e = check.run({ "recipes/bench/decode.lua" })
  check.truthy(not ok and e:match("%-%-model PATH is required"), "no --model: " .. e)
  ok, _, e = check.run({ "recipes/bench/compile.lua" })
  check.truthy(not ok and e:match("^compile: %-%-model PATH is required"), "compile.lua, no --model: " .. e)
  ok, _, e = check.run({ "recipes/bench/decode.lua", "--model", GEMMA, "--tokens", "5000" })
  check.truthy(not ok and e:match("exceed the context"), "too long: " .. e)
  ok, _, e = check.run({ "recipes/bench/copy_bandwidth.lua", "--groups", "0" })
  check.truthy(not ok and e:match("not a workgroup count"), "bad groups: " .. e)
end)

os.remove(tmp)
check.done()
