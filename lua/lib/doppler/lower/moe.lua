-- doppler.lower.moe: mixture of experts: routing (one invocation per token), the selected experts'
-- products, the combine.
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local R = B.M.rules
local WG_MAX_GROUPS, ceil_div, groups_1d = B.WG_MAX_GROUPS, B.ceil_div, B.groups_1d

-- Mixture of experts: routing (one invocation per token), the selected experts' products, the combine.
R.topk_softmax = function(ctx, n)
  local logits, ids = n.inputs[1], n.inputs[2]
  local T, E = logits.bshape[1], logits.bshape[2]
  local k = ctx.kernel("moe/topk_softmax.comp", ctx.defines(nil, logits.etype), { WG = 64 })
  ctx.dispatch(k, ceil_div(T, 64), 1, 1, {
    logits = ctx.t(logits), ids = ctx.t(ids), w = ctx.t(n), n_tokens = T, n_experts = E, top_k = n.attrs.k,
  })
end

R.expert_linear = function(ctx, n)
  local x, w, ids = n.inputs[1], n.inputs[2], n.inputs[3]
  local T, topk, N = n.bshape[1], n.bshape[2], n.bshape[3]
  local S, rows = T * topk, 2
  if S > WG_MAX_GROUPS then Graph.fail("expert_linear at %s: %d slots exceed %d per pass", n.where, S, WG_MAX_GROUPS) end
  local k = ctx.kernel("moe/expert_gemv.comp", ctx.defines { ctx.weight_define(w.etype, w.attrs.name) }, { WG = 128, ROWS = rows })
  local nb = ceil_div(N, rows)
  local gx = math.min(nb, WG_MAX_GROUPS)
  ctx.dispatch(k, gx, S, ceil_div(nb, gx), {
    x = ctx.t(x), w = ctx.t(w), ids = ctx.t(ids), y = ctx.t(n), n_slots = S, N = N, K = w.bshape[3],
    top_k = topk, x_per_slot = (#x.bshape == 3) and 1 or 0, n_experts = w.bshape[1],
  })
end

R.weighted_sum = function(ctx, n)
  local x, wts = n.inputs[1], n.inputs[2]
  local T, N = n.bshape[1], n.bshape[2]
  local k = ctx.kernel("moe/weighted_sum.comp", ctx.defines(), { WG = 256 })
  local gx, gy = groups_1d(T * N, 256)
  ctx.dispatch(k, gx, gy, 1, { x = ctx.t(x), w = ctx.t(wts), y = ctx.t(n), n_tokens = T, N = N, top_k = x.bshape[2] })
end
