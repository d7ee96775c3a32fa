-- doppler.lower.prepare: the form a quantised weight takes in the matrix kernels (hint q_matmul and its
-- per-weight forms: its blocks, or an f16 copy), and the weight preparations made at compile time (those f16
-- copies, the fused MLP's down projection by columns), recorded once per plan and run by M.finish.
local clock = require("doppler").clock
local B = require "doppler.lower.base"
local M = B.M
local Q_DEFINE, LAYOUT_DEFINE, groups_1d, row_blocks = B.Q_DEFINE, B.LAYOUT_DEFINE, B.groups_1d, B.row_blocks

-- Weight preparations made at compile time (f16 copies, down's columns) are recorded into one recorder per
-- plan and run once when its lowering ends (M.finish), not each on a recorder and a submit of its own: one
-- submit and wait per weight took ~0.12 s of Gemma 3 1B Q4_K_M's prompt plan on the H100 (docs/BENCHMARKS.md
-- 39a), and in one recording the copies of different weights run side by side. Until M.finish they are
-- pending in ctx.prep; the caches every plan shares take them only once they are made, so a plan whose
-- lowering fails leaves no unmade tensor behind.
local function prep_of(ctx)
  if not ctx.prep then ctx.prep = { rec = ctx.dev:recorder(), f16 = {}, cols = {}, alloc_s = 0 } end
  return ctx.prep
end

-- A device tensor for a preparation's result, its allocation timed (compile.lua reports prepare_alloc_s).
local function prep_tensor(ctx, desc)
  local prep, t0 = prep_of(ctx), clock()
  local t = ctx.dev:tensor(desc)
  prep.alloc_s = prep.alloc_s + (clock() - t0)
  ctx.plan.owned[#ctx.plan.owned + 1] = t
  return t
end

-- The f16 copy of a quantised weight for q_matmul=dequant_f16: made once per weight tensor (dequant.comp,
-- a weight preparation) and shared by every plan and linear that reads the weight; it lives as long as the
-- weight does (weak keys).
local f16_copies = setmetatable({}, { __mode = "k" })
local function dequant_f16(ctx, w)
  local wt = ctx.t(w)
  local t = f16_copies[wt] or (ctx.prep and ctx.prep.f16[wt])
  if t then return t end
  local N, K = w.bshape[1], w.bshape[2]
  t = prep_tensor(ctx, { dtype = "f16", shape = { N, K } })
  local ldef = LAYOUT_DEFINE[M.layout_of(wt)]
  local k = ctx.kernel("quant/dequant.comp", { Q_DEFINE[w.etype], ldef }, { WG = 256 })
  local gx, gy = groups_1d(N * K // 8, 256)
  local prep = prep_of(ctx)
  prep.rec:dispatch(k, { gx, gy, 1 }, { w = wt, y = t, n = N * K, K = K, row_blocks = row_blocks(wt) })
  prep.f16[wt] = t
  return t
end

-- q_matmul=auto: the f16 copy where memory is plentiful (measured faster on the H100), fused blocks
-- where it is not (a quantised model must still fit lavapipe's 2 GiB).
local function q_matmul_mode(ctx, hints)
  local mode = hints.q_matmul or "auto"
  if mode ~= "auto" then return mode end
  -- precision=f32 (f32 activations) must see the exact dequantised weights: an f16 copy would round
  -- them (on the H100 that moved llama-q's logits by 0.028, past the 1e-2 bound of the f32 mode).
  if ctx.env.act == "f32" then return "fused" end
  ctx.big_memory = ctx.big_memory or (ctx.dev:caps().device_local_bytes >= (16 << 30) and "yes" or "no")
  return ctx.big_memory == "yes" and "dequant_f16" or "fused"
end

-- A weight with a q_matmul hint of its own (`key`): that hint's value, or under auto q_matmul's, and whether
-- auto may keep the weight in blocks anyway: where q_matmul is itself auto and resolves to the f16 copies,
-- on a device with accelerated packed dot products (the blocks then go through int8 x, M.gemv_q_x).
local function own_q_matmul(ctx, hints, key)
  local mode = hints[key] or "auto"
  if mode ~= "auto" then return mode, false end
  local base = q_matmul_mode(ctx, hints)
  return base, base == "dequant_f16" and (hints.q_matmul or "auto") == "auto" and ctx.dev:caps().integer_dot_fast
end

-- The LM head's weight (the fused head, and the linear doppler.session marks attrs.lm_head): hint
-- q_matmul_head; auto keeps a Q8_0 head, and a Q6_K head stored flat, in blocks where own_q_matmul allows.
-- Why: that head reads half the bytes of its f16 copy and, on int8 x, is no longer bound by its instructions
-- (H100, Gemma 3 1B's 262,144 x 1152 Q8_0 head: 0.19 ms per token against the copy's 0.23, docs/BENCHMARKS.md
-- 18b and 20b; flat 0.14), and the copy (604 MB there) is not made. A Q6_K head (Llama 3's) read row_wise
-- takes 16-bit loads and stayed slower than its copy (0.21 against 0.19); flat (q_layout's auto on such a
-- device) it took 0.173 against the copy's 0.186 (21f): kept in blocks there (21i).
local function q_matmul_head_mode(ctx, hints, w)
  local mode, may_keep = own_q_matmul(ctx, hints, "q_matmul_head")
  local blocks = w.etype == "q8_0" or (w.etype == "q6_k" and M.layout_of(ctx.t(w)) == "flat")
  return (may_keep and blocks) and "fused" or mode
end

-- gate+up in one pass (R.glu_linear) with `T` tokens, weights wg and wu: hint q_matmul_glu; auto reads the
-- blocks at decode (T <= 4) of a pair of one block type where own_q_matmul allows (gemv_q, DP_GLU), and
-- prefill keeps the copies (gemm_cm). Why: on the H100 that pass beat the copies' gemv_multi (Llama 3.2 1B
-- Q4_K_M 0.31 against 0.41 ms per token, Gemma 3 1B 0.35 against 0.37; docs/BENCHMARKS.md 18h and 20c),
-- while the other fused GEMVs stayed slower than their copies.
local function q_matmul_glu_mode(ctx, hints, wg, wu, T)
  local mode, may_keep = own_q_matmul(ctx, hints, "q_matmul_glu")
  return (may_keep and T <= 4 and wg.etype == wu.etype) and "fused" or mode
end

M.q_matmul_head_mode, M.q_matmul_glu_mode = q_matmul_head_mode, q_matmul_glu_mode   -- tests check the rules

-- The dtype a linear's weight has in the matrix kernels: a quantised weight that q_matmul turns into its f16
-- copy is f16 there. The fusion rules that want one weight type per kernel (fusions.lua: qkv, gate_up)
-- compare these, so that projections of different block types (Q4_K_M's v takes more bits than q and k in
-- some layers) fuse on their copies. Without a device (fusions applied to a bare graph) the dtype itself.
function M.kernel_dtype(ctx, w)
  if not (Q_DEFINE[w.dtype] and ctx.dev and ctx.env) then return w.dtype end
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  return q_matmul_mode(ctx, hints) == "dequant_f16" and "f16" or w.dtype
end

-- A linear's weight as the matrix kernels see it: (tensor, quant define or nil, weight dtype). With
-- q_matmul=dequant_f16 a quantised weight becomes its f16 copy, so it takes the float kernels (and fusions).
-- mode: the q_matmul value for this weight where it has its own (q_matmul_head_mode, q_matmul_glu_mode).
local function matrix_weight(ctx, w, hints, mode)
  local qdef = Q_DEFINE[w.etype]
  mode = qdef and (mode or q_matmul_mode(ctx, hints))
  if mode == "dequant_f16" then return dequant_f16(ctx, w), nil, "f16" end
  return ctx.t(w), qdef, w.etype
end

-- D [K, N] by columns for the fused MLP, made once per weight tensor and format at compile time and shared by
-- every plan (weak keys), as dequant_f16's copies are. Returns the tensor and gemv_q.comp's define:
--   Q4_K or Q6_K blocks with rows of h per workgroup a multiple of 32 (and hint glu_down_cols auto): their
--     values exactly, codes and scales by blocks of 32 columns (quant/columns_q.comp; DP_DCOL_Q4 / _Q6);
--   otherwise the f16 values in blocks of 8 columns ([N / 8][K][8], copy/columns.comp, from the f16 copy).
-- Why the blocks: 24 (Q4_K) or 32 (Q6_K) bytes per 32 values against 64 in f16; in the probe
-- (recipes/bench/glu_down.lua, docs/BENCHMARKS.md 34b) the fused layer took ~15 % less with 4-bit columns.
local down_cols = setmetatable({}, { __mode = "k" })
local COL_Q = { q4_k = "DP_DCOL_Q4", q6_k = "DP_DCOL_Q6" }
local function down_columns(ctx, wd, rows)
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local w = ctx.t(wd)
  local K, N = wd.bshape[1], wd.bshape[2]
  local qdef = (hints.glu_down_cols or "auto") == "auto" and rows % 32 == 0 and COL_Q[wd.etype] or nil
  local key = qdef or "f16"
  local t = (down_cols[w] and down_cols[w][key]) or (ctx.prep and ctx.prep.cols[w] and ctx.prep.cols[w][key])
  if t then return t, qdef end
  -- a weight preparation (prep_of): the f16 copy it may read first is one too, ordered by the recorder
  local src = not qdef and Q_DEFINE[wd.etype] and dequant_f16(ctx, wd) or w
  local prep = prep_of(ctx)
  if qdef then
    t = prep_tensor(ctx, { dtype = "u8", shape = { (N // 32) * K * (wd.etype == "q4_k" and 24 or 32) } })
    local k = ctx.kernel("quant/columns_q.comp", { Q_DEFINE[wd.etype], LAYOUT_DEFINE[M.layout_of(w)] }, { WG = 256 })
    local gx, gy = groups_1d((N // 32) * K, 256)
    prep.rec:dispatch(k, { gx, gy, 1 }, { w = w, y = t, K = K, N = N, row_blocks = row_blocks(w) })
  else
    t = prep_tensor(ctx, { dtype = "f16", shape = { N // 8, K, 8 } })
    local k = ctx.kernel("copy/columns.comp", {}, { WG = 256 })
    local gx, gy = groups_1d(K * N // 8, 256)
    prep.rec:dispatch(k, { gx, gy, 1 }, { w = src, y = t, N = K, K = N })
  end
  prep.cols[w] = prep.cols[w] or {}
  prep.cols[w][key] = t
  return t, qdef
end

-- Runs the plan's weight preparations (prep_of), if it has any, and hands what they made to the caches every
-- plan shares. plan.compile calls it when the lowering rules are done. Returns the seconds their tensors'
-- allocations took (during the lowering).
function M.finish(ctx)
  local prep = ctx.prep
  if not prep then return 0 end
  ctx.prep = nil
  prep.rec:run()
  for w, t in pairs(prep.f16) do f16_copies[w] = t end
  for w, made in pairs(prep.cols) do
    down_cols[w] = down_cols[w] or {}
    for key, t in pairs(made) do down_cols[w][key] = t end
  end
  return prep.alloc_s
end

-- for the rule files that read quantised weights
return {
  dequant_f16 = dequant_f16, q_matmul_mode = q_matmul_mode, q_matmul_head_mode = q_matmul_head_mode,
  q_matmul_glu_mode = q_matmul_glu_mode, matrix_weight = matrix_weight, down_columns = down_columns,
}
