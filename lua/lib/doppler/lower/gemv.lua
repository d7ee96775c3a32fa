-- doppler.lower.gemv: the matrix-vector kernels' geometry, shared by every rule that runs them (linear, the
-- fused projections, the fused MLP, the LM head): workgroup size, rows per workgroup and loads in flight
-- (M.gemv_params, M.gemv_unroll), the quantised kernels' int8 x (M.gemv_q_x), the tiled GEMM's tile, and
-- gemv_multi (several weights of one x per pass) with the norm it may fold in.
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local M = B.M
local WG_MAX_GROUPS, NW_DEFINE, ceil_div, norm_layout = B.WG_MAX_GROUPS, B.NW_DEFINE, B.ceil_div, B.norm_layout
local a_defines = B.a_defines
local Cpu = require "doppler.lower.cpu"
local on_cpu, cpu_gemv = Cpu.on_cpu, Cpu.cpu_gemv

-- Loads in flight per GEMV thread, the kernels' spec constant UN (hints gemv_unroll for gemv.comp and
-- gemv_multi.comp, gemv_q_unroll for gemv_q.comp; 0 = the built-in choice, 1). The kernels hold the raw
-- loads of UN loop iterations for each of their tt tokens, so UN * tt is kept <= 4 (registers): UN applies
-- in full at T = 1 (decode), halved at T = 2, and not at all for 3 or 4 tokens per workgroup. Every UN
-- gives the same sums bit for bit (the kernels consume the loads in the UN = 1 order).
function M.gemv_unroll(ctx, quantised, tt)
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local un
  if quantised then un = hints.gemv_q_unroll or 0 else un = hints.gemv_unroll or 0 end
  -- built-in: 2 for float weights (H100, Gemma 3 1B F16 decode: 467 -> 482 tok/s; 4: 473), 1 for quantised
  -- ones (gemv_q lost at 2 and 4: 378 -> 355 -> 329 tok/s, its registers being the limit); docs/BENCHMARKS.md
  if un == 0 then un = quantised and 1 or 2 end
  return math.max(1, math.min(un, 4 // (tt or 1)))
end

-- gemv_q's built-in rows per workgroup for an N x K matrix and workgroups of wg: the most rows (8, 4, 2, 1)
-- that still leave at least Q_MIN_GROUPS workgroups and at most Q_MAX_ROUNDS units of 32 values per thread
-- (wg / rows threads share a row). Why: a thread waits on memory once per unit; few rows per workgroup
-- spread a small matrix over enough workgroups to keep every SM busy and a long row over more threads,
-- while many rows give a large matrix fewer, longer-lived workgroups. On the H100 (q_matmul=fused, Q4_K_M,
-- docs/BENCHMARKS.md 15c) no single value was best: Gemma 3 1B took 8 rows for gate+up (6912 x 1152:
-- 0.417 ms per token against 0.488 at 4) and 1 for down (1152 x 6912: 0.261 against 0.360), while
-- Llama 3.2 1B decoded faster with 4 for gate+up (8192 x 2048, 4 units per thread at 8) and 1 for down.
local Q_MIN_GROUPS, Q_MAX_ROUNDS = 768, 3
function M.gemv_q_rows(N, K, wg)
  for _, rows in ipairs { 8, 4, 2 } do
    if wg % rows == 0 and N // rows >= Q_MIN_GROUPS and ceil_div(ceil_div(K, 32), wg // rows) <= Q_MAX_ROUNDS then
      return rows
    end
  end
  return 1
end

-- The GEMV's workgroup size and rows per workgroup (hints gemv_wg, gemv_rows, gemv_q_wg, gemv_q_rows; 0 =
-- the built-in choice, which `doppler tune` may replace per device), and its UN for tt tokens per workgroup
-- (M.gemv_unroll), for an N x K matrix. One function, so that the fused LM head (R.lm_head) computes each row
-- exactly as the linear it replaces (it needs no UN: its loop is the UN = 1 loop, and every UN sums alike).
-- nw = 2 (gate and up, DP_GLU): a built-in workgroup of 256 invocations where that gives 8 rows (within
-- Q_MAX_ROUNDS units per thread) and 128 does not, and x then goes int8 (M.gemv_q_x: 8 rows x 2 weights
-- share each staging). Why: on the H100 Llama 3.2 1B's gate+up (8192 x 2048: 4 rows at 128, since 8 rows
-- would be 4 units per thread) took 0.386 ms per token with act and 0.311 at 256 invocations, 8 rows and q8x2
-- (docs/BENCHMARKS.md 18g, 18h); Gemma 3 1B's (K = 1152) already has 8 rows at 128.
-- On a CPU device (caps.type "cpu": lavapipe) neither rule applies: there a workgroup's invocations run one
-- SIMD vector of subgroup-size lanes after another with no memory latency to hide, and an idle lane costs
-- as much as a busy one, so the built-in is 8 rows with one vector of lanes each (workgroups of 8 x the
-- subgroup size). Why: the rules above give a row 32 to 128 lanes, and a row of the tests' tiny models
-- has 8 units (K = 256), so most lanes idled; on lavapipe (Gemma-shaped GGUF fixture, Q4_K_M, 8 tokens one
-- at a time) gemv_q took 575 ms with the GPU rules and 95 ms with this one (docs/BENCHMARKS.md 22-lvp).
-- head = true: the quantised LM head (fused/lm_head_q.comp, or the gemv_q it replaces): 128 invocations and 8
-- rows (16 threads per row) whatever the row length. Why: on the H100 Llama 3.2 1B's Q6_K head (128256 x 2048)
-- took 0.174 ms per token at 4 rows (the Q_MAX_ROUNDS rule: 2 units per thread) and 0.148 at 8 (4 units per
-- thread); Gemma 3 1B's (K = 1152) has 8 rows at 128 already, and 0.169 ms at 256 invocations (22b,
-- docs/BENCHMARKS.md; DOPPLER_KERNEL_STATS=1 gave the head 56 registers).
local HEAD_WG, HEAD_ROWS = 128, 8

