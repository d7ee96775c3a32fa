-- doppler.lower.base: what every lowering rule shares. The table doppler.lower returns (M) with its rule
-- table (M.rules: op -> rule) and the inputs each op reads with a row stride (M.strided); the context a rule
-- gets (M.context: kernels made once per file, defines and constants; dispatches recorded, or collected for
-- doppler.loop); the defines of activation, weight and block types; which quantised weights are stored in
-- another layout or with padded rows; and small helpers (workgroup counts, rmsnorm's lane layout, zeroed
-- counter buffers). The rule files (lower/*.lua) require this one and add to M.
local Graph = require "doppler.graph"

local M = { rules = {}, strided = {} }
local R = M.rules

-- Inputs (by position) each op's kernel reads with a row stride (node.row_stride, set by the plan
-- for slices of a fused projection): linear's x, rope's x, attention's q/k/v, glu's gate/up; the element-wise
-- ops (add, mul, scale, gelu_tanh, silu: set with their rule, eltwise.lua) both inputs.
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

-- Norm layout (norm_rows.glsl): about 4 elements per lane (8 to 256 lanes a row), and short rows (q/k
-- norms: a row per head) packed several to a workgroup of up to 256 invocations.
local function norm_layout(d, rows)
  local lanes = pow2_at_least(ceil_div(d, 4), 8, 256)
  local per = math.min(256 // lanes, pow2_at_least(rows, 1, 256))
  local groups = ceil_div(rows, per)
  return lanes * per, per, math.min(groups, WG_MAX_GROUPS), ceil_div(groups, WG_MAX_GROUPS)
end

-- The define a reader of a branch output `a` needs: DP_A_FIX64 where a is the fused MLP's fixed-point sum
-- (op glu_down, fusions.lua; dp_types.glsl). Appended to defs, which it returns.
local function a_defines(a, defs)
  if a.op == "glu_down" then defs[#defs + 1] = "DP_A_FIX64" end
  return defs
end

-- The device's subgroup size (cached in ctx).
local function subgroup_size(ctx)
  ctx.sg = ctx.sg or ctx.dev:caps().subgroup_size
  return ctx.sg
end

-- for the rule files: M, and what they share
return {
  M = M, WG_MAX_GROUPS = WG_MAX_GROUPS, NW_DEFINE = NW_DEFINE,
  Q_DEFINE = Q_DEFINE, LAYOUT_DEFINE = LAYOUT_DEFINE, Q_BLOCK = Q_BLOCK,
  ceil_div = ceil_div, groups_1d = groups_1d, pow2_at_least = pow2_at_least, zeroed_counters = zeroed_counters,
  numel = numel, row_blocks = row_blocks, norm_layout = norm_layout, a_defines = a_defines,
  subgroup_size = subgroup_size,
}
