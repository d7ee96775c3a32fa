-- Evidence that llama.cpp loads what `doppler convert` writes (llama.cpp itself cannot run here): our file is
-- compared, at the level llama.cpp reads a GGUF, with llama.cpp's own file for the same model config.
-- tests/fixtures/gguf/{gemma3-q,llama-q} hold files written by llama.cpp's llama-quantize from the HF config
-- beside them (hf_config.json). For each of them and each quant our converter also makes:
--   source: `doppler synth` with that config (random weights) and a tokenizer.json holding the fixture's own
--           placeholder vocabulary (tokens, special tokens, unknown token), so that the same tokenizer is used;
--   ours:   `doppler convert SOURCE --quant Q --name <the fixture's general.name>`.
-- Checked with a GGUF reader written from the specification (lib/gguf_raw.lua, not our C reader):
--   - metadata: every key of llama.cpp's file is in ours with the same GGUF value type (arrays: the same
--     element type) and the same value; every key of ours is in llama.cpp's. The exceptions are listed below,
--     each with why. Tokenizer: tokens, token types and special ids are equal.
--   - tensors: the same names, ne (ggml order) and ggml types (tensor order is free: llama.cpp finds tensors
--     by name, and llama.cpp's file here lists each block's tensors alphabetically).
--   - layout: the alignment (general.alignment or 32), the data section at the first aligned offset after the
--     header, every tensor offset aligned, tensors back to back (each at the aligned end of the previous one),
--     the file ending with the last tensor; the same rules hold in llama.cpp's file (which checks the reader).
-- Q5_K_M (in gemma3-q) is not a quant our converter makes, so it is not compared.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local gguf = require "lib.gguf_raw"

local G = check.fixtures .. "/gguf/"
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. check.quote(tmp))

-- ---- the allowed differences, and why ----

-- Keys whose value may differ (present in both, same type).
local VALUE_DIFFERS = {
  ["tokenizer.ggml.scores"] = "the fixture's placeholder vocabulary scores token i as -i; a tokenizer.json (BPE) has " ..
    "no SentencePiece scores, so ours come from the merge ranks (convert.lua) and this vocabulary has no merges",
}
local FAMILY = {
  ["gemma3-q"] = {
    only_ours = {
      ["tokenizer.ggml.merges"] = "the BPE merges of tokenizer.json (convert_hf_to_gguf.py writes them too); empty here",
      ["tokenizer.ggml.add_space_prefix"] = "convert_hf_to_gguf.py writes false for Gemma 3; llama.cpp's default is true",
      ["tokenizer.ggml.add_bos_token"] = "convert_hf_to_gguf.py writes it (SpecialVocab); the fixture's script did not",
      ["tokenizer.ggml.add_eos_token"] = "as add_bos_token",
    },
    only_theirs = {},
    value_differs = {},
  },
  ["llama-q"] = {
    only_ours = {
      ["llama.attention.key_length"] = "convert_hf_to_gguf.py writes head_dim when the config has it; checked below " ..
        "to equal embedding_length / head_count, what llama.cpp assumes without the key",
      ["llama.attention.value_length"] = "as key_length",
      ["llama.vocab_size"] = "convert_hf_to_gguf.py's LlamaModel writes it; checked below to equal the token count",
      ["tokenizer.ggml.merges"] = "Llama 3's tokenizer is BPE: llama.cpp's gpt2 vocabulary needs merges (empty here)",
      ["tokenizer.ggml.pre"] = "a gpt2 vocabulary names its pre-tokenizer (llama-bpe for Llama 3)",
      ["tokenizer.ggml.add_bos_token"] = "convert_hf_to_gguf.py writes it (SpecialVocab); the fixture's script did not",
      ["tokenizer.ggml.add_eos_token"] = "as add_bos_token",
    },
    only_theirs = {
      ["tokenizer.ggml.scores"] = "a gpt2 (BPE) vocabulary has no scores: convert_hf_to_gguf.py writes none",
    },
    value_differs = {
      ["tokenizer.ggml.model"] = "the fixture's placeholder is a SentencePiece-style list (llama); Llama 3's " ..
        "tokenizer is BPE, which convert_hf_to_gguf.py writes as gpt2",
    },
  },
}

