-- doppler run --model PATH [options]: generation with the recipe the model's own metadata names
-- (config.json `architectures` / `model_type`, or GGUF general.architecture), so no recipe file
-- has to be given. Everything after that is doppler.run's command line, the same as
-- `doppler recipes/NAME.lua --model PATH ...`.
local ok, rc = pcall(require("doppler.run").for_model, arg)
if not ok then
  io.stderr:write("doppler run: ", tostring(rc), "\n")
  os.exit(1, true)
end
if rc ~= 0 then os.exit(rc, true) end
