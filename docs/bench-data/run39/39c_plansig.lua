-- Run 39c: every fixture model's plans (T = 1, T = 5, a loop of 4) under four hint sets, one line per plan: each
-- dispatch's kernel file, spec constants, defines and groups. Run with two DOPPLER_HOMEs and compared (cmp).
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"
local F = os.getenv("DOPPLER_FIXTURES")
local models = {}
for _, n in ipairs { "gemma3-tiny", "gemma3-tiny-scaled", "llama3-tiny", "mistral-tiny", "mixtral-tiny", "phi3-tiny", "qwen2-tiny", "qwen3-tiny" } do models[#models+1] = F .. "/models/" .. n end
for _, q in ipairs { "Q4_K_M", "Q8_0" } do models[#models+1] = F .. "/gguf/gemma3-q/model-" .. q .. ".gguf"; models[#models+1] = F .. "/gguf/llama-q/model-" .. q .. ".gguf" end
local sets = { {}, { q_matmul = "dequant_f16", glu_down = "on", q_matmul_glu = "fused", glu_down_rows = 32, glu_down_wg = 256 }, { fusion = "off" }, {attention_decode="basic"} }
for _, path in ipairs(models) do
  local m = doppler.open_model(path)
  local recipe = recipes.for_model(m, path)
  for si, set in ipairs(sets) do
    local h = hints.new()
    h:apply(recipe.hints, "recipe")
    for k, v in pairs(set) do h:set(k, v, "t") end
    local ok, s = pcall(session.open, recipe, m, { hints = h, context = 64 })
    if ok then
      for _, T in ipairs { 1, 5 } do
        local ok2, p = pcall(s.plan_for, s, T, false)
        local line = {}
        if ok2 then
          for i, k in ipairs(p.kernel_log) do
            local spec = p.kernel_specs[i]
            local ck = {} for kk, vv in pairs(spec and spec.constants or {}) do ck[#ck+1] = kk .. "=" .. tostring(vv) end table.sort(ck)
            line[#line+1] = (spec and spec.file or "?") .. "|" .. table.concat(ck, ",") .. "|" .. table.concat(spec and spec.defines or {}, ",") .. "|" .. table.concat(p.kernel_groups[i] or {}, "x")
          end
          print(path:match("[^/]+/[^/]+$"), si, T, p.dispatches, table.concat(line, " "))
        else print(path, si, T, "ERR", p) end
      end
      local ok3, lp = pcall(s.loop_plan, s, 4)
      print(path:match("[^/]+/[^/]+$"), si, "loop", ok3 and lp.dispatches or lp)
    else print(path, si, "open ERR", s) end
  end
end
