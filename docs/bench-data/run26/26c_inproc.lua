local doppler = require "doppler"
local recipes = require "doppler.recipes"
local run = require "doppler.run"
local M = "/work/main/tests/fixtures/gguf/gemma3-q/model-Q4_K_M.gguf"
local ids = "2,10,20,30,40,50,60,70,80,90,100,110"
local variants = { {"--hint","precision=f32"}, {"--hint","q_matmul=fused"}, {"--hint","q_matmul=dequant_f16"}, {"--hint","precision=f32","--hint","prefill_chunk=1"} }
local mode = arg[1]
local t0 = doppler.clock()
for r = 1, 2 do
for _, v in ipairs(variants) do
  local argv = { "--model", M, "--ids", ids, "--max-tokens", "0", "--logits-out", "/tmp/inproc/l.f32", "--quiet" }
  for _, a in ipairs(v) do argv[#argv + 1] = a end
  if mode == "proc" then
    local cmd = "/work/main/build/doppler run"
    for _, a in ipairs(argv) do cmd = cmd .. " '" .. a .. "'" end
    assert(os.execute(cmd))
  else
    local recipe = recipes.for_architectures({ "gemma3" }, M)
    run.main(recipe, argv)
    collectgarbage()
  end
end
end
print(mode, ("%.2f s"):format(doppler.clock() - t0))
