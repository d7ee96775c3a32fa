-- doppler.lower.linear: y = x · Wᵀ (+ b) and the fused q/k/v projections: the GEMV at decode sizes, the
-- tiled GEMM or the cooperative-matrix GEMM (gemm_cm) for prefill, by hint matmul and the device.
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local M, R = B.M, B.M.rules
local WG_MAX_GROUPS, Q_DEFINE, LAYOUT_DEFINE, Q_BLOCK = B.WG_MAX_GROUPS, B.Q_DEFINE, B.LAYOUT_DEFINE, B.Q_BLOCK
local ceil_div, zeroed_counters, numel, row_blocks = B.ceil_div, B.zeroed_counters, B.numel, B.row_blocks
local Prep = require "doppler.lower.prepare"
local q_matmul_mode, q_matmul_head_mode = Prep.q_matmul_mode, Prep.q_matmul_head_mode
local matrix_weight = Prep.matrix_weight
local Gemv = require "doppler.lower.gemv"
local prenorm_multi, gemv_multi = Gemv.prenorm_multi, Gemv.gemv_multi

-- gemm_cm (matmul/gemm_cm.comp): the tiled product on cooperative matrices, for prefill-sized T where the
-- device has VK_NV_cooperative_matrix with f16 tiles (caps.coopmat_shape) and x and W are f16. Tiles are
-- BM x BN with one subgroup per 32 x 32 of it (CM_WARP); hint gemm_cm_tile picks one, auto 128 x 128 for
-- large grids, else 64 x 64 (smaller tiles measured no faster on the H100), and K may be split (below).
-- Subgroup tile per workgroup tile: 32 x 32 (2 x 2 accumulators), 32 x 64 in a 128 x 128 tile (8 subgroups;
-- on the H100 the gate/up projections of a 512-token Gemma 3 1B prefill took 4.9 ms against 5.85 at 64 x 64,
-- while 64 x 64 per subgroup ran 2-3x slower everywhere).
local CM_WARP = { ["128x128"] = { 32, 64 } }
-- auto split K (H100, Gemma 3 1B 512-token prefill, per shape: docs/BENCHMARKS.md): splitting helps where
-- the tiles leave the GPU idle (k/v projections, 32 tiles: 1.86 -> 1.33 ms in 4 parts) and where the K loop is
-- long (down projection, 108 slices: 4.88 -> 4.29 ms in 4 parts), and costs elsewhere (the parts' f32 tiles
-- are written and read again; gate/up in 2 parts: 6.7 -> 9.8 ms). So: double the parts while the grid has
-- fewer than CM_FILL_GROUPS workgroups (each part keeping >= CM_MIN_SLICES slices) or a part has more than
-- CM_MAX_SLICES slices.
local CM_FILL_GROUPS, CM_MIN_SLICES, CM_MAX_SLICES = 128, 3, 32

