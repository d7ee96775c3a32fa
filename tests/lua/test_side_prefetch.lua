-- The side prefetcher (gpu/prefetch.h, hint side_prefetch): a kernel on a second queue reads each stage's
-- weights ahead of it while a decode plan is replayed. lavapipe has one queue, so these tests run it on the
-- main queue (doppler.open_device{ side_queue = "main" }), one after the other: what they check is what must
-- hold on any device. Its schedule is made (stages, weight ranges) for decode passes and not for prefill ones;
-- the side kernel runs (side submits); the ids of the GPU loop and of the step-by-step loop, and every logit,
-- are the bits of the same model without it, with prefetch_skip too; the side kernel counts the stages it
-- reaches, finds late and skips (dispatched alone on a preset count); a device without a side queue refuses
-- side_prefetch=on; options out of range are refused. Whether it gains anything is for the H100 (docs/BENCHMARKS.md, session 20).
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local tiny = require "lib.tiny_session"

local PROMPT = { 2, 10, 20, 30, 7, 11, 3, 5 }

local side_dev = doppler.open_device { side_queue = "main" }

local function open(name, dev, prefetch, lead)
  -- prefetch_min_kb: the fixtures' matrices are a few KiB
  return tiny.open(name, dev, { side_prefetch = prefetch, prefetch_min_kb = 1, prefetch_lead = lead })
end

-- Greedy ids from the recipe's decode loop, and the last pass's logits.
local function run(M, chunk, n) return tiny.greedy(M, PROMPT, chunk, n) end

local function logits(M)
  M.s:reset()
  M.s:feed(PROMPT, false)
  local out = {}
  for i, ids in ipairs({ { 4 }, { 9 }, { 13 } }) do
    M.s:feed(ids, false)
    out[i] = M.s:last_logits()
  end
  return out
end

