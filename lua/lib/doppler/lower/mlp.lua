-- doppler.lower.mlp: the gated MLP. The activation alone (glu), gate and up in one pass with the activation
-- (glu_linear: gemv_multi, gemv_q, or gemm_cm for prefill) with the norm before it folded in, and the fused
-- MLP (glu_down: gate+up, the activation and down in one dispatch, adding into y with 64-bit atomics).
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local M, R = B.M, B.M.rules
local WG_MAX_GROUPS, NW_DEFINE, Q_DEFINE, LAYOUT_DEFINE = B.WG_MAX_GROUPS, B.NW_DEFINE, B.Q_DEFINE, B.LAYOUT_DEFINE
local ceil_div, groups_1d, numel, row_blocks = B.ceil_div, B.groups_1d, B.numel, B.row_blocks
local Cpu = require "doppler.lower.cpu"
local on_cpu, cpu_gemv = Cpu.on_cpu, Cpu.cpu_gemv
local Prep = require "doppler.lower.prepare"
local q_matmul_glu_mode, matrix_weight, down_columns = Prep.q_matmul_glu_mode, Prep.matrix_weight, Prep.down_columns
local Gemv = require "doppler.lower.gemv"
local prenorm_multi, gemv_multi = Gemv.prenorm_multi, Gemv.gemv_multi
local Linear = require "doppler.lower.linear"
local gemm_cm_refusal, emit_gemm_cm = Linear.gemm_cm_refusal, Linear.emit_gemm_cm

