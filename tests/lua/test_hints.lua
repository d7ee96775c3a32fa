-- Hints and manifests through the command line:
--   precedence recipe < manifest < --hints FILE < --hint KEY=VALUE, shown by --show-hints with sources;
--   a manifest runs a model (its hints take effect: precision=f32 gives the same logits as --hint);
--   `doppler run --model M.yaml` takes the manifest's recipe;
--   errors (unknown key, bad value, unknown hint, wrong recipe, missing file or model) name the file
--   and list what is valid;
--   gemv_unroll / gemv_q_unroll reach the GEMV kernels as their spec constant UN (plan.kernel_specs), capped
--   so that UN * tokens per workgroup <= 4, and change no output bit.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. check.quote(tmp))
local function write(name, text)
  local f = assert(io.open(tmp .. "/" .. name, "w"))
  f:write(text)
  f:close()
  return tmp .. "/" .. name
end

local TINY = check.fixtures .. "/models/gemma3-tiny"
-- The gemma3 recipe with hints of its own (recipes ship none yet).
local recipe = write("gemma3_hinted.lua", ([[
local r = dofile(%q)
r.hints = { context = 1024, prefill_chunk = 32, matmul = "gemv", kv_dtype = "f32" }
return r
]]):format(doppler.home() .. "/recipes/gemma3.lua"))
local manifest = write("tiny.yaml", ([[
name: tiny
model: %s
recipe: gemma3
quantization: f32
kernel_hints:
  prefill_chunk: 64
  matmul: gemm
  kv_dtype: f16
]]):format(TINY))
local hints_file = write("hints.yaml", "matmul: gemv\nkv_dtype: f32\n")

-- --show-hints output -> { key = {value, source} }
local function shown(out)
  local t = {}
  for line in out:gmatch("[^\n]+") do
    local k, v, src = line:match("^(%S+)%s+=%s+(%S+)%s+%((.*)%)$")
    if k then t[k] = { v, src } end
  end
  return t
end

check.case("precedence: recipe < manifest < --hints FILE < --hint, with sources", function()
  local out = check.must_run({ recipe, "--model", manifest, "--hints", hints_file, "--hint", "kv_dtype=f16",
                               "--show-hints" })
  local h = shown(out)
  check.eq(h.context[1], "1024", "context value");             check.eq(h.context[2], "recipe gemma3", "context source")
  check.eq(h.prefill_chunk[1], "64", "prefill_chunk value");   check.eq(h.prefill_chunk[2], "manifest tiny", "prefill_chunk source")
  check.eq(h.matmul[1], "gemv", "matmul value");               check.eq(h.matmul[2], "--hints " .. hints_file, "matmul source")
  check.eq(h.kv_dtype[1], "f16", "kv_dtype value");            check.eq(h.kv_dtype[2], "--hint", "kv_dtype source")
  check.eq(h.precision[1], "default", "precision value");      check.eq(h.precision[2], "default", "precision source")
  -- without the later layers, the earlier ones show through
  h = shown(check.must_run({ recipe, "--model", manifest, "--show-hints" }))
  check.eq(h.matmul[1], "gemm", "manifest matmul");  check.eq(h.kv_dtype[2], "manifest tiny", "manifest kv_dtype")
  h = shown(check.must_run({ recipe, "--show-hints" }))
  check.eq(h.matmul[1], "gemv", "recipe matmul");    check.eq(h.prefill_chunk[2], "recipe gemma3", "recipe prefill_chunk")
end)

