-- recipes/bench/gemv.lua on lavapipe with tiny shapes: every JSON line carries the documented keys with
-- consistent values (weight bytes of each dtype, GB/s = bytes / time, the kernel the plan chose, the hints
-- and layout applied), the output check stays within its tolerance (and fails the run when the tolerance
-- is made impossible), --table prints a markdown table, bad options fail with a message. Timings never
-- decide anything here.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"

local tmp = os.tmpname()

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

-- --warmup-ms 0: the clock warm-up matters on a GPU, not for what these cases check (it would add 0.3 s each)
local function gemv(args)
  local a = { "recipes/bench/gemv.lua", "--warmup-ms", "0" }
  for _, x in ipairs(args) do a[#a + 1] = x end
  return json_lines((check.must_run(a)))
end

local function positive(row, key)
  check.truthy(type(row[key]) == "number" and row[key] > 0, ("%s = %s, want a number > 0"):format(key, tostring(row[key])))
end

local REQUIRED = { "device", "op", "dtype", "layout", "N", "K", "T", "hints", "kernel", "us_per_call_wall",
                   "weight_bytes", "gb_s_wall", "check", "check_tol", "copies", "act" }

-- Keys, the check, and GB/s from the times; us_per_call / gb_s where the device has timestamps.
local function check_row(r)
  for _, k in ipairs(REQUIRED) do check.truthy(r[k] ~= nil, "key '" .. k .. "' is missing") end
  check.truthy(type(r.hints) == "table", "hints is an object")
  check.truthy(r.check >= 0 and r.check <= r.check_tol, ("check %s within %s"):format(r.check, r.check_tol))
  local tol = r.act == "f16" and 2 ^ -10 or 1e-4
  check.near(r.check_tol, tol, 1e-5 * tol, "tolerance of the activation type")   -- JSON keeps 6 digits
  positive(r, "us_per_call_wall")
  check.near(r.gb_s_wall, r.weight_bytes / r.us_per_call_wall / 1e3, 1e-4 * r.gb_s_wall, "wall GB/s = bytes / time")
  check.truthy(r.check_failed == nil, "no failure note")
  if r.timestamps then
    positive(r, "us_per_call")
    check.near(r.gb_s, r.weight_bytes / r.us_per_call / 1e3, 1e-4 * r.gb_s, "GB/s = bytes / GPU time")
  end
end

local BYTES = { f16 = function(N, K) return N * K * 2 end, q8_0 = function(N, K) return N * K // 32 * 34 end,
                q4_k = function(N, K) return N * ((K + 255) // 256) * 144 end }

check.case("linear and glu, f16 / q4_k / q8_0, T = 1 and 2: one checked line per case", function()
  local rows = gemv({ "--shape", "64,256", "--shape", "glu:64,256", "--dtype", "f16,q4_k,q8_0", "--tokens", "1,2",
                      "--iters", "3", "--warmup", "1", "--copies", "2", "--label", "lvp" })
  check.eq(#rows, 12, "2 shapes x 3 dtypes x 2 token counts")
  local i = 0
  for _, op in ipairs({ "linear", "glu" }) do
    for _, dtype in ipairs({ "f16", "q4_k", "q8_0" }) do
      for _, T in ipairs({ 1, 2 }) do
        i = i + 1
        local r = rows[i]
        check_row(r)
        check.eq(r.op, op, "op")
        check.eq(r.dtype, dtype, "dtype")
        check.eq(r.T, T, "T")
        check.eq(r.N, 64, "N")
        check.eq(r.K, 256, "K")
        check.eq(r.copies, 2, "copies")
        check.eq(r.label, "lvp", "label")
        check.eq(r.layout, "row_wise", "default layout")
        check.eq(r.act, "f16", "default activations")
        check.eq(next(r.hints), nil, "no hint set")
        local quant = dtype ~= "f16"
        local want = quant and "gemv_q" or (op == "glu" and "gemv_multi" or "gemv")
        if quant and r.q_matmul == "dequant_f16" then want = op == "glu" and "gemv_multi" or "gemv" end
        check.eq(r.kernel, want, ("%s %s kernel"):format(op, dtype))
        local n_w = op == "glu" and 2 or 1
        local per = (quant and r.q_matmul == "fused") and BYTES[dtype](64, 256) or BYTES.f16(64, 256)
        check.eq(r.weight_bytes, n_w * per, "weight bytes read per call")
        if r.kernel == "gemv_q" then
          -- a GPU: 128 invocations, 1 row (64 rows are too few for more per workgroup); a CPU device
          -- (lavapipe): 8 rows of one subgroup-wide vector of lanes each (lower.gemv_params)
          local c = doppler.device():caps()
          local cpu = c.type == "cpu"
          check.eq(r.wg, cpu and 8 * c.subgroup_size or 128, "gemv_q's default workgroup")
          check.eq(r.rows, cpu and 8 or 1, "gemv_q's default rows")
        end
      end
    end
  end
end)

check.case("gemv_q's built-in rows per workgroup follow the matrix", function()
  local lower = require "doppler.lower"
  -- Gemma 3 1B: gate+up and the LM head (many rows, K = 1152) 8; down (K = 6912) and q, k, v, o 1
  check.eq(lower.gemv_q_rows(6912, 1152, 128), 8, "gate+up 6912 x 1152")
  check.eq(lower.gemv_q_rows(262144, 1152, 128), 8, "LM head 262144 x 1152")
  check.eq(lower.gemv_q_rows(1152, 6912, 128), 1, "down 1152 x 6912")
  check.eq(lower.gemv_q_rows(1024, 1152, 128), 1, "q 1024 x 1152")
  check.eq(lower.gemv_q_rows(256, 1152, 128), 1, "k 256 x 1152")
  -- Llama 3.2 1B: gate+up 8192 x 2048 (64 units) 4, since 8 would leave 4 units per thread; down
  -- 2048 x 8192 (256 units) 1, since 2 would leave 4
  check.eq(lower.gemv_q_rows(8192, 2048, 128), 4, "Llama gate+up 8192 x 2048")
  check.eq(lower.gemv_q_rows(2048, 8192, 128), 1, "Llama down 2048 x 8192")
  check.eq(lower.gemv_q_rows(2048, 2048, 128), 2, "Llama q, o 2048 x 2048 (4 would leave 512 workgroups)")
  -- a workgroup of 32 over K = 4096 (128 units): no row count keeps 3 units per thread, so 1
  check.eq(lower.gemv_q_rows(8192, 4096, 32), 1, "8192 x 4096, workgroups of 32")
end)

check.case("hints, sweeps, layouts, padded K-quant rows, f32 activations, the tiled GEMM", function()
  local rows = gemv({ "--shape", "40,640", "--dtype", "q4_k", "--tokens", "1,5", "--iters", "2", "--warmup", "0",
                      "--copies", "1", "--hint", "q_matmul=fused", "--hint", "act_dtype=f32", "--hint", "gemv_q_wg=64",
                      "--sweep", "q_layout=row_wise,flat", "--sweep", "gemv_q_rows=2,8" })
  check.eq(#rows, 8, "2 token counts x 2 layouts x 2 row counts")
  for _, r in ipairs(rows) do
    check_row(r)
    check.eq(r.act, "f32", "act_dtype=f32")
    check.eq(r.K_stored, 768, "rows padded to whole 256-blocks")
    check.eq(r.weight_bytes, 40 * 3 * 144, "the padded blocks")
    check.eq(r.layout, r.hints.q_layout, "the swept layout")
    check.eq(r.hints.gemv_q_wg, 64, "--hint reported")
    check.eq(r.q_matmul, "fused", "q_matmul")
    if r.T == 1 then
      check.eq(r.kernel, "gemv_q", "T=1 kernel")
      check.eq(r.wg, 64, "gemv_q_wg applied")
      check.eq(r.rows, r.hints.gemv_q_rows, "gemv_q_rows applied")
      check.eq(r.groups[1][1], 40 // r.rows, "one workgroup per gemv_q_rows rows")
    else
      check.eq(r.kernel, "gemm_q", "T=5: the tiled GEMM")
    end
  end
  -- an f16 copy for the float kernels: its bytes are what the kernel reads
  local d = gemv({ "--shape", "glu:24,512", "--dtype", "q8_0", "--iters", "2", "--copies", "1",
                   "--hint", "q_matmul=dequant_f16", "--glu-act", "silu" })
  check_row(d[1])
  check.eq(d[1].q_matmul, "dequant_f16", "q_matmul")
  check.eq(d[1].kernel, "gemv_multi", "the float gate/up kernel")
  check.eq(d[1].weight_bytes, 2 * 24 * 512 * 2, "two f16 copies")
end)

check.case("--table: a markdown table, one row per case", function()
  local out = check.must_run({ "recipes/bench/gemv.lua", "--shape", "16,64", "--dtype", "f32,bf16", "--iters", "1",
                               "--copies", "1", "--table" })
  local lines = {}
  for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
  check.eq(#lines, 4, "header + rule + 2 rows")
  check.truthy(lines[1]:match("^| name | op | dtype | layout | N | K | T | hints | kernel | GPU us |"), "header: " .. lines[1])
  check.truthy(lines[3]:match("^| %- | linear | f32 | row_wise | 16 | 64 | 1 | default | gemv |"), "row: " .. lines[3])
  check.truthy(lines[4]:match("^| %- | linear | bf16 |"), "row: " .. lines[4])
end)

check.case("the check fails the run when the output is off by more than the tolerance", function()
  local ok, out, e = check.run({ "recipes/bench/gemv.lua", "--shape", "32,256", "--dtype", "q4_k", "--iters", "1",
                                 "--copies", "1", "--tol", "1e-12" })
  check.truthy(not ok, "exit status")
  check.truthy(e:match("check [%d.e%-]+ exceeds 1e%-12 at token 0 row %d+: got") and e:match("differs from the CPU reference"),
               "message: " .. e)
  local r = json_lines(out)[1]
  check.truthy(r and r.check_failed and r.us_per_call_wall == nil, "the line notes the failure, no timing")
end)

check.case("bad options fail with a message", function()
  local function fails(args, pattern, what)
    local a = { "recipes/bench/gemv.lua" }
    for _, x in ipairs(args) do a[#a + 1] = x end
    local ok, _, e = check.run(a)
    check.truthy(not ok and e:match(pattern), what .. ": " .. tostring(e))
  end
  fails({ "--dtype", "f16,q3_k" }, "unknown weight dtype 'q3_k'; valid: f16", "unknown dtype")
  fails({ "--shape", "64x" }, "'64x' is not %[glu:|linear:%]N,K", "malformed shape")
  fails({ "--shape", "mlp:64,256" }, "'mlp:64,256' is not", "unknown op")
  fails({ "--hint", "gemv_q_cols=2" }, "unknown hint 'gemv_q_cols'", "unknown hint")
  fails({ "--hint", "gemv_q_rows=3" }, "gemv_q_rows=3 is not valid", "bad hint value")
  fails({ "--sweep", "gemv_q_wg" }, "%-%-sweep wants KEY=V1,V2", "malformed sweep")
  fails({ "--warmup-ms", "-5" }, "%-%-warmup%-ms", "negative warm-up")
  fails({ "--tokens", "1,0" }, "'0' is not a token count", "bad token count")
  fails({ "--shape", "8,48", "--dtype", "q8_0" }, "q8_0 needs K a multiple of 32", "K not whole blocks")
end)

os.remove(tmp)
check.done()