R.glu = function(ctx, n)
  local gate, up = n.inputs[1], n.inputs[2]
  local F = n.bshape[#n.bshape]
  local T = numel(n.bshape) // F
  local k = ctx.kernel("act/glu.comp", ctx.defines(), { WG = 256 })
  local gx, gy = groups_1d(T * F, 256)
  ctx.dispatch(k, gx, gy, 1, {
    gate = ctx.t(gate), up = ctx.t(up), y = ctx.t(n), n_tokens = T, F = F,
    gate_stride = gate.row_stride or F, up_stride = up.row_stride or F, kind = (n.attrs.kind == "silu") and 1 or 0,
  })
end

-- gemv_q with DP_GLU for glu_linear and glu_down: gate and up in quantised blocks decoded in the kernel (both
-- weights share type and layout), with prenorm (fusion norm_gate_up) the norm folded into the staging of x
-- (pre_in: its nodes a, w2, sum, w1), with o.down (fusion glu_down) the down projection in the same dispatch
-- (gemv_q.comp's DP_DOWN: o.down = { w = D's columns, define = their format's (none: f16), y = the sum, z = the
-- sum to zero }; o.wgs, o.rows its geometry) instead of writing h to o.y.
local function emit_glu_q(ctx, n, o)
  local x, wg, wu, tg, tu, N, K, T = o.x, o.wg, o.wu, o.tg, o.tu, o.N, o.K, o.T
  local ldef = LAYOUT_DEFINE[M.layout_of(tg)]
  if ldef ~= LAYOUT_DEFINE[M.layout_of(tu)] or row_blocks(tg) ~= row_blocks(tu) then
    Graph.fail("plan: %s and %s are stored differently (layout or padded rows)", wg.attrs.name, wu.attrs.name)
  end
  if K % 16 ~= 0 then Graph.fail("plan: %s is %s with rows of %d elements (not a multiple of 16)", wg.attrs.name, wg.etype, K) end
  local tt = math.min(T, 4)
  local wgs, rows, un = M.gemv_params(ctx, true, tt, N, K, 2)
  if o.down then wgs, rows = o.wgs, o.rows end
  local defs, spec = { o.qdef, "DP_GLU", ldef }, { WG = wgs, ROWS = rows, TT = tt, UN = un }
  local xdefs, xspec = M.gemv_q_x(ctx, K, tt, wgs, 2, rows)
  for _, d in ipairs(xdefs) do defs[#defs + 1] = d end
  for key, v in pairs(xspec) do spec[key] = v end
  local push = {
    x = ctx.t(x), w = tg, wu = tu, y = o.y, T = T, N = N, K = K, x_stride = x.row_stride or 0, y_stride = 0,
    w_row_blocks = row_blocks(tg), kind = o.kind,
  }
  local pre = o.pre
  if pre then
    -- fusion norm_gate_up: the norm in the staging (gemv_q.comp's DP_PRENORM); the rule checked the path
    local a, w2, sum, w1 = o.pre_in.a, o.pre_in.w2, o.pre_in.sum, o.pre_in.w1
    if #xdefs == 0 then Graph.fail("plan: norm_gate_up at %s needs int8 x (hint gemv_q_x)", n.where) end
    defs[#defs + 1] = "DP_PRENORM=" .. pre.kind
    defs[#defs + 1] = ctx.weight_define(w2.etype, w2.attrs.name)
    push.ra, push.nw2, push.r = ctx.t(a), ctx.t(w2), ctx.t(sum)
    push.nw1 = ctx.t(w1 or w2)
    push.eps1, push.off1 = pre.eps1 or 0, pre.offset1 or 0
    push.eps2, push.off2 = pre.eps, pre.offset or 0
  end
  if o.down then
    defs[#defs + 1] = "DP_DOWN"
    if o.down.define then defs[#defs + 1] = o.down.define end
    push.y, push.wd, push.yd, push.zd = nil, o.down.w, o.down.y, o.down.z
  end
  local k = ctx.kernel("matmul/gemv_q.comp", ctx.defines(defs), spec)
  local nb = ceil_div(N, rows)
  local gx = math.min(nb, WG_MAX_GROUPS)
  ctx.dispatch(k, gx, ceil_div(T, tt), ceil_div(nb, gx), push)
end

R.glu_linear = function(ctx, n)
  local x, wg, wu = n.inputs[1], n.inputs[2], n.inputs[3]
  local N, K = n.bshape[#n.bshape], x.bshape[#x.bshape]
  local T = numel(n.bshape) // N
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local mode = Q_DEFINE[wg.etype] and q_matmul_glu_mode(ctx, hints, wg, wu, T)
  local tg, qdef, wtype = matrix_weight(ctx, wg, hints, mode)
  local tu = matrix_weight(ctx, wu, hints, mode)
  local kind = (n.attrs.kind == "silu") and 1 or 0
  local pre = n.attrs.prenorm
  if pre and (T > 4 or (not qdef and (T ~= 1 or pre.kind ~= 2))) then
    Graph.fail("plan: norm_gate_up at %s needs gemv_q of a decode-sized pass, or Gemma's form on gemv_multi " ..
               "of a one-token pass", n.where)
  end
  if T > 4 and not gemm_cm_refusal(ctx, qdef, wtype, x, K, nil) and (hints.matmul or "auto") ~= "gemv" then
    -- prefill: both products on the matrix units, the activation in the epilogue (gemm_cm.comp, DP_GLU)
    emit_gemm_cm(ctx, { ctx.weight_define(wtype, wg.attrs.name), "DP_GLU" }, nil, T, N, K, {
      x = ctx.t(x), w = tg, wu = tu, y = ctx.t(n), T = T, N = N, K = K, x_stride = x.row_stride or 0, y_stride = 0,
      kind = kind,
    })
    return
  end
  if not qdef then
    local defs = { "DP_GLU", ctx.weight_define(wtype, wg.attrs.name) }
    local push = { x = ctx.t(x), wg = tg, wu = tu, y = ctx.t(n), T = T, N = N, K = K, x_stride = x.row_stride or 0,
                   kind = kind }
    if pre then prenorm_multi(ctx, n, defs, push, pre, n.inputs[4], n.inputs[5], n.inputs[6], n.inputs[7]) end
    gemv_multi(ctx, defs, N, T, push)
    return
  end
  -- Quantised blocks decoded in the kernel: gemv_q with DP_GLU (both weights share type and layout).
  local pre_in = pre and { a = n.inputs[4], w2 = n.inputs[5], sum = n.inputs[6], w1 = n.inputs[7] }
  emit_glu_q(ctx, n, { x = x, wg = wg, wu = wu, tg = tg, tu = tu, qdef = qdef, N = N, K = K, T = T, kind = kind,
                       pre = pre, pre_in = pre_in, y = ctx.t(n) })
end

-- Whether fusions.lua's norm_gate_up may give a glu_linear of weights wg, wu (graph nodes) the norm of form
-- `kind` (1 add_rmsnorm, 2 norm_add_norm) that feeds it: on a subgroup of 8 or more (both kernels reduce
-- per subgroup), a decode-sized pass whose pair goes (R.glu_linear's choices for this device and these hints)
--   to gemv_q with int8 x (its DP_PRENORM staging), quantised weights, either form;
--   to gemv_multi, float weights of one type, one token and Gemma's form (DP_PRENORM=2, as norm_qkv takes it:
--   that rule says why not Llama's).
function M.glu_prenorm_ok(dev, env, wg, wu, N, K, kind)
  if not (dev and env) or type(env.T) ~= "number" or env.T > 4 then return false end
  if (dev:caps().subgroup_size or 0) < 8 then return false end
  local ctx = { dev = dev, env = env }
  local hints = env.hints and env.hints.values or {}
  if hints.matmul == "gemm" then return false end
  if NW_DEFINE[wg.dtype] ~= nil then return env.T == 1 and kind == 2 and wg.dtype == wu.dtype end
  if not Q_DEFINE[wg.dtype] or wg.dtype ~= wu.dtype or K % 16 ~= 0 then return false end
  if q_matmul_glu_mode(ctx, hints, { etype = wg.dtype }, { etype = wu.dtype }, env.T) ~= "fused" then return false end
  local tt = math.min(env.T, 4)
  local ok, wgs, rows = pcall(M.gemv_params, ctx, true, tt, N, K, 2)
  if not ok then return false end
  local ok2, xdefs = pcall(M.gemv_q_x, ctx, K, tt, wgs, 2, rows)
  return ok2 and #xdefs > 0
end

-- ---- the fused MLP (fusion glu_down): gate+up, the activation and down in one dispatch -------------------
-- The fused MLP's workgroup and rows of h (hints glu_down_wg, glu_down_rows; 0 = the built-in choice): on a
-- GPU 32 rows and 8 lanes per row (256 invocations; glu_down_wg = 0 keeps 8 lanes per row for any rows); on a
-- CPU device gemv_q's CPU rule (8 rows of a subgroup's lanes). Why: every workgroup adds its share of y (K
-- values) with atomics, so fewer, larger workgroups add fewer times (in the probe on the H100, 8 rows per
-- workgroup took 21-38 us per layer against 15.5-24.6 at 32: docs/BENCHMARKS.md 34c), while gate+up wants 8
-- lanes per row (4 made both models' decode 1.2-1.3x slower, 34e). Of 32 and 64 rows, 32 was the faster for
-- Gemma 3 1B Q4_K_M (1.19-1.21 against 1.22-1.24 ms per token: 6912 / 64 = 108 workgroups leave SMs of the
-- H100 idle) and 64 for Llama 3.2 1B (1.03-1.04 against 1.04-1.06; 34f); doppler tune measures 16, 32, 64.
-- float = true: the fused MLP on float gate and up (fused/glu_down_float.comp), FLOAT_MLP_LANES lanes per row:
-- in the probe (recipes/bench/glu_down.lua --gate f16 --down f16, 36a) 32 rows and 16 lanes per row took 21.9
-- us per Gemma 3 1B layer against 24.2-25.0 at 8 lanes (32 or 64 rows), and 39.1 at Llama 3.2 1B's shape
-- against 43.0-46.7.
local FLOAT_MLP_LANES = 16
function M.glu_down_params(ctx, float)
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local wg, rows = hints.glu_down_wg or 0, hints.glu_down_rows or 0
  if on_cpu(ctx) and wg == 0 and rows == 0 then return cpu_gemv(ctx) end
  rows = rows ~= 0 and rows or 32
  return wg ~= 0 and wg or rows * (float and FLOAT_MLP_LANES or 8), rows
end

-- Whether fusions.lua's glu_down may fuse down (graph node wd, [K, N]) into the one-token glu_linear of wg, wu
-- (N x K): hint glu_down (auto: not on a CPU device, where nothing waits on a dispatch), int64 atomics, the
-- activations f16 (precision=f32 keeps the exact chain: D's f16 columns, where its blocks cannot be read by
-- columns, would round its weights, and the sum's order changes the f32 roundings), gate and up decoded
-- in their blocks (gemv_q) as the unfused pass would, D quantised or f16, the workgroups' rows dividing N
-- in blocks of 8, and with prenorm (the glu took its norm: norm_gate_up) int8 x; or float gate and up with
-- hint glu_down=on (M.glu_down_float_ok).
function M.glu_down_ok(dev, env, wg, wu, wd, N, K, prenorm)
  if not (dev and env) or env.T ~= 1 then return false end
  local hints = env.hints and env.hints.values or {}
  local mode = hints.glu_down or "auto"
  local caps = dev:caps()
  if mode == "off" or (mode == "auto" and caps.type == "cpu") or not caps.int64_atomics then return false end
  if env.act ~= "f16" or hints.matmul == "gemm" then return false end
  if wg.dtype ~= wu.dtype or K % 16 ~= 0 or (caps.subgroup_size or 0) < 8 then return false end
  if wd.shape[1] ~= K or wd.shape[2] ~= N then return false end
  local ctx = { dev = dev, env = env }
  if NW_DEFINE[wg.dtype] ~= nil then return mode == "on" and M.glu_down_float_ok(ctx, wd, N, K) end
  if not Q_DEFINE[wg.dtype] or not (Q_DEFINE[wd.dtype] or wd.dtype == "f16") then return false end
  if q_matmul_glu_mode(ctx, hints, { etype = wg.dtype }, { etype = wu.dtype }, 1) ~= "fused" then return false end
  local wgs, rows = M.glu_down_params(ctx)
  if rows % 8 ~= 0 or N % rows ~= 0 or wgs % rows ~= 0 or wgs > caps.max_wg_invocations then return false end
  local ok, xdefs = pcall(M.gemv_q_x, ctx, K, 1, wgs, 2, rows)
  return ok and (#xdefs > 0 or not prenorm)   -- the folded norm needs int8 x (gemv_q.comp's DP_PRENORM)
end

-- The float form (fused/glu_down_float.comp), with hint glu_down=on only (auto leaves float models unfused):
-- gate and up float weights of one type as the unfused pass reads them (gemv_multi), D f16 (its columns are
-- then its own values; a bf16 or f32 D would be rounded), with a folded norm only Gemma's form (norm_gate_up
-- takes no other on float weights), the geometry of glu_down_params(ctx, true) (rows a multiple of 8 dividing
-- N, lanes per row a power of two) and x, the partial sums and h in shared memory. Why not auto: on the H100
-- the fused kernel took as long as the two it replaces (Gemma 3 1B F16 0.680 against 0.674 ms per token,
-- Llama 3.2 1B F16 0.702 against 0.673) and decode was no faster (Gemma 1.43-1.56 ms p50 against 1.44-1.45,
-- varying between processes; Llama 1.407-1.412 against 1.343-1.347: docs/BENCHMARKS.md 36c), where the probe
-- had promised 1.1x; `doppler tune` measures it on float models.
function M.glu_down_float_ok(ctx, wd, N, K)
  local caps = ctx.dev:caps()
  if wd.dtype ~= "f16" then return false end
  local wgs, rows = M.glu_down_params(ctx, true)
  local lanes = wgs // rows
  if rows % 8 ~= 0 or N % rows ~= 0 or wgs % rows ~= 0 or lanes & (lanes - 1) ~= 0 then return false end
  if wgs > caps.max_wg_invocations or N // rows > WG_MAX_GROUPS then return false end
  return 4 * K + 8 * wgs + 4 * rows + wgs // 2 <= (caps.max_shared_memory or 0)
end

-- glu_down (fusions.lua): inputs x, wg, wu, wd and, with prenorm, a, w2, sum, w1 (as norm_gate_up's); the
-- output is the plan's fixed-point sum for this node (plan.lua), which its readers take with DP_A_FIX64.
R.glu_down = function(ctx, n)
  local x, wg, wu, wd = n.inputs[1], n.inputs[2], n.inputs[3], n.inputs[4]
  local N, K = wg.bshape[1], x.bshape[#x.bshape]
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local zero = ctx.plan.fix_zero and ctx.plan.fix_zero[n]
  if not zero then Graph.fail("plan: glu_down at %s has no sum to zero (plan.lua)", n.where) end
  local kind = (n.attrs.kind == "silu") and 1 or 0
  if not Q_DEFINE[wg.etype] then
    -- float gate and up: fused/glu_down_float.comp, D by its f16 columns
    local wgs, rows = M.glu_down_params(ctx, true)
    local cols = down_columns(ctx, wd, rows)
    local defs = { ctx.weight_define(wg.etype, wg.attrs.name) }
    local push = { x = ctx.t(x), wg = ctx.t(wg), wu = ctx.t(wu), wd = cols, yd = ctx.t(n), zd = zero, N = N,
                   kind = kind }
    if n.attrs.prenorm then prenorm_multi(ctx, n, defs, push, n.attrs.prenorm, n.inputs[5], n.inputs[6], n.inputs[7], n.inputs[8]) end
    local k = ctx.kernel("fused/glu_down_float.comp", ctx.defines(defs), { WG = wgs, ROWS = rows, UN = 2, KC = K })
    ctx.dispatch(k, N // rows, 1, 1, push)
    return
  end
  local tg, qdef = matrix_weight(ctx, wg, hints, "fused")
  local tu = matrix_weight(ctx, wu, hints, "fused")
  local wgs, rows = M.glu_down_params(ctx)
  local pre_in = n.attrs.prenorm and { a = n.inputs[5], w2 = n.inputs[6], sum = n.inputs[7], w1 = n.inputs[8] }
  local cols, cdef = down_columns(ctx, wd, rows)
  emit_glu_q(ctx, n, { x = x, wg = wg, wu = wu, tg = tg, tu = tu, qdef = qdef, N = N, K = K, T = 1,
                       kind = kind, pre = n.attrs.prenorm, pre_in = pre_in,
                       wgs = wgs, rows = rows, down = { w = cols, y = ctx.t(n), z = zero, define = cdef } })
end