-- gemm_cm's split-K buffers, shared by every gemm_cm node of the plan (they run one after another): the
-- partial tiles (f32, grown to the largest need) and the per-tile counters (zeroed_counters).
local function cm_splitk_buffers(ctx, part_count, tiles)
  if not ctx.cm_part or ctx.cm_part:numel() < part_count then
    ctx.cm_part = ctx.dev:tensor { dtype = "f32", shape = { part_count } }
    ctx.plan.owned[#ctx.plan.owned + 1] = ctx.cm_part
  end
  return ctx.cm_part, zeroed_counters(ctx, "gemm_cm_counter", tiles)
end

-- The device's cooperative-matrix shape {M, N, K} for gemm_cm, or false (cached in ctx.cm).
local function cm_shape(ctx)
  if ctx.cm == nil then
    local c = ctx.dev:caps()
    ctx.cm = (c.coopmat_nv and c.subgroup_size == 32 and c.coopmat_shape) or false
  end
  return ctx.cm
end

-- Why gemm_cm cannot take this linear, or nil when it can.
local function gemm_cm_refusal(ctx, qdef, wtype, x, K, b)
  if not cm_shape(ctx) then return "the device has no VK_NV_cooperative_matrix f16 tiles with 32-wide subgroups" end
  if qdef or wtype ~= "f16" then return ("its weight is %s, not f16"):format(qdef and "quantised" or wtype) end
  if x.etype ~= "f16" then return ("its activations are %s, not f16"):format(x.etype) end
  if K % 8 ~= 0 then return ("K = %d is not a multiple of 8"):format(K) end
  if b and b.etype ~= "f16" and b.etype ~= "f32" then return ("its bias is %s"):format(b.etype) end
  return nil
end

local function emit_gemm_cm(ctx, defs, b, T, N, K, push)
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local glu = push.wu ~= nil   -- DP_GLU: a second weight slice per step, a second staging tile, no split
  local multi = push.N1 ~= nil  -- DP_MULTI: N is the columns of all weights; each column tile reads one
  local tile = hints.gemm_cm_tile or "auto"
  local auto_tile = tile == "auto"
  if auto_tile then   -- 128 x 128 where it still gives one workgroup per SM or so, else 64 x 64
    tile = ceil_div(N, 128) * ceil_div(T, 128) >= 128 and "128x128" or "64x64"
  end
  local cm = ctx.cm
  local nw = glu and 2 or 1
  local bm, bn, sgm, sgn
  local function set_tile(t)
    tile = t
    bm, bn = t:match("(%d+)x(%d+)")
    bm, bn = tonumber(bm), tonumber(bn)
    local warp = CM_WARP[t] or { 32, 32 }
    sgm, sgn = bm // warp[1], bn // warp[2]
  end
  set_tile(tile)
  -- shared memory (gemm_cm.comp's header): the x and W slices, padded, and one staging tile per subgroup
  local function shared(k) return 2 * (bm + nw * bn) * (k + 8) + 4 * nw * sgm * sgn * cm[1] * cm[2] end
  local limit = ctx.dev:caps().max_shared_memory
  local bk = hints.gemm_cm_bk or 0
  if bk == 0 then   -- auto: 64 where it fits (on the H100, 512-token prefill: 15.6 ms against 17.9 at 128, 24.7 at 32)
    bk = shared(64) <= limit and 64 or 32
    -- but 32 for long K loops (then split in twice the parts): on the H100 Gemma 3 1B's down projection
    -- (K = 6912) took 3.70 ms per 512-token prefill against 4.09 at 64, while K = 1024 / 1152 lost at 32
    if K > 4096 then bk = 32 end
  elseif auto_tile and shared(bk) > limit then
    set_tile("64x64")   -- a K slice the user chose that the auto tile cannot hold (DP_GLU's 128 x 128)
  end
  -- (the last weight's columns need not fill whole tiles)
  if multi and (push.N % bn ~= 0 or (push.N2 > 0 and push.N1 % bn ~= 0)) then return false end
  if shared(bk) > limit then
    Graph.fail("hints gemm_cm_tile=%s gemm_cm_bk=%d need %d bytes of shared memory; the device has %d",
               tile, bk, shared(bk), limit)
  end
  defs = { table.unpack(defs) }
  defs[#defs + 1] = "DP_CM_M=" .. cm[1]
  defs[#defs + 1] = "DP_CM_N=" .. cm[2]
  defs[#defs + 1] = "DP_CM_K=" .. cm[3]
  -- split K where the tiles alone leave the GPU idle (each K slice is a memory round trip; gemm_cm.comp)
  local gx, gy = ceil_div(N, bn), ceil_div(T, bm)
  local slices = ceil_div(K, bk)
  local splits = hints.gemm_cm_splits or 0
  if glu then splits = 1 end
  if splits == 0 then
    splits = 1
    while splits < 16 and ((gx * gy * splits < CM_FILL_GROUPS and slices // (2 * splits) >= CM_MIN_SLICES)
                           or ceil_div(slices, splits) > CM_MAX_SLICES) do
      splits = splits * 2
    end
  end
  local k_split = ceil_div(slices, splits) * bk
  splits = ceil_div(K, k_split)    -- no empty split
  if splits > 1 then
    defs[#defs + 1] = "DP_SPLITK"
    push.part, push.counter = cm_splitk_buffers(ctx, gx * gy * splits * bm * bn, gx * gy)
    push.k_split = k_split
  end
  local k = ctx.kernel("matmul/gemm_cm.comp", ctx.defines(defs),
                       { WG = 32 * sgm * sgn, BM = bm, BN = bn, BK = bk, SGM = sgm, SGN = sgn })
  ctx.dispatch(k, gx, gy, splits, push)
  return true
end

-- y = x · Wᵀ (+ b) into node y. Float weights use the GEMV kernel at every T (W streamed once per 4 tokens:
-- on the H100 it beat the tiled GEMM for 32- and 512-token prompts, docs/BENCHMARKS.md); quantised weights
-- use GEMV up to 4 tokens and the tiled GEMM beyond. hint matmul=gemm|gemv forces one. An output type other
-- than the activations' (f32 logits) is a define.
-- Quantised W: the fused kernels (gemv_q / gemm_q decode blocks in registers, in the tensor's layout), or
-- with q_matmul=dequant_f16 the ordinary kernels on an f16 copy.
local function emit_linear(ctx, x, w, b, y)
  local K = x.bshape[#x.bshape]
  local N = y.bshape[#y.bshape]
  local T = numel(y.bshape) // N
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local wt, qdef, wtype = matrix_weight(ctx, w, hints, (y.attrs or {}).lm_head and q_matmul_head_mode(ctx, hints, w))
  local defs
  if qdef then
    if K % 16 ~= 0 then Graph.fail("plan: %s is %s with rows of %d elements (not a multiple of 16)", w.attrs.name, w.etype, K) end
    if b and b.etype ~= "f32" then Graph.fail("plan: bias of quantised %s must be f32, is %s", w.attrs.name, b.etype) end
    defs = { qdef, LAYOUT_DEFINE[M.layout_of(wt)] }
    if row_blocks(wt) == 0 and K % Q_BLOCK[w.etype] ~= 0 then
      Graph.fail("plan: %s is %s with rows of %d elements, not whole blocks", w.attrs.name, w.etype, K)
    end
  else
    defs = { ctx.weight_define(wtype, w.attrs.name) }
  end
  if b then defs[#defs + 1] = "DP_BIAS" end
  -- an f32 bias beside a weight of another float type (a quantised model's bias with the f16 copy of its
  -- weight, q_matmul=dequant_f16): the float kernels (gemv, gemm, gemm_cm) read it as f32
  if b and not qdef and b.etype == "f32" and wtype ~= "f32" then
    defs[#defs + 1] = "DP_BIAS_F32"
  end
  if y.etype ~= ctx.env.act then defs[#defs + 1] = "DP_OUT_" .. y.etype:upper() end
  local push = { x = ctx.t(x), w = wt, y = ctx.t(y), T = T, N = N, K = K, x_stride = x.row_stride or 0, y_stride = 0 }
  if b then push.bias = ctx.t(b) end
  if qdef then push.w_row_blocks = row_blocks(wt) end
  local mode = hints.matmul or "auto"
  local cm_no = gemm_cm_refusal(ctx, qdef, wtype, x, K, b)
  if mode == "coopmat" and cm_no then
    Graph.fail("hint matmul=coopmat: %s cannot use gemm_cm: %s", w.attrs.name, cm_no)
  end
  if mode == "coopmat" or (mode == "auto" and T > 4 and not cm_no) then
    emit_gemm_cm(ctx, defs, b, T, N, K, push)
  elseif mode == "gemv" or (mode == "auto" and (T <= 4 or not qdef)) then
    local tt = math.min(T, 4)
    local wg, rows, un = M.gemv_params(ctx, qdef ~= nil, tt, N, K, nil, (y.attrs or {}).lm_head)
    local file = qdef and "matmul/gemv_q.comp" or "matmul/gemv.comp"
    local spec = { WG = wg, ROWS = rows, TT = tt, UN = un }
    if qdef then
      local xdefs, xspec = M.gemv_q_x(ctx, K, tt, wg, 1, rows, (y.attrs or {}).lm_head and { N = N } or nil)
      for _, d in ipairs(xdefs) do defs[#defs + 1] = d end
      for key, v in pairs(xspec) do spec[key] = v end
    end
    local k = ctx.kernel(file, ctx.defines(defs), spec)
    local nb = ceil_div(N, rows)
    local gx = math.min(nb, WG_MAX_GROUPS)
    ctx.dispatch(k, gx, ceil_div(T, tt), ceil_div(nb, gx), push)
  else
    local file = qdef and "matmul/gemm_q.comp" or "matmul/gemm.comp"
    local tile = M.gemm_tile(ctx, T)
    tile.BK = qdef and 32 or 16
    local k = ctx.kernel(file, ctx.defines(defs), tile)
    ctx.dispatch(k, ceil_div(N, tile.BN), ceil_div(T, tile.BM), 1, push)
  end
end

R.linear = function(ctx, n)
  emit_linear(ctx, n.inputs[1], n.inputs[2], n.inputs[3], n)
end

-- Can a prefill-sized fused projection (T > 4: glu_linear, qkv_linear) of weights of `dtype` with rows of K
-- run on gemm_cm (DP_GLU, DP_MULTI)? The gate_up and qkv fusions ask (fusions.lua) before they fuse a prefill
-- pass: elsewhere the unfused linears are faster than the GEMV scheme at T > 4. dev, env: as plan.compile's.
function M.cm_prefill_ok(dev, env, dtype, K)
  if not dev then return false end
  local ctx = { dev = dev, env = env }
  local hints = env.hints and env.hints.values or {}
  local mm = hints.matmul or "auto"
  if mm ~= "auto" and mm ~= "coopmat" then return false end
  local wtype = dtype
  if Q_DEFINE[dtype] then
    if q_matmul_mode(ctx, hints) ~= "dequant_f16" then return false end
    wtype = "f16"
  end
  return cm_shape(ctx) and wtype == "f16" and env.act == "f16" and K % 8 == 0 or false
end

-- Whether fusions.lua's norm_qkv may give a qkv_linear of weights ws (graph nodes, no biases) the norm that
-- feeds it: a one-token pass whose projections go to gemv_multi (R.qkv_linear: float weights or their f16
-- copies), on a subgroup of 8 or more (gemv_multi.comp's DP_PRENORM).
function M.qkv_prenorm_ok(dev, env, ws)
  if not (dev and env) or env.T ~= 1 or (dev:caps().subgroup_size or 0) < 8 then return false end
  local ctx = { dev = dev, env = env }
  local hints = env.hints and env.hints.values or {}
  if hints.matmul == "gemm" then return false end
  for _, w in ipairs(ws) do
    local kd = M.kernel_dtype(ctx, w)
    if kd ~= "f16" and kd ~= "f32" and kd ~= "bf16" then return false end
  end
  return true
end

R.qkv_linear = function(ctx, n)
  local x = n.inputs[1]
  local outs, ws, bs = n.attrs.outputs, n.attrs.weights, n.attrs.biases
  local K = x.bshape[#x.bshape]
  local T = numel(n.bshape) // n.bshape[#n.bshape]
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local wts, qdef, wtype = {}, nil, nil
  for i, w in ipairs(ws) do wts[i], qdef, wtype = matrix_weight(ctx, w, hints) end
  -- Quantised blocks (no multi-weight quantised GEMV: the projections are independent dispatches, one
  -- dependency level all the same), or biases of another type than the f16 copies: one linear each.
  local bias_mismatch = false
  for _, b in ipairs(bs or {}) do bias_mismatch = bias_mismatch or b.etype ~= wtype end
  if T > 4 and not bs and not gemm_cm_refusal(ctx, qdef, wtype, x, K, nil) and (hints.matmul or "auto") ~= "gemv" then
    -- prefill: one gemm_cm over the concatenated columns (DP_MULTI), where the column tiles divide N and N1
    local N = {}
    for i, o in ipairs(outs) do N[i] = o.bshape[#o.bshape] end
    local last = outs[3] and 3 or 2
    local push = { x = ctx.t(x), T = T, K = K, x_stride = x.row_stride or 0, y_stride = 0,
                   w = wts[1], y = ctx.t(outs[1]), N = N[1], w1 = wts[2], y1 = ctx.t(outs[2]), N1 = N[2],
                   w2 = wts[last], y2 = ctx.t(outs[last]), N2 = outs[3] and N[3] or 0 }
    if emit_gemm_cm(ctx, { ctx.weight_define(wtype, ws[1].attrs.name), "DP_MULTI" }, nil, T,
                    N[1] + N[2] + (outs[3] and N[3] or 0), K, push) then
      return
    end
  end
  local pre = n.attrs.prenorm
  if pre and (qdef or bs or T ~= 1) then
    Graph.fail("plan: norm_qkv at %s needs the float q/k/v GEMV (gemv_multi) of a one-token pass", n.where)
  end
  if qdef or bias_mismatch or T > 4 then
    for i, o in ipairs(outs) do emit_linear(ctx, x, ws[i], bs and bs[i], o) end
    return
  end
  local defs = { ctx.weight_define(wtype, ws[1].attrs.name) }
  if bs then defs[#defs + 1] = "DP_BIAS" end
  local push = { x = ctx.t(x), T = T, K = K, x_stride = x.row_stride or 0 }
  if pre then prenorm_multi(ctx, n, defs, push, pre, pre.a, pre.w2, pre.sum, pre.w1) end
  local total = 0
  for i = 1, 3 do
    local j = math.min(i, #outs)   -- a pair repeats its last member with N2 = 0 (never read)
    local o = outs[j]
    local N = (i <= #outs) and o.bshape[#o.bshape] or 0
    push["w" .. (i - 1)], push["y" .. (i - 1)], push["N" .. (i - 1)] = wts[j], ctx.t(o), N
    if bs then push["b" .. (i - 1)] = ctx.t(bs[j]) end
    total = total + N
  end
  gemv_multi(ctx, defs, total, T, push)
end

-- for mlp.lua: gate+up of a prefill on the matrix units
return {
  gemm_cm_refusal = gemm_cm_refusal, emit_gemm_cm = emit_gemm_cm,
}
