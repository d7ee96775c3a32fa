-- fused (gemv_norm) against unfused logits on a real-size model, step by step, and the kernel counts
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"
local path = arg[1]
local PROMPT = { 2, 17, 5, 33, 8, 11, 4, 29, 3, 7, 19 }
local function steps(hl)
  local h = hints.new()
  for k, v in pairs(hl) do h:set(k, v, "test") end
  local m = doppler.open_model(path)
  local cfg = m:config()
  local recipe
  if cfg.raw then recipe = recipes.for_config(cfg.raw, path)
  else recipe = recipes.for_architectures({ cfg.architecture, cfg.model_type }, path) end
  h = hints.new(); h:apply(recipe.hints, "recipe"); for k, v in pairs(hl) do h:set(k, v, "test") end
  local s = session.open(recipe, m, { hints = h, context = 64 })
  local rows = {}
  s:feed(table.move(PROMPT, 1, 3, 1, {})); rows[1] = s:last_logits()
  for i = 4, #PROMPT do s:feed({ PROMPT[i] }); rows[#rows + 1] = s:last_logits() end
  local c = {}
  for _, k in ipairs(s.last_plan.kernel_log) do c[k:name()] = (c[k:name()] or 0) + 1 end
  m:close()
  return rows, c
end
for _, prec in ipairs { "default", "f32" } do
  local a, ca = steps { precision = prec }
  local b, cb = steps { precision = prec, fusion = "-gemv_norm,-gemv_add_norm" }
  local maxd, maxa, ndiff = 0, 0, 0
  for i = 1, #a do for j = 1, #a[i] do
    local d = math.abs(a[i][j] - b[i][j]); if d > maxd then maxd = d end
    if a[i][j] ~= b[i][j] then ndiff = ndiff + 1 end
    maxa = math.max(maxa, math.abs(b[i][j]))
  end end
  print(path, prec, "max |fused - unfused|", maxd, "max |logit|", maxa, "differing", ndiff,
        "gemv_norm", ca.gemv_norm, "norm_add_norm", ca.norm_add_norm, cb.norm_add_norm, "add_rmsnorm", ca.add_rmsnorm, cb.add_rmsnorm)
end
