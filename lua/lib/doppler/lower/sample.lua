-- doppler.lower.sample: picking the next id from a logits row: argmax, and the sampler (penalty, temperature,
-- top-k / top-p / min-p draws; core/sample.h holds the CPU reference).
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local R = B.M.rules
local ceil_div, groups_1d, pow2_at_least = B.ceil_div, B.groups_1d, B.pow2_at_least

-- Two stages: per-chunk (value, index) pairs, then one pair per row. The partial buffers belong
-- to the plan (allocated once, at compile time).
R.argmax = function(ctx, n)
  local x = n.inputs[1]
  local rows, V = x.bshape[1], x.bshape[2]
  local chunk = 4096
  local n_chunks = ceil_div(V, chunk)
  local pv = ctx.dev:tensor { dtype = "f32", shape = { rows * n_chunks } }
  local pi = ctx.dev:tensor { dtype = "u32", shape = { rows * n_chunks } }
  ctx.plan.owned[#ctx.plan.owned + 1] = pv
  ctx.plan.owned[#ctx.plan.owned + 1] = pi
  local k1 = ctx.kernel("argmax/argmax_partial.comp", ctx.defines(nil, x.etype), { WG = 256 })
  ctx.dispatch(k1, n_chunks, rows, 1, { x = ctx.t(x), part_val = pv, part_idx = pi, n = V, chunk = chunk, n_chunks = n_chunks })
  local k2 = ctx.kernel("argmax/argmax_final.comp", {}, { WG = 64 })
  ctx.dispatch(k2, rows, 1, 1, { part_val = pv, part_idx = pi, ids = ctx.t(n), n_chunks = n_chunks })
end

-- The sampler (core/sample.h; kernels in shaders/sample/). context_ids records the pass's ids for the
-- repetition penalty and yields the context length, which sample reads as its draw counter (step).
R.context_ids = function(ctx, n)
  local ids, pos, c = n.inputs[1], n.inputs[2], n.inputs[3]
  local T = ids.bshape[1]
  local k = ctx.kernel("sample/sample_context.comp", {}, { WG = 64 })
  ctx.dispatch(k, ceil_div(T, 64), 1, 1, { ids = ctx.t(ids), pos = ctx.t(pos), ctx = ctx.t(c), n_ctx = ctx.t(n),
                                           T = T, cap = c.bshape[1] })
end

-- penalty into a scratch copy (the logits stay intact for --logits-out); then either one pass of
-- Gumbel-max keys per chunk + argmax_final (no sorting: greedy, temperature, min-p), or bitonic top-kp
-- stages over chunks of SORT_N until one workgroup is left, which applies top-k/top-p/min-p and draws.
local SORT_N, SAMPLE_CHUNK = 2048, 4096
R.sample = function(ctx, n)
  local x, n_ctx, c = n.inputs[1], n.inputs[2], n.inputs[3]
  local sp = n.attrs.spec
  local V = x.bshape[#x.bshape]
  if x.etype ~= "f32" then Graph.fail("sample: the logits row must be f32, got %s (%s)", x.etype, n.where) end
  local function scratch(dtype, count)
    local t = ctx.dev:tensor { dtype = dtype, shape = { math.max(1, count) } }
    ctx.plan.owned[#ctx.plan.owned + 1] = t
    return t
  end
  local src = ctx.t(x)
  local steps = ctx.t(n_ctx)
  if sp.repeat_penalty ~= 1 then
    local z = scratch("f32", V)
    local cap = c.bshape[1]
    local k = ctx.kernel("sample/sample_penalty.comp", {}, { WG = 256 })
    for mode = 0, 1 do
      local gx, gy = groups_1d(mode == 0 and V or cap, 256)
      ctx.dispatch(k, gx, gy, 1, { x = src, z = z, ctx = ctx.t(c), n_ctx = steps, n = V, cap = cap, mode = mode,
                                   penalty = sp.repeat_penalty, inv_penalty = sp.inv_penalty })
    end
    src = z
  end
  local seed_lo, seed_hi = sp.seed_lo, sp.seed_hi
  if sp.greedy or sp.k == 0 then
    local n_chunks = ceil_div(V, SAMPLE_CHUNK)
    local pmax, pv, pi = scratch("f32", n_chunks), scratch("f32", n_chunks), scratch("u32", n_chunks)
    local n_max = 0
    if not sp.greedy and sp.min_p > 0 then
      n_max = n_chunks
      local km = ctx.kernel("sample/sample_max.comp", {}, { WG = 256 })
      ctx.dispatch(km, n_chunks, 1, 1, { x = src, part_max = pmax, n = V, chunk = SAMPLE_CHUNK, n_chunks = n_chunks })
    end
    local kg = ctx.kernel("sample/sample_gumbel.comp", {}, { WG = 256 })
    ctx.dispatch(kg, n_chunks, 1, 1, {
      x = src, part_max = pmax, part_val = pv, part_idx = pi, steps = steps, n = V, chunk = SAMPLE_CHUNK,
      n_chunks = n_chunks, n_max = n_max, temperature = sp.greedy and 0 or sp.temperature,
      log_min_p = sp.log_min_p, seed_lo = seed_lo, seed_hi = seed_hi,
    })
    local kf = ctx.kernel("argmax/argmax_final.comp", {}, { WG = 64 })
    ctx.dispatch(kf, 1, 1, 1, { part_val = pv, part_idx = pi, ids = ctx.t(n), n_chunks = n_chunks })
    return
  end
  local kp = pow2_at_least(sp.k, 1, SORT_N // 2)
  local per_group = SORT_N // kp
  local n_lists = ceil_div(V, SORT_N)
  local bv = { scratch("f32", n_lists * kp), scratch("f32", n_lists * kp) }
  local bi = { scratch("u32", n_lists * kp), scratch("u32", n_lists * kp) }
  local kt = ctx.kernel("sample/sample_topk.comp", {}, { WG = 256 })
  local mode, groups, cur, count = 0, n_lists, 1, V
  while true do
    local final = groups == 1
    ctx.dispatch(kt, groups, 1, 1, {
      z = src, in_val = bv[cur], in_id = bi[cur], out_val = bv[3 - cur], out_id = bi[3 - cur], ids = ctx.t(n),
      steps = steps, n = count, kp = kp, k = sp.k, mode = mode, final_stage = final and 1 or 0,
      temperature = sp.temperature, top_p = sp.top_p, log_min_p = sp.log_min_p, seed_lo = seed_lo, seed_hi = seed_hi,
    })
    if final then break end
    cur = 3 - cur
    count = groups
    groups = ceil_div(groups, per_group)
    mode = 1
  end
end