-- The float GEMVs' built-in workgroup and rows (gemv.comp, fused/gemv_multi.comp, and fused/lm_head.comp,
-- which follows gemv): 128 invocations and 2 rows; on a CPU device gemv_q's CPU rule, for the same reason
-- (an idle lane costs as much as a busy one there). On lavapipe (gemma3-tiny, 40 tokens) o and down went
-- 2.45 -> 1.85 ms per token (docs/BENCHMARKS.md, session 16).
function M.gemv_float_default(ctx)
  if on_cpu(ctx) then return cpu_gemv(ctx) end
  return 128, 2
end

-- gemv.comp's linears other than the LM head (o, down) take one row per workgroup on a GPU. Why: on the H100,
-- beside the side prefetcher's workgroups, one row made decode 1.04x for Llama 3.2 1B Q4_K_M and 1.00-1.005x
-- for Gemma 3 1B Q4_K_M and both F16 models, measured in one call (docs/BENCHMARKS.md 31g); one row for
-- gemv_multi's q/k/v as well cost Gemma 3 1B 3 % (31g), and the float LM head at one row cost both F16 models
-- ~2.5 % (31e), so those keep gemv_float_default's two.
local LINEAR_ROWS_GPU = 1

-- The tiled GEMM's tile (matmul/gemm.comp, gemm_q.comp: BM tokens x BN outputs, TM x TN of them per
-- invocation, WG = (BM / TM) * (BN / TN)). GPUs: 64 x 64, 4 x 4 per invocation. A CPU device runs a workgroup
-- as vectors of 8 lanes one after another, so the rows of a tile past T cost as much as used ones, and each
-- shared-memory read feeds more FMAs at 4 x 8 or 8 x 8 per invocation: there 64 invocations, BM = 16, 32 or
-- 64 (the least that holds T, up to 64) and BN = 64. On lavapipe gemm_q took 700 -> 297 ms for a 24-token
-- prompt and 665 -> 441 ms for 56 tokens (the Gemma-shaped Q4_K_M fixture, docs/BENCHMARKS.md session 17).
-- Every tile sums each output over k in the same order, so all give the same bits (test_k_quant checks it).
function M.gemm_tile(ctx, T)
  if not on_cpu(ctx) then return { WG = 256, BM = 64, BN = 64, TM = 4, TN = 4 } end
  local bm = T <= 16 and 16 or T <= 32 and 32 or 64
  local tm = bm // 8
  return { WG = 64, BM = bm, BN = 64, TM = tm, TN = 8 }
end

