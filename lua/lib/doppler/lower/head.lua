-- doppler.lower.head: the fused final norm + LM head + argmax or draw (fusion lm_head), one dispatch and
-- argmax_final, with the bounds a CPU device's loop limit sets.
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local M, R = B.M, B.M.rules
local WG_MAX_GROUPS, NW_DEFINE, Q_DEFINE, LAYOUT_DEFINE = B.WG_MAX_GROUPS, B.NW_DEFINE, B.Q_DEFINE, B.LAYOUT_DEFINE
local ceil_div, zeroed_counters, row_blocks = B.ceil_div, B.zeroed_counters, B.row_blocks
local norm_layout, a_defines, subgroup_size = B.norm_layout, B.a_defines, B.subgroup_size
local Cpu = require "doppler.lower.cpu"
local on_cpu = Cpu.on_cpu
local Prep = require "doppler.lower.prepare"
local dequant_f16, q_matmul_head_mode = Prep.dequant_f16, Prep.q_matmul_head_mode

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
