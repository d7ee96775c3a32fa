-- The attention-side fusions and attention_decode's variants in whole models (tiny fixtures, lavapipe):
--   rope_kv (q/k norm + RoPE + KV append) and norm_add_norm (Gemma's sandwich norm) are applied to the
--   decode step of every family that has the pattern, leave no rope / kv_append / rmsnorm dispatch behind
--   there, and give the logits of the unfused plans (fusion=-rope_kv,-norm_add_norm; compared in
--   precision=f32, see same_logits) over a prompt fed one token at a time (every step reads what the fused kernel appended to the caches);
--   attention_rope folds rope_kv into attention_decode in those steps (no rope_kv dispatch left, one
--   attention_decode per layer, one dispatch per layer fewer than with fusion=-attention_rope), with the
--   logits of fusion=-attention_rope and of the unfused plan (precision=f32, same_logits; on lavapipe they are
--   bit for bit those of rope_kv + attention_decode, which test_k_attention_rope.c checks per kernel), also
--   after a 3-token pass (T <= 4 takes it too); fusion=-attention_rope leaves rope_kv;
--   attention_decode's merge is in the kernel (no attention_reduce dispatch); the hints attention_lanes /
--   attention_wg pick other variants with the same logits, and a value that does not suit the head_dim or
--   the device is an error listing the valid ones; auto takes one q head per workgroup, and attention_heads
--   puts more of a kv head's q heads in one (the plan's spec constants G and GS say so) with the same logits;
--   attention_splits' auto chunks (256 / (kv heads x T) and one per 128 x T keys of the capacity on a GPU, 1
--   on a CPU device) on fake devices, and
--   several chunks per query on this device (the grid says so) with the logits of the auto plan; a context
--   shorter than a sliding layer's window + T - 1 keeps rope_kv and attention_rope (its caches never wrap),
--   with the logits of the unfused plan and of a longer context.
-- The kernels themselves are tested against core/ref in tests/unit (test_k_rope_kv.c, test_k_norm.c,
-- test_k_attention_flash.c); the fixture tests check the fused models against the references.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"

local PROMPT = { 2, 17, 5, 33, 8, 11, 4, 29, 3, 7, 19 }