for _, name in ipairs({ "gemma3-tiny", "llama3-tiny" }) do
  local A = open(name, nil, "off")
  local B = open(name, side_dev, "on")

  check.case(name .. ": the GPU loop and the step-by-step loop give the same ids with the side prefetcher", function()
    local sub0 = side_dev:side_submits()
    for _, chunk in ipairs({ 16, 1 }) do
      local want, got = run(A, chunk, 40), run(B, chunk, 40)
      check.eq(#got, 40, "ids generated")
      check.eq(check.join(got), check.join(want), ("ids in chunks of %d"):format(chunk))
    end
    check.truthy(side_dev:side_submits() > sub0, "the side kernel ran")
    local n = side_dev:prefetch_counts()
    check.truthy(n.stages > 0 and n.late <= n.stages and n.skipped == 0,
                 ("the side kernels' counts: %d stages reached, %d late, %d skipped"):format(n.stages, n.late, n.skipped))
  end)

  check.case(name .. ": prefetch_skip=finished and =begun give the same ids", function()
    for _, skip in ipairs({ "finished", "begun" }) do
      local C = tiny.open(name, side_dev, { side_prefetch = "on", prefetch_min_kb = 1, prefetch_skip = skip })
      for _, chunk in ipairs({ 16, 1 }) do
        check.eq(check.join(run(C, chunk, 40)), check.join(run(A, chunk, 40)), ("%s: ids in chunks of %d"):format(skip, chunk))
      end
      C.model:close()
    end
  end)

  check.case(name .. ": decode logits are the same bits with the side prefetcher", function()
    local want, got = logits(A), logits(B)
    for i = 1, #want do
      check.eq(#got[i], #want[i], "logits")
      local same = 0
      for j = 1, #want[i] do if got[i][j] == want[i][j] then same = same + 1 end end
      check.eq(same, #want[i], ("equal logits at step %d"):format(i))
    end
  end)

  check.case(name .. ": a schedule for decode passes, none for prefill ones", function()
    local step, chunk = B.s:plan_for(1, false), B.s:loop_plan(16)
    for what, p in pairs({ step = step, chunk = chunk }) do
      local st = p:stats()
      check.truthy(st.prefetch, what .. ": prefetching")
      check.truthy(st.prefetch_stages > 0 and st.prefetch_ranges > 0,
               ("%s: %d stages, %d ranges"):format(what, st.prefetch_stages, st.prefetch_ranges))
    end
    -- the chunk is 16 steps: 16 times the step's stages, and an advance between two steps
    check.truthy(chunk:stats().prefetch_stages >= 16 * step:stats().prefetch_stages, "a chunk's stages")
    check.eq(B.s:plan_for(8, false):stats().prefetch, false, "a prefill pass (T = 8) does not prefetch")
    check.eq(A.s:plan_for(1, false):stats().prefetch, false, "side_prefetch=off")
  end)

  check.case(name .. ": reads start at a light stage (prefetch_lead), or one ahead with prefetch_lead=1", function()
    local C = open(name, side_dev, "on", 1)
    for _, chunk in ipairs({ 16, 1 }) do
      check.eq(check.join(run(C, chunk, 40)), check.join(run(A, chunk, 40)), ("ids in chunks of %d"):format(chunk))
    end
    -- (stats after the runs: a plan is recorded when it first runs) on lavapipe both forms have stages with
    -- weights two after a light one (the down projection after the norm before gate+up)
    local led = B.s:loop_plan(16):stats().prefetch_led
    check.truthy(led >= 16, ("by default a chunk's stages led: %d"):format(led))
    check.eq(C.s:loop_plan(16):stats().prefetch_led, 0, "with prefetch_lead=1 every stage reads one ahead")
    C.model:close()
  end)
  A.model:close()
  B.model:close()
end

check.case("side_prefetch=on where the device has no side queue is an error", function()
  local dev = doppler.device()
  if dev:caps().side_queue then return end   -- the H100 has one: nothing to refuse there
  local ok, msg = pcall(open, "gemma3-tiny", nil, "on")
  if ok then ok, msg = pcall(function() msg.s:plan_for(1, false) end) end
  check.eq(ok, false, "refused")
  check.truthy(tostring(msg):find("no side queue", 1, true), "names the cause: " .. tostring(msg))
end)

-- The side kernel alone (loop/prefetch.comp), started where the main queue's count already stands at P: 3 stages
-- of one range each, lead 1, so stage j of run c is read once the count reaches c * 3 + j. The kernel reaches the
-- P + 1 stages with c * 3 + j <= P, finds finished (late) those with c * 3 + j + 2 <= P and begun those with
-- c * 3 + j + 1 <= P, skips them as SKIP says, then waits for the next stage and leaves at the quit word (set
-- beforehand). Control words as in shaders/include/dp_prefetch.glsl.
check.case("the side kernel counts the stages it reaches late, and skips them as told", function()
  local dev = doppler.device()
  local S, P, WORDS, QUIT, SEEN, LATE, SKIPPED = 3, 7, 4480, 4160, 4288, 4352, 4416
  local w = dev:tensor { dtype = "u32", shape = { 256 } }   -- the 1 KiB each stage reads
  local a = w:address()
  local rv = {}
  for _ = 1, S do
    for _, x in ipairs({ a & 0xffffffff, a >> 32, 1024, 0 }) do rv[#rv + 1] = x end
  end
  local ranges = dev:tensor { dtype = "u32", shape = { 4 * S } }
  ranges:upload(rv)
  local first = dev:tensor { dtype = "u32", shape = { S + 1 } }
  first:upload({ 0, 1, 2, 3 })
  local lead = dev:tensor { dtype = "u32", shape = { S } }
  lead:upload({ 1, 1, 1 })
  for skip, want in pairs({ [0] = 0, [1] = P - 1, [2] = P }) do
    local words = {}
    for i = 1, WORDS do words[i] = 0 end
    words[1], words[QUIT + 1] = P, 1                        -- progress copy 0 (COPIES = 1), the quit word
    local ctl = dev:tensor { dtype = "u32", shape = { WORDS } }
    ctl:upload(words)
    local k = dev:kernel { file = "loop/prefetch.comp", constants = { WG = 32, COPIES = 1, SKIP = skip } }
    local rec = dev:recorder()
    rec:dispatch(k, { 1, 1, 1 }, { first = first, lead = lead, ranges = ranges, ctl = ctl, stages = S })
    rec:run()
    local c = ctl:download({ dtype = "u32" })
    check.eq(c[SEEN + 1], P + 1, ("SKIP %d: stages reached"):format(skip))
    check.eq(c[LATE + 1], P - 1, ("SKIP %d: stages the main queue had finished"):format(skip))
    check.eq(c[SKIPPED + 1], want, ("SKIP %d: stages skipped"):format(skip))
  end
end)

check.case("prefetch options out of range are refused", function()
  for _, bad in ipairs({ { copies = 65 }, { groups = 0 }, { depth = 0 }, { depth = 9 }, { light_lead = 9 },
                         { min_kb = 64, max_mb = 0 }, { skip = 3 } }) do
    local ok, msg = pcall(side_dev.recorder, side_dev, { prefetch = bad })
    check.eq(ok, false, "refused")
    check.truthy(tostring(msg):find("out of range", 1, true), tostring(msg))
  end
  local ok, msg = pcall(side_dev.recorder, side_dev, { prefetch = { groups = -1 } })
  check.eq(ok, false, "a negative value is refused")
  check.truthy(tostring(msg):find("non-negative", 1, true), tostring(msg))
end)

check.done()
