-- Files written by `doppler convert --quant q4_k_m --pad-k` through the normal model path (docs/QUANTIZATION.md
-- "--pad-k files"). gemma3-tiny's rows are 64 and 128 wide, so every K-quant tensor of it is padded to 256.
-- The converter keeps llama.cpp's Q8_0 for the tied embedding; a second file, rewritten from the first with
-- token_embd as Q6_K padded to 256, covers a padded table (gather_q) shared by the tied LM head.
-- Each check below runs on both files.
-- 1. The model reports the logical shapes (padded_cols = the stored 256), inspect shows both, and
--    doppler.tensor_f32 drops the padding.
-- 2. Reference: the file's quantised weights dequantised on the CPU (padding dropped, norms - 1) written as an
--    f32 HF directory and run by the recipe with precision=f32, i.e. a float model of the same weights.
-- 3. precision=f32, q_matmul=fused, every q_layout: logits within 1e-4 max abs of the reference, through
--    recipes/gemma3.lua, `doppler run` and the Lua API (doppler.session); token by token (the GEMV kernels)
--    too; weight_quant=dequant (padding dropped on upload) likewise.
-- 4. Default mode (f16 activations), q_matmul = fused and dequant_f16, every q_layout: within 0.5 max abs and
--    the argmax of each row = the reference's wherever the reference margin exceeds 1.0 (the bounds of the
--    default-mode GGUF tests).
-- 5. Bad doppler.pad_k metadata is an error naming the file and the tensor.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"

local F = check.fixtures
local SRC = F .. "/models/gemma3-tiny"
local ref = doppler.read_json(SRC .. "/reference.json")
local IDS = ref.all_ids
local T, V = ref.logits_shape[1], ref.logits_shape[2]
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. check.quote(tmp))

local PADK = tmp .. "/g-padk.gguf"
check.must_run({ "convert", SRC, "--quant", "q4_k_m", "--pad-k", "--out", PADK, "--no-manifest", "--threads", "2", "--quiet" })

