package.path = "tests/lua/?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"
local PROMPT = { 2, 17, 5, 33, 8, 11, 4, 29, 3, 7, 19 }
local function steps(name, hl, first)
  local path = check.fixtures .. "/models/" .. name
  local h = hints.new()
  for k, v in pairs(hl) do h:set(k, v, "test") end
  local m = doppler.open_model(path)
  local recipe = recipes.for_config(doppler.read_json(path .. "/config.json"), path)
  local s = session.open(recipe, m, { hints = h, context = 64 })
  local rows, i0 = {}, 1
  if first then s:feed(table.move(PROMPT, 1, first, 1, {})); rows[1] = s:last_logits(); i0 = first + 1 end
  for i = i0, #PROMPT do s:feed({ PROMPT[i] }); rows[#rows + 1] = s:last_logits() end
  local names = {}
  for i, k in ipairs(s.last_plan.kernel_log) do names[i] = k:name() end
  m:close()
  return rows, names
end
for _, name in ipairs { "gemma3-tiny", "llama3-tiny", "qwen3-tiny", "phi3-tiny", "mixtral-tiny", "qwen2-tiny" } do
  for _, prec in ipairs { "f32", "default" } do
  local a, na = steps(name, { precision = prec }, 3)
  local b, nb = steps(name, { precision = prec, fusion = "-gemv_norm,-gemv_add_norm" }, 3)
  local maxd, exact = 0, true
  for i = 1, #a do for j = 1, #a[i] do
    local d = math.abs(a[i][j] - b[i][j]); if d > maxd then maxd = d end
    if a[i][j] ~= b[i][j] then exact = false end
  end end
  local c = {}
  for _, k in ipairs(na) do c[k] = (c[k] or 0) + 1 end
  local cb = {}
  for _, k in ipairs(nb) do cb[k] = (cb[k] or 0) + 1 end
  print(name, prec, "dispatches", #na, #nb, "maxdiff", maxd, "exact", exact, "gemv_norm", c.gemv_norm, "norms", c.norm_add_norm, c.add_rmsnorm, cb.norm_add_norm, cb.add_rmsnorm)
  end
end
