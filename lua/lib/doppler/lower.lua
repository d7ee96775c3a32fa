-- doppler.lower: one rule per op, turning a planned node into kernel dispatches. The kernel
-- contracts (push members, dispatch shape, defines) are in each shader's header comment; the
-- op semantics in docs/OPS.md. A rule gets the context (kernels, dispatch, tensors, types) and
-- the node, whose inputs already have device tensors (ctx.t(node)).
local Graph = require "doppler.graph"
local clock = require("doppler").clock

local M = { rules = {}, strided = {} }
local R = M.rules

-- Inputs (by position) each op's kernel reads with a row stride (node.row_stride, set by the plan
-- for slices of a fused projection): linear's x, rope's x, attention's q/k/v, glu's gate/up; the element-wise
-- ops (add, mul, scale, gelu_tanh, silu: set with their rule below) both inputs.
M.strided = { linear = { true }, rope = { true }, attention = { true, true, true }, glu = { true, true },
              glu_linear = { true }, qkv_linear = { true },
              rope_kv = { true, true, true } }   -- fuse2: q, k, v of rope_kv

local WG_MAX_GROUPS = 65535
-- A norm weight's type in the kernels that read one beside weights of another type (fused/lm_head*.comp,
-- gemv_multi.comp's DP_PRENORM): DP_NW_F16 | DP_NW_BF16, false for f32 (the default).
local NW_DEFINE = { f32 = false, f16 = "DP_NW_F16", bf16 = "DP_NW_BF16" }

local function ceil_div(a, b) return (a + b - 1) // b end

-- Groups for `count` invocations in workgroups of `wg`: x up to 65535, the rest in y.
local function groups_1d(count, wg)
  local g = math.max(1, ceil_div(count, wg))
  return math.min(g, WG_MAX_GROUPS), ceil_div(g, WG_MAX_GROUPS), 1
end
M.groups_1d = groups_1d

local function pow2_at_least(n, lo, hi)
  local p = lo
  while p < n and p < hi do p = p * 2 end
  return p
end