-- Feeds PROMPT one token at a time (or its first `first` tokens as one pass, then one at a time); returns
-- every pass's logits (a list of rows) and the last T = 1 plan's kernel names (and the first pass's, then the
-- last plan's kernel descriptions: file, defines, constants).
local function steps(name, hint_list, first)
  local path = check.fixtures .. "/models/" .. name
  local h = hints.new()
  for k, v in pairs(hint_list) do h:set(k, v, "test") end
  local m = doppler.open_model(path)
  local recipe = recipes.for_config(doppler.read_json(path .. "/config.json"), path)
  local s = session.open(recipe, m, { hints = h, context = 64 })
  local rows, i0, names0 = {}, 1, {}
  if first then
    s:feed(table.move(PROMPT, 1, first, 1, {}))
    rows[1] = s:last_logits()
    for i, k in ipairs(s.last_plan.kernel_log) do names0[i] = k:name() end
    i0 = first + 1
  end
  for i = i0, #PROMPT do
    s:feed({ PROMPT[i] })
    rows[#rows + 1] = s:last_logits()
  end
  local names = {}
  for i, k in ipairs(s.last_plan.kernel_log) do names[i] = k:name() end
  local specs, groups = s.last_plan.kernel_specs, s.last_plan.kernel_groups
  m:close()
  return rows, names, names0, specs, groups
end

local count = check.count

-- Logits of two plans of the same model, compared in precision=f32: the fused kernels keep every rounding
-- point and rmsnorm's order, but a GPU compiler may contract a * b + c into an fma in one kernel and not in
-- the other, and in the default mode an f16 rounding turns such a last-bit difference into one f16 ulp
-- that the layers amplify (seen on the H100: 1.9e-3 on qwen3-tiny). In f32 those stay at a few ulps, so
-- 1e-4 relative still catches any wrong value (a wrong key, slot or weight moves logits by >= 1e-2). The
-- default mode's accuracy is the fixture tests' business (test_gemma3_fixtures, test_families_fixtures).
local function same_logits(a, b, what)
  for i = 1, #a do
    for j = 1, #a[i] do
      check.near(b[i][j], a[i][j], 1e-4 * math.max(1, math.abs(a[i][j])), ("%s step %d logit %d"):format(what, i, j - 1))
    end
  end
end

local FAMILIES = {
  { "gemma3-tiny", norm = true, sandwich = true },
  { "qwen3-tiny", norm = true },
  { "llama3-tiny" },
  { "phi3-tiny" },      -- q, k, v are strided slices of one projection
  { "mixtral-tiny" },
}

for _, f in ipairs(FAMILIES) do
  local name = f[1]
  check.case(name .. ": rope_kv" .. (f.sandwich and " and norm_add_norm" or "") .. " used, same logits as unfused", function()
    -- norm_qkv and norm_gate_up off: they fold the norm_add_norms before q/k/v and gate+up into those passes
    -- (counted here; and they are not exact, which the f32 comparison below wants)
    local fused, kf = steps(name, { fusion = "-attention_rope,-norm_qkv,-norm_gate_up" })
    local plain, kp = steps(name, { fusion = "-rope_kv,-norm_add_norm,-attention_rope" })
    local layers = doppler.read_json(check.fixtures .. "/models/" .. name .. "/config.json").num_hidden_layers
    check.eq(count(kf, "rope_kv"), layers, "rope_kv dispatches")
    check.eq(count(kf, "rope") + count(kf, "kv_append") + count(kf, "attention_reduce"), 0, "rope, kv_append, reduce left")
    check.eq(count(kp, "rope"), 2 * layers, "unfused rope dispatches")
    if f.sandwich then
      check.truthy(count(kf, "norm_add_norm") >= 2 * layers - 1, "norm_add_norm dispatches: " .. count(kf, "norm_add_norm"))
    end
    if f.norm then check.eq(count(kf, "rmsnorm"), count(kp, "rmsnorm") - 2 * layers - (f.sandwich and count(kf, "norm_add_norm") or 0),
                            "rmsnorm dispatches left") end
    check.truthy(#kf < #kp, ("fused %d dispatches, unfused %d"):format(#kf, #kp))
    local fused32 = steps(name, { precision = "f32", fusion = "-attention_rope,-norm_qkv,-norm_gate_up" })
    local plain32 = steps(name, { precision = "f32", fusion = "-rope_kv,-norm_add_norm,-attention_rope" })
    same_logits(plain32, fused32, name .. " (f32)")
    check.eq(#fused, #PROMPT, "default-mode steps")
  end)

  check.case(name .. ": attention_rope folds rope_kv into attention_decode, same logits", function()
    local layers = doppler.read_json(check.fixtures .. "/models/" .. name .. "/config.json").num_hidden_layers
    local fused, kf = steps(name, {})
    local sep, ks = steps(name, { fusion = "-attention_rope" })
    check.eq(count(kf, "rope_kv") + count(kf, "rope") + count(kf, "kv_append"), 0, "rope_kv, rope, kv_append left")
    check.eq(count(kf, "attention_decode"), layers, "attention_decode dispatches")
    check.eq(count(ks, "rope_kv"), layers, "fusion=-attention_rope keeps rope_kv")
    check.eq(#kf, #ks - layers, ("one dispatch per layer fewer: %d against %d"):format(#kf, #ks))
    check.eq(#fused, #sep, "default-mode passes")   -- the default mode's accuracy: the fixture tests
    local plain32 = steps(name, { precision = "f32", fusion = "-rope_kv,-norm_add_norm,-attention_rope" })
    local fused32 = steps(name, { precision = "f32" })
    same_logits(plain32, fused32, name .. " attention_rope (f32)")
    same_logits(steps(name, { precision = "f32", fusion = "-attention_rope" }), fused32, name .. " against rope_kv (f32)")
    -- a 3-token pass first (T <= 4: the rule applies there too), then one token at a time
    local f3, _, k3 = steps(name, { precision = "f32" }, 3)
    local p3 = steps(name, { precision = "f32", fusion = "-rope_kv,-norm_add_norm,-attention_rope" }, 3)
    check.eq(count(k3, "rope_kv") + count(k3, "kv_append"), 0, "rope_kv, kv_append in the 3-token pass")
    check.eq(count(k3, "attention_decode"), layers, "attention_decode in the 3-token pass")
    same_logits(p3, f3, name .. " 3-token pass (f32)")
  end)
end

check.case("gemma3-tiny: a context shorter than window + T - 1 keeps the fusions (its caches never wrap)", function()
  -- window 8: a sliding cache of min(8 + REWIND, context) slots. At context 12 a 6-token pass has
  -- cap 12 < 8 + 6 - 1, and only the cache's slot for every position of the context (attrs.whole) lets
  -- rope_kv append before attention there; then one token at a time (attention_rope), past the window.
  local path = check.fixtures .. "/models/gemma3-tiny"
  local function run(context, hint_list)
    local h = hints.new()
    for k, v in pairs(hint_list) do h:set(k, v, "test") end
    local m = doppler.open_model(path)
    local recipe = recipes.for_config(doppler.read_json(path .. "/config.json"), path)
    local s = session.open(recipe, m, { hints = h, context = context })
    local rows, names = {}, {}
    s:feed(table.move(PROMPT, 1, 6, 1, {}))
    rows[1] = s:last_logits()
    local first = {}
    for i, k in ipairs(s.last_plan.kernel_log) do first[i] = k:name() end
    for i = 7, #PROMPT do
      s:feed({ PROMPT[i] })
      rows[#rows + 1] = s:last_logits()
    end
    for i, k in ipairs(s.last_plan.kernel_log) do names[i] = k:name() end
    m:close()
    return rows, first, names
  end
  local layers = doppler.read_json(path .. "/config.json").num_hidden_layers
  local r12, first12, step12 = run(12, { precision = "f32" })
  check.eq(count(first12, "rope_kv"), layers, "the 6-token pass: rope_kv in every layer")
  check.eq(count(first12, "rope") + count(first12, "kv_append"), 0, "no rope or kv_append left")
  check.eq(count(step12, "rope_kv") + count(step12, "rope") + count(step12, "kv_append"), 0, "one token: attention_rope")
  check.eq(#r12, #PROMPT - 5, "passes")
  same_logits(run(12, { precision = "f32", fusion = "-rope_kv,-norm_add_norm,-attention_rope" }), r12,
              "context 12 against the unfused plan (f32)")
  same_logits(run(64, { precision = "f32" }), r12, "context 12 against context 64 (f32)")
end)

check.case("attention_lanes / attention_wg: other variants, same logits; bad values listed", function()
  -- in the f32 mode: another variant sums the scores in another order, which f16 activations would amplify
  local auto = steps("gemma3-tiny", { precision = "f32" })
  local sg = doppler.device():caps().subgroup_size
  local alt = steps("gemma3-tiny", { precision = "f32", attention_lanes = "1", attention_wg = "64" })
  same_logits(auto, alt, "attention_lanes=1 attention_wg=64")
  -- head_dim 32 with an f16 cache: lanes up to min(subgroup, 32 / 8 = 4)
  local ok, err = pcall(steps, "gemma3-tiny", { attention_lanes = "16" })
  check.truthy(not ok and tostring(err):find("attention_lanes=16") and tostring(err):find("valid: auto, 1, 2, 4", 1, true),
               "error lists the valid lanes: " .. tostring(err))
  ok, err = pcall(steps, "gemma3-tiny", { attention_lanes = "4", attention_wg = "32" })
  check.truthy(ok, "lanes 4, workgroup 32: " .. tostring(err))
  -- a 1024-invocation workgroup whose one chunk takes every key (no merge): the same logits
  local big = steps("gemma3-tiny", { precision = "f32", attention_wg = "1024", attention_min_chunk = 64 })
  same_logits(auto, big, "attention_wg=1024 attention_min_chunk=64")
  ok, err = pcall(function() hints.new():set("attention_wg", "48", "test") end)
  check.truthy(not ok and tostring(err):find("valid values"), "attention_wg=48 rejected: " .. tostring(err))
  check.truthy(sg >= 1, "subgroup size")
end)

-- The G and GS spec constants of every attention_decode dispatch of a plan (all must agree).
local function attention_split(names, specs)
  local g, gs
  for i, k in ipairs(names) do
    if k == "attention_decode" then
      local c = specs[i].constants
      check.truthy(g == nil or (g == c.G and gs == c.GS), "every attention_decode takes one split")
      g, gs = c.G, c.GS
    end
  end
  return g, gs
end

check.case("attention_heads: a kv head's q heads over several workgroups, same logits; bad values listed", function()
  -- gemma3-tiny: 4 q heads share one kv head; llama3-tiny: 2 per kv head
  local auto, ka, _, sa = steps("gemma3-tiny", { precision = "f32" })
  local g, gs = attention_split(ka, sa)
  check.eq(g, 1, "auto: one q head per workgroup")
  check.eq(gs, 4, "auto: four workgroups per kv head")
  for _, h in ipairs { { "4", 4, 1 }, { "2", 2, 2 } } do
    local rows, kn, _, sp = steps("gemma3-tiny", { precision = "f32", attention_heads = h[1] })
    g, gs = attention_split(kn, sp)
    check.eq(g, h[2], "attention_heads=" .. h[1] .. ": G")
    check.eq(gs, h[3], "attention_heads=" .. h[1] .. ": workgroups per kv head")
    same_logits(auto, rows, "attention_heads=" .. h[1])
  end
  -- the kv head's four q heads in one 1024-invocation workgroup, one chunk; the unfused attention_decode
  -- (rope_kv before it) with two heads per workgroup
  same_logits(auto, steps("gemma3-tiny", { precision = "f32", attention_heads = "4", attention_wg = "1024",
                                           attention_min_chunk = 64 }), "attention_heads=4 attention_wg=1024")
  same_logits(auto, steps("gemma3-tiny", { precision = "f32", attention_heads = "2", fusion = "-attention_rope" }),
              "attention_heads=2 without attention_rope")
  local la = steps("llama3-tiny", { precision = "f32" })
  same_logits(la, steps("llama3-tiny", { precision = "f32", attention_heads = "2" }), "llama3-tiny attention_heads=2")
  local ok, err = pcall(steps, "gemma3-tiny", { attention_heads = "8" })
  check.truthy(not ok and tostring(err):find("attention_heads=8 does not divide the 4 q heads", 1, true),
               "attention_heads=8 on 4 heads per kv head: " .. tostring(err))
  ok, err = pcall(function() hints.new():set("attention_heads", "3", "test") end)
  check.truthy(not ok and tostring(err):find("valid values"), "attention_heads=3 rejected: " .. tostring(err))
end)

-- The most chunks (workgroups along y) of the attention_decode dispatches of a plan (a sliding-window layer
-- of gemma3-tiny sees fewer keys, so it may take fewer).
local function attention_chunks(names, groups)
  local n = 0
  for i, k in ipairs(names) do
    if k == "attention_decode" then n = math.max(n, groups[i][2]) end
  end
  return n
end

check.case("attention_splits: 256 / (kv heads x T) chunks on a GPU (and one per 128 x T keys), 1 on a CPU device (more past its loop bound); several chunks, same logits", function()
  local lower = require "doppler.lower"
  local function on(kind) return { dev = { caps = function() return { type = kind } end } } end
  -- Gemma 3 1B: 1 kv head, one token, a 4096-key cache, chunks of at least 8 keys
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 1, 1, 4096, 8), 64, "GPU: 256, at most 64")
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 8, 1, 4096, 8), 32, "GPU, 8 kv heads: 32")
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 8, 2, 4096, 8), 16, "GPU, 8 kv heads, 2 tokens: 16")
  -- at least one chunk per 128 x T keys of the capacity, at most 64 (Llama 3.2 1B's 8 kv heads)
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 8, 1, 6000, 8), 47, "GPU, 8 kv heads, 6000 keys: 47")
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 32, 1, 4096, 8), 32, "GPU, 32 kv heads (Phi-3 mini): 32, not 8")
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 8, 1, 16384, 8), 64, "GPU, 8 kv heads, 16384 keys: 64")
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 8, 2, 8192, 8), 32, "GPU, 8 kv heads, 2 tokens, 8192 keys: 32")
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 8, 4, 32768, 8), 64, "GPU, 8 kv heads, 4 tokens, 32768 keys: 64")
  check.eq(lower.attention_decode_chunks(on("discrete"), { attention_splits = 32 }, 8, 1, 16384, 8), 32,
           "GPU: the hint wins over the capacity")
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 1, 1, 100, 8), 13, "GPU: no more chunks than keys / 8")
  check.eq(lower.attention_decode_chunks(on("cpu"), {}, 1, 1, 4096, 8), 1, "CPU device: one chunk")
  check.eq(lower.attention_decode_chunks(on("cpu"), { attention_splits = 16 }, 1, 1, 4096, 8), 16, "the hint wins")
  -- a CPU device with its bound on a chunk's keys (cpu_keys, llvmpipe's loop limit): at least ceil(keys / it)
  check.eq(lower.attention_decode_chunks(on("cpu"), {}, 1, 1, 4096, 8, 1000), 5, "CPU device: 4096 keys in chunks of <= 1000")
  check.eq(lower.attention_decode_chunks(on("cpu"), {}, 1, 1, 900, 8, 1000), 1, "CPU device: 900 keys, one chunk")
  check.eq(lower.attention_decode_chunks(on("cpu"), { attention_splits = 2 }, 1, 1, 4096, 8, 1000), 5,
           "CPU device: a hint below the bound is raised")
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 1, 1, 4096, 8, 1000), 64, "GPU: no bound")
  check.eq(lower.attention_decode_chunks(on("cpu"), {}, 1, 1, 70000, 8, 1000), 70, "CPU device: 70 chunks of <= 1000")
  local ok, err = pcall(lower.attention_decode_chunks, on("cpu"), {}, 1, 1, 300000, 8, 1000)
  check.truthy(not ok and tostring(err):find("loop limit", 1, true), "more than 256 chunks: refused: " .. tostring(err))
  -- more than 64 chunks by hint only (the merge's MAX_CHUNKS follows), at most 256
  check.eq(lower.attention_decode_chunks(on("discrete"), {}, 8, 1, 32768, 8), 64, "GPU, 32768 keys: the auto's 64")
  check.eq(lower.attention_decode_chunks(on("discrete"), { attention_splits = 128 }, 8, 1, 16384, 8), 128,
           "GPU: hint 128")
  check.eq(lower.attention_decode_chunks(on("discrete"), { attention_splits = 1000 }, 8, 1, 16384, 8), 256,
           "GPU: a hint above 256 takes 256")
  -- on this device: the auto plan against several chunks per query (the merge, and chunks past the keys
  -- written so far), in whole-model steps; context 64 with 8 keys per chunk holds at most 8 chunks
  local auto, ka, _, _, ga = steps("gemma3-tiny", { precision = "f32" })
  local want = doppler.device():caps().type == "cpu" and 1 or 8
  check.eq(attention_chunks(ka, ga), want, "auto chunks on this device (a global layer)")
  local split, ks, _, _, gs = steps("gemma3-tiny", { precision = "f32", attention_splits = 16 })
  check.eq(attention_chunks(ks, gs), 8, "attention_splits=16: 64 keys / 8 per chunk (a global layer)")
  same_logits(auto, split, "attention_splits=16")
  local la, kl, _, _, gl = steps("llama3-tiny", { precision = "f32", attention_splits = 4 })
  check.eq(attention_chunks(kl, gl), 4, "llama3-tiny attention_splits=4")
  same_logits(steps("llama3-tiny", { precision = "f32" }), la, "llama3-tiny attention_splits=4")
end)

