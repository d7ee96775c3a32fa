-- Quantised weight layouts through the Lua side (docs/QUANTIZATION.md "Weight layouts"):
-- doppler.quant_pack / quant_unpack round trips; a synthetic Q4_K and Q8_0 weight repacked column_wise and flat,
-- recorded with doppler.lower.set_layout and run through plan.compile (gemv_q T=1, gemm_q T=9, and
-- q_matmul=dequant_f16): each equals the row_wise plan within the matmul bound (1e-4 relative, floored at 1);
-- dev:upload_model_tensor with a layout on llama.cpp's Q4_K_M fixture, through the disk cache (a miss, then a
-- hit; cache = false never touches it), run against the row_wise upload; doppler.weights.layout_for's hint rules
-- (q_layout=auto by device memory); doppler.weights.repack_flat (the device's repack) against quant_pack;
-- `doppler run` on llama.cpp's Q4_K_M fixtures (Gemma 3: Q4_K, Q6_K and a Q6_K embedding read by gather_q and
-- the tied head; Llama: de-interleaved q/k rows) with each q_layout / q4k_layout, against the row_wise run, on
-- a copy of the model so the disk cache next to it is exercised (made, then used; q_layout_cache=off: none).
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local Graph = require "doppler.graph"
local plan = require "doppler.plan"
local hints = require "doppler.hints"
local lower = require "doppler.lower"
local weights = require "doppler.weights"

local dev = doppler.device()

-- Random blocks with small positive f16 scales at the given offsets (bytes of a row_wise [N, K] tensor).
local seed = 12345
local function rnd_byte()
  seed = (seed * 1103515245 + 12345) % 2147483648
  return (seed >> 16) & 0xff