-- Rewrites PADK with edit(tensors, kv) applied: the same tensors (re-quantised from their logical values)
-- and metadata (tokenizer keys left out: nothing here needs them).
local function rewrite(out, edit, from)
  local g = doppler.open_model(from or PADK)
  local md = g:metadata()
  local kv = {}
  for k, v in pairs(md) do
    if not k:match("^tokenizer%.") then
      local ty
      if type(v) == "table" then ty = type(v[1]) == "string" and "arr:str" or "arr:u32"
      elseif type(v) == "string" then ty = "str"
      elseif type(v) == "boolean" then ty = "bool"
      elseif math.type(v) == "integer" then ty = "u32"
      else ty = "f32" end
      kv[#kv + 1] = { k, ty, v }
    end
  end
  table.sort(kv, function(a, b) return a[1] < b[1] end)
  local tensors = {}
  for _, t in ipairs(g:tensors()) do
    tensors[#tensors + 1] = { name = t.name, type = t.dtype, shape = t.shape, pad_cols = t.padded_cols,
                              data = doppler.tensor_f32(g, t.name) }
  end
  g:close()
  local function find(key) for _, e in ipairs(kv) do if e[1] == key then return e end end end
  edit(tensors, find)
  doppler.gguf_write(out, kv, tensors, { threads = 2 })
  return out
end

-- The converter keeps llama.cpp's output rule (a tied embedding on rows that are not whole 256-blocks is
-- Q8_0, convert.lua), so its files have no padded table. This one has: PADK with token_embd re-quantised to
-- Q6_K on rows padded to 256 and listed in doppler.pad_k.*, which gather_q and the tied LM head then read.
local PADK_EMB = rewrite(tmp .. "/g-padk-emb.gguf", function(tensors, kv)
  for _, t in ipairs(tensors) do
    if t.name == "token_embd.weight" then t.type, t.pad_cols = "q6_k", 256 end
  end
  local names, widths = kv("doppler.pad_k.tensors")[3], kv("doppler.pad_k.widths")[3]
  names[#names + 1], widths[#widths + 1] = "token_embd.weight", 64
end)

local function logits(first, model, extra)
  return check.logits(first, model, IDS, extra, tmp .. "/logits.f32")
end

-- The float model of the file's weights: every tensor dequantised on the CPU (tensor_f32: padding dropped),
-- Gemma's stored norms (1 + w) back to w, written as safetensors beside gemma3-tiny's config.
local function reference_logits(path)
  local g = doppler.open_model(path)
  local dir = path:gsub("%.gguf$", "-float-hf")
  os.execute("mkdir -p " .. check.quote(dir))
  local list = {}
  for _, t in ipairs(g:tensors()) do
    local f = doppler.tensor_f32(g, t.name)
    if t.name:match("norm%.weight$") then
      local vals = {}
      for i = 1, #f // 4 do vals[i] = string.pack("<f", string.unpack("<f", f, 4 * i - 3) - 1.0) end
      f = table.concat(vals)
    end
    list[#list + 1] = { name = doppler.hf_tensor_name("gemma3", t.name), dtype = "f32", shape = t.shape, data = f }
  end
  g:close()
  doppler.write_safetensors(dir .. "/model.safetensors", list, { metadata = '{"format":"pt"}' })
  doppler.copy_file(SRC .. "/config.json", dir .. "/config.json")
  return logits("recipes/gemma3.lua", dir, { "--hint", "precision=f32" })
end

local FILES = { { "converted", PADK, reference_logits(PADK) }, { "Q6_K embedding padded", PADK_EMB, reference_logits(PADK_EMB) } }

check.case("the model reports logical shapes; inspect and tensor_f32 drop the padding", function()
  local g = doppler.open_model(PADK)
  local q = g:tensor("blk.0.attn_q.weight")
  check.eq(q.dtype, "q4_k", "attn_q stays Q4_K")
  check.eq(q.shape[2], 64, "logical row length")
  check.eq(q.padded_cols, 256, "stored row length")
  check.eq(q.numel, q.shape[1] * 64, "numel of the logical shape")
  check.eq(#doppler.tensor_bytes(g, q.name), q.shape[1] * 144, "one Q4_K block a stored row")
  check.eq(#doppler.tensor_f32(g, q.name), q.shape[1] * 64 * 4, "tensor_f32: the logical values")
  check.eq(g:tensor("model.embed_tokens.weight").dtype, "q8_0", "the converter's tied embedding: Q8_0 (llama.cpp's output rule)")
  local ge = doppler.open_model(PADK_EMB)
  local e = ge:tensor("model.embed_tokens.weight")
  check.eq(e.dtype, "q6_k", "rewritten embedding Q6_K")
  check.eq(e.padded_cols, 256, "embedding padded")
  check.eq(e.shape[2], 64, "embedding logical width")
  ge:close()
  check.eq(g:tensor("blk.0.ffn_down.weight").shape[2], 128, "ffn_down logical row")
  check.eq(g:tensor("blk.0.attn_norm.weight").padded_cols, nil, "norms are not padded")
  -- the first padded row's tail quantised to exact zeros: the stored row dequantises to [row, 0 x 192]
  local raw = doppler.dequantize("q4_k", doppler.tensor_bytes(g, q.name):sub(1, 144), 256)
  local f = doppler.tensor_f32(g, q.name)
  check.truthy(raw:sub(1, 256) == f:sub(1, 256), "tensor_f32 row 0 = the stored row's first 64 values")
  check.truthy(raw:sub(257) == ("\0"):rep(192 * 4), "padding dequantises to +0")
  g:close()
  local ok, out = check.run({ "inspect", PADK })
  check.truthy(ok, "inspect runs")
  check.truthy(out:match("blk%.0%.attn_q%.weight%s+q4_K%s+%[%d+, 64%] rows padded to 256"), "inspect shows both widths")
end)

local function check_f32(what, l, expected)
  local d, row = check.max_diff(l, expected, T, V)
  print(("  %-58s max abs %.3g"):format(what, d))
  if d > 1e-4 then error(("%s: max abs %.4g at row %d (bound 1e-4)"):format(what, d, row)) end
end

for _, f in ipairs(FILES) do
  local label, path, expected = f[1], f[2], f[3]
  for _, layout in ipairs({ "row_wise", "column_wise", "flat" }) do
    check.case(("%s: precision=f32, fused, q_layout=%s: within 1e-4 of the float model"):format(label, layout), function()
      local h = { "--hint", "precision=f32", "--hint", "q_matmul=fused", "--hint", "q_layout=" .. layout }
      check_f32(label .. ", recipes/gemma3.lua " .. layout, logits("recipes/gemma3.lua", path, h), expected)
      check_f32(label .. ", doppler run " .. layout, logits("run", path, h), expected)
    end)
  end

  check.case(label .. ": precision=f32 token by token (gemv_q, T = 1) and weight_quant=dequant: within 1e-4", function()
    check_f32(label .. ", prefill_chunk=1", logits("run", path, { "--hint", "precision=f32", "--hint", "prefill_chunk=1" }), expected)
    check_f32(label .. ", weight_quant=dequant",
              logits("run", path, { "--hint", "precision=f32", "--hint", "weight_quant=dequant" }), expected)
  end)
end

check.case("the Lua API (doppler.session): padded weights stay blocks, logits within 1e-4", function()
  local session = require "doppler.session"
  local hints = require "doppler.hints"
  local recipes = require "doppler.recipes"
  local lower = require "doppler.lower"
  local m = doppler.open_model(PADK_EMB)
  local h = hints.new()
  h:set("precision", "f32", "test")
  h:set("q_layout", "column_wise", "test")
  h:set("q_layout_cache", "off", "test")
  local s = session.open(recipes.for_architectures({ "gemma3" }, "test"), m, { hints = h, context = 128 })
  local q = s.weights["model.layers.0.self_attn.q_proj.weight"]
  check.eq(q:dtype(), "q4_k", "q_proj kept as Q4_K")
  check.eq(q:shape()[2], 256, "device tensor: the stored rows")
  check.eq(lower.logical_shape(q)[2], 64, "logical shape")
  check.eq(lower.row_blocks(q), 1, "row stride in blocks")
  check.eq(lower.layout_of(q), "column_wise", "layout")
  local e = s.weights["model.embed_tokens.weight"]
  check.eq(e:dtype(), "q6_k", "embedding kept as Q6_K (gather_q, tied head)")
  check.eq(lower.row_blocks(e), 1, "embedding row stride in blocks")
  local rows = {}
  s:feed(IDS, true, function(r) rows[#rows + 1] = r[1] end)
  local all = table.concat(rows)
  local l = {}
  for i = 1, #all // 4 do l[i] = string.unpack("<f", all, 4 * i - 3) end
  check_f32("doppler.session column_wise", l, FILES[2][3])
  m:close()
end)

for _, f in ipairs(FILES) do
 local label, path, expected = f[1], f[2], f[3]
 for _, qm in ipairs({ "fused", "dequant_f16" }) do
  for _, layout in ipairs({ "row_wise", "column_wise", "flat" }) do
    check.case(("%s: default mode, q_matmul=%s, q_layout=%s: within 0.5; argmax = the float model's where margin > 1"):format(label, qm, layout), function()
      local l = logits("run", path, { "--hint", "q_matmul=" .. qm, "--hint", "q_layout=" .. layout })
      local d, row = check.max_diff(l, expected, T, V)
      local rows, agree = 0, 0
      for t = 0, T - 1 do
        local a, b = check.argmax_row(expected, V, t), nil
        local best, second = -math.huge, -math.huge
        for i = 0, V - 1 do
          local v = expected[t * V + i + 1]
          if v > best then best, second = v, best elseif v > second then second = v end
        end
        if best - second > 1.0 then
          rows = rows + 1
          b = check.argmax_row(l, V, t)
          if a == b then agree = agree + 1 else error(("row %d: argmax %d, float model %d (margin %.3f)"):format(t, b, a, best - second)) end
        end
      end
      print(("  %s, default %-11s %-11s max abs %.4f, argmax equal on %d / %d rows with margin > 1"):format(label, qm, layout, d, agree, rows))
      check.truthy(rows >= 16, "enough rows with margin > 1 (" .. rows .. ")")
      if d > 0.5 then error(("max abs %.4g at row %d (bound 0.5)"):format(d, row)) end
    end)
  end
end
end

-- ---- bad metadata ----

local function open_fails(path, pattern, tensor)
  local ok, e = pcall(doppler.open_model, path)
  check.truthy(not ok, path .. " opened")
  e = tostring(e)
  check.truthy(e:find(path, 1, true), "the message names the file: " .. e)
  if tensor then check.truthy(e:find(tensor, 1, true), "the message names " .. tensor .. ": " .. e) end
  check.truthy(e:match(pattern), "message: " .. e)
end

check.case("errors: a width off the ceil(K / 256) * 256 rule, an absent, doubled or float tensor, bad keys", function()
  local p = rewrite(tmp .. "/bad-width.gguf", function(_, kv)
    local names, widths = kv("doppler.pad_k.tensors")[3], kv("doppler.pad_k.widths")[3]
    for i, n in ipairs(names) do if n == "blk.1.ffn_up.weight" then widths[i] = 300 end end
  end)
  open_fails(p, "rows of 256.*300", "blk.1.ffn_up.weight")
  p = rewrite(tmp .. "/bad-absent.gguf", function(_, kv) kv("doppler.pad_k.tensors")[3][2] = "blk.99.attn_q.weight" end)
  open_fails(p, "does not hold", "blk.99.attn_q.weight")
  local twice
  p = rewrite(tmp .. "/bad-twice.gguf", function(_, kv)
    local names, widths = kv("doppler.pad_k.tensors")[3], kv("doppler.pad_k.widths")[3]
    names[#names + 1], widths[#widths + 1], twice = names[1], widths[1], names[1]
  end)
  open_fails(p, "listed twice", twice)
  p = rewrite(tmp .. "/bad-float.gguf", function(_, kv)
    local names, widths = kv("doppler.pad_k.tensors")[3], kv("doppler.pad_k.widths")[3]
    names[#names + 1], widths[#widths + 1] = "output_norm.weight", 64
  end)
  open_fails(p, "not block%-quantised", "output_norm.weight")
  p = rewrite(tmp .. "/bad-count.gguf", function(_, kv) table.remove(kv("doppler.pad_k.widths")[3]) end)
  open_fails(p, "malformed")
end)

check.case("errors: padded rows the metadata does not list fail the recipe check, naming the tensor", function()
  local victim = "blk.2.ffn_gate.weight"
  local p = rewrite(tmp .. "/bad-unlisted.gguf", function(tensors, kv)
    local names, widths = kv("doppler.pad_k.tensors")[3], kv("doppler.pad_k.widths")[3]
    for i = #names, 1, -1 do
      if names[i] == victim then table.remove(names, i); table.remove(widths, i) end
    end
    for _, t in ipairs(tensors) do
      if t.name == victim then   -- the same padded rows, now stored as a plain [N, 256] tensor
        local cols, parts = t.shape[2], {}
        for r = 0, t.shape[1] - 1 do
          parts[#parts + 1] = t.data:sub(r * cols * 4 + 1, (r + 1) * cols * 4) .. ("\0"):rep(4 * (256 - cols))
        end
        t.data, t.shape, t.pad_cols = table.concat(parts), { t.shape[1], 256 }, nil
      end
    end
  end)
  local g = doppler.open_model(p)
  check.eq(g:tensor(victim).shape[2], 256, "opens; the tensor reads as [N, 256]")
  g:close()
  local ok, _, e = check.run({ "run", "--model", p, "--ids", "1,2,3", "--max-tokens", "0", "--quiet" })
  check.truthy(not ok, "run refused")
  check.truthy(e:find(p, 1, true) and e:find("model.layers.2.mlp.gate_proj.weight", 1, true)
               and e:match("does not list it"), "message names the file and tensor: " .. e)
end)

os.execute("rm -rf " .. check.quote(tmp))
check.done()
