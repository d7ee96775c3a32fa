-- recipes/bench/persistent.lua: a probe of the persistent-kernel ("megakernel") design for decode.
--   doppler recipes/bench/persistent.lua [--shape llama|gemma|tiny] [--weights f16|q4|q4_k_m] [--modes LIST] ...
-- doppler's decode records one dispatch per kernel with a barrier wherever a dependency exists (~7 dependent
-- dispatches per layer). The alternative design runs a whole token, or many, in one dispatch whose
-- workgroups stay resident and meet at grid barriers (a counter in device memory), and requests each step's
-- weights before waiting at the barrier. This script measures that design against the dispatch chain on the
-- same kernel (shaders/probe/persistent_chain.comp), and a third way between them (--modes chain): a dispatch
-- per step with no barrier, each workgroup waiting on the counter for the earlier dispatches' workgroups
-- (rec:dispatch's self_ordered). The steps of a decode token at a real model's shapes
-- (per layer q/k/v with the pre-norm folded in, attention over a fixed cache of --context positions, o,
-- gate+up with the pre-norm, down on the GLU of gate+up; then the LM head), weights and cache made on the
-- GPU from a hash, `--tokens` tokens per submit.
-- It is a bound, not a model: no RoPE, KV append, residual adds or sampler; norms without gains; 4-bit
-- weights with one scale per row, or (--weights q4_k_m) each matrix at the bytes per weight of the ggml type
-- `doppler convert --quant q4_k_m` gives it, with int8 activations and packed dot products as gemv_q's
-- (the shader says how; q/k/v and o in f16, as doppler's decode reads their f16 copies on the H100).
-- Each mode prints one JSON line; the modes' final activations must be the same bits (same arithmetic), and
-- with --check (the default for --shape tiny) they are compared with a CPU reference. A persistent run needs
-- every workgroup resident at once: --groups at most what the device holds (the H100: one 1024-invocation
-- workgroup per SM, 132); one that is not resident gives up after a spin limit and the script fails rather
-- than hang.
local doppler = require "doppler"
local cli = require "doppler.cli"
local json = require "doppler.json"

local SHAPES = {   -- hidden, q (attention output), q+k+v, intermediate, layers, vocab, heads, kv heads, head_dim
  llama = { hidden = 2048, q = 2048, qkv = 3072, inter = 8192, layers = 16, vocab = 128256,     -- Llama 3.2 1B
            heads = 32, kv_heads = 8, head_dim = 64 },
  gemma = { hidden = 1152, q = 1024, qkv = 1536, inter = 6912, layers = 26, vocab = 262144,     -- Gemma 3 1B
            heads = 4, kv_heads = 1, head_dim = 256 },
  tiny  = { hidden = 64, q = 64, qkv = 128, inter = 128, layers = 2, vocab = 160, heads = 4, kv_heads = 2, head_dim = 16 },
}
local FILE = "probe/persistent_chain.comp"
local NORM, GLU, ATTN = 1, 2, 4
local FMT = { f16 = 0, q4 = 8, q5 = 8 | 32, q8 = 16 }   -- the shader's mixed weight types (flags bits 3-5)
local FMT_BYTES = { f16 = 2, q4 = 18 / 32, q5 = 22 / 32, q8 = 34 / 32 }   -- bytes per weight: F16, Q4_K, Q5_0, Q8_0

-- --weights q4_k_m: the type of each matrix as `doppler convert --quant q4_k_m` makes it (llama.cpp's rules:
-- Q4_K, Q5_0 where rows of 1152 are not whole 256-blocks, Q6_K for down on the use_more_bits layers and for
-- the head, Q8_0 for a head of rows of 1152), as the probe's nearest types: Q6_K (0.8125 bytes) as q5 (0.6875).
-- q/k/v and o are f16: doppler's decode reads their f16 copies on the H100 (hint q_matmul auto). tiny takes
-- every type, so that the CPU check covers each.
local function more_bits(i, n) return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2 end
local Q4KM = {
  gemma = function(name, i, n)
    if name == "gate_up" then return "q5" end
    if name == "down" then return more_bits(i, n) and "q5" or "q4" end
    if name == "head" then return "q8" end
    return "f16"
  end,
  llama = function(name, i, n)
    if name == "gate_up" then return "q4" end
    if name == "down" then return more_bits(i, n) and "q5" or "q4" end
    if name == "head" then return "q5" end
    return "f16"
  end,
  tiny = function(name, i)
    return ({ qkv = "f16", o = "q8", gate_up = "q5", down = i == 0 and "q4" or "q5", head = "q8" })[name]
  end,
}
local MAX_P = 1024   -- the kernel's MAX_P

local spec = {
  usage = "doppler recipes/bench/persistent.lua [options]",
  about = "Times a decode token's GEMV chain as one dispatch per step (barriers) and as one persistent\n" ..
          "dispatch (grid barriers), on the same kernel; one JSON line per mode.",
  options = {
    { "--shape", "NAME", "llama (Llama 3.2 1B), gemma (Gemma 3 1B) or tiny", default = "llama" },
    { "--weights", "TYPE", "f16, q4 (4-bit, one f32 scale per row), or q4_k_m (each matrix at its Q4_K_M\n" ..
      "type's bytes, int8 activations and packed dot products)", default = "f16" },
    { "--modes", "LIST", "persistent, dispatch, chain (a dispatch per step, ordered by counters instead of\n" ..
      "barriers), sync (the three with empty steps: the cost of ordering)",
      default = "dispatch,persistent" },
    { "--tokens", "N", "tokens per submit", type = "int", default = 32, min = 1 },
    { "--runs", "N", "timed submits per mode", type = "int", default = 5, min = 1 },
    { "--groups", "N", "workgroups (0: 132 on a GPU, 1 on a CPU device)", type = "int", default = 0, min = 0 },
    { "--dispatch-groups", "N", "workgroups per dispatch in dispatch mode (0: --groups)", type = "int",
      default = 0, min = 0 },
    { "--wg", "N", "workgroup size", type = "int", default = 1024, min = 32 },
    { "--un", "N", "16-byte weight chunks in flight per lane", type = "int", default = 2, min = 1 },
    { "--sync", "KIND", "grid barrier: acquire, volatile (no acquire) or fence (the shader says how)",
      default = "fence" },
    { "--no-head", nil, "leave the LM head out of a token" },
    { "--no-attention", nil, "GEMVs only (runs 28a-28d)" },
    { "--no-norm", nil, "the GEMVs read x as it is (no RMS norm folded in): what the fold costs" },
    { "--context", "N", "positions the attention steps read", type = "int", default = 160, min = 1 },
    { "--check", nil, "compare with a CPU reference (slow beyond --shape tiny)" },
    { "--label", "TEXT", "extra 'label' key in every line" },
    { "--table", nil, "print a markdown table instead of JSON lines" },
  },
}

-- The kernel's hash (MODE 3), on 32-bit words.
local function hash(i)
  local h = (i * 0x9E3779B9 + 0x7F4A7C15) & 0xffffffff
  h = h ~ (h >> 16); h = (h * 0x85EBCA6B) & 0xffffffff
  h = h ~ (h >> 13); h = (h * 0xC2B2AE35) & 0xffffffff
  return h ~ (h >> 16)
end

-- The steps of one token: { N, K, flags } per GEMV or attention, in order.
local function token_ops(s, head, attention, P, norm, types)
  local NORM = norm and NORM or 0
  local ops = {}
  for layer = 0, s.layers - 1 do
    local first = #ops + 1
    ops[#ops + 1] = { N = s.qkv, K = s.hidden, flags = NORM, name = "qkv" }
    if attention then
      ops[#ops + 1] = { N = s.q, K = s.q, flags = ATTN, name = "attention", hd = s.head_dim, heads = s.heads,
                        kv = s.kv_heads, P = P }
    end
    ops[#ops + 1] = { N = s.hidden, K = s.q, flags = 0, name = "o" }
    ops[#ops + 1] = { N = 2 * s.inter, K = s.hidden, flags = NORM, name = "gate_up" }
    ops[#ops + 1] = { N = s.hidden, K = s.inter, flags = GLU, name = "down" }
    for j = first, #ops do ops[j].layer = layer end
  end
  if head then ops[#ops + 1] = { N = s.vocab, K = s.hidden, flags = NORM, name = "head", layer = 0 } end
  for _, op in ipairs(ops) do
    if op.flags & ATTN == 0 then
      op.fmt = types and types(op.name, op.layer, s.layers) or "f16"
      op.flags = op.flags | FMT[op.fmt]
    end
  end
  return ops
end

-- Every push member must be set, in every mode: those a mode does not read get zeros (and pointers `w`).
local function push_of(t)
  local out = { n_ops = 1, first = 0, steps = 0, slot = 0, w_off = 0, words = 0, kind = 0, kk = 0, target = 0 }
  for key, v in pairs(t) do out[key] = v end
  out.ops, out.act, out.ctl = out.ops or out.w, out.act or out.w, out.ctl or out.w
  return out
end

local function align(v, a) return (v + a - 1) // a * a end

-- Lays the weights out (each matrix, then its row scales for q4, or its chunks' f16 scales and fifth bits for
-- the mixed types) and fills them on the GPU.
local function make_weights(dev, ops, q4, init)
  local off = 0
  local function wbytes(op)   -- a GEMV's weights (codes), or an attention step's f16 keys (and as many values)
    if op.flags & ATTN ~= 0 then return op.P * op.kv * op.hd * 2 end
    if op.fmt ~= "f16" then return op.fmt == "q8" and op.N * op.K or op.N * op.K // 2 end
    return op.N * op.K * (q4 and 1 or 2) // (q4 and 2 or 1)
  end
  for _, op in ipairs(ops) do
    op.w_off = off
    off = align(off + wbytes(op), 256)
    op.s_off, op.h_off = 0, 0
    if op.flags & ATTN ~= 0 then op.s_off = off; off = align(off + wbytes(op), 256)
    elseif op.fmt ~= "f16" then
      op.s_off = off; off = align(off + 2 * (op.N * op.K // 32), 256)
      if op.fmt == "q5" then op.h_off = off; off = align(off + 4 * (op.N * op.K // 32), 256) end
    elseif q4 then op.s_off = off; off = align(off + 4 * op.N, 256) end
  end
  local w = dev:tensor { dtype = "u8", shape = { math.max(off, 256) } }
  local rec = dev:recorder()
  local function fill(at, words, kind, kk, groups)
    rec:dispatch(init, { groups }, push_of { w = w, w_off = at, words = words, kind = kind, kk = kk })
  end
  for _, op in ipairs(ops) do
    local attn = op.flags & ATTN ~= 0
    fill(op.w_off, wbytes(op) // 4, (q4 or op.fmt ~= "f16") and not attn and 1 or 0, op.K, 1024)
    if attn then fill(op.s_off, wbytes(op) // 4, 0, op.K, 1024)
    elseif op.fmt ~= "f16" then
      fill(op.s_off, op.N * op.K // 64, 0, op.K, 256)   -- f16 scales, two a word: |v| in [0.5, 1)
      if op.fmt == "q5" then fill(op.h_off, op.N * op.K // 32, 1, op.K, 256) end
    elseif q4 then fill(op.s_off, op.N, 2, op.K, 64) end
  end
  rec:run()
  return w, off
end

local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end

-- CPU reference of `steps` steps from the act the script uploaded (slot 0).
local function reference(ops, q4, x0, steps)
  local function f16(bits)
    local sign = (bits & 0x8000) ~= 0 and -1 or 1
    local e, m = (bits >> 10) & 31, bits & 1023
    return sign * (1 + m / 1024) * 2.0 ^ (e - 15)
  end
  local function half(off, e)   -- element e of the f16 region at byte offset off
    local h = hash(off // 4 + e // 2)
    return f16(((e % 2 == 0) and h or (h >> 16)) & 0x83FF | 0x3800)
  end
  local function attention(op, q)
    local y, group = {}, op.heads // op.kv
    for h = 0, op.heads - 1 do
      local kvh, sc, m = h // group, {}, -math.huge
      for t = 0, op.P - 1 do
        local d = 0
        for i = 0, op.hd - 1 do d = d + q[h * op.hd + i + 1] * half(op.w_off, (t * op.kv + kvh) * op.hd + i) end
        sc[t] = d / math.sqrt(op.hd)
        m = math.max(m, sc[t])
      end
      local l = 0
      for t = 0, op.P - 1 do sc[t] = math.exp(sc[t] - m); l = l + sc[t] end
      for i = 0, op.hd - 1 do
        local o = 0
        for t = 0, op.P - 1 do o = o + sc[t] * half(op.s_off, (t * op.kv + kvh) * op.hd + i) end
        y[h * op.hd + i + 1] = o / l
      end
    end
    return y
  end
  local x = x0
  for s = 0, steps - 1 do
    local op = ops[s % #ops + 1]
    if op.flags & ATTN ~= 0 then x = attention(op, x) goto continue end
    local K, xv = op.K, {}
    local scale = 1
    if op.flags & NORM ~= 0 then
      local ss = 0
      for k = 1, K do ss = ss + x[k] * x[k] end
      scale = 1 / math.sqrt(ss / K + 1e-6)
    end
    for k = 1, K do
      local v = x[k]
      if op.flags & GLU ~= 0 then v = v / (1 + math.exp(-v)) * x[k + K] end
      xv[k] = v * scale
    end
    local y = {}
    if op.fmt ~= "f16" then   -- the mixed types: x as the int8 codes the shader stages, each times its d
      for g = 0, K // 32 - 1 do
        local amax = 0
        for i = 1, 32 do amax = math.max(amax, math.abs(f32(xv[32 * g + i]))) end
        local e = 0   -- frexp's exponent: 2^(e - 1) <= amax < 2^e
        if amax > 0 then
          e = math.floor(math.log(amax, 2)) + 1
          while 2.0 ^ (e - 1) > amax do e = e - 1 end
          while 2.0 ^ e <= amax do e = e + 1 end
        end
        for i = 1, 32 do
          local q = f32(xv[32 * g + i]) * 2.0 ^ (7 - e)
          local r = math.floor(q + 0.5)
          if r - q == 0.5 and r % 2 ~= 0 then r = r - 1 end   -- roundEven
          xv[32 * g + i] = math.max(-127, math.min(127, r)) * 2.0 ^ (e - 7)
        end
      end
    end
    for n = 0, op.N - 1 do
      local acc = 0
      for k = 0, K - 1 do
        local e = n * K + k
        local wv
        if op.fmt ~= "f16" then
          local g = e // 32
          local sc = half(op.s_off, g)
          if op.fmt == "q8" then
            local b = (hash(op.w_off // 4 + e // 4) >> (8 * (e % 4))) & 255
            wv = (b >= 128 and b - 256 or b) * sc
          else
            local j = e % 32
            local byte = (hash(op.w_off // 4 + g * 4 + (j % 16) // 4) >> (8 * (j % 4))) & 255
            local code = j < 16 and (byte & 15) or (byte >> 4)
            if op.fmt == "q5" then code = code | (((hash(op.h_off // 4 + g) >> j) & 1) << 4) end
            wv = (code - (op.fmt == "q5" and 16 or 8)) * sc
          end
        elseif q4 then wv = ((hash(op.w_off // 4 + e // 8) >> (4 * (e % 8))) & 15) - 8
        else wv = half(op.w_off, e) end
        acc = acc + wv * xv[k + 1]
      end
      local r = q4 and (0.75 + (hash(op.s_off // 4 + n) & 255) / 512) * 0.25 / math.sqrt(K) or 1 / math.sqrt(K)
      y[n + 1] = acc * r
    end
    x = y
    ::continue::
  end
  return x
end

local function run_mode(dev, k, o, mode, c)
  local rec = dev:recorder()
  local steps = o.tokens * #c.ops
  local push = { ops = c.opt, w = c.w, act = c.act, ctl = c.ctl, n_ops = #c.ops, slot = c.slot }
  if mode == "persistent" then
    rec:dispatch(k.reset, { 1 }, push_of { ops = c.opt, w = c.w, act = c.act, ctl = c.ctl })
    push.first, push.steps = 0, steps
    rec:dispatch(k.persistent, { c.groups }, push_of(push))
  elseif mode == "chain" then
    -- no barriers: each dispatch's workgroups wait for all the workgroups of the dispatches before
    rec:dispatch(k.reset, { 1 }, push_of { ops = c.opt, w = c.w, act = c.act, ctl = c.ctl })
    rec:barrier()   -- the steps below are self-ordered: the recorder puts no barrier after the reset
    push.steps = 1
    for s = 0, steps - 1 do
      push.first, push.target = s, s * c.dgroups
      rec:dispatch(k.chain, { c.dgroups }, push_of(push), { self_ordered = true })
    end
  else
    push.steps = 1
    for s = 0, steps - 1 do
      push.first = s
      rec:dispatch(k.dispatch, { c.dgroups }, push_of(push))
    end
  end
  local times = {}
  for r = 0, o.runs do      -- run 0 warms up (and compiles)
    c.act:upload(c.x0)
    local t0 = doppler.clock()
    rec:run()
    if r > 0 then times[#times + 1] = doppler.clock() - t0 end
    if (mode == "persistent" or mode == "chain") and string.unpack("<I4", c.ctl:read(4, 4)) ~= 0 then
      error(("%s: a wait gave up (are %d workgroups of %d resident at once?)"):format(mode,
        mode == "chain" and c.dgroups or c.groups, o.wg), 0)   -- each run resets the flag
    end
  end
  table.sort(times)
  local med = times[(#times + 1) // 2]
  local out_slot = steps % 2
  local y = c.act:read(out_slot * c.slot * 4, c.ops[(steps - 1) % #c.ops + 1].N * 4)
  return med, y, rec:stats()
end

local function main(argv)
  local o = cli.parse(argv, spec)
  if #o._ > 0 then error(("unexpected argument '%s' (options start with --)"):format(o._[1]), 0) end
  local s = SHAPES[o.shape] or error(("--shape: '%s' is not llama, gemma or tiny"):format(o.shape), 0)
  if o.weights ~= "f16" and o.weights ~= "q4" and o.weights ~= "q4_k_m" then
    error(("--weights: '%s' is not f16, q4 or q4_k_m"):format(o.weights), 0)
  end
  local q4 = o.weights == "q4"
  local types = o.weights == "q4_k_m" and Q4KM[o.shape] or nil
  local SYNC = { acquire = 0, volatile = 1, fence = 2 }
  if not SYNC[o.sync] then error(("--sync: '%s' is not acquire, volatile or fence"):format(o.sync), 0) end
  local modes = {}
  for m in o.modes:gmatch("[^,%s]+") do
    if m ~= "persistent" and m ~= "dispatch" and m ~= "chain" and m ~= "sync" then
      error(("--modes: '%s' is not persistent, dispatch, chain or sync"):format(m), 0)
    end
    modes[#modes + 1] = m
  end
  if o.context > MAX_P then error(("--context %d: the kernel holds at most %d positions"):format(o.context, MAX_P), 0) end
  if o.wg < s.head_dim and not o.no_attention then
    error(("--wg %d: the attention step needs at least head_dim = %d invocations"):format(o.wg, s.head_dim), 0)
  end
  local dev = doppler.device()
  local caps = dev:caps()
  if o.wg > caps.max_wg_invocations then
    error(("--wg %d: the device takes at most %d"):format(o.wg, caps.max_wg_invocations), 0)
  end
  local cpu = caps.type == "cpu"
  local c = { groups = o.groups > 0 and o.groups or (cpu and 1 or 132) }
  c.dgroups = o.dispatch_groups > 0 and o.dispatch_groups or c.groups
  local wants_grid = false
  for _, m in ipairs(modes) do wants_grid = wants_grid or m ~= "dispatch" end
  if cpu and c.groups > 1 and wants_grid then   -- see the shader: llvmpipe ends long polls early
    error(("--groups %d: a CPU device (%s) cannot hold a grid barrier between workgroups; use --groups 1"):format(
      c.groups, caps.name), 0)
  end
  local function kern(mode, max_k)
    local Q4 = q4 and 1 or types and 2 or 0   -- the shader's weights: f16, 4-bit, or mixed (q4_k_m)
    return dev:kernel { file = FILE, constants = { WG = o.wg, UN = o.un, Q4 = Q4, MODE = mode, MAX_K = max_k,
                                                   SYNC = SYNC[o.sync] } }
  end
  local init = kern(3, 32)

  local rows = {}
  for _, mode in ipairs(modes) do
    local sync = mode == "sync"
    c.ops = sync and {} or token_ops(s, not o.no_head, not o.no_attention, o.context, not o.no_norm, types)
    if sync then   -- empty steps (no rows), each staging an x of 32 values: what ordering alone costs
      for i = 1, 4 * s.layers do c.ops[i] = { N = 0, K = 32, flags = 0, name = "empty", fmt = "f16" } end
    end
    c.w, c.wbytes = make_weights(dev, c.ops, q4, init)
    local max_k = 32
    for _, op in ipairs(c.ops) do max_k = math.max(max_k, op.K) end
    local shared = 4 * (max_k + (q4 and max_k // 8 or 0) + o.wg + MAX_P)   -- the kernel's xs (padded for q4), red, sc
    if shared > caps.max_shared_memory then
      error(("a K of %d and --wg %d need %d bytes of shared memory; the device has %d"):format(max_k, o.wg,
        shared, caps.max_shared_memory), 0)
    end
    local k = { dispatch = kern(0, max_k), persistent = kern(1, max_k), reset = kern(2, 32), chain = kern(4, max_k) }
    c.slot = 32
    for _, op in ipairs(c.ops) do c.slot = math.max(c.slot, op.N, 2 * op.K) end
    local tab = {}
    for _, op in ipairs(c.ops) do
      tab[#tab + 1] = string.pack("<I4I4I4I4I4I4I4I4I4I4I4I4", op.w_off & 0xffffffff, op.w_off >> 32, op.N, op.K,
                                  op.flags, op.s_off & 0xffffffff, op.s_off >> 32, 0,
                                  op.hd or op.h_off & 0xffffffff, op.heads or op.h_off >> 32, op.kv or 0, op.P or 0)
    end
    c.opt = dev:tensor { dtype = "u8", shape = { #tab * 48 } }
    c.opt:upload(table.concat(tab))
    c.act = dev:tensor { dtype = "f32", shape = { 2 * c.slot } }
    c.ctl = dev:tensor { dtype = "u8", shape = { 256 } }
    c.ctl:upload(string.rep("\0", 256))
    local xv, x0_bytes = {}, {}   -- the first step's input: seeded values, exact in f32 (the reference reads xv)
    math.randomseed(1)
    for i = 1, 2 * c.slot do
      x0_bytes[i] = string.pack("<f", i <= c.slot and (2 * math.random() - 1) or 0)
      xv[i] = string.unpack("<f", x0_bytes[i])
    end
    c.x0 = table.concat(x0_bytes)

    local sub = sync and { "dispatch", "persistent", "chain" } or { mode }
    for _, m in ipairs(sub) do
      local sec, y, st = run_mode(dev, k, o, m, c)
      local steps = o.tokens * #c.ops
      local bytes = 0
      for _, op in ipairs(c.ops) do
        if op.flags & ATTN ~= 0 then bytes = bytes + 2 * op.P * op.kv * op.hd * 2
        elseif op.fmt ~= "f16" then bytes = bytes + op.N * op.K * FMT_BYTES[op.fmt]
        else bytes = bytes + op.N * op.K * (q4 and 0.5 or 2) + (q4 and 4 * op.N or 0) end
      end
      local r = {
        probe = "persistent_chain", mode = sync and ("sync_" .. m) or m, shape = o.shape, weights = o.weights,
        head = not o.no_head, attention = not o.no_attention, norm = not o.no_norm, context = o.context,
        tokens = o.tokens,
        runs = o.runs, steps_per_token = #c.ops,
        groups = m == "persistent" and c.groups or c.dgroups, wg = o.wg, un = o.un, sync = o.sync,
        weight_bytes_per_token = math.floor(bytes),
        ms_per_token = sec * 1e3 / o.tokens, us_per_step = sec * 1e6 / steps,
        tok_s = o.tokens / sec, gb_s = bytes * o.tokens / sec / 1e9,
        dispatches = st.dispatches, barriers = st.barriers,
        device = caps.name, driver = caps.driver, label = o.label,
      }
      rows[#rows + 1] = r
      r.y = y
      if not sync and (o.check or o.shape == "tiny") then
        local got = {}
        for i = 1, #y // 4 do got[i] = string.unpack("<f", y, 4 * i - 3) end
        local x0 = {}
        for i = 1, c.slot do x0[i] = xv[i] end
        local ref = reference(c.ops, q4, x0, steps)
        local worst = 0
        for i = 1, #ref do worst = math.max(worst, math.abs(got[i] - ref[i]) / (1 + math.abs(ref[i]))) end
        r.check_max_rel_err = worst
        if worst > 1e-3 then error(("%s: output differs from the CPU reference (%.3g)"):format(m, worst), 0) end
      end
    end
  end
  -- The modes run the same arithmetic: their outputs must be the same bits.
  local first = {}
  for _, r in ipairs(rows) do
    local key = r.mode:gsub("^sync_", "")
    local group = r.mode:match("^sync_") and "sync" or "model"
    local prev = first[group]
    if prev then r.same_bits = (prev == r.y) else first[group] = r.y; r.same_bits = true end
    if not r.same_bits then error(("%s: output differs from the first mode's"):format(key), 0) end
    r.y = nil
    if not o.table then print(json.encode(r)); io.stdout:flush() end
  end
  if o.table then
    print("| device | shape | weights | mode | sync | groups | WG | UN | ms/token | tok/s | GB/s | µs/step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for _, r in ipairs(rows) do
      print(("| %s | %s | %s | %s | %s | %d | %d | %d | %.4f | %.1f | %.1f | %.2f |"):format(r.device, r.shape,
        r.weights, r.mode, r.sync, r.groups, r.wg, r.un, r.ms_per_token, r.tok_s, r.gb_s, r.us_per_step))
    end
  end
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("persistent: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