function M.gemv_params(ctx, quantised, tt, N, K, nw, head)
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  if quantised then
    local wg, rows = hints.gemv_q_wg or 0, hints.gemv_q_rows or 0
    if wg == 0 and rows == 0 and on_cpu(ctx) then
      wg, rows = cpu_gemv(ctx)
    elseif wg == 0 and rows == 0 and head then
      wg, rows = HEAD_WG, HEAD_ROWS
    end
    if wg == 0 then
      wg = 128
      if nw == 2 and rows == 0 and M.gemv_q_rows(N, K, 128) < 8 and M.gemv_q_rows(N, K, 256) == 8 then
        -- a probe: an explicit x mode that does not fit at 256 is reported where the kernel is made, at 128
        local ok, xdefs = pcall(M.gemv_q_x, ctx, K, tt or 1, 256, 2, 8)
        if ok and #xdefs > 0 then wg = 256 end
      end
    end
    if rows == 0 then rows = M.gemv_q_rows(N, K, wg) end
    if wg % rows ~= 0 then Graph.fail("hints: gemv_q_wg=%d is not a multiple of gemv_q_rows=%d", wg, rows) end
    return wg, rows, M.gemv_unroll(ctx, true, tt)
  end
  local wg, rows = hints.gemv_wg or 0, hints.gemv_rows or 0
  local linear_rows = (head or on_cpu(ctx)) and 2 or LINEAR_ROWS_GPU   -- rows where only gemv_wg is hinted
  if wg == 0 and rows == 0 then
    wg, rows = M.gemv_float_default(ctx)
    if not head and not on_cpu(ctx) then rows = LINEAR_ROWS_GPU end
  end
  wg, rows = wg ~= 0 and wg or 128, rows ~= 0 and rows or linear_rows
  -- gemv.comp's shared memory is 4 * ROWS * TT * WG bytes (TT <= 4): at most 32 KiB
  if wg * rows > 2048 then Graph.fail("hints: gemv_wg=%d * gemv_rows=%d exceeds 2048 (shared memory)", wg, rows) end
  return wg, rows, M.gemv_unroll(ctx, false, tt)
end

-- gemv_q's activations (hint gemv_q_x): as they are ("act"), or quantised by each workgroup per 16 values
-- and met with packed integer dot products (DP_XQ8, shaders/include/dp_quant_x8.glsl): "q8" one int8 plane
-- (x within max|x| / 254 of each group: llama.cpp's q8_1 scheme, which moved llama-q's logits by 0.70,
-- past the 0.5 bound of tests/lua/test_gguf_fixtures.lua), "q8x2" two planes (within max|x| / 64516: finer
-- than f16 activations).
-- auto: q8x2 where the device's packed dot products are accelerated (caps.integer_dot_fast) and the workgroup
-- takes at least XQ_MIN_ROW_DOTS row dot products (rows x nw) per staging of x; act elsewhere. Why: every
-- workgroup quantises all K values of x before its first dot product, so the staging pays only where many
-- rows share it. On the H100 (docs/BENCHMARKS.md 16c, Gemma 3 1B Q4_K_M, GPU ms per token) q8x2 took gate+up
-- (8 rows x 2 weights per workgroup, K = 1152) from 0.418 to 0.336, but down (1 row, K = 6912) from 0.261 to
-- 0.661 and q (1 row) from 0.137 to 0.154. `doppler tune` measures auto, act and q8x2
-- (one value for the whole model).
-- The LM head (`head`: the linear that makes the logits, attrs.lm_head, which doppler.session sets) follows
-- the fused LM head in both of its forms: fused/lm_head_q.comp stages x once per workgroup and then loops
-- over hundreds of rows (Gemma 3 1B: 256), so auto gives it q8x2 wherever the packed dot products are
-- accelerated and its shared memory (M.lm_head_q_shared) fits; the plain gemv_q that it replaces (top-k
-- draws, fusion lm_head off) takes the same mode, so that the two stay bit for bit alike. Why: with x as it
-- is the quantised head is bound by its instructions (~5 per weight), not its bytes: on the H100 Gemma 3 1B's
-- Q8_0 head (320 MB) took 0.405 ms per token, 0.8 TB/s (docs/BENCHMARKS.md 18b).
-- Returns the defines to add and the spec constants for `tt` tokens per workgroup of `wg` invocations,
-- `rows` rows and `nw` weights (2 with DP_GLU).
local XQ_PLANES = { q8 = 1, q8x2 = 2 }
local XQ_MIN_ROW_DOTS = 16
function M.gemv_q_x(ctx, K, tt, wg, nw, rows, head)
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local mode = hints.gemv_q_x or "auto"
  local c = ctx.dev:caps()
  local xk = ceil_div(K, 16) * 16
  local function need(planes) return (16 * planes + 16) * tt * xk // 16 + 4 * nw * tt * wg end
  if mode == "auto" then
    local many = rows * nw >= XQ_MIN_ROW_DOTS
    if head then many = M.lm_head_q_shared(ctx, head.N, K, 2) <= c.max_shared_memory end
    mode = (c.integer_dot_fast and many and need(2) <= c.max_shared_memory) and "q8x2" or "act"
  end
  local planes = XQ_PLANES[mode]
  if not planes then return {}, {} end
  if not c.integer_dot then
    Graph.fail("hint gemv_q_x=%s: %s has no integer dot products (Vulkan 1.3 shaderIntegerDotProduct)", mode, c.name)
  end
  if need(planes) > c.max_shared_memory then
    Graph.fail("hint gemv_q_x=%s: K = %d with %d tokens per workgroup needs %d bytes of shared memory, %s has %d",
               mode, K, tt, need(planes), c.name, c.max_shared_memory)
  end
  return { "DP_XQ8", "DP_XQ8_PLANES=" .. planes }, { XK = xk }