end
local BLOCK = { q4_k = { qk = 256, qb = 144, f16 = { 0, 2 }, scale = 0x1c00 }, q8_0 = { qk = 32, qb = 34, f16 = { 0 }, scale = 0x2000 } }
local function random_blocks(dtype, N, K)
  local b = BLOCK[dtype]
  local parts = {}
  for _ = 1, N * K // b.qk do
    local blk = {}
    for i = 1, b.qb do blk[i] = rnd_byte() end
    for _, at in ipairs(b.f16) do
      local h = b.scale | (rnd_byte() << 2)                 -- 2^-7 (q8_0) / 2^-8 (q4_k) times 1 + small mantissa
      blk[at + 1], blk[at + 2] = h & 0xff, h >> 8
    end
    parts[#parts + 1] = string.char(table.unpack(blk))
  end
  return table.concat(parts)
end

local function weight_tensor(dtype, N, K, bytes, layout)
  local w = dev:tensor { dtype = dtype, shape = { N, K } }
  w:upload(layout == "row_wise" and bytes or doppler.quant_pack(bytes, dtype, N, K, layout))
  lower.set_layout(w, layout)
  return w
end

-- y = x · Wᵀ through a compiled plan; returns the f32 outputs.
local function run_linear(w, dtype, N, K, T, mode)
  local g = Graph.new { name = "qlayout" }
  local x = g:input("x", { "T", K }, "f32")
  local wn = g:weight { name = "w", shape = { N, K }, dtype = dtype }
  g:output("y", g:linear(x, wn))
  local xv = {}
  for i = 1, T * K do xv[i] = ((i * 37) % 23 - 11) / 8 end
  local xt = dev:tensor { dtype = "f32", shape = { T, K } }
  xt:upload(xv)
  local h = hints.new()
  h:set("q_matmul", mode, "test")
  local p = plan.compile(dev, g, { T = T, act = "f32", kv = "f32", hints = h, weights = { w = w },
                                   inputs = { x = xt }, states = {}, constants = function() end })
  p:run()
  return p:output("y"):download()
end

local function same_result(got, want, what)
  check.eq(#got, #want, what .. " length")
  for i = 1, #want do
    check.near(got[i], want[i], 1e-4 * math.max(1, math.abs(want[i])), ("%s y[%d]"):format(what, i - 1))
  end
end

check.case("quant_pack / quant_unpack round trips", function()
  for dtype, shape in pairs { q4_k = { 5, 512 }, q8_0 = { 7, 96 } } do
    local bytes = random_blocks(dtype, shape[1], shape[2])
    for _, layout in ipairs { "row_wise", "column_wise", "flat" } do
      local packed = doppler.quant_pack(bytes, dtype, shape[1], shape[2], layout)
      check.eq(#packed, #bytes, dtype .. " " .. layout .. " size")
      check.truthy((layout == "row_wise") == (packed == bytes), dtype .. " " .. layout .. " moves bytes")
      check.truthy(doppler.quant_unpack(packed, dtype, shape[1], shape[2], layout) == bytes, dtype .. " " .. layout .. " back")
    end
  end
  check.truthy(not pcall(doppler.quant_pack, "abc", "q4_k", 1, 256, "flat"), "wrong size rejected")
  check.truthy(not pcall(doppler.quant_pack, string.rep("\0", 144), "q4_k", 1, 256, "diagonal"), "bad layout rejected")
  check.truthy(not pcall(lower.set_layout, {}, "diagonal"), "set_layout rejects a bad layout")
end)

for _, dtype in ipairs { "q4_k", "q8_0" } do
  local N, K = 37, 512                                 -- 37 rows: not a multiple of gemv_q's 4 or gemm_q's 64
  local bytes = random_blocks(dtype, N, K)
  local row = weight_tensor(dtype, N, K, bytes, "row_wise")
  for _, layout in ipairs { "column_wise", "flat" } do
    local w = weight_tensor(dtype, N, K, bytes, layout)
    for _, mode in ipairs { "fused", "dequant_f16" } do
      for _, T in ipairs { 1, 9 } do
        check.case(("%s %s linear T=%d q_matmul=%s equals row_wise"):format(dtype, layout, T, mode), function()
          check.eq(lower.layout_of(w), layout, "recorded layout")
          same_result(run_linear(w, dtype, N, K, T, mode), run_linear(row, dtype, N, K, T, mode), layout)
        end)
      end
    end
  end
end

check.case("upload_model_tensor with a layout, through the disk cache", function()
  local model = doppler.open_model(check.fixtures .. "/gguf/gemma3-q/model-Q4_K_M.gguf")
  local name = "blk.0.ffn_gate.weight"
  local info = model:tensor(name)
  check.eq(info.dtype, "q4_k", name .. " dtype")
  local N, K = info.shape[1], info.shape[2]
  local dir = os.tmpname()
  os.remove(dir)                                       -- the cache makes its directory itself
  local row, how = dev:upload_model_tensor(model, name, "q4_k")
  check.eq(how, nil, "row_wise upload")
  local want = run_linear(row, "q4_k", N, K, 2, "fused")
  for _, layout in ipairs { "column_wise", "flat" } do
    local w1, from1 = dev:upload_model_tensor(model, name, "q4_k", { layout = layout, cache_dir = dir })
    local w2, from2 = dev:upload_model_tensor(model, name, "q4_k", { layout = layout, cache_dir = dir })
    local w3, from3 = dev:upload_model_tensor(model, name, "q4_k", { layout = layout, cache = false })
    check.eq(from1, "repacked", layout .. " first upload")
    check.eq(from2, "cache", layout .. " second upload")
    check.eq(from3, "repacked", layout .. " cache = false")
    for i, w in ipairs { w1, w2, w3 } do
      lower.set_layout(w, layout)
      same_result(run_linear(w, "q4_k", N, K, 2, "fused"), want, ("%s upload %d"):format(layout, i))
    end
  end
  check.truthy(not pcall(dev.upload_model_tensor, dev, model, name, "f16", { layout = "flat" }), "a dequantised tensor has no layout")
  check.truthy(not pcall(dev.upload_model_tensor, dev, model, name, "q4_k", { layout = "zigzag" }), "unknown layout")
  os.execute("rm -rf '" .. dir .. "'")
end)

check.case("layout hints", function()
  local h = hints.new()
  local small, big = { device_local_bytes = 2 << 30 }, { device_local_bytes = 80 << 30 }
  local l, auto = weights.layout_for("q4_k", 2, h, small)
  check.eq(l, "row_wise", "default (auto) on a 2 GiB device")
  check.eq(auto, true, "from auto")
  l, auto = weights.layout_for("q8_0", 2, h, big)
  check.eq(l, "flat", "default (auto) on an 80 GiB device")
  check.eq(auto, true, "from auto (made on the device)")
  check.eq(weights.layout_for("q4_k", 2, h, { device_local_bytes = (16 << 30) - 1 }), "row_wise", "just under 16 GiB")
  check.eq(weights.layout_for("q4_k", 2, h, { device_local_bytes = 16 << 30 }), "flat", "16 GiB")
  check.eq(weights.layout_for("q4_k", 2, h, dev:caps()), weights.auto_layout(dev:caps()), "this device")
  h:set("q_layout", "flat", "test")
  l, auto = weights.layout_for("q4_k", 2, h, small)
  check.eq(l, "flat", "q_layout applies to q4_k under auto")
  check.eq(auto, false, "an explicit flat (the CPU repack and its cache)")
  check.eq(weights.layout_for("q6_k", 2, h, small), "flat", "q_layout applies to q6_k")
  h:set("q4k_layout", "column_wise", "test")
  check.eq(weights.layout_for("q4_k", 2, h, big), "column_wise", "q4k_layout overrides for q4_k")
  check.eq(weights.layout_for("q6_k", 2, h, big), "flat", "q4k_layout leaves q6_k alone")
  check.eq(weights.layout_for("f16", 2, h, big), "row_wise", "float weights")
  check.eq(weights.layout_for("q4_k", 1, h, big), "row_wise", "1-D")
  check.truthy(not pcall(h.set, h, "q4k_layout", "diagonal", "test"), "bad value rejected")
end)

-- doppler.weights.repack_flat (quant/repack_flat.comp) against the CPU's dp_qlayout_pack, byte for byte, on
-- llama.cpp's tensors of every block type the fixtures hold (Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K), and the
-- repacked tensor through a linear against its row_wise upload.
check.case("flat repacked on the device: the CPU's bytes, the same linear", function()
  local seen = {}
  for _, q in ipairs { "Q8_0", "Q4_0", "Q5_0", "Q4_K_M", "Q5_K_M" } do
    local model = doppler.open_model(check.fixtures .. "/gguf/gemma3-q/model-" .. q .. ".gguf")
    for _, info in ipairs(model:tensors()) do
      if #info.shape == 2 and lower.quant_types[info.dtype] and not seen[info.dtype] then
        seen[info.dtype] = true
        local N, K = info.shape[1], info.shape[2]
        local row = dev:upload_model_tensor(model, info.name, info.dtype)
        local bytes = row:read()
        local want = run_linear(row, info.dtype, N, K, 1, "fused")
        local flat = weights.repack_flat(dev, row)   -- releases row
        check.truthy(flat:read() == doppler.quant_pack(bytes, info.dtype, N, K, "flat"),
                     ("%s %s [%d, %d]: the device's flat bytes are the CPU's"):format(q, info.name, N, K))
        lower.set_layout(flat, "flat")
        same_result(run_linear(flat, info.dtype, N, K, 1, "fused"), want, info.dtype .. " flat (device) linear")
        flat:release()
      end
    end
    model:close()
  end
  for _, dt in ipairs { "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k" } do
    check.truthy(seen[dt], dt .. " covered by the fixtures")
  end
end)

-- ---- whole models ----------------------------------------------------------------------------------------
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. check.quote(tmp))

local function logits_for(model, ids, extra)
  return check.logits("run", model, ids, extra, tmp .. "/logits.f32")
end

local function max_diff(a, b)
  check.eq(#a, #b, "logits values")
  local worst = 0
  for i = 1, #a do
    local d = math.abs(a[i] - b[i])
    if d ~= d then return math.huge end
    if d > worst then worst = d end
  end
  return worst
end

local function cache_files(model)
  local p = io.popen("ls " .. check.quote(model .. ".doppler-cache") .. " 2>/dev/null")
  local n = 0
  for _ in p:lines() do n = n + 1 end
  p:close()
  return n
end

for _, f in ipairs { { "gemma3-q", "Q4_K_M" }, { "llama-q", "Q4_K_M" } } do
  local src = check.fixtures .. "/gguf/" .. f[1] .. "/model-" .. f[2] .. ".gguf"
  local ref = doppler.read_json(check.fixtures .. "/gguf/" .. f[1] .. "/reference-" .. f[2] .. ".json")
  local model = tmp .. "/" .. f[1] .. ".gguf"
  os.execute(("cp %s %s"):format(check.quote(src), check.quote(model)))
  local ids = ref.all_ids
  -- The layouts change where blocks are read, not the values or the order of the sums: the f32 logits
  -- must agree with the row_wise run to f32 rounding (logits are O(10): 1e-3 is 1e-4 relative).
  local base = logits_for(model, ids, { "--hint", "precision=f32" })
  for _, hs in ipairs {
    { "q_layout=column_wise" }, { "q_layout=flat" }, { "q_layout=flat", "q4k_layout=column_wise" },
  } do
    check.case(("%s %s: %s equals row_wise (f32)"):format(f[1], f[2], table.concat(hs, " ")), function()
      local extra = { "--hint", "precision=f32" }
      for _, kv in ipairs(hs) do extra[#extra + 1] = "--hint"; extra[#extra + 1] = kv end
      local d = max_diff(logits_for(model, ids, extra), base)
      if d > 1e-3 then error(("max abs %.4g"):format(d)) end
    end)
  end
  check.case(f[1] .. " " .. f[2] .. ": the repacked tensors are cached next to the model and reused", function()
    local n = cache_files(model)
    check.truthy(n > 0, "cache entries made")
    local again = logits_for(model, ids, { "--hint", "precision=f32", "--hint", "q_layout=flat" })
    check.eq(cache_files(model), n, "no new entries on a second run")
    local d = max_diff(again, base)
    if d > 1e-3 then error(("cached run: max abs %.4g"):format(d)) end
    local fresh = tmp .. "/fresh-" .. f[1] .. ".gguf"
    os.execute(("cp %s %s"):format(check.quote(src), check.quote(fresh)))
    logits_for(fresh, ids, { "--hint", "q_layout=flat", "--hint", "q_layout_cache=off" })
    check.eq(cache_files(fresh), 0, "q_layout_cache=off makes no entries")
  end)
  check.case(f[1] .. " " .. f[2] .. ": flat with q_matmul=dequant_f16 (default precision)", function()
    local want = logits_for(model, ids, { "--hint", "q_matmul=dequant_f16" })
    local got = logits_for(model, ids, { "--hint", "q_matmul=dequant_f16", "--hint", "q_layout=flat" })
    -- f16 activations: the GGUF test's bound for this mode
    local d = max_diff(got, want)
    if d > 0.5 then error(("max abs %.4g"):format(d)) end
  end)
end
os.execute("rm -rf " .. check.quote(tmp))

check.done()