check.case("a manifest runs its model; its hints take effect; doppler run takes its recipe", function()
  local f32_manifest = write("tiny-f32.yaml", ("model: %s\nrecipe: gemma3\nkernel_hints:\n  precision: f32\n"):format(TINY))
  local ids = "2,10,20,30,40"
  local function logits(args)
    local out = tmp .. "/l.f32"
    local a = { "--ids", ids, "--max-tokens", "0", "--logits-out", out, "--quiet" }
    for _, x in ipairs(a) do args[#args + 1] = x end
    check.must_run(args)
    return check.read_file(out)
  end
  local direct = logits({ "recipes/gemma3.lua", "--model", TINY, "--hint", "precision=f32" })
  check.truthy(logits({ "recipes/gemma3.lua", "--model", f32_manifest }) == direct, "manifest precision=f32 = --hint precision=f32")
  check.truthy(logits({ "run", "--model", f32_manifest }) == direct, "doppler run --model MANIFEST")
  local default = logits({ "recipes/gemma3.lua", "--model", TINY })
  check.truthy(default ~= direct, "the hint changes the logits (the comparison can fail)")
  local h = shown(check.must_run({ "run", "--model", manifest, "--show-hints" }))
  check.eq(h.matmul[2], "manifest tiny", "doppler run applies the manifest's hints")
end)

local function fails(args, ...)
  local ok, _, e = check.run(args)
  check.truthy(not ok, "should fail: " .. table.concat(args, " "))
  for _, needle in ipairs({ ... }) do
    check.truthy(e:find(needle, 1, true), ("'%s' not in the message:\n%s"):format(needle, e))
  end
end

check.case("errors name the file and list what is valid", function()
  fails({ "recipes/gemma3.lua", "--model", write("k.yaml", "model: x\nhints: {}\n"), "--show-hints" },
        "k.yaml", "unknown key 'hints'", "valid keys: name, model, recipe, quantization")
  fails({ "recipes/gemma3.lua", "--model", write("v.yaml", "model: x\nkernel_hints:\n  q_matmul: fastest\n"), "--show-hints" },
        "v.yaml:3", "q_matmul=fastest is not valid", "valid values: auto, fused, dequant_f16")
  fails({ "recipes/gemma3.lua", "--model", write("u.yaml", "model: x\nkernel_hints:\n  q4k_speed: 1\n"), "--show-hints" },
        "u.yaml:3", "unknown hint 'q4k_speed'", "valid hints: act_dtype, attention_decode")
  fails({ "recipes/gemma3.lua", "--model", write("q.yaml", "model: x\nquantization: q2\n"), "--show-hints" },
        "q.yaml", "valid values: f32, f16, bf16")
  fails({ "recipes/gemma3.lua", "--hints", write("hb.yaml", "kv_dtype: f8\n"), "--show-hints" },
        "hb.yaml:1", "valid values: auto, f16, f32")
  fails({ "recipes/gemma3.lua", "--show-hints", "--hint", "kv_dtyp=f16" }, "unknown hint 'kv_dtyp'", "valid hints:")
  fails({ "recipes/llama3.lua", "--model", manifest, "--show-hints" }, "for the gemma3 recipe, not llama3")
  fails({ "recipes/gemma3.lua", "--model", tmp .. "/none.yaml", "--show-hints" }, tmp .. "/none.yaml", "cannot open")
  fails({ "recipes/gemma3.lua", "--model", write("nomodel.yaml", "model: no/such/dir\n"), "--ids", "1" },
        "nomodel.yaml", "no/such/dir does not exist")
  fails({ "run", "--model", write("norecipe.yaml", "model: x\nrecipe: gemma9\n"), "--show-hints" }, "recipe 'gemma9' does not exist")
end)

check.case("gemv_unroll / gemv_q_unroll: only 0, 1, 2, 4", function()
  fails({ "recipes/gemma3.lua", "--show-hints", "--hint", "gemv_unroll=3" },
        "gemv_unroll=3 is not valid", "valid values: 0, 1, 2, 4")
  fails({ "recipes/gemma3.lua", "--hints", write("un.yaml", "gemv_q_unroll: 8\n"), "--show-hints" },
        "un.yaml:1", "gemv_q_unroll=8 is not valid", "valid values: 0, 1, 2, 4")
  local h = shown(check.must_run({ "recipes/gemma3.lua", "--show-hints", "--hint", "gemv_q_unroll=4" }))
  check.eq(h.gemv_q_unroll[1], "4", "gemv_q_unroll value");  check.eq(h.gemv_q_unroll[2], "--hint", "its source")
  check.eq(h.gemv_unroll[1], "0", "gemv_unroll default")
end)

-- Every GEMV kernel the planner makes, in one graph: a float linear (gemv), float gate/up (gemv_multi
-- DP_GLU), float q/k/v (gemv_multi), a Q8_0 linear (gemv_q) and Q8_0 gate/up (gemv_q DP_GLU).
local dev = doppler.device()
local K, KQ = 256, 96
local rng = 99
local function rnd() rng = (rng * 1103515245 + 12345) % 2147483648; return rng / 1073741824 - 1 end
local function ftensor(shape)
  local v = {}
  for i = 1, shape[1] * (shape[2] or 1) do v[i] = rnd() end
  local t = dev:tensor { dtype = "f32", shape = shape }
  t:upload(v)
  return t
end
local function q8_tensor(N)   -- blocks with d = 1/64 and codes in -8..8
  local bytes = {}
  for _ = 1, N * KQ // 32 do
    bytes[#bytes + 1] = string.pack("<I2", 0x2400)
    for _ = 1, 32 do bytes[#bytes + 1] = string.pack("<i1", math.floor((rnd() + 1) * 8.5) - 8) end
  end
  local t = dev:tensor { dtype = "q8_0", shape = { N, KQ } }
  t:upload(table.concat(bytes))
  return t
end
local W = {
  w1 = ftensor { 21, K }, wg = ftensor { 19, K }, wu = ftensor { 19, K },
  wq = ftensor { 16, K }, wk = ftensor { 16, K }, wv = ftensor { 16, K },
  q1 = q8_tensor(13), qg = q8_tensor(11), qu = q8_tensor(11),
}
local function gemv_graph()
  local g = Graph.new { name = "gemvs" }
  local function w(name, N, k, dtype) return g:weight { name = name, shape = { N, k }, dtype = dtype or "f32" } end
  local x1, xa, xb = g:input("x1", { "T", K }, "act"), g:input("xa", { "T", K }, "act"), g:input("xb", { "T", K }, "act")
  local xq, xr = g:input("xq", { "T", KQ }, "act"), g:input("xr", { "T", KQ }, "act")
  g:output("y1", g:linear(x1, w("w1", 21, K)))
  g:output("glu", g:silu(g:linear(xa, w("wg", 19, K))) * g:linear(xa, w("wu", 19, K)))
  g:output("qkv", g:linear(xb, w("wq", 16, K)) + g:linear(xb, w("wk", 16, K)) + g:linear(xb, w("wv", 16, K)))
  g:output("yq", g:linear(xq, w("q1", 13, KQ, "q8_0")))
  g:output("gluq", g:silu(g:linear(xr, w("qg", 11, KQ, "q8_0"))) * g:linear(xr, w("qu", 11, KQ, "q8_0")))
  return g
end
local X = {}
for _, T in ipairs { 1, 2, 3 } do
  X[T] = { x1 = ftensor { T, K }, xa = ftensor { T, K }, xb = ftensor { T, K }, xq = ftensor { T, KQ }, xr = ftensor { T, KQ } }
end

-- Compiles and runs the graph at T with the given hints; returns outputs and { kernel name -> { UN, ... } }.
local function run_gemvs(T, set)
  local h = hints.new()
  h:set("q_matmul", "fused", "test")
  for k, v in pairs(set) do h:set(k, v, "test") end
  local p = plan.compile(dev, gemv_graph(), { T = T, act = "f32", kv = "f32", hints = h, weights = W,
                                              inputs = X[T], states = {}, constants = function() end })
  p:run()
  local r = { outputs = {}, un = {} }
  for _, name in ipairs { "y1", "glu", "qkv", "yq", "gluq" } do r.outputs[name] = p:output(name):download() end
  for i, k in ipairs(p.kernel_log) do
    local spec = p.kernel_specs[i]
    local un = r.un[k:name()] or {}
    un[#un + 1] = spec and spec.constants and spec.constants.UN
    r.un[k:name()] = un
  end
  return r
end

local function all_un(r, name, want, count)
  local l = r.un[name] or {}
  check.eq(#l, count, name .. " dispatches")
  for i, v in ipairs(l) do check.eq(v, want, ("%s #%d: UN"):format(name, i)) end
end

check.case("gemv_unroll / gemv_q_unroll reach gemv, gemv_multi and gemv_q as UN; outputs bit for bit the same", function()
  for _, T in ipairs { 1, 2, 3 } do
    local base = run_gemvs(T, { gemv_unroll = 1, gemv_q_unroll = 1 })
    all_un(base, "gemv", 1, 1);  all_un(base, "gemv_multi", 1, 2);  all_un(base, "gemv_q", 1, 2)
    for _, c in ipairs {
      { set = {}, f = 2, q = 1 },                              -- the built-in choice (0): 2 float, 1 quantised
      { set = { gemv_unroll = 2 }, f = 2, q = 1 },
      { set = { gemv_q_unroll = 2 }, f = 2, q = 2 },
      { set = { gemv_unroll = 4, gemv_q_unroll = 4 }, f = 4, q = 4 },
      { set = { gemv_unroll = 1, gemv_q_unroll = 0 }, f = 1, q = 1 },
    } do
      local cap = 4 // math.min(T, 4)      -- UN * tokens per workgroup <= 4
      local r = run_gemvs(T, c.set)
      local what = ("T=%d %s%s"):format(T, c.set.gemv_unroll and ("gemv_unroll=" .. c.set.gemv_unroll .. " ") or "",
                                        c.set.gemv_q_unroll and ("gemv_q_unroll=" .. c.set.gemv_q_unroll) or "")
      all_un(r, "gemv", math.min(c.f, cap), 1)
      all_un(r, "gemv_multi", math.min(c.f, cap), 2)
      all_un(r, "gemv_q", math.min(c.q, cap), 2)
      for name, want in pairs(base.outputs) do
        local got = r.outputs[name]
        check.eq(#got, #want, what .. " " .. name .. " length")
        for i = 1, #want do
          if got[i] ~= want[i] then
            error(("%s: %s[%d] = %.9g, UN = 1 gave %.9g"):format(what, name, i - 1, got[i], want[i]))
          end
        end
      end
    end
  end
end)

-- Many options: the script's arguments go on the Lua stack, which a C function has only 20 guaranteed slots
-- of (lua/host.c checks for more; 17 --hint options crashed before, docs/BENCHMARKS.md 31h).
check.case("a script with many arguments: 60 --hint options", function()
  local args = { "recipes/gemma3.lua", "--show-hints" }
  for i = 1, 30 do
    args[#args + 1] = "--hint"
    args[#args + 1] = (i % 2 == 0) and "decode_chunk=8" or "decode_chunk=4"
  end
  args[#args + 1] = "--hint"
  args[#args + 1] = "decode_chunk=5"
  local h = shown(check.must_run(args))
  check.eq(h.decode_chunk[1], "5", "the last of 31 --hint options wins")
  local run_args = { "run", "--show-hints" }
  for _ = 1, 60 do run_args[#run_args + 1] = "--hint=decode_chunk=3" end
  local ok, out, e = check.run(run_args)
  check.truthy(ok or (e or ""):match("hint") or (e or ""):match("model"), "doppler run with 60 options ends cleanly: " ..
               tostring(out) .. tostring(e))
end)

os.execute("rm -rf " .. check.quote(tmp))
check.done()
