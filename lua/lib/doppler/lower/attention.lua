-- doppler.lower.attention: RoPE, attention and the KV cache: flash-decoding for decode-sized passes (with the
-- attention_rope fusion's prologue), tiled flash attention for prefill (on cooperative matrices where the
-- device has them), the basic kernel, the cache append, and the fused q/k norm + RoPE + append (rope_kv).
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local M, R = B.M, B.M.rules
local WG_MAX_GROUPS, ceil_div, groups_1d = B.WG_MAX_GROUPS, B.ceil_div, B.groups_1d
local zeroed_counters, norm_layout, subgroup_size = B.zeroed_counters, B.norm_layout, B.subgroup_size
local Cpu = require "doppler.lower.cpu"
local on_cpu = Cpu.on_cpu

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
local ATTN_MERGE_CHUNKS = 64   -- attention_decode.comp's MAX_CHUNKS unless a plan takes more chunks
local ATTN_MAX_CHUNKS = 256    -- the most chunks a plan may take (MAX_CHUNKS, a spec constant, follows)
local ATTN_AUTO_CHUNKS = 64    -- the most the auto takes
local ATTN_LONG_KEYS = 128     -- auto: at least a chunk per this many keys of the capacity (decode_chunks)
local ATTN_SHARED = 32768      -- the least maxComputeSharedMemorySize of the devices served (lavapipe)

-- attention_decode.comp's shared memory for a variant, in bytes (red_ml, the shared array sh, last_s); with
-- nl (the DP_ROPE_QK variant, rmsnorm's nl lanes per row) sh also holds the prologue's rows, plus norm_red;
-- maxc: its MAX_CHUNKS (default ATTN_MERGE_CHUNKS)
local function decode_shared(wg, lk, D, G, nl, maxc)
  local ncl = wg // lk
  local sh = math.max(ncl * D, 2 * G * (maxc or ATTN_MERGE_CHUNKS) + G)
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
-- keys and at most ATTN_MAX_CHUNKS (256): hint attention_splits, else on a GPU (at most ATTN_AUTO_CHUNKS, 64) the
-- larger of 256 / (kv heads x tokens) workgroups' worth and one chunk per ATTN_LONG_KEYS x tokens keys of the
-- plan's capacity (max_keys: the context, or the window; a pass of T tokens has T times the workgroups, as in
-- the first term). Why the auto stops at 64: more were slower (H100, Llama 3.2 1B F16 after 16000
-- tokens, context 16384: 491 tok/s with 64 chunks, 470 with 128, 432 with 256; docs/BENCHMARKS.md 56a).
-- Why 256: a GPU needs hundreds of workgroups in flight while one decode step's attention has a few per kv head.
-- Why the capacity too: a chunk's keys are read in rounds, one memory round trip each, so a long context in
-- few chunks is bound by those round trips, not by its bytes. Llama 3.2 1B Q4_K_M (8 kv heads: 32 chunks by
-- the first term) after a 16,000-token prompt, context 16384, decoded at 445 tok/s with 32 chunks (attention
-- 1.35 ms of GPU time per token, ~7x its 0.52 GB of keys and values at the copy rate) and at 587 with 64;
-- after a 3,900-token prompt at the default context (4096), 755-772 against 798-812 (H100, docs/BENCHMARKS.md
-- 55a). At 4096 keys the second term does not exceed the first for up to 8 kv heads (32 / T), so Gemma's and
-- Llama's plans of the default context keep the chunks whose short-prompt decode the issue-7 figures measured
-- (64 chunks there have not been timed at short prompts); a model with more kv heads (Phi-3 mini: 32, 8 chunks
-- by the first term) takes up to 32 there. Chunks past the keys written so far exit at once.
-- On a CPU device (caps.type "cpu": lavapipe) the built-in is 1: there workgroups run one after
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
    splits = on_cpu(ctx) and 1 or math.min(ATTN_AUTO_CHUNKS,
                                           math.max(1, 256 // (Hkv * T), ceil_div(max_keys, ATTN_LONG_KEYS * T)))
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

-- attention_decode's MAX_CHUNKS for n_chunks: ATTN_MERGE_CHUNKS (every plan of up to 64 chunks keeps the
-- pipeline, and the shared memory, it had), else n_chunks, where the device's shared memory holds its merge
local function merge_chunks(ctx, n_chunks, wg, lk, D, G, nl)
  if n_chunks <= ATTN_MERGE_CHUNKS then return ATTN_MERGE_CHUNKS end
  local bytes, limit = decode_shared(wg, lk, D, G, nl, n_chunks), ctx.dev:caps().max_shared_memory
  if bytes > limit then
    Graph.fail("attention_decode: %d chunks need %d bytes of shared memory for their merge (this device has %d): " ..
               "lower attention_splits", n_chunks, bytes, limit)
  end
  return n_chunks
end

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
                   NL = nl, MAX_CHUNKS = merge_chunks(ctx, n_chunks, wg, lk, D, G, nl) }
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

-- attention_prefill_cm's shared memory (its header)
local function attention_cm_shared(D, split, bc, rt)
  local sgs = split * rt
  return (math.max(bc, 16 * rt) + bc) * (D + 8) * 2 + sgs * 16 * bc * 4 + sgs * 16 * (bc + 8) * 2 + 1024 + sgs * 64
end

