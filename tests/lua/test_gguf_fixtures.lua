-- GGUF models quantised by llama.cpp (tests/fixtures/gguf) through the normal model path
-- (`doppler run --model X.gguf`: the recipe from general.architecture, HF weight names resolved
-- to GGUF ones, Llama q/k rows de-interleaved, Gemma norms stored with +1), against HF
-- transformers on the exactly dequantised weights. Bounds from the GGUF issue (logits std ~ 10):
-- precision=f32 every row within 1e-2 (max abs); default mode within 0.5, and each row's argmax =
-- the reference's (the greedy id in the continuation) wherever the reference margin exceeds 1.0. Both quantised-linear paths
-- (q_matmul=fused, q_matmul=dequant_f16) are checked in the default mode, and the fused one with two-plane
-- int8 activations in gemv_q (gemv_q_x=q8x2, token by token so that gemv_q runs); decode (T = 1, the GEMV
-- kernels) by prefill_chunk=1 in f32 and by free-running greedy generation.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"

local G = check.fixtures .. "/gguf/"
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. check.quote(tmp))

local fixtures = {
  { "gemma3-q", "Q8_0" }, { "gemma3-q", "Q4_0" }, { "gemma3-q", "Q5_0" }, { "gemma3-q", "Q4_K_M" },
  { "gemma3-q", "Q5_K_M" }, { "llama-q", "Q8_0" }, { "llama-q", "Q4_K_M" },
}

local function logits_for(model, ids, extra)
  return check.logits("run", model, ids, extra, tmp .. "/logits.f32")
end

local max_diff = check.max_diff

local argmax_row = check.argmax_row

local report = {}

