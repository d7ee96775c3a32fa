-- doppler.act: the activations of shaders/include/dp_act.glsl in double precision, the CPU references of
-- the GLU kernels' checks (recipes/bench/gemv.lua, tests/lua/test_gemv_q8.lua).
--   act.gelu_tanh(x)   0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
--   act.silu(x)        x / (1 + exp(-x))
local M = {}

-- Lua 5.4 has no math.tanh; past |z| = 20 tanh is +-1 in double precision (and exp(2z) would overflow later)
local function tanh(z)
  if z > 20 then return 1 elseif z < -20 then return -1 end
  local e = math.exp(2 * z)
  return (e - 1) / (e + 1)
end

function M.gelu_tanh(x) return 0.5 * x * (1 + tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ^ 3))) end
function M.silu(x) return x / (1 + math.exp(-x)) end

return M