-- A u32 buffer of at least `count` zeros for kernels whose last workgroup merges and then resets what it
-- used: attention_decode's merge (one per token and kv head) and gemm_cm's split K (one per tile). Zero
-- between dispatches, so one buffer per kind serves every node and every plan. It comes from env.constants
-- (the session's tables, uploaded once per session: f32 zeros are u32 zeros), so compiling a plan costs no
-- upload submit; an env without constants gets its own zeroed buffer. Cached in ctx[field], a power of two.
local function zeroed_counters(ctx, field, count)
  local size = pow2_at_least(count, 64, 1 << 30)
  if ctx[field] and ctx[field]:numel() >= size then return ctx[field] end
  local zeros = {}
  for i = 1, size do zeros[i] = 0 end
  local t = ctx.env.constants and ctx.env.constants("doppler." .. field .. "." .. size, zeros)
  if not t then
    t = ctx.dev:tensor { dtype = "u32", shape = { size } }
    t:upload(zeros)
    ctx.plan.owned[#ctx.plan.owned + 1] = t
  end
  ctx[field] = t
  return t
end

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

local ACT_DEFINE = { f16 = "DP_ACT_F16", f32 = nil }
local W_DEFINE = { f32 = "DP_W_F32", f16 = "DP_W_F16", bf16 = "DP_W_BF16" }
-- Quantised weight types with GPU kernels (shaders/include/dp_quant.glsl): dtype -> define.
local Q_DEFINE = {
  q8_0 = "DP_Q_Q8_0", q4_0 = "DP_Q_Q4_0", q4_1 = "DP_Q_Q4_1", q5_0 = "DP_Q_Q5_0", q5_1 = "DP_Q_Q5_1",
  q4_k = "DP_Q_Q4_K", q5_k = "DP_Q_Q5_K", q6_k = "DP_Q_Q6_K",
}
M.quant_types = Q_DEFINE

-- True for a ggml block type the quantised kernels decode.
function M.is_quant(dtype) return Q_DEFINE[dtype] ~= nil end

-- Storage layouts of quantised weights (core/quant_layout.h, docs/QUANTIZATION.md "Weight layouts"): the
-- define each kernel that reads blocks takes. A device tensor's layout is recorded here when doppler.weights
-- uploads it repacked (keyed by the tensor object, weakly: the entry goes with the tensor); absent = row_wise.
local LAYOUT_DEFINE = { column_wise = "DP_LAYOUT_COL", flat = "DP_LAYOUT_FLAT" }
local weight_layouts = setmetatable({}, { __mode = "k" })
function M.set_layout(t, layout)
  if layout ~= "row_wise" and not LAYOUT_DEFINE[layout] then error("unknown quantised layout " .. tostring(layout), 2) end
  weight_layouts[t] = LAYOUT_DEFINE[layout] and layout or nil
end
function M.layout_of(t) return weight_layouts[t] or "row_wise" end

-- Quantised weights whose rows the file pads to whole blocks (doppler convert --pad-k, docs/QUANTIZATION.md):
-- the device tensor holds the stored rows [.., Kpad] and stands for the logical [.., K]. doppler.weights
-- records K here (weak keys, as layouts); the kernels get the row stride in blocks (w_row_blocks / row_blocks,
-- 0 for every unpadded tensor) and read only the first K elements of each row.
local Q_BLOCK = { q8_0 = 32, q4_0 = 32, q4_1 = 32, q5_0 = 32, q5_1 = 32, q4_k = 256, q5_k = 256, q6_k = 256 }
M.Q_BLOCK = Q_BLOCK   -- values per block of each quantised type (the bench scripts and tests pad rows by it)
local padded_cols = setmetatable({}, { __mode = "k" })
function M.set_padded(t, cols)
  local s = t:shape()
  local q = Q_BLOCK[t:dtype()]
  if not q or cols < 1 or cols > s[#s] or s[#s] % q ~= 0 then
    error(("set_padded: a %s tensor %s cannot hold rows of %s"):format(t:dtype(), table.concat(s, "x"), tostring(cols)), 2)
  end
  padded_cols[t] = cols ~= s[#s] and cols or nil
end
-- The shape the weight stands for (the device tensor's, unless its rows are padded).
function M.logical_shape(t)
  local s = t:shape()
  if padded_cols[t] then s[#s] = padded_cols[t] end
  return s
end
-- Blocks from one row to the next of a padded tensor; 0 (the kernels' "K / QK") otherwise.
local function row_blocks(t)
  if not padded_cols[t] then return 0 end
  local s = t:shape()
  return s[#s] // Q_BLOCK[t:dtype()]
end
M.row_blocks = row_blocks

-- The side prefetcher for a pass (gpu/prefetch.h): dev:recorder's options, or nil. Decode-sized passes only: a
-- prefill pass's matrix kernels are bound by arithmetic, and on the H100 the side kernel beside them slowed a
-- 512-token prefill by 15 % (docs/BENCHMARKS.md, 27e). auto: where the device has a second compute family.
function M.side_prefetch(dev, env, T)
  local hints = env.hints and env.hints.values or {}
  local mode = hints.side_prefetch or "auto"
  if mode == "off" or T > 4 then return nil end
  local caps = dev:caps()
  if mode == "auto" and (not caps.side_queue or caps.type == "cpu") then return nil end
  local function given(name) local v = hints[name] or 0; return v > 0 and v or nil end
  -- prefetch_lead 0: 3 stages, which on Gemma 3 1B Q4_K_M moves the fused MLP's reads to the attention before o
  -- and q/k/v's to the attention of the layer before (H100: 1.02x, docs/BENCHMARKS.md 43c); where a layer's
  -- weights are larger than prefetch_max_mb (F16 models, Llama's MLP) the schedule stays as at 1
  local skip = ({ off = 0, finished = 1, begun = 2 })[hints.prefetch_skip or "off"]
  return { prefetch = { groups = given("prefetch_groups"), wg = given("prefetch_wg"), max_mb = given("prefetch_max_mb"),
                        min_kb = given("prefetch_min_kb"), depth = given("prefetch_depth"),
                        light_lead = given("prefetch_lead") or 3, skip = skip } }
end

function M.context(dev, plan, env)
  local ctx = { dev = dev, plan = plan, env = env, dispatches = 0, kernels = {}, kernel_desc = {},
                profile_shapes = os.getenv("DOPPLER_PROFILE_SHAPES") == "1" }
  plan.kernel_log = {}   -- every dispatch's kernel, in order (tests check which kernels a fusion left)
  plan.kernel_specs = {} -- and what it was made from, { file, defines, constants } (tests check hints reach it)
  plan.kernel_groups = {} -- and its workgroup counts { gx, gy, gz } (tests check a split reaches the grid)

  function ctx.t(node) return plan.tensors[node] end

  -- defines for a kernel: the activation type plus extras
  function ctx.defines(extra, act)
    local d = {}
    local a = ACT_DEFINE[act or env.act]
    if a then d[#d + 1] = a end
    for _, e in ipairs(extra or {}) do d[#d + 1] = e end
    return d
  end

  function ctx.weight_define(dtype, what)
    local d = W_DEFINE[dtype]
    if not d then Graph.fail("plan: %s has dtype %s, which no float kernel reads", what, tostring(dtype)) end
    return d
  end

  function ctx.kernel(file, defines, constants)
    local key = file .. "|" .. table.concat(defines or {}, ",")
    local ck = {}
    for k, v in pairs(constants or {}) do ck[#ck + 1] = k .. "=" .. tostring(v) end
    table.sort(ck)
    key = key .. "|" .. table.concat(ck, ",")
    local k = ctx.kernels[key]
    if not k then
      k = dev:kernel { file = file, defines = defines, constants = constants }
      ctx.kernels[key] = k
      ctx.kernel_desc[k] = { file = file, defines = defines, constants = constants, key = key }
    end
    return k
  end

  -- DOPPLER_PROFILE_SHAPES=1: a matrix kernel (push members N or N0, and K) is profiled under
  -- "name@NxK" (a pipeline of its own per shape), so that --profile and the bench scripts split a
  -- kernel's GPU time by the shapes it runs at (which GEMV or GEMM costs what).
  local function by_shape(kernel, push)
    local n = push.N and push.N + (push.N1 or 0) + (push.N2 or 0)
              or (push.N0 and push.N0 + (push.N1 or 0) + (push.N2 or 0))
    local d = ctx.kernel_desc[kernel]
    if not (n and push.K and d) then return kernel end
    local label = ("%s@%dx%d"):format(d.file:match("([^/]+)%.comp$") or d.file, n, push.K)
    local key = d.key .. "|" .. label
    local k = ctx.kernels[key]
    if not k then
      k = dev:kernel { file = d.file, defines = d.defines, constants = d.constants, name = label }
      ctx.kernels[key] = k
    end
    return k
  end

  function ctx.dispatch(kernel, gx, gy, gz, push)
    local desc = ctx.kernel_desc[kernel]
    if ctx.profile_shapes then kernel = by_shape(kernel, push) end
    if plan.calls then
      -- loop mode (doppler.loop): the calls are recorded later, once per step of the chunk
      plan.calls[#plan.calls + 1] = { kernel = kernel, groups = { gx, gy, gz }, push = push }
    else
      plan.recorder:dispatch(kernel, { gx, gy, gz }, push)
    end
    ctx.dispatches = ctx.dispatches + 1
    plan.kernel_log[ctx.dispatches] = kernel
    plan.kernel_specs[ctx.dispatches] = desc
    plan.kernel_groups[ctx.dispatches] = { gx, gy, gz }
  end
  return ctx
end

-- Leaves and views record nothing.
for _, op in ipairs({ "input", "weight", "state", "constant", "view", "last_row", "slice", "fused_output", "topk_ids" }) do
  R[op] = function() end
end

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

-- Norm layout (norm_rows.glsl): about 4 elements per lane (8 to 256 lanes a row), and short rows (q/k
-- norms: a row per head) packed several to a workgroup of up to 256 invocations.
local function norm_layout(d, rows)
  local lanes = pow2_at_least(ceil_div(d, 4), 8, 256)
  local per = math.min(256 // lanes, pow2_at_least(rows, 1, 256))
  local groups = ceil_div(rows, per)
  return lanes * per, per, math.min(groups, WG_MAX_GROUPS), ceil_div(groups, WG_MAX_GROUPS)
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

R.rmsnorm = function(ctx, n)
  local x, w = n.inputs[1], n.inputs[2]
  local d = n.bshape[#n.bshape]
  local rows = numel(n.bshape) // d
  local wg, per, gx, gy = norm_layout(d, rows)
  local k = ctx.kernel("norm/rmsnorm.comp", ctx.defines { ctx.weight_define(w.etype, w.attrs.name) }, { WG = wg, ROWS = per })
  ctx.dispatch(k, gx, gy, 1, {
    x = ctx.t(x), w = ctx.t(w), y = ctx.t(n), rows = rows, n = d, eps = n.attrs.eps, w_offset = n.attrs.offset,
  })
end

-- The define a reader of a branch output `a` needs: DP_A_FIX64 where a is the fused MLP's fixed-point sum
-- (op glu_down, fusions.lua; dp_types.glsl). Appended to defs, which it returns.
local function a_defines(a, defs)
  if a.op == "glu_down" then defs[#defs + 1] = "DP_A_FIX64" end
  return defs
end

R.add_rmsnorm = function(ctx, n)
  local a, b, w, sum = n.inputs[1], n.inputs[2], n.inputs[3], n.inputs[4]
  if b.op == "glu_down" then Graph.fail("plan: add_rmsnorm at %s reads the fused MLP's sum as b", n.where) end
  local d = n.bshape[#n.bshape]
  local rows = numel(n.bshape) // d
  local wg, per, gx, gy = norm_layout(d, rows)
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
  local d = n.bshape[#n.bshape]
  local rows = numel(n.bshape) // d
  local wg, per, gx, gy = norm_layout(d, rows)
  local k = ctx.kernel("norm/norm_add_norm.comp", ctx.defines(a_defines(a, { ctx.weight_define(w1.etype, w1.attrs.name) })),
                       { WG = wg, ROWS = per })
  ctx.dispatch(k, gx, gy, 1, {
    x = ctx.t(x), a = ctx.t(a), w1 = ctx.t(w1), w2 = ctx.t(w2), y = ctx.t(sum), h = ctx.t(n),
    rows = rows, n = d, eps1 = n.attrs.eps1, w_offset1 = n.attrs.offset1, eps2 = n.attrs.eps, w_offset2 = n.attrs.offset,
  })
end

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
local CPU_ROWS, HEAD_WG, HEAD_ROWS = 8, 128, 8

-- Is the device a CPU (caps.type "cpu": lavapipe)? Its kernel defaults differ (docs/ARCHITECTURE.md).
local function on_cpu(ctx) return ctx.dev:caps().type == "cpu" end

-- llvmpipe (lavapipe) ends every loop of an invocation once the loops of that invocation have run 65535
-- iterations together (Mesa's gallivm, LP_MAX_TGSI_LOOP_ITERATIONS: one counter per invocation, decremented at
-- every loop's back edge and never reset), and the kernel then goes on with whatever its sums hold: no error.
-- A kernel whose invocations loop over work that grows with the model must bound it on a CPU device: its
-- invocations may run CPU_LOOP_BUDGET (a quarter of the limit) loop iterations by an estimate per kernel, and
-- cpu_loop_blocks(per) is how many units of `per` estimated iterations that allows (at least 1). The fused LM
-- head counts one per weight element an invocation reads (`elems` per row block): on lavapipe with the head in
-- one workgroup (8 lanes per row) the f16 head (K = 640: 80 elements per row block) went wrong from row 10,528
-- on (~105,000 elements per invocation) and the Q8_0 head (K = 512) from row 11,456 (~92,000), so the bound
-- is ~5x below them (tests/lua/test_lm_head_fusion.lua runs heads past the old limit).
local CPU_LOOP_BUDGET = 16384
function M.cpu_loop_blocks(elems)
  return math.max(1, CPU_LOOP_BUDGET // math.max(1, elems))
end

-- The attention kernels' keys per invocation on a CPU device, by the same budget: an invocation's loops run
-- ~5 + D / LANES / 8 iterations per key in attention_prefill.comp (its innermost loops unrolled on every
-- device) and ~5 + D / LK in attention_decode.comp (f16 caches on lavapipe through lower's auto variants:
-- the prefill kernel went wrong past ~8,000 keys at D = 256 and ~12,000 at D = 64, ~900 and ~2,500 with those
-- loops rolled; the decode kernel with one chunk past ~2,200 and ~6,000; test_attention_long runs both past
-- the old limits). So on a CPU device attention_decode takes chunks of at most cpu_decode_keys keys, and a
-- prefill whose queries may see more than cpu_prefill_keys keys goes to attention_decode too (its chunks
-- split the keys; the prefill kernel walks all of a row's keys in one invocation).
-- The basic kernel (attention.comp: a workgroup of 128 per (token, q head), a key per invocation and block)
-- runs ~1 + 2 D / 128 per key: it went wrong past ~14,000 keys at D = 256.
function M.cpu_prefill_keys(D, lanes) return M.cpu_loop_blocks(5 + D // lanes // 8) end
function M.cpu_decode_keys(D, lk) return M.cpu_loop_blocks(5 + D // lk) end
function M.cpu_basic_keys(D) return M.cpu_loop_blocks(1 + 2 * D // 128) end

-- Every GEMV's workgroup and rows on a CPU device: CPU_ROWS rows of one subgroup-wide vector of lanes each.
local function cpu_gemv(ctx) return CPU_ROWS * math.max(1, ctx.dev:caps().subgroup_size or 1), CPU_ROWS end

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

-- y = x · Wᵀ (+ b). Float weights use the GEMV kernel at every T (W streamed once per 4 tokens: on the
-- H100 it beat the tiled GEMM for 32- and 512-token prompts, docs/BENCHMARKS.md); quantised weights use
-- GEMV up to 4 tokens and the tiled GEMM beyond. hint matmul=gemm|gemv forces one. An output type other
-- than the activations' (f32 logits) is a define.
-- Quantised W: the fused kernels (gemv_q / gemm_q decode blocks in registers, in the tensor's layout), or
-- with q_matmul=dequant_f16 the ordinary kernels on an f16 copy.
-- A linear's weight as the matrix kernels see it: (tensor, quant define or nil, weight dtype). With
-- q_matmul=dequant_f16 a quantised weight becomes its f16 copy, so it takes the float kernels (and fusions).
-- mode: the q_matmul value for this weight where it has its own (q_matmul_head_mode, q_matmul_glu_mode).
local function matrix_weight(ctx, w, hints, mode)
  local qdef = Q_DEFINE[w.etype]
  mode = qdef and (mode or q_matmul_mode(ctx, hints))
  if mode == "dequant_f16" then return dequant_f16(ctx, w), nil, "f16" end
  return ctx.t(w), qdef, w.etype
end

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

R.rope = function(ctx, n)
  local x, pos, freq = n.inputs[1], n.inputs[2], n.inputs[3]
  local T, H, D = n.bshape[1], n.bshape[2], n.bshape[3]
  local rot = 2 * freq.bshape[1]
  local k = ctx.kernel("rope/rope.comp", ctx.defines(), { WG = 256 })
  local gx, gy = groups_1d(T * H * rot // 2, 256)
  ctx.dispatch(k, gx, gy, 1, {
    x = ctx.t(n), pos = ctx.t(pos), inv_freq = ctx.t(freq), n_tokens = T, n_heads = H, head_dim = D, rot_dim = rot,
    x_stride = n.row_stride or 0,
  })
end

-- Attention reads this pass's k, v directly and older positions from the cache, then appends
-- k, v: correct for any T as long as a sliding cache holds the window (see attention.comp).
-- Kernels (same semantics): T <= 4 flash-decoding in one dispatch (attention_decode.comp splits the visible
-- keys into at most n_chunks chunks of >= min_chunk keys and its last workgroup per (kv head, token) merges
-- them; the chunk count comes from pos at run time, so the dispatch does not depend on the context length;
-- variants per head_dim: decode_variant); larger T the
-- tiled flash prefill (attention_prefill.comp); `basic` (attention.comp) by hint, or where a head_dim
-- does not suit the fast kernels (not a multiple of 8, or > 256).
local ATTN_DECODE_MAX_T = 4

-- A partial-result buffer for flash-decoding, shared by every attention node of the plan that needs
-- that many elements (nodes run one after another, and the recorder orders them).
local function attn_scratch(ctx, count)
  ctx.attn_scratch = ctx.attn_scratch or {}
  local t = ctx.attn_scratch[count]
  if not t then
    t = ctx.dev:tensor { dtype = "f32", shape = { count } }
    ctx.plan.owned[#ctx.plan.owned + 1] = t
    ctx.attn_scratch[count] = t
  end
  return t
end


local function subgroup_size(ctx)
  ctx.sg = ctx.sg or ctx.dev:caps().subgroup_size
  return ctx.sg
end

-- fuse2: attention_decode's variant for a head_dim: G q heads per workgroup (of the Gkv sharing a kv head;
-- Gkv / G workgroups per kv head), LK lanes per key row (a power of two <= the subgroup size with D / LK a
-- multiple of VEC), the workgroup size WG (a multiple of LK) and UK key rows per cluster per round.
-- Auto: G = 1; LK = the largest valid (head_dim 64 / 128 / 256 with an f16 cache: 8 / 16 / 32 lanes on a
-- 32-wide subgroup, min(subgroup, D / VEC); head_dim 96: 4); WG = 8 clusters of LK lanes (at least the rope
-- prologue's lanes per row); UK = 1.
-- Why one head per workgroup: a decode step's attention is a chain of memory round trips in a few
-- workgroups; with a kv head's G q heads in one workgroup, each lane holds G query and output slices, and
-- each chunk's workgroup does G heads' arithmetic in sequence. One head per workgroup spreads the same keys
-- over G times more workgroups (K and V are read G times, from L2). On the H200 (docs/BENCHMARKS.md 21a-21c,
-- 160 tokens): Gemma 3 1B attention_decode 0.387 -> 0.259 ms per token, decode 1.10x; Llama 3.2 1B
-- 0.189 -> 0.145, 1.09x; with a 2048-token context Gemma 1.14x, Llama 1.02x (Llama needs WG = 64 there:
-- at 256, 0.94x). Eight clusters and UK = 1 make short chunks (8 keys), so many workgroups share the keys.
-- With G > 1 (hint attention_heads) the auto WG and UK stay those measured for it: WG = 256 where its
-- shared memory fits, else 128 (never below LK); UK = 2.
-- Hints attention_heads / attention_lanes / attention_wg / attention_unroll override; a value this head_dim
-- or device cannot take is an error listing the valid ones.
local ATTN_MAX_CHUNKS = 64     -- attention_decode.comp's MAX_CHUNKS
local ATTN_SHARED = 32768      -- the least maxComputeSharedMemorySize of the devices served (lavapipe)

-- attention_decode.comp's shared memory for a variant, in bytes (red_ml, the shared array sh, last_s); with
-- nl (the DP_ROPE_QK variant, rmsnorm's nl lanes per row) sh also holds the prologue's rows, plus norm_red
local function decode_shared(wg, lk, D, G, nl)
  local ncl = wg // lk
  local sh = math.max(ncl * D, 2 * G * ATTN_MAX_CHUNKS + G)
  if nl then sh = math.max(sh, (wg // nl + G + 4) * D) end
  return 4 * (ncl * G * 2 + sh) + 4 + (nl and 4 * wg or 0)
end

local function decode_variant(ctx, D, vec, Gkv, hints, nl)
  local sg = subgroup_size(ctx)
  -- q heads per workgroup (G) out of the kv head's Gkv; Gkv / G workgroups share a kv head
  local G = 1
  local hh = hints.attention_heads or "auto"
  if hh ~= "auto" then
    G = math.tointeger(tonumber(hh))
    if Gkv % G ~= 0 then
      Graph.fail("hint attention_heads=%s does not divide the %d q heads of a kv head", tostring(hh), Gkv)
    end
  end
  local valid = {}
  local l = 1
  while l <= sg do
    if D % l == 0 and (D // l) % vec == 0 then valid[#valid + 1] = l end
    l = l * 2
  end
  local function list(t) local s = {} for i, v in ipairs(t) do s[i] = tostring(v) end return table.concat(s, ", ") end
  -- auto: the most lanes the head_dim allows, valid's last (min(subgroup, D / VEC) for a power-of-two head_dim;
  -- head_dim 96 with an f16 cache: 4 lanes of 24 elements, where min(32, 12) = 12 lanes would not be a power
  -- of two, and on an 8-wide subgroup 8 lanes would leave 4 of each lane's 12 elements out)
  local lk = valid[#valid]
  local hl = hints.attention_lanes or "auto"
  if hl ~= "auto" then
    lk = math.tointeger(tonumber(hl))
    local ok = false
    for _, v in ipairs(valid) do ok = ok or v == lk end
    if not ok then
      Graph.fail("hint attention_lanes=%s does not suit head_dim %d (subgroup size %d); valid: auto, %s",
                 tostring(hl), D, sg, list(valid))
    end
  end
  local wg
  if G == 1 then
    wg = math.max(8 * lk, nl or 1)
  else
    wg = math.max(128, lk, nl or 1)
    if lk <= 256 and decode_shared(256, lk, D, G, nl) <= ATTN_SHARED then wg = 256 end
  end
  local hw = hints.attention_wg or "auto"
  local caps = ctx.dev:caps()
  if hw ~= "auto" then
    wg = math.tointeger(tonumber(hw))
    if wg < lk or wg % lk ~= 0 or wg > caps.max_wg_invocations then
      local ok_wg = {}
      for _, w in ipairs { 32, 64, 128, 256, 512, 1024 } do
        if w >= lk and w <= caps.max_wg_invocations then ok_wg[#ok_wg + 1] = w end
      end
      Graph.fail("hint attention_wg=%s is not a multiple of the %d lanes per key row, or exceeds the device's %d " ..
                 "invocations per workgroup; valid: auto, %s", tostring(hw), lk, caps.max_wg_invocations, list(ok_wg))
    end
  end
  if nl and (wg < nl or wg % nl ~= 0) then   -- attention_rope: the prologue's rows need nl lanes each
    Graph.fail("attention_rope: workgroup %d cannot hold rows of %d lanes (head_dim %d): raise attention_wg " ..
               "or turn the fusion off (--hint fusion=-attention_rope)", wg, nl, D)
  end
  -- auto stays within ATTN_SHARED (every device served); a hinted workgroup may use what this device has
  local bytes = decode_shared(wg, lk, D, G, nl)
  if bytes > caps.max_shared_memory then
    Graph.fail("attention_decode: workgroup %d with %d lanes per key row needs %d bytes of shared memory for " ..
               "head_dim %d (this device has %d): raise attention_lanes or lower attention_wg", wg, lk, bytes, D,
               caps.max_shared_memory)
  end
  local hu = hints.attention_unroll or "auto"
  -- auto with G = 1: 1 (H200, Gemma 3 1B at 160 tokens: 1.03x against 2; at 2048 tokens alike, 21b/21c);
  -- with G > 1: 2 (H100, Gemma 3 1B, ~150 keys: 1 and 2 timed alike and 4 slower, more registers; run 10
  -- in docs/BENCHMARKS.md; 2 halves the rounds of long contexts against 1)
  local uk = math.tointeger(tonumber(hu)) or (G == 1 and 1 or 2)
  return lk, wg, uk, G, Gkv // G
end
M.attention_decode_variant = decode_variant   -- tests check the auto rule on fake devices

-- attention_decode's chunks (split-K, flash-decoding) over up to max_keys keys, each of at least min_chunk
-- keys and at most ATTN_MAX_CHUNKS: hint attention_splits, else 256 / (kv heads x tokens) workgroups' worth.
-- Why 256: a GPU needs hundreds of workgroups in flight while one decode step's attention has a few per kv
-- head. On a CPU device (caps.type "cpu": lavapipe) the built-in is 1: there workgroups run one after
-- another on a few cores, so a split gains nothing and costs each chunk's prologue and the merge, and the
-- chunks past the keys written so far (the plan is recorded for the whole cache) still run. On lavapipe
-- (Gemma-shaped GGUF fixture, f32, 56 tokens one at a time) attention_decode took 581 ms with 64 chunks and
-- 138 ms with 1 (docs/BENCHMARKS.md, session 16). The tests still run several chunks end to end on lavapipe
-- through the hint (tests/lua/test_fuse_attn.lua), and the kernel tests run the merge directly.
-- cpu_keys (a CPU device): the most keys a chunk may hold there (M.cpu_decode_keys), so that no invocation
-- runs past llvmpipe's loop limit: at least ceil(max_keys / cpu_keys) chunks, whatever the hint says, and an
-- error where that is more than ATTN_MAX_CHUNKS.
local function decode_chunks(ctx, hints, Hkv, T, max_keys, min_chunk, cpu_keys)
  local splits = hints.attention_splits or 0
  if splits == 0 then
    splits = on_cpu(ctx) and 1 or math.max(1, 256 // (Hkv * T))
  end
  local n = math.max(1, math.min(splits, ATTN_MAX_CHUNKS, ceil_div(max_keys, min_chunk)))
  if on_cpu(ctx) and cpu_keys then
    local need = ceil_div(max_keys, cpu_keys)
    if need > ATTN_MAX_CHUNKS or min_chunk > cpu_keys then
      Graph.fail("attention: %d keys (the context or window) need %d chunks of at most %d keys on a CPU device " ..
                 "(llvmpipe's loop limit; attention_min_chunk %d), more than the %d attention_decode merges: " ..
                 "use a shorter context (hint context)", max_keys, need, cpu_keys, min_chunk, ATTN_MAX_CHUNKS)
    end
    n = math.max(n, need)
  end
  return n
end
M.attention_decode_chunks = decode_chunks

-- attention_decode's least keys per chunk (hint attention_min_chunk): one round of the workgroup (each cluster
-- reads UK keys at once), so short contexts take few workgroups and the merge reads few partials; on a CPU
-- device without an attention_splits hint, the most its loop bound allows (M.cpu_decode_keys): the chunk
-- count cpu_keys forces is for the longest context, and with long chunks a context within the bound stays
-- one chunk, as before the bound (a split gains nothing there, above).
local function decode_min_chunk(ctx, hints, D, wg, lk, uk)
  local m = hints.attention_min_chunk or 0
  if m ~= 0 then return m end
  if on_cpu(ctx) and (hints.attention_splits or 0) == 0 then return M.cpu_decode_keys(D, lk) end
  return (wg // lk) * uk
end

-- ---- attention_rope (fusions.lua): rope_kv's work in attention_decode's dispatch (DP_ROPE_QK) --------------
-- n.inputs: q, k, v (the projections, unrotated), pos, kc, vc, inv_freq[, qw, kw]; n.attrs.rope = { norm, eps,
-- offset }. The dispatch is attention_decode's; push and spec constants as its header says for DP_ROPE_QK.
local function attention_rope(ctx, n)
  local q, k, v, pos, kc, vc, freq, qw, kw = table.unpack(n.inputs)
  local T, Hq, D = n.bshape[1], n.bshape[2], n.bshape[3]
  local Hkv, cap = k.bshape[2], kc.bshape[2]
  local kv_f16 = kc.etype == "f16"
  local vec = kv_f16 and 8 or 4
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  if (k.row_stride or 0) ~= (v.row_stride or 0) then
    Graph.fail("attention_rope at %s: k and v have different row strides (%s, %s)", n.where,
               tostring(k.row_stride or "contiguous"), tostring(v.row_stride or "contiguous"))
  end
  if T > 4 or D % vec ~= 0 or D > 256 or Hq % Hkv ~= 0 or (hints.attention_decode or "auto") == "basic" then
    Graph.fail("attention_rope at %s: T %d, head_dim %d, heads %d/%d do not suit attention_decode " ..
               "(--hint fusion=-attention_rope)", n.where, T, D, Hq, Hkv)
  end
  local rope = n.attrs.rope
  local defs = { "DP_ROPE_QK" }
  if kv_f16 then defs[#defs + 1] = "DP_KV_F16" end
  if rope.norm then
    defs[#defs + 1] = "DP_QK_NORM"
    defs[#defs + 1] = ctx.weight_define(qw.etype, qw.attrs.name)
  end
  local nl = norm_layout(D, 1)   -- rope_kv's lanes per row (rmsnorm's), so the norm sums in its order
  local window = n.attrs.window or 0
  local max_keys = (window > 0) and math.min(window, cap) or cap
  local lk, wg, uk, G, gs = decode_variant(ctx, D, vec, Hq // Hkv, hints, nl)
  local min_chunk = decode_min_chunk(ctx, hints, D, wg, lk, uk)
  local n_chunks = decode_chunks(ctx, hints, Hkv, T, max_keys, min_chunk, M.cpu_decode_keys(D, lk))
  local consts = { WG = wg, D = D, G = G, GS = gs, LK = lk, UK = uk, MINC = min_chunk, ROT = 2 * freq.bshape[1],
                   NL = nl }
  if rope.norm then consts.EPS, consts.WOFF = rope.eps, rope.offset end
  local push = {
    q = ctx.t(q), k = ctx.t(k), v = ctx.t(v), kc = ctx.t(kc), vc = ctx.t(vc), pos = ctx.t(pos), o = ctx.t(n),
    part_o = attn_scratch(ctx, T * Hq * n_chunks * D), part_ml = attn_scratch(ctx, T * Hq * n_chunks * 2),
    counter = zeroed_counters(ctx, "attention_counter", T * Hkv * gs), inv_freq = ctx.t(freq),
    cap = cap, window = window, scale = n.attrs.scale, softcap = n.attrs.softcap or 0,
    q_stride = q.row_stride or 0, kv_stride = k.row_stride or 0,
  }
  if rope.norm then push.qw, push.kw = ctx.t(qw), ctx.t(kw) end
  local kd = ctx.kernel("attention/attention_decode.comp", ctx.defines(defs), consts)
  ctx.dispatch(kd, Hkv * gs, n_chunks, T, push)
end

-- attention_prefill_cm (attention/attention_prefill_cm.comp): flash attention on cooperative matrices, for
-- prefill where the device has VK_NV_cooperative_matrix 16 x 16 x 16 f16 tiles (with 32-wide subgroups) and
-- q, k, v and the caches are f16. The head dims are split between SPLIT subgroups (hint
-- attention_prefill_cm_split) and each tile holds BC keys (hint attention_prefill_cm_keys).
-- auto: 4 subgroups (fewer where head_dim / 16 has fewer), 16 keys. On the H100, Gemma 3 1B 512-token
-- prefill, attention per pass: 4.36 ms with attention_prefill, 1.81 at split 4, 2.58 at 8, 1.89 at split 4
-- with 32 keys; split 2 prefilled 32.7k tok/s against 34.9k at 4 (docs/BENCHMARKS.md).
local function attention_cm_params(ctx, D, hints)
  local split = hints.attention_prefill_cm_split or 0
  local bc = hints.attention_prefill_cm_keys or 0
  if split == 0 then
    split = 4
    while split > 1 and D % (16 * split) ~= 0 do split = split // 2 end
  end
  return split, bc ~= 0 and bc or 16
end

-- the kernel's shared memory (its header)
local function attention_cm_shared(D, split, bc)
  return 2 * bc * (D + 8) * 2 + split * 16 * bc * 4 + split * 16 * (bc + 8) * 2 + 1024 + split * 64
end

-- Why attention_prefill_cm cannot take this attention node, or nil when it can.
local function attention_cm_refusal(ctx, n, kv_f16, D, hints)
  local c = ctx.dev:caps()
  local shape = c.coopmat_shape
  if not (c.coopmat_nv and c.subgroup_size == 32 and shape and shape[1] == 16 and shape[2] == 16 and shape[3] == 16) then
    return "the device has no VK_NV_cooperative_matrix 16 x 16 x 16 f16 tiles with 32-wide subgroups"
  end
  if ctx.env.act ~= "f16" or not kv_f16 then return "its activations and KV cache are not both f16" end
  local split, bc = attention_cm_params(ctx, D, hints)
  if D % (16 * split) ~= 0 or D > 256 then
    return ("head_dim %d is not a multiple of 16 * %d subgroups, or exceeds 256"):format(D, split)
  end
  if bc % 16 ~= 0 then return ("%d keys per tile is not a multiple of 16"):format(bc) end
  local need, limit = attention_cm_shared(D, split, bc), c.max_shared_memory
  if need > limit then return ("it needs %d bytes of shared memory; the device has %d"):format(need, limit) end
  return nil
end

R.attention = function(ctx, n)
  if n.attrs.rope then return attention_rope(ctx, n) end
  local q, k, v, pos, kc, vc = table.unpack(n.inputs)
  local T, Hq, D = q.bshape[1], q.bshape[2], q.bshape[3]
  local Hkv, cap = k.bshape[2], kc.bshape[2]
  local kv_f16 = kc.etype == "f16"
  local kvdef = kv_f16 and { "DP_KV_F16" } or {}
  -- k and v share one stride: both contiguous, or both column slices of one fused projection
  if (k.row_stride or 0) ~= (v.row_stride or 0) then
    Graph.fail("attention at %s: k and v have different row strides (%s, %s)", n.where,
               tostring(k.row_stride or "contiguous"), tostring(v.row_stride or "contiguous"))
  end
  local kv_stride = k.row_stride or 0
  local window = n.attrs.window or 0
  local push = {
    q = ctx.t(q), k = ctx.t(k), v = ctx.t(v), kc = ctx.t(kc), vc = ctx.t(vc), pos = ctx.t(pos),
    n_tokens = T, n_q_heads = Hq, n_kv_heads = Hkv, cap = cap,
    window = window, scale = n.attrs.scale, softcap = n.attrs.softcap or 0,
    q_stride = q.row_stride or 0, kv_stride = kv_stride,
  }
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local vec = kv_f16 and 8 or 4
  local fast_ok = D % vec == 0 and D <= 256 and Hq % Hkv == 0
  local decode = T <= ATTN_DECODE_MAX_T
  local mode = decode and (hints.attention_decode or "auto") or (hints.attention_prefill or "auto")
  local sg = subgroup_size(ctx)
  -- keys a query can see: the window, or the whole cache for global layers
  local max_keys = (window > 0) and math.min(window, cap) or cap
  local lanes = hints.attention_prefill_lanes or 0
  -- auto: 8 dims per lane (H100, Gemma 3 1B 512-token prefill: 32 lanes 4.78 ms against 8 lanes 6.20; a row's
  -- keys are walked serially, so more lanes per row is more parallel work in flight)
  if lanes == 0 then   -- the largest power of two <= min(subgroup, D / 8) that divides D
    lanes = 1
    while lanes * 2 <= math.min(sg, D // 8) and D % (lanes * 2) == 0 do lanes = lanes * 2 end
  end
  -- A CPU device: a prefill whose queries may see more keys than attention_prefill's invocations can walk
  -- under llvmpipe's loop limit (M.cpu_prefill_keys) runs attention_decode, whose chunks split the keys;
  -- `flash` asked for there is an error, and so is the basic kernel past its own bound.
  if not decode and fast_ok and on_cpu(ctx) and mode ~= "basic" and max_keys > M.cpu_prefill_keys(D, lanes) then
    if mode == "flash" then
      Graph.fail("hint attention_prefill=flash: attention at %s sees up to %d keys, more than its kernel walks " ..
                 "on a CPU device (%d: llvmpipe's loop limit); use auto", n.where, max_keys,
                 M.cpu_prefill_keys(D, lanes))
    end
    decode, mode = true, hints.attention_decode or "auto"
  end
  local basic = mode == "basic" or not fast_ok
  if basic and on_cpu(ctx) and max_keys > M.cpu_basic_keys(D) then
    Graph.fail("attention at %s: the basic kernel (head_dim %d, or hint attention_%s=basic) cannot walk %d keys " ..
               "on a CPU device (%d: llvmpipe's loop limit); use a shorter context (hint context)", n.where, D,
               decode and "decode" or "prefill", max_keys, M.cpu_basic_keys(D))
  end
  if basic then
    push.o, push.head_dim = ctx.t(n), D
    local ka = ctx.kernel("attention/attention.comp", ctx.defines(kvdef), { WG = 128 })
    ctx.dispatch(ka, Hq, T, 1, push)
  elseif decode then
    local lk, wg, uk, G, gs = decode_variant(ctx, D, vec, Hq // Hkv, hints)
    local min_chunk = decode_min_chunk(ctx, hints, D, wg, lk, uk)
    local n_chunks = decode_chunks(ctx, hints, Hkv, T, max_keys, min_chunk, M.cpu_decode_keys(D, lk))
    push.part_o = attn_scratch(ctx, T * Hq * n_chunks * D)
    push.part_ml = attn_scratch(ctx, T * Hq * n_chunks * 2)
    push.counter = zeroed_counters(ctx, "attention_counter", T * Hkv * gs)
    push.o, push.n_chunks, push.min_chunk = ctx.t(n), n_chunks, min_chunk
    local kd = ctx.kernel("attention/attention_decode.comp", ctx.defines(kvdef),
                          { WG = wg, D = D, G = G, GS = gs, LK = lk, UK = uk })
    ctx.dispatch(kd, Hkv * gs, n_chunks, T, push)
  elseif mode ~= "flash" and not attention_cm_refusal(ctx, n, kv_f16, D, hints) then
    -- attention_prefill_cm: the same tiles on the matrix units, 16 rows per workgroup
    local split, bc = attention_cm_params(ctx, D, hints)
    push.o = ctx.t(n)
    local kp = ctx.kernel("attention/attention_prefill_cm.comp", ctx.defines(kvdef),
                          { WG = 32 * split, D = D, SPLIT = split, BC = bc })
    ctx.dispatch(kp, ceil_div(T * (Hq // Hkv), 16), Hkv, 1, push)
  else
    if mode == "coopmat" then
      Graph.fail("hint attention_prefill=coopmat: attention at %s cannot use attention_prefill_cm: %s", n.where,
                 attention_cm_refusal(ctx, n, kv_f16, D, hints))
    end
    -- rows = (token, q head) pairs of one kv head; LANES lanes per row (above), BR rows per workgroup; K/V
    -- tiles of BC keys in shared memory (2 * BC * D * KV bytes <= 16 KiB)
    if lanes > sg or D % lanes ~= 0 then
      Graph.fail("hint attention_prefill_lanes=%d: must be <= the subgroup size (%d) and divide head_dim %d", lanes, sg, D)
    end
    local br = hints.attention_prefill_rows or 0
    if br == 0 then br = 16 end
    local bc = math.min(64, (kv_f16 and 4096 or 2048) // D)
    push.o = ctx.t(n)
    local kp = ctx.kernel("attention/attention_prefill.comp", ctx.defines(kvdef),
                          { WG = br * lanes, D = D, LANES = lanes, BC = bc })
    ctx.dispatch(kp, ceil_div(T * (Hq // Hkv), br), Hkv, 1, push)
  end
  if n.attrs.kv_appended then return end   -- the rope_kv fusion appended k, v already
  local kk = ctx.kernel("attention/kv_append.comp", ctx.defines(kvdef), { WG = 256 })
  local gx, gy = groups_1d(T * Hkv * D, 256)
  ctx.dispatch(kk, gx, gy, 1, {
    k = ctx.t(k), v = ctx.t(v), kc = ctx.t(kc), vc = ctx.t(vc), pos = ctx.t(pos),
    n_tokens = T, n_kv_heads = Hkv, head_dim = D, cap = cap, kv_stride = kv_stride,
  })
end

-- ---- fuse2: rope_kv (fusions.lua): q/k norm + RoPE + KV append in one kernel, one workgroup per (head,
-- token) with rmsnorm's lanes per row (norm_layout), so the norm sums in rmsnorm's order.
R.rope_kv = function(ctx, n)
  local xq, xk, v, pos, freq, kc, vc, qw, kw = table.unpack(n.inputs)
  local T, Hq, D = n.bshape[1], n.bshape[2], n.bshape[3]
  local Hkv, cap = xk.bshape[2], kc.bshape[2]
  if (xk.row_stride or 0) ~= (v.row_stride or 0) then
    Graph.fail("rope_kv at %s: k and v have different row strides (%s, %s)", n.where,
               tostring(xk.row_stride or "contiguous"), tostring(v.row_stride or "contiguous"))
  end
  local defs = {}
  if kc.etype == "f16" then defs[#defs + 1] = "DP_KV_F16" end
  if n.attrs.norm then
    defs[#defs + 1] = "DP_QK_NORM"
    defs[#defs + 1] = ctx.weight_define(qw.etype, qw.attrs.name)
  end
  local lanes = norm_layout(D, 1)
  local k = ctx.kernel("rope/rope_kv.comp", ctx.defines(defs), { WG = lanes, D = D })
  local push = {
    q = ctx.t(n), k = ctx.t(xk), v = ctx.t(v), kc = ctx.t(kc), vc = ctx.t(vc), pos = ctx.t(pos),
    inv_freq = ctx.t(freq), n_tokens = T, n_q_heads = Hq, n_kv_heads = Hkv, cap = cap,
    rot_dim = 2 * freq.bshape[1], q_stride = xq.row_stride or 0, kv_stride = xk.row_stride or 0,
  }
  if n.attrs.norm then
    push.qw, push.kw, push.eps, push.w_offset = ctx.t(qw), ctx.t(kw), n.attrs.eps, n.attrs.offset
  end
  ctx.dispatch(k, Hq + Hkv, math.min(T, WG_MAX_GROUPS), ceil_div(T, WG_MAX_GROUPS), push)
end

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

R.softcap = function(ctx, n)
  local count = numel(n.bshape)
  local k = ctx.kernel("act/softcap.comp", ctx.defines(nil, n.etype), { WG = 256 })
  local gx, gy = groups_1d(count, 256)
  ctx.dispatch(k, gx, gy, 1, { x = ctx.t(n), n = count, c = n.attrs.arg })
end

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

-- Element-wise ops read strided slices in place (Phi-3's gate_up with fusion=off: silu(gate) * up): the
-- kernel maps element i of the [rows, cols] value to (i / cols) * stride + i % cols; the output is contiguous.
local ELTWISE = { add = 0, mul = 1, scale = 2, gelu_tanh = 3, silu = 4 }
for op, kind in pairs(ELTWISE) do
  R[op] = function(ctx, n)
    local a, b = n.inputs[1], n.inputs[2] or n.inputs[1]
    local count = numel(n.bshape)
    local cols = count // n.bshape[1]   -- a row is one token: what a slice's row_stride counts in
    local function stride_of(x)
      if not x.row_stride then return 0 end
      if numel(x.bshape) // x.bshape[1] ~= cols then
        Graph.fail("%s at %s: a strided input of shape [%s] does not have rows of %d elements", op, n.where,
                   table.concat(x.bshape, ", "), cols)
      end
      return x.row_stride
    end
    local k = ctx.kernel("graph/eltwise.comp", ctx.defines(), { WG = 256 })
    local gx, gy = groups_1d(count, 256)
    ctx.dispatch(k, gx, gy, 1, { a = ctx.t(a), b = ctx.t(b), y = ctx.t(n), n = count, kind = kind,
                                 s = n.attrs.arg or 1.0, cols = cols, a_stride = stride_of(a), b_stride = stride_of(b) })
  end
  M.strided[op] = { true, true }
end

-- ---- fused final norm + LM head + argmax / draw (fusions.lua: lm_head) ------------------------------------
-- inputs: x (the hidden row before the final norm, [1, K]), the norm weight, the LM head W [N, K], and for
-- a draw n_ctx (its counter); attrs.logits: the logits node to write as well (env.keep_logits);
-- attrs.pre (fusion lm_head_pre): x is the residual stream and the row is x + a or x + rmsnorm(a; w1), a and
-- w1 the inputs at attrs.pre.a_at and w1_at (fused/lm_head_common.glsl, DP_LMH_PRE). Every
-- workgroup normalises x itself, then computes its rows' logits exactly as the unfused kernels would (the same rmsnorm layout, the same GEMV parameters, softcap's formula) and
-- keeps the best (value, index); argmax_final.comp picks the id from the gx pairs.
M.LM_HEAD_MAX_K = 4096      -- the normalised row lives in shared memory (4 * K bytes)

R.lm_head = function(ctx, n)
  local x, wn, w, n_ctx = n.inputs[1], n.inputs[2], n.inputs[3], n.inputs[4]
  local K, N = x.bshape[#x.bshape], w.bshape[1]
  local a = n.attrs
  local hints = ctx.env.hints and ctx.env.hints.values or {}
  local wt, qdef = ctx.t(w), Q_DEFINE[w.etype]
  if qdef and q_matmul_head_mode(ctx, hints, w) == "dequant_f16" then wt, qdef = dequant_f16(ctx, w), nil end
  local gw, rows = M.gemv_params(ctx, qdef ~= nil, nil, N, K, nil, true)
  local defs = {}
  if qdef then
    if K % 16 ~= 0 then Graph.fail("plan: %s is %s with rows of %d elements (not a multiple of 16)", w.attrs.name, w.etype, K) end
    defs = { qdef, LAYOUT_DEFINE[M.layout_of(wt)] }
    -- x as the unfused head's gemv_q takes it (M.gemv_q_x, `head`)
    local xdefs = M.gemv_q_x(ctx, K, 1, gw, 1, rows, { N = N })
    local planes = 0
    for _, d in ipairs(xdefs) do
      defs[#defs + 1] = d
      planes = tonumber(d:match("^DP_XQ8_PLANES=(%d)$")) or planes
    end
    local need, have = M.lm_head_q_shared(ctx, N, K, planes), ctx.dev:caps().max_shared_memory
    if need > have then
      Graph.fail("lm_head at %s: K = %d with hint gemv_q_x=%s needs %d bytes of shared memory, %s has %d; " ..
                 "use hint fusion=-lm_head or gemv_q_x=act", n.where, K, tostring(hints.gemv_q_x), need,
                 ctx.dev:caps().name, have)
    end
  else
    defs = { ctx.weight_define(wt == ctx.t(w) and w.etype or "f16", w.attrs.name) }
  end
  local nwd = NW_DEFINE[wn.etype]
  if nwd == nil then Graph.fail("lm_head: the norm weight %s has dtype %s", wn.attrs.name, tostring(wn.etype)) end
  if nwd then defs[#defs + 1] = nwd end
  if a.sample then defs[#defs + 1] = "DP_LMH_SAMPLE" end
  if a.logits then defs[#defs + 1] = "DP_LMH_LOGITS" end
  local pre = a.pre
  if pre then
    defs[#defs + 1] = "DP_LMH_PRE=" .. pre.kind
    a_defines(n.inputs[pre.a_at], defs)
  end
  local nl = norm_layout(K, 1)
  if not qdef and gw % subgroup_size(ctx) ~= 0 then
    Graph.fail("lm_head at %s: the GEMV workgroup (%d) is not a multiple of the subgroup size (%d); "
               .. "use hint fusion=-lm_head or another gemv_wg", n.where, gw, subgroup_size(ctx))
  end
  local wg = math.max(gw, nl)
  local teams = wg // gw
  local nb = ceil_div(N, rows)
  -- auto: 1024 workgroups at most, 16 on a CPU device. Why: every workgroup normalises x before its rows, and
  -- on a CPU those prologues run one after another: on lavapipe (gemma3-tiny, 512 rows: 256 workgroups) the
  -- head took 8.8 ms per token, and 1.2 with 16 (docs/BENCHMARKS.md, session 16); 16 still keeps 16 cores busy.
  local cap = hints.lm_head_groups or 0
  if cap == 0 then cap = on_cpu(ctx) and 16 or 1024 end
  local gx = math.min(ceil_div(nb, teams), cap, WG_MAX_GROUPS)
  -- the quantised head takes its row blocks from a queue (DP_LMH_QUEUE, lm_head_q.comp: a late workgroup
  -- finds less left instead of running a whole share alone; docs/BENCHMARKS.md 41a, 41b); hint lm_head_queue,
  -- whose auto is on for a GPU and off on a CPU device (there no workgroup runs a wave late)
  local qmode = hints.lm_head_queue or "auto"
  if qmode == "auto" then qmode = on_cpu(ctx) and "off" or "on" end
  local queue = qdef and qmode ~= "off"
  local ticket = (hints.lm_head_ticket or 0) > 0 and hints.lm_head_ticket or 2
  -- On a CPU device no invocation may take more row blocks than M.cpu_loop_blocks allows for its K / TPR
  -- elements each: at least the workgroups that needs, whatever lm_head_groups says, and a ticket bound for
  -- the queue (MAXT).
  local maxt = 0
  if on_cpu(ctx) then
    local per_wg = M.cpu_loop_blocks(ceil_div(K, gw // rows)) * teams          -- row blocks a workgroup may take
    if queue then
      maxt = math.max(1, per_wg // (ticket * teams))
      per_wg = maxt * ticket * teams
    end
    gx = math.min(math.max(gx, ceil_div(nb, per_wg)), WG_MAX_GROUPS)
    if gx * per_wg < nb then
      Graph.fail("lm_head at %s: %d rows of %d need more than %d workgroups on %s", n.where, N, K, WG_MAX_GROUPS,
                 ctx.dev:caps().name)
    end
  end
  local pv = ctx.dev:tensor { dtype = "f32", shape = { gx } }
  local pi = ctx.dev:tensor { dtype = "u32", shape = { gx } }
  ctx.plan.owned[#ctx.plan.owned + 1] = pv
  ctx.plan.owned[#ctx.plan.owned + 1] = pi
  local consts = { WG = wg, ROWS = rows, GW = gw, NL = nl, KMAX = K }
  if queue then
    defs[#defs + 1] = "DP_LMH_QUEUE"
    consts.TICKET, consts.MAXT = ticket, maxt
  end
  local k = ctx.kernel(qdef and "fused/lm_head_q.comp" or "fused/lm_head.comp", ctx.defines(defs), consts)
  local push = {
    x = ctx.t(x), wn = ctx.t(wn), w = wt, part_val = pv, part_idx = pi, N = N, K = K,
    eps = a.eps, w_offset = a.offset or 0, softcap = a.softcap or 0,
  }
  if a.logits then push.logits = ctx.t(a.logits) end
  if qdef then push.w_row_blocks = row_blocks(wt) end
  if queue then push.queue = zeroed_counters(ctx, "lm_head_queue", 2) end
  if pre then
    push.ra = ctx.t(n.inputs[pre.a_at])
    if pre.kind == 2 then
      local w1 = n.inputs[pre.w1_at]
      if w1.etype ~= wn.etype then
        Graph.fail("lm_head at %s: the norm weights %s and %s differ in dtype", n.where, w1.attrs.name, wn.attrs.name)
      end
      push.wn1, push.eps1, push.off1 = ctx.t(w1), pre.eps1, pre.offset1 or 0
    end
  end
  local sp = a.sample
  if sp then
    push.steps = ctx.t(n_ctx)
    push.temperature = sp.greedy and 0 or sp.temperature
    push.seed_lo, push.seed_hi = sp.seed_lo, sp.seed_hi
  end
  ctx.dispatch(k, gx, 1, 1, push)
  local kf = ctx.kernel("argmax/argmax_final.comp", {}, { WG = 256 })
  ctx.dispatch(kf, 1, 1, 1, { part_val = pv, part_idx = pi, ids = ctx.t(n), n_chunks = gx })
end

return M
