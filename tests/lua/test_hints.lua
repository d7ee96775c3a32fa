-- Hints and manifests through the command line:
--   precedence recipe < manifest < --hints FILE < --hint KEY=VALUE, shown by --show-hints with sources;
--   a manifest runs a model (its hints take effect: precision=f32 gives the same logits as --hint);
--   `doppler run --model M.yaml` takes the manifest's recipe;
--   errors (unknown key, bad value, unknown hint, wrong recipe, missing file or model) name the file
--   and list what is valid.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"

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

os.execute("rm -rf " .. check.quote(tmp))
check.done()