check.case("attention_decode's auto variant: lanes, workgroup, keys per round and heads on fake devices", function()
  local lower = require "doppler.lower"
  for _, sg in ipairs { 8, 32 } do
    local ctx = { dev = { caps = function()
      return { subgroup_size = sg, max_wg_invocations = 1024, max_shared_memory = 49152 }
    end } }
    for _, D in ipairs { 16, 32, 64, 96, 128, 256 } do
      for _, vec in ipairs { 4, 8 } do
        local nl = math.max(8, 1 << math.ceil(math.log((D + 3) // 4, 2)))   -- rmsnorm's lanes per row
        local lk, wg, uk, G, gs = lower.attention_decode_variant(ctx, D, vec, 4, {}, nl)
        local what = ("subgroup %d, head_dim %d, VEC %d"):format(sg, D, vec)
        -- the most lanes that are a power of two <= the subgroup with D / LK a multiple of VEC
        local want = 1
        while want * 2 <= sg and D % (want * 2) == 0 and (D // (want * 2)) % vec == 0 do want = want * 2 end
        check.eq(lk, want, what .. ": lanes per key row")
        check.truthy(D % lk == 0 and (D // lk) % vec == 0, what .. ": each lane holds whole vectors")
        check.eq(wg, math.max(8 * lk, nl), what .. ": 8 clusters, at least the prologue's lanes")
        check.eq(uk, 1, what .. ": one key per cluster per round")
        check.eq(G, 1, what .. ": one q head per workgroup")
        check.eq(gs, 4, what .. ": four workgroups per kv head")
      end
    end
  end
  -- Phi-3 mini (head_dim 96) with an f16 cache on a 32-wide subgroup: 4 lanes of 24, not min(32, 96 / 8) = 12
  local ctx = { dev = { caps = function()
    return { subgroup_size = 32, max_wg_invocations = 1024, max_shared_memory = 49152 }
  end } }
  check.eq((lower.attention_decode_variant(ctx, 96, 8, 1, {}, 32)), 4, "head_dim 96: 4 lanes")
  -- all of a kv head's heads in one workgroup: the auto measured for it (WG 256 where it fits, UK 2)
  local _, wg, uk, G, gs = lower.attention_decode_variant(ctx, 256, 8, 4, { attention_heads = "4" }, 64)
  check.eq(G, 4, "attention_heads=4: G")
  check.eq(gs, 1, "attention_heads=4: one workgroup per kv head")
  check.eq(wg, 256, "attention_heads=4: WG 256")
  check.eq(uk, 2, "attention_heads=4: 2 keys per round")
end)

check.done()
