-- Run 34n (session 27), this machine (lavapipe): dispatches and barriers of one T = 1 decode step of the GGUF Q4_K_M
-- fixtures with the H100's quantised path forced (f16 copies, gate+up in blocks on q8x2), glu_down off and on:
--   VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD build/doppler docs/bench-data/run34/34n_dispatches.lua
-- Output at f2fde74:
--   gemma3-q	glu_down=off	layers	6	dispatches per T=1 step	33	barriers	32
--   gemma3-q	glu_down=on	layers	6	dispatches per T=1 step	27	barriers	26
--   llama-q	glu_down=off	layers	4	dispatches per T=1 step	26	barriers	25
--   llama-q	glu_down=on	layers	4	dispatches per T=1 step	22	barriers	21
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"
for _, name in ipairs({ "gemma3-q", "llama-q" }) do
  local path = os.getenv("DOPPLER_FIXTURES") .. "/gguf/" .. name .. "/model-Q4_K_M.gguf"
  for _, g in ipairs({ "off", "on" }) do
    local m = doppler.open_model(path)
    local h = hints.new()
    for k, v in pairs({ q_matmul = "dequant_f16", q_matmul_head = "fused", q_matmul_glu = "fused", gemv_q_x = "q8x2", glu_down = g, decode_chunk = 1 }) do h:set(k, v, "x") end
    local s = session.open(recipes.for_model(m, path), m, { hints = h, context = 64 })
    local p = s:plan_for(1)
    print(name, "glu_down=" .. g, "layers", m:config().num_hidden_layers or "?", "dispatches per T=1 step", p.dispatches, "barriers", p.recorder:stats().barriers)
    m:close()
  end
end
