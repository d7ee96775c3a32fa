-- doppler.lower.norm: the embedding lookup and the RMSNorm family (rmsnorm, add_rmsnorm, Gemma's sandwich
-- norm_add_norm, and embed_norm, the lookup with the norm that reads it), all in norm_rows.glsl's layout
-- (B.norm_layout), so every fused form sums in rmsnorm's order.
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local M, R = B.M, B.M.rules
local WG_MAX_GROUPS, NW_DEFINE, Q_DEFINE, LAYOUT_DEFINE = B.WG_MAX_GROUPS, B.NW_DEFINE, B.Q_DEFINE, B.LAYOUT_DEFINE
local ceil_div, numel, row_blocks, norm_layout = B.ceil_div, B.numel, B.row_blocks, B.norm_layout
local a_defines = B.a_defines

-- A quantised table (a GGUF's token_embd) is read in its blocks by gather_q, so a tied LM head shares
-- the one quantised copy.
R.embed = function(ctx, n)
  local ids, tab = n.inputs[1], n.inputs[2]
  local T, C = n.bshape[1], n.bshape[2]
  local qdef, k = Q_DEFINE[tab.etype], nil
  if qdef then
    if C % 8 ~= 0 then Graph.fail("plan: quantised table %s has rows of %d elements (gather_q needs a multiple of 8)", tab.attrs.name, C) end
    k = ctx.kernel("embed/gather_q.comp", ctx.defines { qdef, LAYOUT_DEFINE[M.layout_of(ctx.t(tab))] }, { WG = 256 })
  else
    k = ctx.kernel("embed/gather.comp", ctx.defines { ctx.weight_define(tab.etype, tab.attrs.name) }, { WG = 256 })
  end
  ctx.dispatch(k, ceil_div(qdef and C // 8 or C, 256), math.min(T, WG_MAX_GROUPS), 1, {
    ids = ctx.t(ids), table = ctx.t(tab), y = ctx.t(n), T = T, C = C, rows = tab.bshape[1], scale = n.attrs.scale,
    row_blocks = qdef and row_blocks(ctx.t(tab)) or nil,
  })
end

-- fusions.lua's embed_norm: the lookup and the norm that reads it, in rmsnorm's layout (embed/embed_norm.comp;
-- inputs ids, table, the norm weight, and the embed node it also writes). The workgroup's rows are staged in
-- shared memory: ROWS x C floats, at most 8192 x 4 bytes (ROWS is 1 from C > 1024 on).
M.EMBED_NORM_MAX_C = 8192
R.embed_norm = function(ctx, n)
  local ids, tab, w, x = n.inputs[1], n.inputs[2], n.inputs[3], n.inputs[4]
  local T, C = n.bshape[1], n.bshape[2]
  local wg, per, gx, gy = norm_layout(C, T)
  local qdef, defs = Q_DEFINE[tab.etype], nil
  if qdef then
    if C % 8 ~= 0 then Graph.fail("plan: quantised table %s has rows of %d elements (embed_norm needs a multiple of 8)", tab.attrs.name, C) end
    defs = { qdef, "DP_TABLE_Q", LAYOUT_DEFINE[M.layout_of(ctx.t(tab))] }   -- row_wise has no layout define
  else
    defs = { ctx.weight_define(tab.etype, tab.attrs.name) }
  end
  local nwd = NW_DEFINE[w.etype]
  if nwd == nil then Graph.fail("embed_norm: the norm weight %s has dtype %s", w.attrs.name, tostring(w.etype)) end
  if nwd then defs[#defs + 1] = nwd end
  local k = ctx.kernel("embed/embed_norm.comp", ctx.defines(defs), { WG = wg, ROWS = per, CMAX = C })
  ctx.dispatch(k, gx, gy, 1, {
    ids = ctx.t(ids), table = ctx.t(tab), x = ctx.t(x), w = ctx.t(w), y = ctx.t(n), T = T, C = C,
    rows = tab.bshape[1], scale = n.attrs.scale, row_blocks = qdef and row_blocks(ctx.t(tab)) or 0,
    eps = n.attrs.eps, w_offset = n.attrs.offset,
  })
end

-- A norm node's rows: their length d (the last dimension), how many, and their layout (B.norm_layout).
local function norm_rows(n)
  local d = n.bshape[#n.bshape]
  local rows = numel(n.bshape) // d
  return d, rows, norm_layout(d, rows)
end

R.rmsnorm = function(ctx, n)
  local x, w = n.inputs[1], n.inputs[2]
  local d, rows, wg, per, gx, gy = norm_rows(n)
  local k = ctx.kernel("norm/rmsnorm.comp", ctx.defines { ctx.weight_define(w.etype, w.attrs.name) }, { WG = wg, ROWS = per })
  ctx.dispatch(k, gx, gy, 1, {
    x = ctx.t(x), w = ctx.t(w), y = ctx.t(n), rows = rows, n = d, eps = n.attrs.eps, w_offset = n.attrs.offset,
  })
end

R.add_rmsnorm = function(ctx, n)
  local a, b, w, sum = n.inputs[1], n.inputs[2], n.inputs[3], n.inputs[4]
  if b.op == "glu_down" then Graph.fail("plan: add_rmsnorm at %s reads the fused MLP's sum as b", n.where) end
  local d, rows, wg, per, gx, gy = norm_rows(n)
  local k = ctx.kernel("norm/add_rmsnorm.comp", ctx.defines(a_defines(a, { ctx.weight_define(w.etype, w.attrs.name) })),
                       { WG = wg, ROWS = per })
  ctx.dispatch(k, gx, gy, 1, {
    a = ctx.t(a), b = ctx.t(b), w = ctx.t(w), r = ctx.t(sum), y = ctx.t(n),
    rows = rows, n = d, eps = n.attrs.eps, w_offset = n.attrs.offset,
  })
end

-- fuse2: norm_add_norm (fusions.lua): y = x + rmsnorm(a; w1), h = rmsnorm(y; w2), with add_rmsnorm's layout
-- (so both sums are bit-identical to rmsnorm's and add_rmsnorm's).
R.norm_add_norm = function(ctx, n)
  local x, a, w1, w2, sum = table.unpack(n.inputs)
  local d, rows, wg, per, gx, gy = norm_rows(n)
  local k = ctx.kernel("norm/norm_add_norm.comp", ctx.defines(a_defines(a, { ctx.weight_define(w1.etype, w1.attrs.name) })),
                       { WG = wg, ROWS = per })
  ctx.dispatch(k, gx, gy, 1, {
    x = ctx.t(x), a = ctx.t(a), w1 = ctx.t(w1), w2 = ctx.t(w2), y = ctx.t(sum), h = ctx.t(n),
    rows = rows, n = d, eps1 = n.attrs.eps1, w_offset1 = n.attrs.offset1, eps2 = n.attrs.eps, w_offset2 = n.attrs.offset,
  })
end
