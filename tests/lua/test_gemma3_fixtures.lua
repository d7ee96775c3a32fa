-- Gemma 3 against Hugging Face's reference logits (tests/fixtures/models, transformers 5.17, f32).
-- Bounds from the Gemma 3 issue: every logits row within 2e-3 (max abs) in precision=f32 and
-- within 5e-2 in the default mode; greedy ids identical wherever the reference margin > 0.1;
-- prefill of the whole prompt and token-by-token decode agree (the sliding window is crossed).
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"

local F = check.fixtures .. "/models/"
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. check.quote(tmp))

-- The same tiny model with its transformers-4 config (config.v4.json) in a directory of its own.
local v4 = tmp .. "/gemma3-tiny-v4"
os.execute(("mkdir -p %s && cp %s %s/config.json && ln -s %s %s/model.safetensors"):format(
  check.quote(v4), check.quote(F .. "gemma3-tiny/config.v4.json"), check.quote(v4),
  check.quote(F .. "gemma3-tiny/model.safetensors"), check.quote(v4)))

local models = {
  { name = "gemma3-tiny", model = F .. "gemma3-tiny", ref = F .. "gemma3-tiny/reference.json" },
  { name = "gemma3-tiny (config.v4.json)", model = v4, ref = F .. "gemma3-tiny/reference.json" },
  { name = "gemma3-tiny bf16", model = F .. "gemma3-tiny/model-bf16.safetensors", ref = F .. "gemma3-tiny/reference-bf16.json" },
  { name = "gemma3-tiny-scaled", model = F .. "gemma3-tiny-scaled", ref = F .. "gemma3-tiny-scaled/reference.json" },
}

local function logits_for(model, ids, extra)
  return check.logits("recipes/gemma3.lua", model, ids, extra, tmp .. "/logits.f32")
end

local max_diff = check.max_diff

local argmax_row = check.argmax_row

for _, m in ipairs(models) do
  local ref = doppler.read_json(m.ref)
  local dir = m.ref:match("^(.*)/")
  local expected = check.read_f32(dir .. "/" .. ref.logits_file)
  local T, V = ref.logits_shape[1], ref.logits_shape[2]
  local P = #ref.prompt_ids

  local f32_logits
  check.case(m.name .. ": precision=f32, every row within 2e-3", function()
    f32_logits = logits_for(m.model, ref.all_ids, { "--hint", "precision=f32" })
    local d, row = max_diff(f32_logits, expected, T, V)
    if d > 2e-3 then error(("max abs %.4g at row %d"):format(d, row)) end
  end)

  check.case(m.name .. ": default mode, every row within 5e-2; teacher-forced argmax = greedy ids where margin > 0.1", function()
    local l = logits_for(m.model, ref.all_ids)
    local d, row = max_diff(l, expected, T, V)
    if d > 5e-2 then error(("max abs %.4g at row %d"):format(d, row)) end
    for t = P - 1, T - 2 do
      if ref.top1_minus_top2[t + 1] > 0.1 then
        check.eq(argmax_row(l, V, t), ref.all_ids[t + 2], ("argmax of row %d"):format(t))
      end
    end
  end)

  check.case(m.name .. ": free-running greedy decode = greedy_ids (up to the first near-tie)", function()
    for _, mode in ipairs({ "precision=f32", "precision=default" }) do
      local out = check.must_run({ "recipes/gemma3.lua", "--model", m.model, "--ids", check.join(ref.prompt_ids),
                                   "--max-tokens", tostring(#ref.greedy_ids), "--print-ids", "--quiet", "--hint", mode })
      local got = check.parse_ids(out)
      check.eq(#got, #ref.greedy_ids, mode .. ": generated count")
      for i, id in ipairs(ref.greedy_ids) do
        if ref.top1_minus_top2[P + i - 1] <= 0.1 then break end   -- a near-tie may legitimately differ
        check.eq(got[i], id, ("%s: generated id %d"):format(mode, i))
      end
    end
  end)

  check.case(m.name .. ": token-by-token decode = whole-prompt prefill (f32, 1e-4)", function()
    local one = logits_for(m.model, ref.all_ids, { "--hint", "precision=f32", "--hint", "prefill_chunk=1" })
    local odd = logits_for(m.model, ref.all_ids, { "--hint", "precision=f32", "--hint", "prefill_chunk=7" })
    local d1 = max_diff(one, f32_logits, T, V)
    local d7 = max_diff(odd, f32_logits, T, V)
    if d1 > 1e-4 or d7 > 1e-4 then error(("chunk 1: %.3g, chunk 7: %.3g"):format(d1, d7)) end
  end)
end

os.execute("rm -rf " .. check.quote(tmp))
check.done()