end

-- fused/lm_head_q.comp's shared memory in bytes for an N x K head with `planes` int8 planes of x (0: x as it
-- is): the row (4 K), four arrays of WG words (the norm's, the rows' sums, the best values and indices) and
-- the staged groups.
function M.lm_head_q_shared(ctx, N, K, planes)
  local gw = M.gemv_params(ctx, true, nil, N, K, nil, true)
  local wg = math.max(gw, norm_layout(K, 1))
  return 4 * K + 16 * wg + (planes > 0 and (16 * planes + 16) * ceil_div(K, 16) or 0)
end

-- Fused projections (fusions.lua: gate_up, qkv): fused/gemv_multi.comp, the GEMV scheme of linear with
-- several weights per pass. glu_linear: y = act(x·Wgᵀ) * (x·Wuᵀ); qkv_linear: two or three linears of one
-- x, each into its own output (the node itself is the first; the others are fused_output nodes).
-- Gemma's norm (norm_add_norm) computed by gemv_multi for the projections it feeds (fusions norm_qkv and, on
-- float gate+up, norm_gate_up; gemv_multi.comp's DP_PRENORM=2): its defines and push fields. a is the branch
-- output, w2 / w1 the norm weights, sum the residual stream the pass writes; pre the node's prenorm attributes.
local function prenorm_multi(ctx, n, defs, push, pre, a, w2, sum, w1)
  local nwd = NW_DEFINE[w2.etype]
  if nwd == nil then Graph.fail("%s at %s: the norm weight %s has dtype %s", n.op, n.where, w2.attrs.name, tostring(w2.etype)) end
  if pre.kind ~= 2 then Graph.fail("plan: %s at %s takes norm_add_norm's form only on gemv_multi", n.op, n.where) end
  defs[#defs + 1] = "DP_PRENORM=2"
  if nwd then defs[#defs + 1] = nwd end
  a_defines(a, defs)
  push.ra, push.nw2, push.r, push.nw1 = ctx.t(a), ctx.t(w2), ctx.t(sum), ctx.t(w1)
  push.eps1, push.off1 = pre.eps1 or 0, pre.offset1 or 0
  push.eps2, push.off2 = pre.eps, pre.offset or 0
end

local function gemv_multi(ctx, defs, rows_total, T, push)
  local tt = math.min(T, 4)
  local wg, rows = M.gemv_float_default(ctx)   -- not the gemv_wg / gemv_rows hints: the tuner times them alone
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  if (hints.gemv_multi_rows or 0) ~= 0 then rows = hints.gemv_multi_rows end
  local k = ctx.kernel("fused/gemv_multi.comp", ctx.defines(defs),
                       { WG = wg, ROWS = rows, TT = tt, UN = M.gemv_unroll(ctx, false, tt) })
  local nb = ceil_div(rows_total, rows)
  local gx = math.min(nb, WG_MAX_GROUPS)
  ctx.dispatch(k, gx, ceil_div(T, tt), ceil_div(nb, gx), push)
end

-- for the fused projections (linear.lua) and the float MLP (mlp.lua)
return {
  prenorm_multi = prenorm_multi, gemv_multi = gemv_multi,
}