for _, f in ipairs(fixtures) do
  local dir, q = f[1], f[2]
  local name = dir .. " " .. q
  local model = G .. dir .. "/model-" .. q .. ".gguf"
  local ref = doppler.read_json(G .. dir .. "/reference-" .. q .. ".json")
  local expected = check.read_f32(G .. dir .. "/" .. ref.logits_file)
  local T, V = ref.logits_shape[1], ref.logits_shape[2]
  local P = #ref.prompt_ids
  local measured = {}

  check.case(name .. ": the recipe's HF names resolve to this GGUF's tensors", function()
    local m = doppler.open_model(model)
    local t = m:tensor("model.layers.0.self_attn.q_proj.weight")
    check.truthy(t, "q_proj found by its HF name")
    check.eq(t.name, "blk.0.attn_q.weight", "stored name")
    check.eq(t.dtype, ref.tensor_types["blk.0.attn_q.weight"]:lower(), "dtype")
    local cfg = m:config()
    check.eq(t.shape[1], cfg.num_attention_heads * cfg.head_dim, "rows (row-major shape)")
    check.eq(t.shape[2], cfg.hidden_size, "columns")
    check.eq(m:tensor("model.embed_tokens.weight").name, "token_embd.weight", "embedding")
    m:close()
  end)

  check.case(name .. ": precision=f32, every row within 1e-2", function()
    local d, row = max_diff(logits_for(model, ref.all_ids, { "--hint", "precision=f32" }), expected, T, V)
    measured[#measured + 1] = ("f32 %.3g"):format(d)
    if d > 1e-2 then error(("max abs %.4g at row %d"):format(d, row)) end
  end)

  check.case(name .. ": precision=f32, token by token (prefill_chunk=1), every row within 1e-2", function()
    local l = logits_for(model, ref.all_ids, { "--hint", "precision=f32", "--hint", "prefill_chunk=1" })
    local d, row = max_diff(l, expected, T, V)
    measured[#measured + 1] = ("f32 chunk1 %.3g"):format(d)
    if d > 1e-2 then error(("max abs %.4g at row %d"):format(d, row)) end
  end)

  -- the third: two-plane int8 activations in gemv_q (gemv_q_x=q8x2, the H100's auto), which only T <= 4
  -- passes reach: token by token (one plane, q8, moved llama-q's logits by 0.70: it is not checked here)
  -- and where the head is Q8_0, the H100's auto on such a file at T = 1: the layers on their f16 copies,
  -- the head and gate+up in blocks on two-plane int8 activations (lower/prepare.lua, q_matmul_head, q_matmul_glu)
  local variants = { { "fused" }, { "dequant_f16" }, { "fused", "gemv_q_x=q8x2", "prefill_chunk=1" } }
  if (ref.tensor_types["output.weight"] or ref.tensor_types["token_embd.weight"]) == "Q8_0" then
    variants[#variants + 1] = { "dequant_f16", "q_matmul_head=fused", "q_matmul_glu=fused", "gemv_q_x=q8x2", "prefill_chunk=1" }
  end
  -- the fused MLP (fusion glu_down, the H100's auto), token by token: gate+up in blocks with down's f16 columns
  -- into a fixed-point sum, read by norm_add_norm / add_rmsnorm; and as on the H100, with the norm folded in
  -- (norm_gate_up, q8x2), Gemma's q/k/v pass (norm_qkv) reading the sum and 32 rows per workgroup, so that
  -- down's Q4_K / Q6_K blocks are read by columns (quant/columns_q.comp)
  if q == "Q4_K_M" then
    variants[#variants + 1] = { "fused", "glu_down=on", "prefill_chunk=1" }
    variants[#variants + 1] = { "dequant_f16", "q_matmul_head=fused", "q_matmul_glu=fused", "gemv_q_x=q8x2",
                                "glu_down=on", "prefill_chunk=1", "glu_down_rows=32", "glu_down_wg=256" }
  end
  for _, v in ipairs(variants) do
    local qm, extra = v[1], { "--hint", "q_matmul=" .. v[1] }
    for i = 2, #v do extra[#extra + 1], extra[#extra + 2] = "--hint", v[i] end
    local label = table.concat(v, " ")
    check.case(name .. ": default mode, q_matmul=" .. label .. ", every row within 0.5; argmax = reference's (greedy ids) where margin > 1", function()
      local l = logits_for(model, ref.all_ids, extra)
      local d, row = max_diff(l, expected, T, V)
      local what = #v == 1 and qm or v[2]:match("^glu_down") and "glu_down" or
                   (v[2]:match("^q_matmul_head") and "copies+head,glu q8x2" or "q8x2")
      if #v > 2 and v[5] == "glu_down=on" then what = what .. "+glu_down" end
      measured[#measured + 1] = ("default/%s %.3g"):format(what, d)
      if d > 0.5 then error(("max abs %.4g at row %d"):format(d, row)) end
      -- every row's top-1 where the reference has a clear one; in the continuation that is the greedy id
      for t = 0, T - 1 do
        if ref.top1_minus_top2[t + 1] > 1.0 then
          local want = t >= P - 1 and t < T - 1 and ref.all_ids[t + 2] or argmax_row(expected, V, t)
          check.eq(argmax_row(l, V, t), want, ("argmax of row %d"):format(t))
        end
      end
    end)
  end

  local greedy = { {} }
  if q == "Q4_K_M" then greedy[2] = { "--hint", "glu_down=on" } end   -- the fused MLP in the GPU loop, the head reading its sum
  for _, extra in ipairs(greedy) do
    check.case(name .. ": free-running greedy decode = greedy_ids (up to the first margin <= 1)" ..
               (extra[2] and (", " .. extra[2]) or ""), function()
      local args = { "run", "--model", model, "--ids", check.join(ref.prompt_ids),
                     "--max-tokens", tostring(#ref.greedy_ids), "--print-ids", "--quiet" }
      for _, a in ipairs(extra) do args[#args + 1] = a end
      local got = check.parse_ids(check.must_run(args))
      check.eq(#got, #ref.greedy_ids, "generated count")
      for i, id in ipairs(ref.greedy_ids) do
        if ref.top1_minus_top2[P + i - 1] <= 1.0 then break end
        check.eq(got[i], id, ("generated id %d"):format(i))
      end
    end)
  end
  report[#report + 1] = ("  %-16s %s"):format(name, table.concat(measured, ", "))
end

check.case("the quantised embedding stays quantised on the device (gather_q; tied head on the same blocks)", function()
  local session = require "doppler.session"
  local hints = require "doppler.hints"
  local recipes = require "doppler.recipes"
  local m = doppler.open_model(G .. "gemma3-q/model-Q4_K_M.gguf")
  local s = session.open(recipes.for_architectures({ "gemma3" }, "test"), m, { hints = hints.new(), context = 64 })
  check.eq(s.weights["model.embed_tokens.weight"]:dtype(), "q6_k", "embedding dtype on the device")
  check.eq(s.weights["model.layers.0.self_attn.q_proj.weight"]:dtype(), "q4_k", "q_proj dtype on the device")
  m:close()
end)

check.case("weight preparations (f16 copies, down's columns) run in one submit per plan, made once for every plan", function()
  local session = require "doppler.session"
  local hints = require "doppler.hints"
  local recipes = require "doppler.recipes"
  local m = doppler.open_model(G .. "gemma3-q/model-Q4_K_M.gguf")
  local function open(set)
    local h = hints.new()
    -- no clock warm-up or side prefetcher (each a submit of its own on a GPU): the counts below are the plans'
    h:set("clock_warmup", "off", "test")
    h:set("side_prefetch", "off", "test")
    for k, v in pairs(set) do h:set(k, v, "test") end
    return session.open(recipes.for_architectures({ "gemma3" }, "test"), m, { hints = h, context = 64 })
  end
  -- a plan's submits: one per constant table it uploads first (Session:constant), and its preparations'
  local function submits_of(s, f)
    local before, tables = s.dev:submits(), 0
    for _ in pairs(s.constants) do tables = tables + 1 end
    local p = f()
    for _ in pairs(s.constants) do tables = tables - 1 end
    return s.dev:submits() - before, p, -tables
  end
  -- the H100's auto on this file: the layers on f16 copies, the fused MLP with down's Q4_K / Q6_K columns
  local s = open { q_matmul = "dequant_f16", q_matmul_glu = "fused", glu_down = "on", glu_down_rows = 32,
                   glu_down_wg = 256 }
  local n, prompt, uploads = submits_of(s, function() return s:plan_for(5, false) end)
  check.eq(n, uploads + 1, "the prompt plan's preparations: one submit besides its uploads")
  local copies = 0
  for _, t in ipairs(prompt.owned) do if t:dtype() == "f16" and #t:shape() == 2 then copies = copies + 1 end end
  -- q, k, v, o and down of every layer and the head (the tied embedding); gate and up too where the device does
  -- not take them in blocks (q_matmul_glu=fused: on the H100 it does, on lavapipe the prefill copies them)
  local L = s.cfg.num_hidden_layers
  check.truthy(copies == 5 * L + 1 or copies == 7 * L + 1, ("f16 copies made by that submit: %d"):format(copies))
  n, _, uploads = submits_of(s, function() return s:plan_for(1, false) end)
  check.eq(n, uploads + 1, "the step plan's preparations (down's columns): one submit besides its uploads")
  -- compiled again, the plans find every preparation made (the caches took them after their submit)
  s:drop_plans()
  check.eq((submits_of(s, function() return s:plan_for(5, false) end)), 0, "prompt plan again: nothing to prepare")
  check.eq((submits_of(s, function() return s:plan_for(1, false) end)), 0, "step plan again: nothing to prepare")
  m:close()
end)

check.case("a GGUF is its own tokenizer (model:tokenizer_path, doppler.tokenizer, run --prompt)", function()
  local path = G .. "llama-q/model-Q8_0.gguf"
  local m = doppler.open_model(path)
  check.eq(m:tokenizer_path(), path, "tokenizer_path")
  m:close()
  local tok = doppler.tokenizer(path)
  check.eq(tok:vocab_size(), 512, "vocab size")
  check.eq(tok:decode({ 2, 4, 5, 1 }), "<bos>t4t5<eos>", "decode")
  check.eq(check.join(tok:encode("<eos>", { bos = true })), "2,1", "encode with BOS")
  local out = check.must_run({ "run", "--model", path, "--prompt", "<eos>", "--max-tokens", "2", "--print-ids", "--quiet" })
  check.eq(#check.parse_ids(out:match("%[.-%]")), 2, "generated ids")
end)

-- llama.cpp stores Llama 3.1+'s rope scaling as rope_freqs.weight, the divisor of each frequency
-- (its converter: 1 above the high-frequency wavelength, factor below the low one, a smooth ramp
-- between); doppler.session turns it into a freq_factors table. Computed here the converter's way
-- from llama3-tiny's parameters, it must give the llama3 table.
check.case("rope freq_factors (a GGUF's rope_freqs.weight) = HF's llama3 scaling", function()
  local rope = require "doppler.rope"
  local cfg = doppler.read_config(check.fixtures .. "/models/llama3-tiny/config.json")
  local sc = cfg.rope_scaling
  check.eq(sc.rope_type, "llama3", "fixture scaling")
  local base = rope.inv_freq(cfg, { theta = cfg.rope_theta })
  local want = rope.inv_freq(cfg, { theta = cfg.rope_theta, scaling = sc })
  local lo_wl = sc.original_max_position_embeddings / sc.low_freq_factor
  local hi_wl = sc.original_max_position_embeddings / sc.high_freq_factor
  local factors = {}
  for i, f in ipairs(base) do
    local wl = 2 * math.pi / f
    if wl < hi_wl then factors[i] = 1
    elseif wl > lo_wl then factors[i] = sc.factor
    else
      local smooth = (sc.original_max_position_embeddings / wl - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor)
      factors[i] = 1 / ((1 - smooth) / sc.factor + smooth)
    end
  end
  local got = rope.inv_freq(cfg, { theta = cfg.rope_theta, scaling = { rope_type = "freq_factors", factors = factors } })
  check.eq(#got, #want, "frequencies")
  local ramp = 0
  for i = 1, #want do
    check.near(got[i], want[i], 2e-6 * want[i], ("inv_freq[%d]"):format(i))
    if factors[i] ~= 1 and factors[i] ~= sc.factor then ramp = ramp + 1 end
  end
  check.truthy(ramp > 0 and got[#got] < base[#base] / 2, "the fixture exercises the ramp and the scaled band")
end)

-- gather_q.comp on every quantised type these files hold: the rows it gathers (scaled, f32 activations)
-- equal the CPU's exact dequantisation (core/quant.c, on upload to f32) times the scale, bit for bit.
check.case("quantised embedding gather = CPU dequantisation, every type", function()
  local Graph = require "doppler.graph"
  local plan = require "doppler.plan"
  local hints = require "doppler.hints"
  local dev = doppler.device()
  local seen = {}
  for _, f in ipairs(fixtures) do
    local m = doppler.open_model(G .. f[1] .. "/model-" .. f[2] .. ".gguf")
    for _, t in ipairs(m:tensors()) do
      if #t.shape == 2 and t.dtype:match("^q") and not seen[t.dtype] then
        seen[t.dtype] = true
        local rows, C = t.shape[1], t.shape[2]
        local q = dev:upload_model_tensor(m, t.name, t.dtype)
        local ref = dev:upload_model_tensor(m, t.name, "f32"):download()
        local ids = { 0, rows - 1, 7, 7, rows // 2, 3 }
        local T = #ids
        local g = Graph.new { name = "gather_q" }
        local idn = g:input("ids", { "T" }, "u32")
        g:output("y", g:embed(idn, g:weight { name = "tab", shape = { rows, C }, dtype = t.dtype }, { scale = 1.5 }))
        local it = dev:tensor { dtype = "u32", shape = { T } }
        it:upload(ids)
        local p = plan.compile(dev, g, { T = T, act = "f32", kv = "f32", hints = hints.new(), weights = { tab = q },
                                         inputs = { ids = it }, states = {}, constants = function() end })
        p:run()
        local y = p:output("y"):download()
        check.eq(#y, T * C, t.dtype .. " output size")
        for r, id in ipairs(ids) do
          for c = 1, C do
            local want = doppler.round_to("f32", ref[id * C + c] * 1.5)
            if y[(r - 1) * C + c] ~= want then
              error(("%s %s: row %d col %d: %.9g, CPU %.9g"):format(t.dtype, t.name, id, c - 1, y[(r - 1) * C + c], want))
            end
          end
        end
      end
    end
    m:close()
  end
  local types = {}
  for k in pairs(seen) do types[#types + 1] = k end
  table.sort(types)
  check.eq(table.concat(types, " "), "q4_0 q4_k q5_0 q5_k q6_k q8_0", "types covered")
end)

print("measured max abs against the references:\n" .. table.concat(report, "\n"))
os.execute("rm -rf " .. check.quote(tmp))
check.done()
