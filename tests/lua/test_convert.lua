-- doppler convert: HF directory -> GGUF with our quantiser.
-- 1. The tensor-type rules against llama.cpp's own files (tests/fixtures/gguf: llama-quantize's type of
--    every tensor) and against MODEL_REFERENCE 4.7 on gemma-3-1b shapes (rows of 1152 fall back).
-- 2. gemma3-tiny converted to q8_0 / q4_0 / q4_k_m (--pad-k too) is read back by our reader with
--    tensors identical to our quantiser's output on the source (norms + 1, as llama.cpp writes them).
-- 3. Logits of the converted weights (dequantised back into a HF directory and run by the recipe, f32):
--    Q8_0 within 0.32 max abs of the f32 reference (llama.cpp's reference quantiser: 0.254);
--    Q4_0 top-1 agreement >= 95% on rows whose reference margin exceeds 0.5.
-- 4. llama3-tiny: q/k rows reordered to llama.cpp's adjacent RoPE pairs, rope_freqs for llama3 scaling,
--    and the tokenizer embedded as tokenizer.ggml.* keys.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local convert = require "doppler.convert"
local recipes = require "doppler.recipes"

local F = check.fixtures
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. check.quote(tmp))

-- GGUF names and shapes of a config's tensors, in the converter's order, with the rule applied.
local function types_for(config_path, quant, opts)
  local cfg = doppler.read_config(config_path)
  local recipe = recipes.for_config(cfg.raw, config_path)
  local fam = convert.family(recipe)
  local list = {}
  for _, w in ipairs(recipe.weights(cfg)) do
    list[#list + 1] = { name = doppler.gguf_tensor_name(fam.arch, w[1]), shape = w[2] }
  end
  table.sort(list, function(a, b)
    local la, lb = tonumber(a.name:match("^blk%.(%d+)%.") or -1), tonumber(b.name:match("^blk%.(%d+)%.") or -1)
    if la ~= lb then return la < lb end
    return false
  end)
  local names = {}
  for i, t in ipairs(list) do names[i] = t.name end
  local st = convert.rule_state(names, opts)
  local out, pads = {}, {}
  for _, t in ipairs(list) do
    local ty, pad = convert.tensor_type(quant, t.name, t.shape, st)
    out[t.name], pads[t.name] = ty, pad
  end
  return out, list, pads
end

for _, case in ipairs {
  { "gemma3-q", "q8_0", "Q8_0" }, { "gemma3-q", "q4_0", "Q4_0" }, { "gemma3-q", "q5_0", "Q5_0" },
  { "gemma3-q", "q4_k_m", "Q4_K_M" }, { "llama-q", "q8_0", "Q8_0" }, { "llama-q", "q4_k_m", "Q4_K_M" },
} do
  check.case(("type rules = llama-quantize's on %s %s"):format(case[1], case[3]), function()
    local dir = F .. "/gguf/" .. case[1]
    local ref = doppler.read_json(dir .. "/reference-" .. case[3] .. ".json").tensor_types
    local got = types_for(dir .. "/hf_config.json", case[2])
    local n = 0
    for name, want in pairs(ref) do
      if name ~= "rope_freqs.weight" then
        check.eq(got[name], want:lower(), name)
        n = n + 1
      end
    end
    check.truthy(n > 20, "compared " .. n .. " tensors")
  end)
end

check.case("q4_k_m on gemma-3-1b shapes: 1152-wide rows fall back to Q5_0 / Q8_0 (MODEL_REFERENCE 4.7)", function()
  local got, list = types_for(F .. "/configs/gemma-3-1b-it.config.json", "q4_k_m")
  local more = {}
  for _, i in ipairs { 0, 1, 2, 5, 8, 11, 14, 17, 20, 22, 23, 24, 25 } do more[i] = true end
  check.eq(got["token_embd.weight"], "q8_0", "token_embd (tied, 1152 wide)")
  for i = 0, 25 do
    local function t(n) return got[("blk.%d.%s.weight"):format(i, n)] end
    check.eq(t "attn_v", more[i] and "q8_0" or "q5_0", "attn_v layer " .. i)
    check.eq(t "ffn_down", more[i] and "q6_k" or "q4_k", "ffn_down layer " .. i)
    for _, n in ipairs { "attn_q", "attn_k", "ffn_gate", "ffn_up" } do check.eq(t(n), "q5_0", n .. " layer " .. i) end
    check.eq(t "attn_output", "q4_k", "attn_output layer " .. i)
    check.eq(t "attn_norm", "f32", "attn_norm layer " .. i)
  end
  -- the file size this mix gives (tensor data; what users compare against llama.cpp's file)
  local bytes = 0
  for _, e in ipairs(list) do
    local n = 1
    for _, d in ipairs(e.shape) do n = n * d end
    local ty = got[e.name]
    local per = ({ f32 = 4, q8_0 = 34 / 32, q5_0 = 22 / 32, q4_k = 144 / 256, q6_k = 210 / 256 })[ty]
    bytes = bytes + n * per
  end
  print(("  gemma-3-1b q4_k_m tensor data: %.1f MB"):format(bytes / 1e6))
  check.truthy(bytes > 700e6 and bytes < 900e6, "size in llama.cpp's range for this mix")
end)

check.case("--pad-k on gemma-3-1b shapes keeps K-quants on padded rows", function()
  local got, _, pads = types_for(F .. "/configs/gemma-3-1b-it.config.json", "q4_k_m", { pad_k = true })
  check.eq(got["blk.0.attn_q.weight"], "q4_k", "attn_q")
  check.eq(pads["blk.0.attn_q.weight"], 1280, "attn_q padded row")
  check.eq(got["blk.0.attn_v.weight"], "q6_k", "attn_v (more bits)")
  check.eq(got["token_embd.weight"], "q8_0", "the output rule stays llama.cpp's")
  check.eq(pads["blk.0.ffn_down.weight"], nil, "6912 = 27 x 256 needs no padding")
end)

-- ---- converting gemma3-tiny ----

local SRC = F .. "/models/gemma3-tiny"
local ref = doppler.read_json(SRC .. "/reference.json")
local expected = check.read_f32(SRC .. "/" .. ref.logits_file)
local T, V = ref.logits_shape[1], ref.logits_shape[2]

local function run_convert(quant, extra)
  local out = ("%s/g-%s%s.gguf"):format(tmp, quant, extra and "-padk" or "")
  local args = { "convert", SRC, "--quant", quant, "--out", out, "--manifest", out:gsub("%.gguf$", ".yaml"),
                 "--threads", "2", "--quiet" }
  if extra then args[#args + 1] = extra end
  check.must_run(args)
  return out
end

-- Every tensor of the GGUF equals our quantiser applied to the (transformed) source; returns the types.
local function check_readback(path, pad)
  local g = doppler.open_model(path)
  local src = doppler.open_model(SRC)
  local cfg = src:config()
  local mix = {}
  for _, t in ipairs(g:tensors()) do
    local hf = doppler.hf_tensor_name("gemma3", t.name)
    check.truthy(hf, "HF name of " .. t.name)
    local s = doppler.tensor_bytes(src, hf)
    local cols = t.padded_cols or t.shape[#t.shape]   -- the stored row length
    local src_cols = (src:tensor(hf)).shape[#t.shape]
    if t.name:match("norm%.weight$") then   -- Gemma norms are stored as 1 + w
      local vals = {}
      for i = 1, #s // 4 do vals[i] = string.pack("<f", string.unpack("<f", s, 4 * i - 3) + 1.0) end
      s = table.concat(vals)
    end
    if cols ~= src_cols then   -- --pad-k: zeros after each row
      check.truthy(pad, t.name .. " padded without --pad-k")
      local rows, parts = #s // (4 * src_cols), {}
      for r = 0, rows - 1 do
        parts[#parts + 1] = s:sub(r * src_cols * 4 + 1, (r + 1) * src_cols * 4) .. ("\0"):rep(4 * (cols - src_cols))
      end
      s = table.concat(parts)
    end
    local want = t.dtype == "f32" and s or doppler.quantize(t.dtype, s, cols)
    check.eq(#doppler.tensor_bytes(g, t.name), #want, t.name .. " bytes")
    check.truthy(doppler.tensor_bytes(g, t.name) == want, t.name .. ": read back differs from the quantiser's output")
    mix[t.name] = t.dtype:lower()
  end
  check.eq(cfg.hidden_size, 64, "source config")
  g:close()
  src:close()
  return mix
end

-- Dequantises the GGUF back into a HF directory (norms - 1) and returns the recipe's f32 logits.
local function logits_of(path)
  local g = doppler.open_model(path)
  local dir = path:gsub("%.gguf$", "-hf")
  os.execute("mkdir -p " .. check.quote(dir))
  local list = {}
  for _, t in ipairs(g:tensors()) do
    local n = 1
    for _, d in ipairs(t.shape) do n = n * d end
    local f = doppler.dequantize(t.dtype, doppler.tensor_bytes(g, t.name), n)
    if t.name:match("norm%.weight$") then
      local vals = {}
      for i = 1, n do vals[i] = string.pack("<f", string.unpack("<f", f, 4 * i - 3) - 1.0) end
      f = table.concat(vals)
    end
    list[#list + 1] = { name = doppler.hf_tensor_name("gemma3", t.name), dtype = "f32", shape = t.shape, data = f }
  end
  g:close()
  doppler.write_safetensors(dir .. "/model.safetensors", list, { metadata = '{"format":"pt"}' })
  doppler.copy_file(SRC .. "/config.json", dir .. "/config.json")
  local out = dir .. "/logits.f32"
  check.must_run({ "recipes/gemma3.lua", "--model", dir, "--ids", check.join(ref.all_ids), "--max-tokens", "0",
                   "--logits-out", out, "--quiet", "--hint", "precision=f32" })
  return check.read_f32(out)
end

local function argmax_row(l, t)
  local best, id = -math.huge, 0
  for i = 0, V - 1 do
    local v = l[t * V + i + 1]
    if v > best then best, id = v, i end
  end
  return id
end

check.case("gemma3-tiny -> q8_0: read back identical, logits within 0.32 of the f32 reference", function()
  local path = run_convert("q8_0")
  local mix = check_readback(path)
  check.eq(mix["token_embd.weight"], "q8_0", "token_embd")
  check.eq(mix["blk.0.attn_q.weight"], "q8_0", "attn_q")
  check.eq(mix["blk.0.attn_norm.weight"], "f32", "norms stay f32")
  local l = logits_of(path)
  check.eq(#l, T * V, "logits count")
  local worst = 0
  for i = 1, T * V do
    local d = math.abs(l[i] - expected[i])
    if d ~= d then d = math.huge end
    if d > worst then worst = d end
  end
  print(("  q8_0 max abs %.4f (bound 0.32; gguf-py's reference Q8_0: 0.254)"):format(worst))
  if worst > 0.32 then error(("max abs %.4f > 0.32"):format(worst)) end
  -- the manifest the converter wrote
  local m = doppler.read_manifest(path:gsub("%.gguf$", ".yaml"))
  check.eq(m.model, "g-q8_0.gguf", "manifest model path (relative)")
  check.eq(m.recipe, "gemma3", "manifest recipe")
  check.eq(m.quantization, "q8_0", "manifest quantization")
end)

check.case("gemma3-tiny -> q4_0: read back identical, top-1 >= 95% where the reference margin > 0.5", function()
  local path = run_convert("q4_0")
  local mix = check_readback(path)
  check.eq(mix["blk.0.ffn_up.weight"], "q4_0", "ffn_up")
  check.eq(mix["token_embd.weight"], "q8_0", "tied output: Q6_K falls back to Q8_0 on 64-wide rows")
  local l = logits_of(path)
  local agree, rows = 0, 0
  for t = 0, T - 1 do
    if ref.top1_minus_top2[t + 1] > 0.5 then
      rows = rows + 1
      if argmax_row(l, t) == argmax_row(expected, t) then agree = agree + 1 end
    end
  end
  print(("  q4_0 top-1 agreement %d / %d = %.1f%%"):format(agree, rows, 100 * agree / rows))
  check.truthy(rows >= 20, "enough rows with margin > 0.5")
  if agree < 0.95 * rows then error(("top-1 agreement %d / %d < 95%%"):format(agree, rows)) end
end)

check.case("gemma3-tiny -> q4_k_m: every 64-wide row falls back (Q5_0, Q8_0), as llama.cpp does", function()
  local mix = check_readback(run_convert("q4_k_m"))
  check.eq(mix["blk.0.attn_q.weight"], "q5_0", "attn_q")
  check.eq(mix["blk.2.attn_v.weight"], "q8_0", "attn_v layer 2 (more bits of 6: 2, 5; Q6_K -> Q8_0)")
  check.eq(mix["blk.3.attn_v.weight"], "q5_0", "attn_v layer 3")
  check.eq(mix["blk.5.ffn_down.weight"], "q8_0", "ffn_down layer 5 (more bits)")
  check.eq(mix["blk.3.ffn_down.weight"], "q5_0", "ffn_down layer 3 (128 wide: Q4_K -> Q5_0)")
  check.eq(mix["token_embd.weight"], "q8_0", "token_embd")
end)

check.case("gemma3-tiny -> q4_k_m --pad-k: K-quants on rows padded to 256, marked in the metadata", function()
  local path = run_convert("q4_k_m", "--pad-k")
  local mix = check_readback(path, true)
  check.eq(mix["blk.0.attn_q.weight"], "q4_k", "attn_q")
  check.eq(mix["blk.2.attn_v.weight"], "q6_k", "attn_v layer 2")
  check.eq(mix["blk.0.attn_v.weight"], "q4_k", "attn_v layer 0")
  local g = doppler.open_model(path)
  local md = g:metadata()
  check.eq(md["doppler.pad_k"], true, "doppler.pad_k")
  check.eq((g:tensor("blk.0.attn_q.weight")).shape[2], 64, "logical row (the model file reads the metadata)")
  check.eq((g:tensor("blk.0.attn_q.weight")).padded_cols, 256, "stored row")
  g:close()
end)

check.case("errors: bad --quant lists the valid ones; --pad-k needs q4_k_m", function()
  local ok, _, e = check.run({ "convert", SRC, "--quant", "q3_k", "--out", tmp .. "/x.gguf", "--no-manifest" })
  check.truthy(not ok and e:match("q4_k_m") and e:match("q8_0"), "valid values listed: " .. e)
  ok, _, e = check.run({ "convert", SRC, "--quant", "q8_0", "--pad-k", "--out", tmp .. "/x.gguf", "--no-manifest" })
  check.truthy(not ok and e:match("pad%-k"), "pad-k refused: " .. e)
end)

-- ---- llama3-tiny: RoPE row order, rope_freqs, tokenizer ----

check.case("llama3-tiny -> f32: q/k rows in llama.cpp's adjacent-pair order, rope_freqs, tokenizer keys", function()
  local src_dir = F .. "/models/llama3-tiny"
  local dir = tmp .. "/llama-src"
  os.execute(("mkdir -p %s && ln -sf %s/model.safetensors %s/ && cp %s/config.json %s/"):format(
    check.quote(dir), check.quote(src_dir), check.quote(dir), check.quote(src_dir), check.quote(dir)))
  doppler.copy_file(F .. "/tokenizers/llama3.tokenizer.json.gz", dir .. "/tokenizer.json", { gunzip = true })
  local out = tmp .. "/llama.gguf"
  check.must_run({ "convert", dir, "--quant", "f32", "--out", out, "--no-manifest", "--quiet" })
  local g, src = doppler.open_model(out), doppler.open_model(src_dir)
  local cfg = src:config()
  local D, Hkv = cfg.head_dim, cfg.num_key_value_heads
  local K = cfg.hidden_size
  local a = doppler.tensor_bytes(g, "blk.0.attn_k.weight")
  local b = doppler.tensor_bytes(src, "model.layers.0.self_attn.k_proj.weight")
  for h = 0, Hkv - 1 do
    for i = 0, D - 1 do   -- GGUF row h*D + i holds HF row h*D + (i % 2) * D/2 + i // 2
      local gr, hr = h * D + i, h * D + (i % 2) * (D // 2) + i // 2
      check.truthy(a:sub(gr * K * 4 + 1, (gr + 1) * K * 4) == b:sub(hr * K * 4 + 1, (hr + 1) * K * 4),
                   ("attn_k row %d"):format(gr))
    end
  end
  check.truthy(doppler.tensor_bytes(g, "blk.0.attn_v.weight") == doppler.tensor_bytes(src, "model.layers.0.self_attn.v_proj.weight"),
               "attn_v unchanged")
  local rf = g:tensor("rope_freqs.weight")
  check.truthy(rf and rf.shape[1] == D // 2, "rope_freqs.weight [head_dim/2]")
  local md = g:metadata()
  check.eq(md["general.architecture"], "llama", "architecture")
  check.eq(md["llama.rope.dimension_count"], D, "rope.dimension_count")
  check.eq(md["tokenizer.ggml.model"], "gpt2", "tokenizer model")
  check.eq(md["tokenizer.ggml.pre"], "llama-bpe", "pre-tokenizer")
  check.eq(#md["tokenizer.ggml.tokens"], 128256, "token count")
  check.eq(md["tokenizer.ggml.tokens"][128009 + 1], "<|eot_id|>", "token 128009")
  check.eq(md["tokenizer.ggml.token_type"][128009 + 1], 3, "eot is a control token")
  check.eq(md["tokenizer.ggml.eot_token_id"], 128009, "eot id")
  check.truthy(#md["tokenizer.ggml.merges"] > 200000, "merges")
  g:close()
  src:close()
end)

check.case("gemma3 tokenizer: added tokens beyond the embedding are dropped, as llama.cpp does", function()
  local tj = tmp .. "/gemma3.tokenizer.json"
  doppler.copy_file(F .. "/tokenizers/gemma3.tokenizer.json.gz", tj, { gunzip = true })
  local cfg = { vocab_size = 262144, bos_token_id = 2, eos_token_ids = { 1, 106 }, pad_token_id = 0 }
  local kv = {}
  for _, e in ipairs(convert.tokenizer_keys(tj, convert.families.gemma3, cfg, function() end)) do kv[e[1]] = e[3] end
  check.eq(#kv["tokenizer.ggml.tokens"], 262144, "tokens = embedding rows")
  check.eq(#kv["tokenizer.ggml.scores"], 262144, "scores")
  check.eq(kv["tokenizer.ggml.tokens"][106 + 1], "<end_of_turn>", "token 106")
  check.eq(kv["tokenizer.ggml.eot_token_id"], 106, "eot id")
  check.eq(kv["tokenizer.ggml.unknown_token_id"], 3, "unk id")
  check.eq(kv["tokenizer.ggml.token_type"][3 + 1], 2, "<unk> is the unknown type")
  check.eq(kv["tokenizer.ggml.add_space_prefix"], false, "no space prefix (Gemma 3)")
end)

os.execute("rm -rf " .. check.quote(tmp))
check.done()
