-- The GPU-resident decode loop (doppler.loop, hint decode_chunk): on the gemma3-tiny and llama3-tiny
-- fixtures, greedy and seeded sampling give exactly the ids of the step-by-step loop (decode_chunk = 1)
-- for chunks of 16 and 5 and lengths that are not a multiple of the chunk; a stop id ends generation at
-- the same place, with nothing emitted after it and the position where the step-by-step loop leaves it;
-- the steps after a stop do no work, both ways (hint loop_skip): conditional blocks that read the stopped
-- word (where the device has conditional rendering; test_kernels checks the blocks themselves) and indirect
-- group counts that the advance zeroes; a chunk is one submit; and where a
-- step ends with argmax_final (the fused LM head), the advance between two steps takes that stage over (one
-- dispatch less per step; the ids above are checked with it). Also with the fused MLP (hint glu_down) on the
-- GGUF Q4_K_M fixtures.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"
local session = require "doppler.session"
local hints = require "doppler.hints"
local recipes = require "doppler.recipes"
local sampler = require "doppler.sampler"
local generate = require "doppler.generate"

local PROMPT = { 2, 10, 20, 30, 7 }

local function open(name)
  local path = check.fixtures .. "/models/" .. name
  local m = doppler.open_model(path)
  local recipe = recipes.for_config(doppler.read_json(path .. "/config.json"), path)
  local h = hints.new()
  local s = session.open(recipe, m, { hints = h, context = 128 })
  return { s = s, h = h, recipe = recipe, model = m }
end

