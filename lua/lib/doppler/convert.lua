-- doppler.convert: Hugging Face directory -> GGUF that llama.cpp loads, quantised by our quantiser.
-- This file decides (names, tensor types, metadata, tokenizer keys); lua/l_convert.c moves the bytes
-- (mmap -> f32 -> quantise on every CPU -> write, one tensor at a time).
--
-- Tensor types follow llama.cpp's llama_tensor_get_type (MODEL_REFERENCE 4.7), so a q4_k_m file has the
-- same type mix and size as llama.cpp's: output / tied embedding Q6_K, attn_v and ffn_down Q6_K in the
-- "more bits" layers, K-quants falling back to Q5_0 / Q5_1 / Q8_0 on rows that are not a multiple of 256.
-- pad_k (our variant) keeps the K-quant on such rows by zero-padding them to 256; the file says so in
-- doppler.pad_k.* keys, and llama.cpp cannot load it.
--
-- Family knowledge (GGUF architecture name, hyperparameter keys, RoPE row order, tokenizer kind) lives
-- in M.families below, keyed by recipe name; a recipe may carry its own table as `recipe.gguf`.
local doppler = require "doppler"

local M = {}

M.quants = { "q4_k_m", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "f16", "bf16", "f32" }
-- LLAMA_FTYPE values (general.file_type)
local file_types = { f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q8_0 = 7, q5_0 = 8, q5_1 = 9, q4_k_m = 15, bf16 = 32 }
local base_type = { q4_k_m = "q4_k" }
local k_fallback = { q4_k = "q5_0", q5_k = "q5_1", q6_k = "q8_0" }
local QK_K = 256

local function use_more_bits(i, n) return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2 end
M.use_more_bits = use_more_bits

-- A rule state for one model: counts of attn_v / ffn_down tensors (the layers llama.cpp counts), whether
-- an output tensor exists (else the tied embedding is the output), the expert count, pad_k.
function M.rule_state(gguf_names, opts)
  local st = { n_attn_v = 0, n_ffn_down = 0, i_attn_v = 0, i_ffn_down = 0, has_output = false,
               n_expert = opts and opts.n_expert or 0, pad_k = opts and opts.pad_k or false }
  for _, n in ipairs(gguf_names) do
    if n:match("attn_v%.weight$") then st.n_attn_v = st.n_attn_v + 1 end
    if n:match("ffn_down%.weight$") then st.n_ffn_down = st.n_ffn_down + 1 end
    if n == "output.weight" then st.has_output = true end
  end
  return st
end