-- attention_prefill_cm (attention/attention_prefill_cm.comp): flash attention on cooperative matrices, for
-- prefill where the device has VK_NV_cooperative_matrix 16 x 16 x 16 f16 tiles (with 32-wide subgroups) and
-- q, k, v and the caches are f16. A workgroup takes RT tiles of 16 rows (hint attention_prefill_cm_rows), the
-- head dims of each are split between SPLIT subgroups (hint attention_prefill_cm_split) and each key tile
-- holds BC keys (hint attention_prefill_cm_keys).
-- auto, head_dim > 128 (Gemma 3's 256): 4 subgroups, 16 keys, two row tiles where they fit the shared memory
-- (else one). On the H100, Gemma 3 1B 512-token prefill, attention per pass: 4.36 ms with attention_prefill,
-- 1.81 at split 4, 2.58 at 8, 1.89 at split 4 with 32 keys; split 2 prefilled 32.7k tok/s against 34.9k at 4
-- (docs/BENCHMARKS.md). Two row tiles (57b, 57c, two fresh processes each): attention 1.85 -> 1.75 ms at 512
-- prompt tokens, 26.0 -> 23.3 at 3900, 228.4 -> 208.2 at 16000, the whole prefill 1.03x faster at 3900 and
-- 16000; 4 and 8 row tiles were slower (15.7 against 13.3 GPU ms at 512, 57a's tune). At split 2 too, two
-- row tiles beat one (56a: 38.3k against 36.6k tok/s at 512). More keys per tile do not fit beside them.
-- auto, head_dim <= 128: one subgroup per row tile (so a tile's scores need no sum across subgroups), then
-- the most row tiles (8, 4, 2) whose key tiles of 16 fit the shared memory, then the most keys per tile
-- (64, 32) that still fit: head_dim 64 takes 8 row tiles of 16 keys, 128 takes 4 of 32. On the H100 (56a),
-- Llama 3.2 1B (head_dim 64), attention per profiled prefill at 1024 / 3900 prompt tokens: 8.92 / 120.8 ms
-- with the plan above (4 subgroups, 16 keys, 1 row tile), 3.39 / 37.6 with 4 row tiles of 64 keys, 3.30 /
-- 39.2 with 4 of 32, 2.58 / 30.3 with 8 of 16; more rows gain more than more keys.
local function attention_cm_params(ctx, D, hints)
  local split = hints.attention_prefill_cm_split or 0
  local bc = hints.attention_prefill_cm_keys or 0
  local rt = hints.attention_prefill_cm_rows or 0
  if split == 0 then
    split = D <= 128 and 1 or 4
    while split > 1 and D % (16 * split) ~= 0 do split = split // 2 end
  end
  local limit = ctx.dev:caps().max_shared_memory
  if rt == 0 then
    rt = 1
    for _, r in ipairs(split == 1 and { 8, 4, 2 } or { 2 }) do
      if attention_cm_shared(D, split, math.max(bc, 16), r) <= limit then rt = r; break end
    end
  end
  if bc == 0 then
    bc = 16
    if rt > 1 and split == 1 then
      for _, b in ipairs { 64, 32 } do
        if attention_cm_shared(D, split, b, rt) <= limit then bc = b; break end
      end
    end
  end
  return split, bc, rt
end
M.attention_prefill_cm_params = attention_cm_params   -- tests check the auto rule on fake devices

-- Why attention_prefill_cm cannot take this attention node, or nil when it can.
local function attention_cm_refusal(ctx, n, kv_f16, D, hints)
  local c = ctx.dev:caps()
  local shape = c.coopmat_shape
  if not (c.coopmat_nv and c.subgroup_size == 32 and shape and shape[1] == 16 and shape[2] == 16 and shape[3] == 16) then
    return "the device has no VK_NV_cooperative_matrix 16 x 16 x 16 f16 tiles with 32-wide subgroups"
  end
  if ctx.env.act ~= "f16" or not kv_f16 then return "its activations and KV cache are not both f16" end
  local split, bc, rt = attention_cm_params(ctx, D, hints)
  if D % (16 * split) ~= 0 or D > 256 then
    return ("head_dim %d is not a multiple of 16 * %d subgroups, or exceeds 256"):format(D, split)
  end
  if bc % 16 ~= 0 then return ("%d keys per tile is not a multiple of 16"):format(bc) end
  if 32 * split * rt > c.max_wg_invocations then
    return ("%d subgroups of 32 (%d split x %d row tiles) exceed the device's %d invocations per workgroup"):format(
      split * rt, split, rt, c.max_wg_invocations)
  end
  local need, limit = attention_cm_shared(D, split, bc, rt), c.max_shared_memory
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
                          { WG = wg, D = D, G = G, GS = gs, LK = lk, UK = uk,
                            MAX_CHUNKS = merge_chunks(ctx, n_chunks, wg, lk, D, G) })
    ctx.dispatch(kd, Hkv * gs, n_chunks, T, push)
  elseif mode ~= "flash" and not attention_cm_refusal(ctx, n, kv_f16, D, hints) then
    -- attention_prefill_cm: the same tiles on the matrix units, 16 * RT rows per workgroup
    local split, bc, rt = attention_cm_params(ctx, D, hints)
    push.o = ctx.t(n)
    local kp = ctx.kernel("attention/attention_prefill_cm.comp", ctx.defines(kvdef),
                          { WG = 32 * split * rt, D = D, SPLIT = split, BC = bc, RT = rt })
    ctx.dispatch(kp, ceil_div(T * (Hq // Hkv), 16 * rt), Hkv, 1, push)
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