-- Generates with the recipe's decode loop; returns the ids, the final position and the main queue's submits
-- (a side prefetch kernel, gpu/prefetch.c, adds one submit per side kernel, which serves many chunks).
local function run(M, chunk, sopts, max_tokens, stops)
  M.h:set("decode_chunk", chunk, "test")
  M.s:reset()
  local smp = sampler.new(M.s, sopts)
  local ids = {}
  local sub0, side0 = M.s.dev:submits() - M.s.dev:side_submits(), M.s.dev:side_submits()
  local decode = M.recipe.decode or generate.decode
  decode(M.s, PROMPT, { max_tokens = max_tokens, sampler = smp, stops = stops or {} },
         function(id) ids[#ids + 1] = id end)
  return ids, M.s.pos, M.s.dev:submits() - M.s.dev:side_submits() - sub0, M.s.dev:side_submits() - side0
end

local SETTINGS = {
  { name = "greedy", opts = { temperature = 0 } },
  { name = "seeded temperature", opts = { temperature = 6, seed = 3 } },
  { name = "penalty + top-p", opts = { temperature = 3, top_p = 0.9, repeat_penalty = 1.5, seed = 77 } },
}

for _, name in ipairs({ "gemma3-tiny", "llama3-tiny" }) do
  local M = open(name)
  for _, st in ipairs(SETTINGS) do
    check.case(("%s, %s: chunks of 16 and 5 give the step-by-step ids"):format(name, st.name), function()
      for _, n in ipairs({ 1, 7, 23, 40 }) do
        local want, want_pos = run(M, 1, st.opts, n)
        check.eq(#want, n, "step-by-step ids")
        for _, chunk in ipairs({ 16, 5, 2 }) do
          local got, pos = run(M, chunk, st.opts, n)
          check.eq(check.join(got), check.join(want), ("ids, %d tokens in chunks of %d"):format(n, chunk))
          check.eq(pos, want_pos, ("position after %d tokens in chunks of %d"):format(n, chunk))
        end
      end
    end)
  end

  local SKIPS = { "indirect" }
  if M.s.dev:caps().conditional_rendering then SKIPS[2] = "conditional" end
  check.case(name .. ": loop_skip auto is conditional where the device has conditional rendering", function()
    M.h:set("loop_skip", "auto", "test")
    run(M, 16, { temperature = 0 }, 20)
    check.eq(M.s.last_plan.loop_skip, M.s.dev:caps().conditional_rendering and "conditional" or "indirect",
             "the chunk's skip mode")
  end)
  for _, skip in ipairs(SKIPS) do
  check.case(name .. ": a stop id ends generation at the same place in every mode, loop_skip=" .. skip, function()
    M.h:set("loop_skip", skip, "test")
    local all = run(M, 1, { temperature = 6, seed = 5 }, 30)
    -- stop at a token first seen at index 9 or later (inside the first or second chunk)
    for _, at in ipairs({ 2, 9, 12, 17 }) do
      local stop_id = all[at]
      local first = at
      for i = 1, at do if all[i] == stop_id then first = i; break end end
      local stops = { [stop_id] = true }
      local want, want_pos = run(M, 1, { temperature = 6, seed = 5 }, 30, stops)
      check.eq(#want, first - 1, "step-by-step ids before the stop")
      for _, chunk in ipairs({ 16, 5 }) do
        local got, pos = run(M, chunk, { temperature = 6, seed = 5 }, 30, stops)
        check.eq(check.join(got), check.join(want), ("ids before stop %d, chunks of %d"):format(stop_id, chunk))
        check.eq(pos, want_pos, ("position after stop %d, chunks of %d"):format(stop_id, chunk))
      end
    end
  end)

  check.case(name .. ": the steps after a stop do no work, loop_skip=" .. skip, function()
    M.h:set("loop_skip", skip, "test")
    local S = { temperature = 6, seed = 5 }
    local all = run(M, 1, S, 16)
    local at                                      -- a token first generated at index 3..16
    for i = 3, 16 do
      local seen = false
      for j = 1, i - 1 do seen = seen or all[j] == all[i] end
      if not seen then at = i; break end
    end
    check.truthy(at, "a token first generated inside the first chunk: " .. check.join(all))
    local ids, pos = run(M, 16, S, 30, { [all[at]] = true })
    check.eq(#ids, at - 1, "ids before the stop")
    check.eq(pos, #PROMPT + at - 1, "position after the stop")
    local p = M.s.last_plan
    check.truthy(p.loop_args, "the last plan is a loop chunk")
    check.eq(p.loop_skip, skip, "the chunk's skip mode")
    -- conditional: every step but the first is a block that reads the stopped word
    check.eq(p.recorder:stats().conditionals, skip == "conditional" and 15 or 0, "conditional blocks in the chunk")
    -- the advance zeroes the counts and sets the stopped word either way; the conditional chunk reads the
    -- word (the skipping itself: test_kernels' conditional blocks), the indirect one the counts
    for i, v in ipairs(p.loop_args:download({ dtype = "u32" })) do check.eq(v, 0, "indirect group count " .. i) end
    check.eq(p.loop_bufs.state:download({ dtype = "u32", count = 1 })[1], 1, "state word 0: stopped by an id")
    local tmpl = p.loop_tmpl:download({ dtype = "u32" })
    local nonzero = 0
    for _, v in ipairs(tmpl) do if v > 0 then nonzero = nonzero + 1 end end
    check.eq(nonzero, #tmpl, "every template group count is positive")
    -- the same session goes on after the stop: the next generation's chunks run (the skipped steps' side
    -- prefetch signals are restarted with its kernel, gpu/recorder.h)
    local again = run(M, 16, S, 20)
    local want = run(M, 1, S, 20)
    check.eq(check.join(again), check.join(want), "a generation after the stop")
  end)
  end
  M.h:set("loop_skip", "auto", "test")

  check.case(name .. ": one submit per chunk", function()
    local _, _, per_step, side_step = run(M, 1, { temperature = 0 }, 33)
    run(M, 16, { temperature = 0 }, 33)           -- the first run records the chunk (and uploads)
    local _, _, chunked, side_chunked = run(M, 16, { temperature = 0 }, 33)
    -- prefill: 1 submit; then 32 fed tokens: 32 steps, or 2 chunks of 16
    check.eq(per_step, 1 + 32, "submits step by step")
    check.eq(chunked, 1 + 2, "submits in chunks of 16")
    -- where the device has a side queue (the H100), one side kernel serves a generation's replays
    check.truthy(side_step <= 1 and side_chunked <= 1,
                 ("side submits per generation: %d step by step, %d in chunks"):format(side_step, side_chunked))
  end)
  check.case(name .. ": a chunked generation compiles the prompt's plan and the loop's, not the step's", function()
    M.s:drop_plans()
    local before = M.s.plans_compiled
    local ids = run(M, 16, { temperature = 0 }, 33)
    check.eq(#ids, 33, "ids")
    check.eq(M.s.plans_compiled - before, 2, "plans compiled")
    check.eq(M.s.plans["1l"], nil, "no step plan")
  end)
  check.case(name .. ": the advance between steps runs the fused head's argmax_final (not after a top-p draw)", function()
    for _, st in ipairs(SETTINGS) do
      run(M, 16, st.opts, 20)
      local p = M.s.last_plan
      local fused_head = st.opts.top_p == nil
      check.eq(p.loop_argmax_folded, fused_head, st.name .. ": argmax_final folded into the advance")
      local per_step = #p.calls
      -- 16 steps of the step's calls, an advance before the first and between two steps, less the
      -- argmax_final of every step but the last where the advance runs it
      check.eq(p.dispatches, 16 * per_step + 16 - (fused_head and 15 or 0), st.name .. ": dispatches per chunk")
    end
  end)
  M.model:close()
end

-- The fused MLP (fusion glu_down, the H100's default for Q4_K_M files): the loop's chunk carries each layer's
-- int64 sum and zeroes it for the next step (plan.lua), and must still give exactly the step-by-step ids.
-- The model at `path` with hint glu_down=on (lavapipe's auto is off); `fused(specs)` counts the chunk plan's
-- fused MLPs.
local function fused_mlp_case(label, path, fused)
  local m = doppler.open_model(path)
  local recipe = recipes.for_model(m, path)
  local h = hints.new()
  h:set("glu_down", "on", "test")
  local M = { s = session.open(recipe, m, { hints = h, context = 128 }), h = h, recipe = recipe, model = m }
  check.case(label .. ", glu_down=on: chunks of 16 and 5 give the step-by-step ids", function()
    for _, st in ipairs({ SETTINGS[1], SETTINGS[2] }) do
      local want, want_pos = run(M, 1, st.opts, 23)
      for _, chunk in ipairs({ 16, 5 }) do
        local got, pos = run(M, chunk, st.opts, 23)
        check.eq(check.join(got), check.join(want), ("%s: ids in chunks of %d"):format(st.name, chunk))
        check.eq(pos, want_pos, ("%s: position in chunks of %d"):format(st.name, chunk))
        check.truthy(fused(M.s.last_plan.kernel_specs) > 0, ("%s: the chunk's plan runs the fused MLP"):format(st.name))
      end
    end
  end)
  m:close()
end

-- The GGUF Q4_K_M fixtures: gemv_q's DP_DOWN.
for _, name in ipairs({ "gemma3-q", "llama-q" }) do
  fused_mlp_case(name .. " Q4_K_M", check.fixtures .. "/gguf/" .. name .. "/model-Q4_K_M.gguf",
                 function(specs) return check.define_count(specs, nil, "DP_DOWN") end)
end

-- Float weights (fused/glu_down_float.comp): the HF fixtures gemma3-tiny (its norm folded in) and llama3-tiny
-- converted to F16 GGUFs.
do
  local tmp = os.tmpname()
  os.remove(tmp)
  os.execute("mkdir -p " .. check.quote(tmp))
  for _, name in ipairs({ "gemma3-tiny", "llama3-tiny" }) do
    local path = tmp .. "/" .. name .. "-f16.gguf"
    check.must_run({ "convert", check.fixtures .. "/models/" .. name, "--quant", "f16", "--out", path, "--no-manifest", "--quiet" })
    fused_mlp_case(name .. " F16", path, function(specs)
      local c = 0
      for _, sp in ipairs(specs) do if sp.file == "fused/glu_down_float.comp" then c = c + 1 end end
      return c
    end)
  end
  os.execute("rm -rf " .. check.quote(tmp))
end

check.done()