-- ---- the source model ----

-- tokenizer.json (BPE) holding the fixture's vocabulary: control tokens (type 3) as special added tokens, the
-- unknown token (type 2) as the model's unk_token, the rest as the vocabulary; no merges.
local function placeholder_tokenizer(ref, path)
  local toks, types = ref.kv["tokenizer.ggml.tokens"].value, ref.kv["tokenizer.ggml.token_type"].value
  local vocab, added, unk = {}, {}, nil
  for i, t in ipairs(toks) do
    check.truthy(t:match("^[%w<>_]+$"), "placeholder token needs no JSON escaping: " .. t)
    if types[i] == 3 then
      added[#added + 1] = ('{"id": %d, "content": "%s", "single_word": false, "lstrip": false, "rstrip": false, ' ..
                           '"normalized": false, "special": true}'):format(i - 1, t)
    else
      vocab[#vocab + 1] = ('"%s": %d'):format(t, i - 1)
      if types[i] == 2 then unk = t end
    end
  end
  check.truthy(unk, "the fixture has an unknown token")
  local f = assert(io.open(path, "w"))
  f:write('{"version": "1.0", "added_tokens": [', table.concat(added, ", "), '], "model": {"type": "BPE", ',
          '"unk_token": "', unk, '", "byte_fallback": false, "vocab": {', table.concat(vocab, ", "), '}, "merges": []}}')
  f:close()
end

local sources = {}
local function source_for(dir, ref)
  if sources[dir] then return sources[dir] end
  local src = tmp .. "/" .. dir
  placeholder_tokenizer(ref, src .. "-tokenizer.json")
  check.must_run({ "synth", "--config", G .. dir .. "/hf_config.json", "--tokenizer", src .. "-tokenizer.json",
                   "--out", src, "--dtype", "f32", "--seed", "1" })
  sources[dir] = src
  return src
end

-- ---- comparisons ----

local function same_value(a, b)
  if a.type ~= gguf.T.arr then return a.value == b.value end
  if #a.value ~= #b.value then return false end
  for i = 1, #a.value do if a.value[i] ~= b.value[i] then return false end end
  return true
end

local function type_str(e)
  return e.type == gguf.T.arr and ("arr[" .. gguf.type_name[e.elem] .. "]") or gguf.type_name[e.type]
end

local function check_layout(f, path)
  check.eq(f.data_start % f.alignment, 0, path .. ": data section aligned")
  check.truthy(f.data_start >= f.header_end and f.data_start - f.header_end < f.alignment, path .. ": data right after the header")
  local by_offset = {}
  for i, t in ipairs(f.tensors) do by_offset[i] = t end
  table.sort(by_offset, function(a, b) return a.offset < b.offset end)
  local next_at = 0
  for _, t in ipairs(by_offset) do
    check.eq(t.offset % f.alignment, 0, path .. ": " .. t.name .. " offset aligned")
    check.eq(t.offset, next_at, path .. ": " .. t.name .. " at the aligned end of the previous tensor")
    next_at = (t.offset + t.bytes + f.alignment - 1) // f.alignment * f.alignment
  end
  local last = by_offset[#by_offset]
  check.truthy(f.size >= f.data_start + last.offset + last.bytes and f.size <= f.data_start + next_at,
               ("%s: the file (%d bytes) ends with the last tensor (%d)"):format(path, f.size, f.data_start + last.offset + last.bytes))
end

local cases = {
  { "gemma3-q", "Q8_0", "q8_0" }, { "gemma3-q", "Q4_0", "q4_0" }, { "gemma3-q", "Q5_0", "q5_0" },
  { "gemma3-q", "Q4_K_M", "q4_k_m" }, { "llama-q", "Q8_0", "q8_0" }, { "llama-q", "Q4_K_M", "q4_k_m" },
}

for _, c in ipairs(cases) do
  local dir, Q, quant = c[1], c[2], c[3]
  local fam = FAMILY[dir]
  check.case(("%s %s: doppler convert --quant %s matches llama.cpp's file (metadata, tensors, layout)"):format(dir, Q, quant), function()
    local theirs_path = G .. dir .. "/model-" .. Q .. ".gguf"
    local theirs = gguf.read(theirs_path)
    local src = source_for(dir, theirs)
    local ours_path = ("%s/%s-%s.gguf"):format(tmp, dir, quant)
    check.must_run({ "convert", src, "--quant", quant, "--out", ours_path, "--no-manifest", "--quiet", "--threads", "2",
                     "--name", theirs.kv["general.name"].value })
    local ours = gguf.read(ours_path)

    -- metadata
    local compared, excused = 0, 0
    for _, k in ipairs(theirs.keys) do
      local a, b = theirs.kv[k], ours.kv[k]
      if not b then
        check.truthy(fam.only_theirs[k], "llama.cpp's key " .. k .. " is missing from ours")
        excused = excused + 1
      else
        check.eq(type_str(b), type_str(a), k .. ": GGUF value type")
        if same_value(a, b) then
          compared = compared + 1
        else
          check.truthy(VALUE_DIFFERS[k] or fam.value_differs[k],
                       ("%s: ours %s, llama.cpp's %s"):format(k, tostring(b.value), tostring(a.value)))
          excused = excused + 1
        end
      end
    end
    for _, k in ipairs(ours.keys) do
      if not theirs.kv[k] then
        check.truthy(fam.only_ours[k], "our key " .. k .. " is not in llama.cpp's file")
        excused = excused + 1
      end
    end
    -- the values of our extra keys are what llama.cpp would assume or read elsewhere
    local arch = theirs.kv["general.architecture"].value
    local kl = ours.kv[arch .. ".attention.key_length"]
    if kl and not theirs.kv[arch .. ".attention.key_length"] then
      check.eq(kl.value, theirs.kv[arch .. ".embedding_length"].value // theirs.kv[arch .. ".attention.head_count"].value,
               "key_length = embedding_length / head_count")
      check.eq(ours.kv[arch .. ".attention.value_length"].value, kl.value, "value_length")
    end
    if ours.kv[arch .. ".vocab_size"] then
      check.eq(ours.kv[arch .. ".vocab_size"].value, #theirs.kv["tokenizer.ggml.tokens"].value, "vocab_size = token count")
    end
    for _, k in ipairs({ "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                         "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                         "general.file_type", "general.quantization_version", arch .. ".block_count",
                         arch .. ".context_length", arch .. ".embedding_length", arch .. ".feed_forward_length",
                         arch .. ".attention.head_count", arch .. ".attention.head_count_kv",
                         arch .. ".attention.layer_norm_rms_epsilon", arch .. ".rope.freq_base" }) do
      check.truthy(theirs.kv[k] and ours.kv[k] and same_value(theirs.kv[k], ours.kv[k]), k .. " compared equal")
    end

    -- tensors
    local mine = {}
    for _, t in ipairs(ours.tensors) do mine[t.name] = t end
    check.eq(#ours.tensors, #theirs.tensors, "tensor count")
    for _, t in ipairs(theirs.tensors) do
      local o = mine[t.name]
      check.truthy(o, "tensor " .. t.name .. " missing from ours")
      check.eq(table.concat(o.ne, ","), table.concat(t.ne, ","), t.name .. " ne")
      check.eq(gguf.ggml[o.type][1], gguf.ggml[t.type][1], t.name .. " ggml type")
    end

    -- layout
    check.eq(ours.alignment, theirs.alignment, "alignment")
    check.eq(ours.version, theirs.version, "GGUF version")
    check_layout(theirs, theirs_path)
    check_layout(ours, ours_path)
    print(("  %s %s: %d keys equal, %d listed differences; %d tensors equal in name, ne and type"):format(
      dir, Q, compared, excused, #theirs.tensors))
  end)
end

os.execute("rm -rf " .. check.quote(tmp))
check.done()
