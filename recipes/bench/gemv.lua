-- recipes/bench/gemv.lua: the matrix-vector kernels in isolation. For each case (shape x weight dtype x
-- tokens x hint setting) a one-op graph on an activation x [T, K] is compiled by the real compiler
-- (doppler.plan: fusions, then doppler.lower), so the kernels, hint handling and quantised layouts are
-- exactly a model's:
--   linear: y = x · Wᵀ, W [N, K]                 (gemv / gemv_q; gemm_q for quantised W and T > 4)
--   glu:    y = act(x · Wgᵀ) * (x · Wuᵀ)         (fusion gate_up: gemv_multi DP_GLU, or gemv_q DP_GLU)
--   doppler recipes/bench/gemv.lua [--shape [glu:]N,K]... [--dtype f16,q4_k] [--tokens 1] [--hint K=V]...
--                                  [--sweep KEY=V1,V2]... [--table]
-- Weights are seeded random values (uniform, variance 1/K), quantised by our quantiser (doppler.quantize);
-- K-quants whose rows are not whole 256-blocks are stored zero-padded (as doppler convert --pad-k does),
-- the layout follows hints q_layout / q4k_layout (doppler.weights.layout_for). A large matrix repeats a
-- tile of R distinct rows (R odd, R * K <= 2^20) so that making it and the CPU reference stay cheap.
--
-- Before timing, the GPU output is compared with a CPU reference (double precision) computed from the
-- same weights as the kernel sees them (dequantised, or rounded to f16/bf16): `check` is the largest
-- error relative to the magnitude of the sum, |y - ref| / sum_k |w_k x_k| (for glu the same propagated
-- through act(g) * u, plus |y|); it must stay within 2^-10 with f16 activations (the bound of the fused
-- LM head's test, tests/lua/test_lm_head_fusion.lua) or 1e-4 with f32 ones (tests/lua/test_quant_layout.lua),
-- else the run fails after the other cases.
--
-- Timing: the op's dispatches (captured from the plan, as doppler.loop captures a step) are cycled over
-- `--copies` copies of the weights, so that what a dispatch reads is not left in the GPU's last-level
-- cache by the one before (a model's next layer reads other weights too). Two figures:
--   us_per_call       median over --iters submits of one call each, GPU timestamps around each dispatch
--                     (gpu/profiler.h, as the other scripts);
--   us_per_call_wall  wall clock over one submit of --iters calls (the recorder puts a barrier between
--                     them: each rewrites y), divided by --iters; the median of 3 replays.
-- Before either, the case's recording is replayed for at least --warmup-ms: an idle GPU runs at a low clock
-- and raises it only under sustained load, and a case starts after the CPU has made its weights (quantised
-- ones take seconds). Without it the H100 timed Gemma 3 1B's down projection (f16) at 27.6 us per call after
-- quantised cases and at 9.6 us with it, against 9.6 in the decode profile (docs/BENCHMARKS.md 19d).
-- gb_s = weight_bytes / time, weight_bytes = the weight bytes the kernel streams per call (with
-- q_matmul=dequant_f16, the f16 copies). One JSON line per case (keys in docs/BENCHMARKS.md), or --table.
package.path = (arg[0]:match("^(.*/)") or "./") .. "?.lua;" .. package.path
local doppler = require "doppler"
local cli = require "doppler.cli"
local json = require "doppler.json"
local hints = require "doppler.hints"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local lower = require "doppler.lower"
local f32 = require "doppler.f32"
local act = require "doppler.act"
local profile = require "doppler.profile"
local weights = require "doppler.weights"
local lib = require "bench_lib"

-- Gemma 3 1B's decode matrices: { op, N, K, name }.
local DEFAULT_SHAPES = {
  { "linear", 1536, 1152, "qkv" }, { "linear", 1152, 1024, "o" }, { "glu", 6912, 1152, "gate_up" },
  { "linear", 1152, 6912, "down" }, { "linear", 262144, 1152, "lm_head" },
}
local FLOAT = { f32 = 4, f16 = 2, bf16 = 2 }
local QK = lower.Q_BLOCK
local TILE_ELEMENTS = 1 << 20
local COLD_BYTES = 256 << 20        -- --copies auto: at least this many weight bytes cycled (H100 L2: 50 MB)
local MAX_COPIES = 64

local spec = {
  usage = "doppler recipes/bench/gemv.lua [options]",
  about = "Times the GEMV kernels (one linear or fused gate/up op, compiled as in a model) per weight dtype and\n" ..
          "shape, checks the output against a CPU reference, prints one JSON line per case (or --table).",
  options = {
    { "--shape", "[glu:]N,K", "W is [N, K] (glu: gate and up, each [N, K]); default: Gemma 3 1B's qkv 1536,1152, " ..
      "o 1152,1024, gate/up glu:6912,1152, down 1152,6912, lm head 262144,1152", repeat_ = true },
    { "--dtype", "LIST", "weight dtypes, comma-separated: f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k",
      default = "f16" },
    { "--tokens", "LIST", "T, rows of x (comma-separated list)", default = "1" },
    { "--iters", "N", "timed calls", type = "int", default = 50, min = 1 },
    { "--warmup", "N", "untimed calls (and replays) first (each copy's call at least once)", type = "int", default = 5,
      min = 0 },
    { "--warmup-ms", "MS", "replay each case untimed for at least this long first (the GPU's clock rises under load)",
      type = "number", default = 300, min = 0 },
    { "--copies", "N|auto", "weight copies cycled through (auto: 256 MiB of weights, at most 64)", default = "auto" },
    { "--hint", "KEY=VALUE", "kernel hint (gemv_wg, gemv_rows, gemv_unroll, gemv_q_wg, gemv_q_rows, gemv_q_unroll, q_layout, q_matmul, ...)",
      repeat_ = true },
    { "--sweep", "KEY=V1,V2", "run every case once per value (every --sweep multiplies the settings)", repeat_ = true },
    { "--glu-act", "NAME", "glu's activation", choices = { "gelu_tanh", "silu" }, default = "gelu_tanh" },
    { "--seed", "N", "weight and activation seed", type = "int", default = 1 },
    { "--tol", "X", "check tolerance instead of the built-in bound (to see the check fail)", type = "number" },
    { "--label", "TEXT", "extra 'label' key in every line" },
    { "--table", nil, "print a markdown table instead of JSON lines" },
  },
}

-- ---- options ---------------------------------------------------------------------------------------------

local function parse_shape(s)
  local op, rest = s:match("^(%a+):(.*)$")
  op, rest = op or "linear", rest or s
  local n, k = rest:match("^%s*(%d+)%s*[,x]%s*(%d+)%s*$")
  n, k = math.tointeger(tonumber(n)), math.tointeger(tonumber(k))
  if (op ~= "linear" and op ~= "glu") or not n or n < 1 or k < 1 then
    error(("--shape: '%s' is not [glu:|linear:]N,K with N, K > 0 (e.g. 1536,1152 or glu:6912,1152)"):format(s), 0)
  end
  return { op, n, k, nil }
end

local function list(s, what, check_one)
  local out = {}
  for tok in s:gmatch("[^,%s]+") do out[#out + 1] = check_one(tok) end
  if #out == 0 then error(what .. ": no value given", 0) end
  return out
end

local function parse_dtype(d)
  if not FLOAT[d] and not QK[d] then
    local names = { "f16", "f32", "bf16" }
    for q in pairs(QK) do names[#names + 1] = q end
    table.sort(names, function(a, b) return #a < #b or (#a == #b and a < b) end)
    error(("--dtype: unknown weight dtype '%s'; valid: %s"):format(d, table.concat(names, ", ")), 0)
  end
  if QK[d] and not lower.quant_types[d] then error(("--dtype: %s has no GPU kernel here"):format(d), 0) end
  return d
end

-- The hint settings: the --sweep combinations, each a list of "KEY=VALUE" (checked now, before any work).
local function settings(sweeps)
  local out = { {} }
  for _, s in ipairs(sweeps) do
    local k, vs = s:match("^([%w_]+)=(.+)$")
    if not k then error(("--sweep wants KEY=V1,V2,..., got '%s'"):format(s), 0) end
    local nxt = {}
    for v in vs:gmatch("[^,]+") do
      hints.new():set(k, v, "--sweep")
      for _, c in ipairs(out) do
        local n = { table.unpack(c) }
        n[#n + 1] = k .. "=" .. v
        nxt[#nxt + 1] = n
      end
    end
    out = nxt
  end
  return out
end

-- ---- weights ---------------------------------------------------------------------------------------------

-- One weight [N, K] of dtype: the device bytes of R distinct rows (repeated to N rows when uploaded) and
-- the values the kernel sees, as a flat list of R * K numbers (row-major).
local function make_weight(dev, dtype, N, K, R, salt, seed)
  math.randomseed(seed, salt)
  local Ks = QK[dtype] and (K + QK[dtype] - 1) // QK[dtype] * QK[dtype] or K   -- stored row length
  local a = math.sqrt(3 / K)                                                   -- variance 1/K
  local v = {}
  for r = 0, R - 1 do
    for k = 1, Ks do v[r * Ks + k] = k <= K and (2 * math.random() - 1) * a or 0 end
  end
  local bytes, seen
  if QK[dtype] then
    bytes = doppler.quantize(dtype, f32.bytes(v), Ks)
    local d = f32.values(doppler.dequantize(dtype, bytes, R * Ks), R * Ks)
    seen = {}
    for r = 0, R - 1 do table.move(d, r * Ks + 1, r * Ks + K, r * K + 1, seen) end
  else
    seen = {}
    for i = 1, R * K do seen[i] = doppler.round_to(dtype, v[i]) end
    local t = dev:tensor { dtype = dtype, shape = { R * K } }
    t:upload(seen)
    bytes = t:read()
    t:release()
  end
  return { bytes = bytes, values = seen, K_stored = Ks, row_bytes = #bytes // R }
end

-- The [N, K_stored] device tensor (copies of it), in `layout`.
local function upload_weight(dev, dtype, N, K, R, w, layout)
  local full = w.bytes:rep(N // R) .. w.bytes:sub(1, (N % R) * w.row_bytes)
  if layout ~= "row_wise" then full = doppler.quant_pack(full, dtype, N, w.K_stored, layout) end
  local t = dev:tensor { dtype = dtype, shape = { N, w.K_stored } }
  t:upload(full)
  if QK[dtype] then
    lower.set_layout(t, layout)
    if w.K_stored ~= K then lower.set_padded(t, K) end
  end
  return t
end

-- ---- the CPU reference -----------------------------------------------------------------------------------

-- Row r of the reference for token t: (value, scale), scale the magnitude the error is relative to.
local function reference(c, xv, wv, t, r)
  local K = c.K
  local function dot(vals)
    local s, a, ox, ow = 0, 0, t * K, r * K
    for k = 1, K do
      local p = vals[ow + k] * xv[ox + k]
      s, a = s + p, a + math.abs(p)
    end
    return s, a
  end
  if c.op == "linear" then return dot(wv[1]) end
  local g, sg = dot(wv[1])
  local u, su = dot(wv[2])
  local f = act[c.glu_act]
  local y = f(g) * u
  local d = math.abs((f(g + 1e-4) - f(g - 1e-4)) / 2e-4)
  return y, d * math.abs(u) * sg + math.abs(f(g)) * su + math.abs(y)
end

-- Largest |got - ref| / scale over every output (row n of W repeats tile row n % R).
local function check_output(c, y, xv, wv)
  local worst, at = 0, nil
  for t = 0, c.T - 1 do
    for r = 0, c.R - 1 do
      local want, scale = reference(c, xv, wv, t, r)
      scale = math.max(scale, 1e-30)
      for n = r, c.N - 1, c.R do
        local got = y[t * c.N + n + 1]
        local e = (got ~= got) and math.huge or math.abs(got - want) / scale
        if e > worst then worst, at = e, { t = t, n = n, got = got, want = want } end
      end
    end
  end
  return worst, at
end

-- ---- one case --------------------------------------------------------------------------------------------

local function graph_of(c)
  local g = Graph.new { name = "gemv_bench" }
  local x = g:input("x", { "T", c.K }, c.act)
  local w1 = g:weight { name = "w1", shape = { c.N, c.K }, dtype = c.dtype }
  if c.op == "linear" then
    g:output("y", g:linear(x, w1))
  else
    local w2 = g:weight { name = "w2", shape = { c.N, c.K }, dtype = c.dtype }
    local gate = g:linear(x, w1)
    g:output("y", g[c.glu_act](g, gate) * g:linear(x, w2))
  end
  return g
end

-- Compiles the graph once per weight copy; returns each copy's calls { kernel, groups, push } and the plans.
local function compile(dev, c, h, xt, copies)
  local g = graph_of(c)
  local calls, plans, arena = {}, {}, nil
  for i, ws in ipairs(copies) do
    local captured
    local env = { T = c.T, act = c.act, kv = c.act, hints = h, weights = { w1 = ws[1], w2 = ws[2] },
                  inputs = { x = xt }, states = {}, constants = function() end, arena = arena,
                  loop = { record = function(_, p) captured = p.calls end } }
    local p = plan.compile(dev, g, env)
    arena = p.arena                 -- one arena: every copy writes the same y (a barrier between calls)
    calls[i], plans[i] = captured, p
  end
  return calls, plans
end

local function record(dev, calls_list)
  local rec = dev:recorder()
  for _, calls in ipairs(calls_list) do
    for _, k in ipairs(calls) do rec:dispatch(k.kernel, k.groups, k.push) end
  end
  return rec
end

local function median(xs) return lib.percentile(xs, 0.5) end

local function time_case(dev, o, calls, caps)
  local C = #calls
  local r = {}
  -- wall clock: one recording of --iters calls, cycling the copies (no timestamp queries in it)
  dev:profile(false)
  local seq = {}
  for i = 1, o.iters do seq[i] = calls[(i - 1) % C + 1] end
  local rec = record(dev, seq)
  for _ = 1, math.max(1, o.warmup) do rec:run() end
  local t_warm = doppler.clock()
  while (doppler.clock() - t_warm) * 1e3 < o.warmup_ms do rec:run() end
  local dts = {}
  for i = 1, 3 do
    local t0 = doppler.clock()
    rec:run()
    dts[i] = doppler.clock() - t0
  end
  r.us_per_call_wall = median(dts) * 1e6 / o.iters
  if not caps.timestamps then return r end
  -- GPU timestamps: one call per submit, its time read from the profiler's totals after each
  dev:profile(true)
  local recs = {}
  for i = 1, C do recs[i] = record(dev, { calls[i] }) end
  for i = 1, math.max(o.warmup, C) do recs[(i - 1) % C + 1]:run() end   -- each recording submitted once
  profile.clear(dev)                 -- forgets the warm-up; the recordings keep their queries
  local us, prev = {}, 0
  for i = 1, o.iters do
    recs[(i - 1) % C + 1]:run()
    local total = 0
    for _, e in pairs(dev:profile()) do total = total + e.total_us end
    us[i], prev = total - prev, total
  end
  dev:profile(false)
  r.us_per_call = median(us)
  return r
end

local function run_case(dev, o, c, h, ws_cache, caps)
  local layout = FLOAT[c.dtype] and "row_wise" or weights.layout_for(c.dtype, 2, h, caps)
  c.layout = layout
  -- the weight copies of this layout (kept across hint settings)
  local key = layout
  if not ws_cache[key] then
    local one = {}
    for j, w in ipairs(c.w) do one[j] = upload_weight(dev, c.dtype, c.N, c.K, c.R, w, layout) end
    local n = o.copies
    if n == "auto" then
      local b = 0
      for _, t in ipairs(one) do b = b + t:nbytes() end
      n = math.max(1, math.min(MAX_COPIES, (COLD_BYTES + b - 1) // b))
    end
    local copies = { one }
    for i = 2, n do
      copies[i] = {}
      for j, w in ipairs(c.w) do copies[i][j] = upload_weight(dev, c.dtype, c.N, c.K, c.R, w, layout) end
    end
    ws_cache[key] = copies
  end
  local copies = ws_cache[key]
  local xt = dev:tensor { dtype = c.act, shape = { c.T, c.K } }
  xt:upload(c.xv)
  local calls, plans = compile(dev, c, h, xt, copies)

  -- what the kernels read: our tensors (quantised blocks decoded in the kernel) or f16 copies of them
  local names, groups, fused = {}, {}, false
  for _, k in ipairs(calls[1]) do
    names[#names + 1] = k.kernel:name()
    groups[#groups + 1] = k.groups
    for _, v in pairs(k.push) do
      for _, w in ipairs(copies[1]) do fused = fused or rawequal(v, w) end
    end
  end
  local row = { op = c.op, name = c.name, dtype = c.dtype, layout = layout, N = c.N, K = c.K, T = c.T, act = c.act,
                kernel = table.concat(names, "+"), groups = groups, copies = #copies, iters = o.iters }
  if c.w[1].K_stored ~= c.K then row.K_stored = c.w[1].K_stored end
  row.weight_bytes = 0
  for _, t in ipairs(copies[1]) do
    row.weight_bytes = row.weight_bytes + ((QK[c.dtype] and not fused) and c.N * c.K * 2 or t:nbytes())
  end
  if QK[c.dtype] then row.q_matmul = fused and "fused" or "dequant_f16" end
  if #names == 1 and (names[1] == "gemv" or names[1] == "gemv_q") then
    -- the GEMV's workgroup size, rows per workgroup and UN, from the function doppler.lower uses
    row.wg, row.rows, row.un = lower.gemv_params({ dev = dev, env = { hints = h } }, names[1] == "gemv_q", math.min(c.T, 4), c.N, c.K)
  end

  -- check, before timing
  local rec = record(dev, { calls[1] })
  rec:run()
  local y = plans[1]:output("y"):download()
  local err, at = check_output(c, y, c.xv, { c.w[1].values, c.w[2] and c.w[2].values })
  row.check = err
  row.check_tol = o.tol or (c.act == "f16" and 2 ^ -10 or 1e-4)
  if not (err <= row.check_tol) then
    row.check_failed = ("token %d row %d: got %.6g, want %.6g"):format(at.t, at.n, at.got, at.want)
    return row
  end
  local tm = time_case(dev, o, calls, caps)
  row.us_per_call, row.us_per_call_wall = tm.us_per_call, tm.us_per_call_wall
  if row.us_per_call then row.gb_s = row.weight_bytes / (row.us_per_call * 1e-6) / 1e9 end
  row.gb_s_wall = row.weight_bytes / (row.us_per_call_wall * 1e-6) / 1e9
  row.timestamps = caps.timestamps
  return row
end

-- ---- main ------------------------------------------------------------------------------------------------

local COLUMNS = {
  { "name", "name" }, { "op", "op" }, { "dtype", "dtype" }, { "layout", "layout" }, { "N", "N" }, { "K", "K" },
  { "T", "T" }, { "hints", function(r) return lib.hints_text(r.hints) end }, { "kernel", "kernel" },
  { "GPU us", "us_per_call", "%.2f" }, { "GB/s", "gb_s", "%.1f" }, { "wall us", "us_per_call_wall", "%.2f" },
  { "wall GB/s", "gb_s_wall", "%.1f" }, { "check", "check", "%.2e" },
}

local function print_table(rows)
  local head, rule = {}, {}
  for i, col in ipairs(COLUMNS) do head[i], rule[i] = col[1], "---" end
  print("| " .. table.concat(head, " | ") .. " |")
  print("| " .. table.concat(rule, " | ") .. " |")
  for _, r in ipairs(rows) do
    local cells = {}
    for i, col in ipairs(COLUMNS) do
      local v = type(col[2]) == "function" and col[2](r) or r[col[2]]
      if v == nil then cells[i] = "-"
      elseif col[3] then cells[i] = col[3]:format(v)
      else cells[i] = tostring(v):gsub("|", "\\|") end
    end
    print("| " .. table.concat(cells, " | ") .. " |")
  end
end

local function main(argv)
  local o = cli.parse(argv, spec)
  if #o._ > 0 then error(("unexpected argument '%s' (options start with --)"):format(o._[1]), 0) end
  local shapes = #o.shape > 0 and {} or DEFAULT_SHAPES
  for i, s in ipairs(o.shape) do shapes[i] = parse_shape(s) end
  local dtypes = list(o.dtype, "--dtype", parse_dtype)
  local tokens = list(o.tokens, "--tokens", function(s)
    local v = math.tointeger(tonumber(s))
    if not v or v < 1 then error(("--tokens: '%s' is not a token count >= 1"):format(s), 0) end
    return v
  end)
  if o.copies ~= "auto" then
    local v = math.tointeger(tonumber(o.copies))
    if not v or v < 1 then error(("--copies: '%s' is not auto or a count >= 1"):format(o.copies), 0) end
    o.copies = v
  end
  local base = hints.new()
  base:apply_args(o.hint)                     -- an unknown hint or value fails here
  local combos = settings(o.sweep)
  for _, d in ipairs(dtypes) do
    for _, s in ipairs(shapes) do
      if QK[d] and s[3] % 16 ~= 0 then
        error(("--shape %d,%d: quantised kernels need K a multiple of 16"):format(s[2], s[3]), 0)
      elseif QK[d] == 32 and s[3] % 32 ~= 0 then
        error(("--shape %d,%d: %s needs K a multiple of 32 (rows are padded for the K-quants only)"):format(
          s[2], s[3], d), 0)
      end
    end
  end

  local dev = doppler.device()
  local caps = dev:caps()
  local rows, failed = {}, {}
  for si, s in ipairs(shapes) do
    for _, dtype in ipairs(dtypes) do
      local N, K = s[2], s[3]
      local c = { op = s[1], N = N, K = K, name = s[4], dtype = dtype, glu_act = o.glu_act }
      local Ks = QK[dtype] and (K + QK[dtype] - 1) // QK[dtype] * QK[dtype] or K
      c.R = math.min(N, math.max(1, TILE_ELEMENTS // Ks))
      if c.R < N and c.R % 2 == 0 then c.R = c.R - 1 end   -- odd: the tile does not line up with row groups
      c.w = { make_weight(dev, dtype, N, K, c.R, si * 2 - 1, o.seed) }
      if c.op == "glu" then c.w[2] = make_weight(dev, dtype, N, K, c.R, si * 2, o.seed) end
      local ws_cache, xs = {}, {}
      for _, T in ipairs(tokens) do
        for _, combo in ipairs(combos) do
          local h = hints.new()
          h:apply_args(o.hint)
          h:apply_args(combo)
          local exact = h:get("precision") == "f32"
          c.act = h:get("act_dtype")
          if c.act == "auto" then c.act = exact and "f32" or "f16" end
          c.T = T
          local key = T .. c.act            -- x: seeded values, exact in the activation type
          if not xs[key] then
            math.randomseed(o.seed, -T)
            local xv = {}
            for i = 1, T * K do xv[i] = doppler.round_to(c.act, 2 * math.random() - 1) end
            xs[key] = xv
          end
          c.xv = xs[key]
          local okc, row = pcall(run_case, dev, o, c, h, ws_cache, caps)
          if not okc then   -- e.g. a swept gemv_wg * gemv_rows the kernel cannot take: the other cases still run
            row = { op = c.op, name = c.name, dtype = dtype, N = N, K = K, T = T, act = c.act,
                    error = (tostring(row):gsub("^[^:\n]*%.lua:%d+: ", "")) }
          end
          row.hints = {}
          for k, v in pairs(h.values) do if h.sources[k] ~= "default" then row.hints[k] = v end end
          row.device, row.driver, row.label, row.seed = caps.name, caps.driver, o.label, o.seed
          if row.error then
            failed[#failed + 1] = ("%s %s %dx%d T=%d (%s): %s"):format(row.op, dtype, N, K, T,
              lib.hints_text(row.hints), row.error)
            io.stderr:write("gemv: ", failed[#failed], "\n")
          elseif row.check_failed then
            failed[#failed + 1] = ("%s %s %dx%d T=%d (%s): check %.3g exceeds %.3g at %s"):format(
              row.op, row.dtype, N, K, T, lib.hints_text(row.hints), row.check, row.check_tol, row.check_failed)
            io.stderr:write("gemv: ", failed[#failed], "\n")
          end
          if o.table then rows[#rows + 1] = row else print(json.encode(row)); io.stdout:flush() end
          collectgarbage()   -- the case's plans and recorders (Vulkan objects Lua's heap size does not show)
        end
      end
      ws_cache = nil
      c = nil
      collectgarbage()
    end
  end
  if o.table then print_table(rows) end
  if #failed > 0 then
    error(("%d case(s) failed (see above): an error, or an output that differs from the CPU reference beyond "
           .. "the tolerance (a wrong kernel variant?)"):format(#failed), 0)
  end
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("gemv: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
