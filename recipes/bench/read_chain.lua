-- recipes/bench/read_chain.lua: the floor of a decode step, and of a model's decode token: dependent
-- dispatches that do nothing but read their bytes.
--   doppler recipes/bench/read_chain.lua [--bytes N | --sizes LIST | --model PATH] [--steps N] [--groups LIST] ...
-- doppler's decode is a chain of dependent dispatches, each a GEMV over a few MB of weights that the L2 does
-- not hold from the token before. This probe times the floor of such a step: a dispatch that only reads its
-- --bytes (shaders/probe/read_chain.comp: every invocation XORs its share of 16-byte loads, --loads of them in
-- flight at once), --steps of them on distinct regions (together larger than the H100's 50 MB L2 at the
-- defaults; --regions 1 has every step read the same bytes, from the L2 where they fit), a barrier between
-- steps as the recorder puts one between dependent kernels, one submit per run. --sizes cycles the steps through
-- a list of sizes instead (e.g. one layer's kernels, then the LM head), to time a model's token as if each of
-- its kernels only read its bytes. --model takes those sizes from the model's own decode step (the GPU loop's
-- plan on this device, with the recipe's hints and --hint): one step per kernel, of the bytes it reads that no
-- kernel of the step writes (weights, their prepared copies, constants; a gather's table counts one row, and the
-- KV cache, which the step writes, not at all), --tokens tokens per submit; the line then adds the floor per token.
-- For each --groups x --loads it prints one JSON line: µs per run (the recording of --steps: wall_us_per_run, the
-- median submit, its submit and wait included; gpu_us_per_run, the steps' GPU timestamps) and per step, and the
-- bytes per second those make (bytes_per_run; bytes is its mean per step); each setting is replayed untimed for
-- --warmup-ms first. Before timing, the XOR of the invocations' sums for the first and last regions is compared
-- with the XOR of those regions' bytes read back, so a kernel that skips loads fails instead of reporting a speed.
package.path = (arg[0]:match("^(.*/)") or "./") .. "?.lua;" .. package.path
local doppler = require "doppler"
local cli = require "doppler.cli"
local json = require "doppler.json"
local session = require "doppler.session"
local lib = require "bench_lib"

local spec = {
  usage = "doppler recipes/bench/read_chain.lua [options]",
  about = "Times a chain of dependent dispatches that only read --bytes each (the floor of a decode GEMV\n" ..
          "step), for each workgroup count and loads in flight; one JSON line per setting. With --model, a\n" ..
          "step per kernel of the model's decode step at the bytes it reads: the floor of its decode token.",
  options = {
    { "--bytes", "N", "bytes each step reads (a multiple of 16)", type = "int", default = 9 << 20, min = 16 },
    { "--sizes", "LIST", "bytes per step, comma-separated (multiples of 16), cycled over the steps (instead of\n" ..
      "--bytes)" },
    { "--model", "PATH", "take the steps from this model's decode step: a step per kernel, at its bytes (instead\n" ..
      "of --bytes, --sizes, --steps and --regions)" },
    { "--recipe", "FILE", "--model: recipe file (default: from the model's architecture)" },
    { "--hint", "KEY=VALUE", "--model: kernel hint for its decode step (repeatable)", repeat_ = true },
    { "--tokens", "N", "--model: decode steps per submit", type = "int", default = 4, min = 1 },
    { "--steps", "N", "dependent dispatches per submit", type = "int", default = 26, min = 1 },
    { "--regions", "N", "distinct regions the steps cycle through (0: one per step; 1: every step reads the\n" ..
      "same bytes, which then come from the L2 where they fit)", type = "int", default = 0, min = 0 },
    { "--groups", "LIST", "workgroup counts, comma-separated; auto: per step, one per 40 KiB read, 132 to 2112\n" ..
      "(near the best of each size on the H100, docs/BENCHMARKS.md 42b)", default = "132,264,528,1056" },
    { "--loads", "LIST", "16-byte loads in flight per invocation (1..16), comma-separated", default = "1,2,4,8" },
    { "--wg", "N", "workgroup size", type = "int", default = 256, min = 1 },
    { "--runs", "N", "timed submits per setting", type = "int", default = 20, min = 1 },
    { "--warmup-ms", "MS", "replay each setting untimed for at least this long first (the GPU's clock rises\n" ..
      "under load)", type = "int", default = 200, min = 0 },
    { "--label", "TEXT", "extra 'label' key in every line" },
    { "--table", nil, "print a markdown table instead of JSON lines" },
  },
}
local FILE = "probe/read_chain.comp"
local MAX_LOADS = 16

-- A step's workgroups: the --groups value, or for auto one per 40 KiB the step reads, 132 to 2112 (42b: the
-- best counts on the H100 were 264-528 for 2-19 MB and 1056-2112 for 128 MB).
local function step_groups(groups, bytes)
  if groups ~= "auto" then return groups end
  return math.max(132, math.min(2112, (bytes + 40959) // 40960))
end

local function int_list(s, name, lo, hi)
  local out = {}
  for tok in s:gmatch("[^,%s]+") do
    local v = math.tointeger(tonumber(tok))
    if not v or v < lo or v > hi then error(("%s: '%s' is not an integer in %d..%d"):format(name, tok, lo, hi), 0) end
    out[#out + 1] = v
  end
  if #out == 0 then error(name .. ": no value given", 0) end
  return out
end

-- XOR of the 16-byte words of s, lane by lane (as the kernel's uvec4 sum).
local function xor16(s)
  local a, b, c, d = 0, 0, 0, 0
  for i = 1, #s, 16 do
    local w, x, y, z = string.unpack("<I4I4I4I4", s, i)
    a, b, c, d = a ~ w, b ~ x, c ~ y, d ~ z
  end
  return string.pack("<I4I4I4I4", a, b, c, d)
end

-- The bytes each kernel of --model's decode step reads that no kernel of the step writes: each tensor a push
-- member reads (reflection) whose range no member of any call writes counts whole, except in a gather (kernels
-- embed*, gather*), which reads one row of its table per token. Returns the sizes (>= 16, multiples of 16), bytes
-- per kernel name and the session (kept open while its tensors are in use).
local function model_steps(o)
  local model, recipe, h = lib.model_and_hints(o)
  local s = session.open(recipe, model, { hints = h })
  local calls = s:loop_plan(2).calls
  local function tensors(c, want)
    local out = {}
    for _, m in ipairs(c.kernel:push_members()) do
      local t = c.push[m.name]
      if m.kind == "ptr" and type(t) == "userdata" and want[m.access] then out[#out + 1] = t end
    end
    return out
  end
  local written = {}
  for _, c in ipairs(calls) do
    for _, t in ipairs(tensors(c, { write = true, readwrite = true })) do
      written[#written + 1] = { t:address(), t:address() + t:nbytes() }
    end
  end
  local function only_read(t)
    local a, b = t:address(), t:address() + t:nbytes()
    for _, w in ipairs(written) do if a < w[2] and w[1] < b then return false end end
    return true
  end
  local sizes, by_kernel = {}, {}
  for i, c in ipairs(calls) do
    local name = c.kernel:name()
    local gather = name:match("^embed") or name:match("^gather")
    local bytes = 0
    for _, t in ipairs(tensors(c, { read = true })) do
      if only_read(t) then
        local sh = t:shape()
        bytes = bytes + ((gather and #sh >= 2) and t:nbytes() // sh[1] or t:nbytes())
      end
    end
    sizes[i] = math.max(16, (bytes + 15) // 16 * 16)
    by_kernel[name] = (by_kernel[name] or 0) + bytes
  end
  return sizes, by_kernel, s
end

-- A byte pattern in a few places of each region (their XOR is not zero whatever the memory held before).
local function mark(t, bytes, seed)
  local n = math.min(4096, bytes)
  for _, off in ipairs({ 0, (bytes - n) // 32 * 16, bytes - n }) do
    local b = {}
    for j = 1, n do b[j] = string.char(((off + j) * 31 + seed * 17 + 7) % 251) end
    t:upload(table.concat(b), off)
  end
end

-- Wall clock: one recording of --steps dispatches (no timestamp queries in it), replayed for --warmup-ms first
-- (an idle GPU runs at a low clock and raises it only under sustained load: gemv.lua's header), then --runs
-- timed replays, their median; the submit and its wait are shared by the steps. GPU time: the same recording
-- with timestamps around each dispatch, its mean.
local function measure(dev, k, src, dst, o, groups)
  local function record()
    local rec = dev:recorder()
    for st = 1, o.steps do
      local t = src[(st - 1) % #src + 1]
      rec:dispatch(k, { step_groups(groups, t.bytes), 1, 1 }, { src = t.buf, dst = dst, n = t.bytes // 16 })
    end
    return rec
  end
  local run_bytes = 0
  for st = 1, o.steps do run_bytes = run_bytes + src[(st - 1) % #src + 1].bytes end
  dev:profile(false)
  local rec = record()
  local stats = rec:stats()
  local t_warm = doppler.clock()
  repeat rec:run() until (doppler.clock() - t_warm) * 1e3 >= o.warmup_ms
  local dts = {}
  for i = 1, o.runs do
    local t0 = doppler.clock()
    rec:run()
    dts[i] = doppler.clock() - t0
  end
  table.sort(dts)
  local r = { groups = groups, barriers = stats.barriers, bytes_per_run = run_bytes, bytes = run_bytes / o.steps,
              wall_us_per_run = dts[(o.runs + 1) // 2] * 1e6 }
  r.wall_us_per_step = r.wall_us_per_run / o.steps
  r.wall_gb_s = run_bytes / (r.wall_us_per_run * 1e-6) / 1e9
  dev:profile(true)                          -- applies to the recording made next
  local prec = record()
  prec:run()
  dev:profile(false)                         -- forgets the first replay's times; the recording keeps its queries
  dev:profile(true)
  for _ = 1, o.runs do prec:run() end
  local e = dev:profile()[k:name()]
  dev:profile(false)
  if e and e.count > 0 then
    r.gpu_us_per_step = e.mean_us
    r.gpu_us_per_run = e.mean_us * o.steps
    r.gpu_gb_s = run_bytes / (r.gpu_us_per_run * 1e-6) / 1e9
  end
  return r
end

-- The invocations' sums of the last dispatch (region `s`) against the region's bytes.
local function check(dev, k, src, dst, o, groups, s)
  local t = src[s]
  local g = step_groups(groups, t.bytes)
  local rec = dev:recorder()
  rec:dispatch(k, { g, 1, 1 }, { src = t.buf, dst = dst, n = t.bytes // 16 })
  rec:run()
  local got, want = xor16(dst:read(0, g * o.wg * 16)), xor16(t.buf:read(0, t.bytes))
  if got ~= want then
    error(("the kernel's XOR of region %d differs from its bytes' (groups %d)"):format(s, g), 0)
  end
end

local function main(argv)
  local o = cli.parse(argv, spec)
  local sizes, by_kernel, sess   -- sess: --model's session, held until the end (its tensors back nothing here,
                                 -- but its device memory stays as a decode would hold it)
  if o.model then
    if o.sizes then error("--model and --sizes: one of them", 0) end
    sizes, by_kernel, sess = model_steps(o)
    o.steps, o.regions = o.tokens * #sizes, #sizes
  else
    sizes = o.sizes and int_list(o.sizes, "--sizes", 16, 1 << 40) or { o.bytes }
  end
  for _, b in ipairs(sizes) do
    if b % 16 ~= 0 then error(("%s: %d is not a multiple of 16"):format(o.sizes and "--sizes" or "--bytes", b), 0) end
  end
  local groups = {}
  for tok in o.groups:gmatch("[^,%s]+") do
    groups[#groups + 1] = tok == "auto" and "auto" or int_list(tok, "--groups", 1, 65535)[1]
  end
  if #groups == 0 then error("--groups: no value given", 0) end
  local loads = int_list(o.loads, "--loads", 1, MAX_LOADS)
  local dev = doppler.device()
  local caps = dev:caps()
  local src = {}
  for r = 1, (o.regions > 0 and math.min(o.regions, o.steps) or o.steps) do
    local b = sizes[(r - 1) % #sizes + 1]
    src[r] = { buf = dev:tensor { dtype = "u8", shape = { b } }, bytes = b }
    mark(src[r].buf, b, r)
  end
  local gmax = 0
  for _, g in ipairs(groups) do
    for _, t in ipairs(src) do gmax = math.max(gmax, step_groups(g, t.bytes)) end
  end
  local dst = dev:tensor { dtype = "u8", shape = { gmax * o.wg * 16 } }
  local rows = {}
  for li, l in ipairs(loads) do
    local k = dev:kernel { file = FILE, constants = { WG = o.wg, L = l } }
    for gi, g in ipairs(groups) do
      if li == 1 and gi == 1 then
        check(dev, k, src, dst, o, g, 1)
        check(dev, k, src, dst, o, g, #src)
      end
      local r = measure(dev, k, src, dst, o, g)
      r.loads, r.wg, r.steps, r.regions, r.runs, r.sizes = l, o.wg, o.steps, #src, o.runs, o.sizes
      if o.model then
        r.model, r.tokens_per_submit, r.kernels_per_token = o.model, o.tokens, #sizes
        r.bytes_per_token, r.kernel_bytes_per_token = r.bytes_per_run // o.tokens, by_kernel
        r.floor_ms_per_token = r.wall_us_per_run / o.tokens / 1e3
        r.floor_tok_s = 1e3 / r.floor_ms_per_token
        if r.gpu_us_per_run then r.floor_gpu_ms_per_token = r.gpu_us_per_run / o.tokens / 1e3 end
      end
      r.device, r.driver, r.label = caps.name, caps.driver, o.label
      if o.table then rows[#rows + 1] = r else print(json.encode(r)); io.stdout:flush() end
    end
  end
  if o.table then
    print("| device | bytes | groups x WG | loads | µs per step (wall) | GB/s (wall) | µs per step (GPU) | GB/s (GPU) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    local function f(fmt, v) return v and fmt:format(v) or "-" end
    for _, r in ipairs(rows) do
      print(("| %s | %d | %s x %d | %d | %s | %s | %s | %s |"):format(r.device, r.bytes, r.groups, r.wg, r.loads,
        f("%.2f", r.wall_us_per_step), f("%.1f", r.wall_gb_s), f("%.2f", r.gpu_us_per_step), f("%.1f", r.gpu_gb_s)))
    end
  end
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("read_chain: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
