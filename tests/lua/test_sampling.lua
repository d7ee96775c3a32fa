-- Sampling through the command line's entry point on tests/fixtures/models/gemma3-tiny (the GPU sampler
-- inside the recorded pass): a seed reproduces its ids; --top-k 1 is greedy; another seed gives other ids;
-- the prefill chunking does not change a draw; and every drawn id equals the CPU reference's
-- (doppler.sample_cpu, core/sample.c) on the logits rows the run wrote with --logits-out, with the same
-- history and step (= context length).
-- The tiny model's rows have a gap of ~7 between the top logit and the rest, hence high temperatures.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"

local MODEL = check.fixtures .. "/models/gemma3-tiny"
local V = doppler.read_json(MODEL .. "/config.json").vocab_size
local PROMPT = { 2, 10, 20, 30, 7 }
local N = 16
local tmp = os.tmpname()

-- The command line `doppler recipes/gemma3.lua ...` in this process (check.run_here: no process start per
-- draw, and the kernels built once; the printed ids are the fixture tests' to check).
local function generate(opts, extra)
  local args = { "--model", MODEL, "--ids", check.join(PROMPT), "--max-tokens", tostring(N), "--quiet" }
  for _, a in ipairs(opts) do args[#args + 1] = a end
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  local ids = check.run_here("recipes/gemma3.lua", args)
  check.eq(#ids, N, "generated ids (" .. table.concat(opts, " ") .. ")")
  return ids
end

local function same(a, b) return check.join(a) == check.join(b) end

check.case("the same seed twice gives the same ids", function()
  local a = generate { "--temperature", "6", "--seed", "3" }
  local b = generate { "--temperature", "6", "--seed", "3" }
  check.truthy(same(a, b), "seed 3: " .. check.join(a) .. " vs " .. check.join(b))
end)

check.case("a different seed gives different ids", function()
  local a = generate { "--temperature", "6", "--seed", "3" }
  local b = generate { "--temperature", "6", "--seed", "4" }
  check.truthy(not same(a, b), "seeds 3 and 4 both gave " .. check.join(a))
end)

check.case("--top-k 1 equals greedy", function()
  local g = generate { "--temperature", "0" }
  local k1 = generate { "--temperature", "6", "--top-k", "1", "--seed", "9" }
  check.truthy(same(g, k1), "greedy " .. check.join(g) .. " vs top-k 1 " .. check.join(k1))
end)

check.case("prefill chunking does not change the draws (context buffer, step = context length)", function()
  local opts = { "--temperature", "5", "--seed", "21", "--repeat-penalty", "1.5" }
  local a = generate(opts)
  local b = generate(opts, { "--hint", "prefill_chunk=2" })
  check.truthy(same(a, b), "chunk default " .. check.join(a) .. " vs chunk 2 " .. check.join(b))
end)

local settings = {
  { "--temperature", "6", "--seed", "1" },
  { "--temperature", "0", "--repeat-penalty", "2" },
  { "--temperature", "5", "--repeat-penalty", "1.4", "--seed", "77" },
  { "--temperature", "2", "--top-k", "5", "--top-p", "0.9", "--min-p", "0.05", "--repeat-penalty", "3", "--seed", "11" },
  { "--temperature", "3", "--top-p", "0.9", "--repeat-penalty", "3", "--seed", "12345678901" },
  { "--temperature", "8", "--min-p", "0.2", "--seed", "-5" },
  { "--temperature", "7", "--top-k", "2000", "--seed", "8" },
}

for _, opts in ipairs(settings) do
  check.case("GPU draws equal the CPU reference: " .. table.concat(opts, " "), function()
    local ids = generate(opts, { "--logits-out", tmp })
    check.truthy(same(ids, generate(opts)), "--logits-out changed the draws")
    local logits = check.read_f32(tmp)
    check.eq(#logits, (#PROMPT + N) * V, "logits values")
    local o = {}
    for i = 1, #opts, 2 do o[opts[i]:sub(3):gsub("-", "_")] = tonumber(opts[i + 1]) end
    local history = {}
    for _, id in ipairs(PROMPT) do history[id] = true end
    local distinct = {}
    for n = 1, N do
      local row = #PROMPT + n - 2               -- 0-based row that produced the n-th generated id
      local z = table.move(logits, row * V + 1, (row + 1) * V, 1, {})
      local want = doppler.sample_cpu(z, {
        temperature = o.temperature, top_k = o.top_k, top_p = o.top_p, min_p = o.min_p,
        repeat_penalty = o.repeat_penalty, seed = math.tointeger(o.seed), step = row + 1, history = history,
      })
      check.eq(ids[n], want, ("token %d"):format(n))
      history[ids[n]] = true
      distinct[ids[n]] = true
    end
    local nd = 0
    for _ in pairs(distinct) do nd = nd + 1 end
    print(("       %d draws, %d distinct ids: %s"):format(N, nd, check.join(ids)))
  end)
end

os.remove(tmp)
check.done()
