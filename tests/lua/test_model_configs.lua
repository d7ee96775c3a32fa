-- models/configs/*.config.json: the released architectures' shapes that `doppler synth` makes synthetic models
-- at (the README's default model, the GPU machine's benchmarks). Each config's recipe must list weights whose
-- element count is the checkpoint's published parameter count, so a wrong head_dim, width or layer count in a
-- config (or a recipe that drops a tensor) fails here rather than skewing a benchmark. Every file in the folder
-- must have a count below.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local recipes = require "doppler.recipes"

-- published parameter counts (tied embeddings counted once)
local published = {
  ["gemma-3-270m"] = 268098176,
  ["gemma-3-1b-it"] = 999885952,
  ["llama-3.2-1b-instruct"] = 1235814400,
  ["qwen3-0.6b"] = 596049920,
}

local dir = doppler.home() .. "/models/configs"
local p = assert(io.popen("ls " .. check.quote(dir)))
local seen = 0
for file in p:lines() do
  local name = file:match("^(.*)%.config%.json$")
  check.case("models/configs/" .. file, function()
    check.truthy(name and published[name], "a published parameter count for " .. file)
    local hf = doppler.read_config(dir .. "/" .. file)
    local n = 0
    for _, w in ipairs(recipes.for_config(hf.raw, file).weights(hf)) do
      local k = 1
      for _, d in ipairs(w[2]) do k = k * d end
      n = n + k
    end
    check.eq(n, published[name], file .. ": parameters")
  end)
  seen = seen + 1
end
p:close()
check.case("models/configs holds every config above", function() check.eq(seen, 4, "config files") end)
check.done()
