-- Attention at long contexts through the planner (doppler.lower R.attention), against the double-precision
-- reference of lib/attention_case.lua: prefills (T = 8) and decode steps (T = 1) whose queries see 1,000 to
-- 3,200 keys, head_dim 256 and 64, global and sliding, with GQA. On a CPU device these pass the old limits of
-- llvmpipe's loop counter (65535 iterations per invocation, lower.cpu_loop_blocks): attention_prefill with its
-- inner loops rolled went wrong past ~900 keys at head_dim 256 and ~2,500 at 64, attention_decode in one chunk
-- past ~2,200 (head_dim 256). There a prefill that may see more than cpu_prefill_keys keys must run
-- attention_decode, in chunks of at most cpu_decode_keys; `attention_prefill=flash` and the basic kernel past
-- their bounds are refused with a message; few keys keep attention_prefill. On a GPU the same cases check the
-- kernels its rules pick. On every device: attention_decode with more chunks than its merge's default 64
-- (hint attention_splits, up to 256).
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local lower = require "doppler.lower"
local A = require "lib.attention_case"

local cpu = doppler.device():caps().type == "cpu"

local function chunks_of(c)   -- attention_decode's chunk count in the plan (its dispatch's y), or nil
  local _, _, _, names, groups = A.run(c)
  for i, k in ipairs(names) do if k == "attention_decode" then return groups[i][2] end end
end

local cases = {
  { T = 8, Hq = 2, Hkv = 1, D = 256, p0 = 1200, cap = 1208 },                  -- Gemma's heads, global
  { T = 8, Hq = 2, Hkv = 1, D = 256, p0 = 2500, cap = 2508 },                  -- past cpu_prefill_keys (256)
  { T = 1, Hq = 1, Hkv = 1, D = 256, p0 = 3000, cap = 3008 },                  -- a decode step past ~2,200 keys
  { T = 8, Hq = 4, Hkv = 1, D = 256, p0 = 2000, cap = 1100, window = 1024 },  -- sliding, a ring that wrapped
  { T = 8, Hq = 8, Hkv = 2, D = 64, p0 = 3200, cap = 3208 },                   -- Llama's heads, GQA 4
}
for _, c in ipairs(cases) do
  c.mode = "auto"
  check.case(("auto: T=%d Hq=%d Hkv=%d D=%d p0=%d cap=%d window=%d"):format(c.T, c.Hq, c.Hkv, c.D, c.p0, c.cap,
             c.window or 0), function()
    local o, want, vmax, names = A.run(c)
    A.compare(o, want, vmax, "auto")
    local keys = (c.window or 0) > 0 and math.min(c.window, c.cap) or c.cap
    if cpu and c.T > 4 then
      local routed = keys > lower.cpu_prefill_keys(c.D, 8)
      check.eq(A.used(names, "attention_decode"), routed,
               ("CPU device, %d keys: attention_decode ran (%s)"):format(keys, table.concat(names, ",")))
      check.eq(A.used(names, "attention_prefill"), not routed, "attention_prefill ran")
    end
  end)
end

-- More chunks than the merge's default 64 (hint attention_splits; attention_decode's MAX_CHUNKS follows): 200 and
-- 256 chunks, of which those past the keys written so far exit, and a 2-token pass
for _, c in ipairs {
  { T = 1, Hq = 8, Hkv = 2, D = 64, p0 = 2000, cap = 2048, splits = 200 },
  { T = 1, Hq = 4, Hkv = 1, D = 256, p0 = 2040, cap = 2048, splits = 256 },
  { T = 2, Hq = 2, Hkv = 1, D = 128, p0 = 1500, cap = 2048, splits = 100 },
} do
  check.case(("%d chunks: T=%d Hq=%d Hkv=%d D=%d p0=%d"):format(c.splits, c.T, c.Hq, c.Hkv, c.D, c.p0), function()
    c.mode, c.hints = "auto", { attention_splits = c.splits, attention_min_chunk = 8 }
    local o, want, vmax, names, groups = A.run(c)
    local n
    for i, k in ipairs(names) do if k == "attention_decode" then n = groups[i][2] end end
    check.eq(n, c.splits, "attention_decode's chunks")
    A.compare(o, want, vmax, c.splits .. " chunks")
  end)
end

if cpu then
  check.case("CPU device: chunks of at most cpu_decode_keys keys; few keys keep attention_prefill", function()
    local n = chunks_of { T = 1, Hq = 1, Hkv = 1, D = 256, p0 = 3000, cap = 3008, mode = "auto" }
    local per = lower.cpu_decode_keys(256, 8)
    check.truthy(n and n * per >= 3008, ("%s chunks of at most %d keys hold 3008"):format(tostring(n), per))
    local _, _, _, names = A.run { T = 8, Hq = 2, Hkv = 1, D = 64, p0 = 16, cap = 64, mode = "auto" }
    check.truthy(A.used(names, "attention_prefill"), "64 keys: attention_prefill (" .. table.concat(names, ",") .. ")")
  end)
  check.case("CPU device: attention_prefill=flash and the basic kernel past their bounds are refused", function()
    local ok, err = pcall(A.run, { T = 8, Hq = 1, Hkv = 1, D = 256, p0 = 2500, cap = 2508, mode = "flash" })
    check.truthy(not ok and tostring(err):find("llvmpipe's loop limit", 1, true), "flash: " .. tostring(err))
    ok, err = pcall(A.run, { T = 1, Hq = 1, Hkv = 1, D = 256, p0 = 3990, cap = 16000, mode = "auto",
                             hints = { attention_decode = "basic" } })
    check.truthy(not ok and tostring(err):find("basic kernel", 1, true), "basic: " .. tostring(err))
  end)
end

check.done()