-- The type of one tensor (gguf name, row-major shape) under quant; call in file order (attn_v and
-- ffn_down are counted as llama.cpp counts them). Returns the type and, under pad_k, the padded row length.
function M.tensor_type(quant, name, shape, st)
  local ne0 = shape[#shape]
  if #shape < 2 or name:match("norm%.weight$") or name:match("ffn_gate_inp") or name == "rope_freqs.weight" then
    return "f32"
  end
  if quant == "f16" or quant == "bf16" or quant == "f32" then return quant end
  local t = base_type[quant] or quant
  local is_output = name == "output.weight" or (name == "token_embd.weight" and not st.has_output)
  if name:match("attn_v%.weight$") then
    if quant == "q4_k_m" then
      if use_more_bits(st.i_attn_v, st.n_attn_v) then t = "q6_k" end
      if st.n_expert == 8 then t = "q8_0" end
    end
    st.i_attn_v = st.i_attn_v + 1
  elseif name:match("ffn_down%.weight$") then
    if quant == "q4_k_m" and use_more_bits(st.i_ffn_down, st.n_ffn_down) then t = "q6_k" end
    st.i_ffn_down = st.i_ffn_down + 1
  elseif is_output then
    if ne0 % QK_K ~= 0 then t = "q8_0" elseif t ~= "q8_0" then t = "q6_k" end
  elseif quant == "q4_k_m" then
    if name:match("attn_output%.weight$") and st.n_expert == 8 then t = "q5_k"
    elseif name:match("attn_qkv%.weight$") then t = "q5_k"
    elseif name:match("attn_k%.weight$") and st.n_expert == 8 then t = "q8_0" end
  end
  if k_fallback[t] and ne0 % QK_K ~= 0 then
    if st.pad_k then return t, (ne0 + QK_K - 1) // QK_K * QK_K end
    t = k_fallback[t]
  end
  if ne0 % 32 ~= 0 then t = "f16" end   -- llama.cpp keeps such tensors unquantised too
  return t
end

-- ---- families ----

local function common_keys(a, cfg)
  local k = {
    { a .. ".context_length", "u32", cfg.max_position_embeddings or 4096 },
    { a .. ".embedding_length", "u32", cfg.hidden_size },
    { a .. ".block_count", "u32", cfg.num_hidden_layers },
    { a .. ".feed_forward_length", "u32", cfg.intermediate_size },
    { a .. ".attention.head_count", "u32", cfg.num_attention_heads },
    { a .. ".attention.head_count_kv", "u32", cfg.num_key_value_heads },
    { a .. ".attention.layer_norm_rms_epsilon", "f32", cfg.rms_norm_eps },
    { a .. ".attention.key_length", "u32", cfg.head_dim },
    { a .. ".attention.value_length", "u32", cfg.head_dim },
    { a .. ".rope.freq_base", "f32", cfg.rope_theta },
  }
  return k
end

M.families = {
  gemma3 = {
    arch = "gemma3",
    tokenizer = { model = "llama", add_space_prefix = false, eot = "<end_of_turn>" },
    keys = function(cfg)
      local k = common_keys("gemma3", cfg)
      if cfg.sliding_window then k[#k + 1] = { "gemma3.attention.sliding_window", "u32", cfg.sliding_window } end
      local sc = cfg.rope_scaling
      if sc and sc.rope_type == "linear" and sc.factor and sc.factor ~= 1 then
        k[#k + 1] = { "gemma3.rope.scaling.type", "str", "linear" }
        k[#k + 1] = { "gemma3.rope.scaling.factor", "f32", sc.factor }
      end
      if cfg.final_logit_softcapping then
        k[#k + 1] = { "gemma3.final_logit_softcapping", "f32", cfg.final_logit_softcapping }
      end
      return k
    end,
  },
  llama3 = {
    arch = "llama",
    rope_interleave = true,   -- llama.cpp rotates adjacent pairs: q/k rows are reordered per head
    tokenizer = { model = "gpt2", pre = "llama-bpe", eot = "<|eot_id|>", eom = "<|eom_id|>" },
    keys = function(cfg)
      local k = common_keys("llama", cfg)
      k[#k + 1] = { "llama.rope.dimension_count", "u32", cfg.head_dim }
      k[#k + 1] = { "llama.vocab_size", "u32", cfg.vocab_size }
      return k
    end,
    -- llama3 rope scaling is a tensor in GGUF: per-frequency divisors of the base frequencies.
    extra_tensors = function(cfg)
      local sc = cfg.rope_scaling
      if not (sc and sc.rope_type == "llama3") then return {} end
      local base = doppler.rope_inv_freq(cfg.rope_theta, cfg.head_dim, nil)
      local scaled = doppler.rope_inv_freq(cfg.rope_theta, cfg.head_dim, sc)
      local parts = {}
      for i = 1, #base do parts[i] = string.pack("<f", base[i] / scaled[i]) end
      return { { name = "rope_freqs.weight", shape = { #base }, data = table.concat(parts) } }
    end,
  },
}

function M.family(recipe)
  local f = recipe.gguf or M.families[recipe.name]
  if not f then
    local known = {}
    for k in pairs(M.families) do known[#known + 1] = k end
    table.sort(known)
    error(("convert: no GGUF mapping for the %s recipe (converts: %s)"):format(recipe.name, table.concat(known, ", ")), 0)
  end
  return f
end

-- ---- tokenizer.json -> tokenizer.ggml.* ----

local function tokenizer_keys(path, fam, cfg, log)
  local tj = doppler.read_json(path)
  local model = tj.model or {}
  if model.type ~= "BPE" then error(path .. ": only BPE tokenizers are converted (model.type " .. tostring(model.type) .. ")", 0) end
  local tokens, types, n = {}, {}, 0
  for tok, id in pairs(model.vocab or {}) do
    tokens[id + 1] = tok
    if id + 1 > n then n = id + 1 end
  end
  local added = {}
  for _, a in ipairs(tj.added_tokens or {}) do
    tokens[a.id + 1] = a.content
    added[a.id + 1] = a.special and 3 or 4   -- control / user-defined
    if a.id + 1 > n then n = a.id + 1 end
  end
  if cfg.vocab_size and cfg.vocab_size > n then n = cfg.vocab_size end
  -- Added tokens beyond the embedding (Gemma 3's 262144 = <image_soft_token> on the text-only 1B) are
  -- dropped, as llama.cpp's converter drops them: the token count must equal the embedding rows.
  if cfg.vocab_size and n > cfg.vocab_size then
    local only_added = true
    for id = cfg.vocab_size + 1, n do only_added = only_added and (tokens[id] == nil or added[id] ~= nil) end
    if only_added then
      log("tokenizer: dropping %d added token(s) beyond the %d embedding rows\n", n - cfg.vocab_size, cfg.vocab_size)
      for id = cfg.vocab_size + 1, n do tokens[id], added[id] = nil, nil end
      n = cfg.vocab_size
    else
      log("warning: the tokenizer has %d tokens but the embedding %d rows; llama.cpp will refuse the file\n",
          n, cfg.vocab_size)
    end
  end
  local merges, rank_of = {}, {}
  for i, m in ipairs(model.merges or {}) do
    local l, r
    if type(m) == "table" then l, r = m[1], m[2] else l, r = m:match("^(.-) (.*)$") end
    merges[i] = l .. " " .. r
    local piece = l .. r
    if not rank_of[piece] then rank_of[piece] = i end
  end
  local ids = {}
  for i = 1, n do
    local t = tokens[i]
    if not t then t = ("[PAD%d]"):format(i - 1); tokens[i] = t; types[i] = 5
    elseif t == model.unk_token then types[i] = 2
    elseif added[i] then types[i] = added[i]
    elseif model.byte_fallback and t:match("^<0x%x%x>$") then types[i] = 6
    else types[i] = 1 end
    ids[t] = ids[t] or (i - 1)
  end
  local k = {
    { "tokenizer.ggml.model", "str", fam.tokenizer.model },
    { "tokenizer.ggml.tokens", "arr:str", tokens },
    { "tokenizer.ggml.token_type", "arr:i32", types },
    { "tokenizer.ggml.merges", "arr:str", merges },
  }
  if fam.tokenizer.pre then k[#k + 1] = { "tokenizer.ggml.pre", "str", fam.tokenizer.pre } end
  if fam.tokenizer.model == "llama" then
    -- SentencePiece-style vocabularies merge by score (highest first). tokenizer.json keeps the merge
    -- ranks instead; a piece's score is minus the rank of the first merge that makes it, which orders
    -- merges as the ranks do. Pieces no merge makes rank below every merge.
    local scores = {}
    for i = 1, n do
      local r = rank_of[tokens[i]]
      scores[i] = r and -r or ((types[i] == 1 and utf8.len(tokens[i]) and utf8.len(tokens[i]) > 1) and -1e9 or 0.0)
    end
    k[#k + 1] = { "tokenizer.ggml.scores", "arr:f32", scores }
    k[#k + 1] = { "tokenizer.ggml.add_space_prefix", "bool", fam.tokenizer.add_space_prefix or false }
  end
  local function id_key(key, id) if id then k[#k + 1] = { "tokenizer.ggml." .. key, "u32", id } end end
  id_key("bos_token_id", cfg.bos_token_id)
  id_key("eos_token_id", cfg.eos_token_ids and cfg.eos_token_ids[1])
  id_key("padding_token_id", cfg.pad_token_id)
  id_key("unknown_token_id", model.unk_token and ids[model.unk_token])
  id_key("eot_token_id", fam.tokenizer.eot and ids[fam.tokenizer.eot])
  id_key("eom_token_id", fam.tokenizer.eom and ids[fam.tokenizer.eom])
  k[#k + 1] = { "tokenizer.ggml.add_bos_token", "bool", true }
  k[#k + 1] = { "tokenizer.ggml.add_eos_token", "bool", false }
  log("tokenizer: %d tokens, %d merges (%s)\n", n, #merges, fam.tokenizer.model)
  return k
end
M.tokenizer_keys = tokenizer_keys

-- ---- the conversion ----

-- opts: src, out, quant, pad_k, name, threads, progress(i, n, name), log(fmt, ...)
-- Returns a summary { recipe=, arch=, types = {type -> count}, tensors = {{name, type, shape}}, bytes = }.
function M.convert(opts)
  local log = opts.log or function() end
  local quant = opts.quant
  local ok = false
  for _, q in ipairs(M.quants) do ok = ok or q == quant end
  if not ok then error(("convert: --quant %s is not valid; valid values: %s"):format(tostring(quant), table.concat(M.quants, ", ")), 0) end
  if opts.pad_k and quant ~= "q4_k_m" then error("convert: --pad-k applies to q4_k_m only", 0) end
  local model = doppler.open_model(opts.src)
  local cfg = model:config()
  if not cfg or not cfg.raw then error(opts.src .. ": not a Hugging Face model directory (config.json)", 0) end
  local recipe = require("doppler.recipes").for_config(cfg.raw, opts.src)
  if recipe.prepare then recipe.prepare(cfg, model) end
  local fam = M.family(recipe)
  local arch = fam.arch

  -- Norm weights: the recipe's offset for safetensors minus the one it uses for GGUF (Gemma: 1 - 0).
  local function offset(kind)
    local o = recipe.norm_offset
    if type(o) == "function" then o = o({ kind = kind }) end
    return o or 0
  end
  local norm_add = offset("safetensors") - offset("gguf")

  local list = {}
  for _, w in ipairs(recipe.weights(cfg)) do
    local g = doppler.gguf_tensor_name(arch, w[1])
    if not g then error(("convert: no GGUF name for %s (architecture %s)"):format(w[1], arch), 0) end
    local t = { name = g, shape = w[2], src = model, src_name = w[1], add = w.norm and norm_add or nil }
    if fam.rope_interleave then
      if g:match("attn_q%.weight$") then t.rope_interleave = cfg.num_attention_heads
      elseif g:match("attn_k%.weight$") then t.rope_interleave = cfg.num_key_value_heads end
    end
    list[#list + 1] = t
  end
  for _, t in ipairs(fam.extra_tensors and fam.extra_tensors(cfg) or {}) do list[#list + 1] = t end
  -- llama.cpp's order: token_embd and the other globals first, then the layers in order
  local function key(t)
    local l = t.name:match("^blk%.(%d+)%.")
    return l and (tonumber(l) + 1) or 0
  end
  for i, t in ipairs(list) do t.order = i end
  table.sort(list, function(a, b)
    local ka, kb = key(a), key(b)
    if ka ~= kb then return ka < kb end
    return a.order < b.order
  end)
  local names = {}
  for i, t in ipairs(list) do names[i] = t.name end
  local st = M.rule_state(names, { n_expert = cfg.num_local_experts or 0, pad_k = opts.pad_k })
  local summary = { recipe = recipe.name, arch = arch, types = {}, tensors = {}, bytes = 0 }
  local padded, widths = {}, {}
  for _, t in ipairs(list) do
    local ty, pad = M.tensor_type(quant, t.name, t.shape, st)
    t.type = ty
    if pad then
      t.pad_cols = pad
      padded[#padded + 1] = t.name
      widths[#widths + 1] = t.shape[#t.shape]
    end
    summary.types[ty] = (summary.types[ty] or 0) + 1
    summary.tensors[#summary.tensors + 1] = { name = t.name, type = ty, shape = t.shape, pad_cols = pad }
  end

  local kv = {
    { "general.architecture", "str", arch },
    { "general.name", "str", opts.name or opts.src:gsub("/+$", ""):match("([^/]+)$") },
    { "general.file_type", "u32", file_types[quant] },
    { "general.quantization_version", "u32", 2 },
  }
  for _, e in ipairs(fam.keys(cfg)) do kv[#kv + 1] = e end
  if #padded > 0 then
    kv[#kv + 1] = { "doppler.pad_k", "bool", true }
    kv[#kv + 1] = { "doppler.pad_k.tensors", "arr:str", padded }
    kv[#kv + 1] = { "doppler.pad_k.widths", "arr:u32", widths }
  end
  local tpath = model:tokenizer_path()
  if tpath and fam.tokenizer then
    for _, e in ipairs(tokenizer_keys(tpath, fam, cfg, log)) do kv[#kv + 1] = e end
    local tmpl = model:chat_template()   -- the template text
    if tmpl then kv[#kv + 1] = { "tokenizer.chat_template", "str", tmpl } end
  else
    log("note: %s has no tokenizer.json; the GGUF carries no tokenizer (llama.cpp needs one to load it)\n", opts.src)
  end

  doppler.gguf_write(opts.out, kv, list, { threads = opts.threads or 0, progress = opts.progress })
  local f = io.open(opts.out, "rb")
  summary.bytes = f:seek("end")
  f:close()
  model:close()
  return summary
end

-- The manifest text for a converted model. model_rel: the GGUF path relative to the manifest's directory.
function M.manifest_text(name, model_rel, recipe, quant, src)
  return table.concat({
    "# Written by `doppler convert` from " .. src .. ".",
    "# Run it:  doppler " .. "recipes/" .. recipe .. ".lua --model <this file>   (or: doppler run --model <this file>)",
    "name: " .. name,
    "model: " .. model_rel,
    "recipe: " .. recipe,
    "quantization: " .. quant,
    "source: " .. src,
    "kernel_hints:",
    "  q_matmul: fused",
    "",
  }, "\n")
end

return M
