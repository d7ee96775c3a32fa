-- doppler.hints: kernel and precision hints, their valid values, and where each value came from.
-- Precedence, lowest first: built-in default < tune cache (doppler.tune, `doppler tune`) < recipe < manifest
-- < --hints FILE < --hint KEY=VALUE.
-- An unknown key or value is an error that lists the valid ones.

local M = {}

-- name -> { values = {...} | kind = "int", default = ..., doc = ... }
M.known = {
  precision     = { values = { "default", "f32" }, default = "default",
                    doc = "f32 runs every activation and the KV cache in f32 (the accuracy reference)" },
  kv_dtype      = { values = { "auto", "f16", "f32" }, default = "auto",
                    doc = "KV cache element type (auto: f16, or f32 with precision=f32)" },
  weight_dtype  = { values = { "auto", "f32", "f16", "bf16" }, default = "auto",
                    doc = "float weights on the device (auto: f16 from f32 files, as stored otherwise; f32 with precision=f32)" },
  act_dtype     = { values = { "auto", "f16", "f32" }, default = "auto",
                    doc = "activation element type (auto: f16, or f32 with precision=f32)" },
  prefill_chunk = { kind = "int", min = 1, default = 512, doc = "tokens per prefill pass (longer prompts run in chunks; 512: on the H100 a 512-token prompt in one pass prefilled 1.7x faster than in two, docs/BENCHMARKS.md)" },
  context       = { kind = "int", min = 1, default = 4096, doc = "context length (KV cache positions)" },
  decode_chunk  = { kind = "int", min = 1, default = 16,
                    doc = "decode steps per submit, run by the GPU itself (sample, stop check, next step: doppler.loop); 1: one submit per token" },
  loop_skip     = { values = { "auto", "conditional", "indirect" }, default = "auto",
                    doc = "how the GPU decode loop skips its steps after a stop: conditional rendering, one read of a state word per step (an error where the device lacks VK_EXT_conditional_rendering), or every kernel dispatched indirectly (auto: conditional where the device has it; on the H100 indirect dispatches cost ~0.1 ms per token, docs/BENCHMARKS.md 31j)" },
  matmul        = { values = { "auto", "gemv", "gemm", "coopmat" }, default = "auto",
                    doc = "matrix kernel for T > 1 (auto: for T > 4 gemm_cm on cooperative matrices where the device has them and x, W are f16; else gemv for float weights, which beat the tiled gemm at every T measured on the H100, gemm_q for quantised ones; coopmat: gemm_cm at every T, an error where it cannot run)" },
  gemm_cm_tile  = { values = { "auto", "32x32", "32x64", "64x32", "64x64", "64x128", "128x64", "128x128" }, default = "auto",
                    doc = "gemm_cm: tokens x outputs per workgroup (auto: 128x128 where that gives >= 128 workgroups, else 64x64)" },
  weight_quant  = { values = { "keep", "dequant" }, default = "keep",
                    doc = "quantised weights: keep the blocks on the device (GPU kernels decode them) or dequantise at load" },
  attention_decode  = { values = { "auto", "flash", "basic" }, default = "auto",
                        doc = "attention for T <= 4: flash-decoding (split over key chunks + merge) or the basic kernel (auto: flash)" },
  attention_prefill = { values = { "auto", "coopmat", "flash", "basic" }, default = "auto",
                        doc = "attention for T > 4: tiled flash attention on cooperative matrices (coopmat: attention_prefill_cm, an error where it cannot run), on FMAs (flash), or the basic kernel (auto: coopmat where the device has VK_NV_cooperative_matrix and activations and KV are f16, else flash)" },
  attention_splits  = { kind = "int", min = 0, default = 0,
                        doc = "flash-decoding: most key chunks per (kv head, token) (0: auto, 256 / (kv heads * T) and at least one per 128 * T keys of the context; at most 64; 1 on a CPU device); at most 256 are used" },
  attention_min_chunk = { kind = "int", min = 0, default = 0,
                          doc = "flash-decoding: fewest keys per chunk (0: auto, one round of the workgroup: its clusters times attention_unroll)" },
  -- fuse2: attention_decode's variants (lower/attention.lua, decode_variant: a value the head_dim or the device's
  -- subgroup size cannot take is an error listing the valid ones)
  attention_lanes = { values = { "auto", "1", "2", "4", "8", "16", "32", "64", "128" }, default = "auto",
                      doc = "flash-decoding: lanes per key row (auto: min(subgroup size, head_dim / 8 with an f16 cache, / 4 with f32))" },
  attention_wg    = { values = { "auto", "32", "64", "128", "256", "512", "1024" }, default = "auto",
                      doc = "flash-decoding: workgroup size, a multiple of the lanes per key row (auto: 8 clusters of lanes, at least the rope prologue's lanes per row; with attention_heads > 1: 256 where its shared memory fits, else max(128, lanes))" },
  attention_unroll = { values = { "auto", "1", "2", "4", "8" }, default = "auto",
                       doc = "flash-decoding: key rows each cluster of lanes loads at once (auto: 1; with attention_heads > 1: 2)" },
  attention_heads = { values = { "auto", "1", "2", "4", "8", "16" }, default = "auto",
                      doc = "flash-decoding: q heads per workgroup, dividing the q heads of a kv head (auto: 1, a workgroup per q head and key chunk; more share each load of K and V)" },
  q_matmul      = { values = { "auto", "fused", "dequant_f16" }, default = "auto",
                    doc = "linears with quantised weights: decode in the matrix kernel, or an f16 copy made once per weight; auto: dequant_f16 on devices with at least 16 GiB of device memory (it decoded faster on the H100) unless precision=f32 (an f16 copy would round the weights), fused elsewhere (it keeps a quantised model within small memories such as lavapipe's 2 GiB)" },
  q_matmul_head = { values = { "auto", "fused", "dequant_f16" }, default = "auto",
                    doc = "the same for the LM head's weight; auto: as q_matmul, except that where q_matmul is auto and gives the f16 copies, a Q8_0 head, or a Q6_K head stored flat, on a device with accelerated integer dot products stays in blocks (the quantised head on int8 activations read half the bytes and ran faster on the H100; no 600 MB copy for Gemma 3, 525 MB for Llama 3.2 1B)" },
  q_matmul_glu  = { values = { "auto", "fused", "dequant_f16" }, default = "auto",
                    doc = "the same for the gate and up projections taken in one pass; auto: as q_matmul, except that where q_matmul is auto and gives the f16 copies, decode (up to 4 tokens) of a pair of one block type on a device with accelerated integer dot products reads the blocks (faster than the copies on the H100) and prefill keeps the copies" },
  q_layout      = { values = { "auto", "row_wise", "column_wise", "flat" }, default = "auto",
                    doc = "device storage order of quantised matrices kept as blocks (docs/QUANTIZATION.md, Weight layouts); auto: flat, repacked on the device at load, where the device has at least 16 GiB (measured faster on the H100), else row_wise" },
  q4k_layout    = { values = { "auto", "row_wise", "column_wise", "flat" }, default = "auto",
                    doc = "the same for Q4_K matrices (auto: as q_layout)" },
  fusion        = { kind = "names", default = "on",
                    doc = "fusion rules (docs/OPS.md, Fusions): on, off, NAME,NAME (only those) or -NAME,-NAME (all but those)" },
  side_prefetch = { values = { "auto", "on", "off" }, default = "auto",
                    doc = "decode passes (T <= 4): a kernel on a second queue reads each stage's weights into L2 while the stage before it runs (gpu/prefetch.h); auto: on where the device has a second compute queue family and is not a CPU (decode 1.02-1.04x on the H100, docs/BENCHMARKS.md session 20), on: wherever it can run (an error where it cannot), off: never" },
  clock_warmup  = { values = { "auto", "on", "off" }, default = "auto",
                    doc = "while the host loads weights or compiles a plan, one workgroup spins on a second queue so that the GPU's clock is up when the passes run (gpu/warmup.h; on the H100 the first ~0.2-0.3 s of passes after 1.5-3 s of idle GPU ran ~4x slower, docs/BENCHMARKS.md session 31); auto: where the device has a second compute queue family and is not a CPU, on: wherever it can run (an error where it cannot), off: never" },
  glu_down      = { values = { "auto", "on", "off" }, default = "auto",
                    doc = "one-token passes: gate+up, the activation and down in one dispatch (fusion glu_down: matmul/gemv_q.comp's DP_DOWN, the down projection added into a 64-bit fixed-point sum with atomics; quantised gate+up in blocks, or with `on` float gate+up and an f16 down: fused/glu_down_float.comp; f16 activations, int64 atomics); auto: on for quantised gate+up where the device is not a CPU, on: wherever those hold, off: never" },
  glu_down_cols = { values = { "auto", "f16" }, default = "auto",
                    doc = "the fused MLP's down projection: auto reads a Q4_K or Q6_K down by its own blocks re-laid by columns (exact; where the rows of h per workgroup are a multiple of 32), else its f16 values by columns; f16: always the f16 values" },
  q_layout_cache = { values = { "on", "off" }, default = "on",
                    doc = "keep repacked layouts in MODEL.doppler-cache/ next to the model file (skipped if not writable)" },
}

-- ---- tunable kernel parameters (doppler tune: docs/TUNING.md) ------------------------------------------
-- 0 = the built-in choice; `choices` lists the accepted values (anything else is an error listing them).
M.known.gemv_wg     = { kind = "int", choices = { 0, 32, 64, 128, 256, 512 }, default = 0,
                        doc = "float GEMV (matmul/gemv.comp): workgroup size (0: 128; on a CPU device 8 x the subgroup size, with 8 rows, where gemv_rows is 0 too)" }
M.known.gemv_rows   = { kind = "int", choices = { 0, 1, 2, 4, 8 }, default = 0,
                        doc = "float GEMV: rows of W per workgroup (0: 1 for a linear and 2 for the LM head on a GPU; 8 on a CPU device where gemv_wg is 0 too)" }
M.known.gemv_multi_rows = { kind = "int", choices = { 0, 1, 2, 4, 8 }, default = 0,
                        doc = "fused float GEMVs (fused/gemv_multi.comp: q/k/v, gate+up): rows per workgroup (0: 2 on a GPU; 8 on a CPU device); same sums for every value" }
M.known.gemv_q_wg   = { kind = "int", choices = { 0, 32, 64, 128, 256, 512 }, default = 0,
                        doc = "quantised GEMV (matmul/gemv_q.comp): workgroup size (0: 128; 256 for gate+up where that gives 8 rows and int8 x, docs/BENCHMARKS.md 18h; on a CPU device 8 x the subgroup size, with 8 rows)" }
M.known.gemv_q_rows = { kind = "int", choices = { 0, 1, 2, 4, 8, 16, 32, 64 }, default = 0,
                        doc = "quantised GEMV: rows of W per workgroup (0: per matrix, the most of 8, 4, 2, 1 that leaves >= 768 workgroups and <= 3 units of 32 values per thread; 8 on a CPU device where gemv_q_wg is 0 too)" }
M.known.gemv_unroll = { kind = "int", choices = { 0, 1, 2, 4 }, default = 0,
                        doc = "float GEMVs (matmul/gemv.comp, fused/gemv_multi.comp): 16-byte chunks whose loads each thread issues before their arithmetic (0: 2); same sums for every value" }
M.known.gemv_q_x = { values = { "auto", "act", "q8", "q8x2" }, default = "auto",
                     doc = "quantised GEMV (matmul/gemv_q.comp, DP_GLU included): activations as they are (act), or quantised per 16 values in each workgroup and multiplied on the integer dot-product units: q8 one int8 plane (within max|x|/254 per group; lossy: llama.cpp's scheme), q8x2 two (within max|x|/64516, finer than f16); auto: q8x2 per matrix where the packed dot products are accelerated and a workgroup takes >= 16 row dot products (rows x weights) per staging of x, and for the LM head (fused/lm_head_q.comp stages x once for hundreds of rows; its unfused gemv_q follows), act elsewhere (docs/BENCHMARKS.md 16c, 18b; doppler tune measures auto, act and q8x2)" }
M.known.gemv_q_unroll = { kind = "int", choices = { 0, 1, 2, 4 }, default = 0,
                        doc = "quantised GEMV (matmul/gemv_q.comp, DP_GLU included): 32-value units whose loads each thread issues before their arithmetic (0: 1); same sums for every value" }
M.known.prefetch_groups = { kind = "int", choices = { 0, 8, 16, 32, 48, 64, 128 }, default = 0,
                        doc = "side prefetch: workgroups of the side kernel (0: 32)" }
M.known.prefetch_wg = { kind = "int", choices = { 0, 32, 64, 128, 256, 512 }, default = 0,
                        doc = "side prefetch: invocations per workgroup of the side kernel (0: 256)" }
M.known.prefetch_depth = { kind = "int", choices = { 0, 1, 2, 3, 4 }, default = 0,
                        doc = "side prefetch: stages ahead of its own that a stage's weights are read (0: 1)" }
M.known.prefetch_lead = { kind = "int", choices = { 0, 1, 2, 3, 4 }, default = 0,
                        doc = "side prefetch: a stage's weights may be read from the last light stage (no weights of its own, such as attention) up to this many stages before it, where DRAM is otherwise idle and the bytes from there fit prefetch_max_mb (0: 3; 1: never earlier than prefetch_depth; docs/BENCHMARKS.md 43c)" }
M.known.prefetch_max_mb = { kind = "int", choices = { 0, 8, 16, 24, 32, 48, 64 }, default = 0,
                        doc = "side prefetch: largest weight range read ahead, in MiB (0: 24; larger ones, such as a head, would not stay in L2)" }
M.known.prefetch_skip = { values = { "off", "finished", "begun" }, default = "off",
                        doc = "side prefetch: stages whose weights the side kernel does not read when it reaches them late: none (off), those the main queue has finished (their weights will not be read again this run), or those it has begun; the device's counts (dev:prefetch_counts) say how many were late (docs/BENCHMARKS.md, session 39)" }
M.known.prefetch_min_kb = { kind = "int", choices = { 0, 1, 16, 64, 256, 1024 }, default = 0,
                        doc = "side prefetch: smallest weight range read ahead, in KiB (0: 256)" }
M.known.gemm_cm_bk = { kind = "int", choices = { 0, 32, 64, 128 }, default = 0,
                        doc = "gemm_cm: K slice staged per step (0: 64 where its shared memory fits the device, else 32; 32 where K > 4096)" }
M.known.gemm_cm_splits = { kind = "int", choices = { 0, 1, 2, 4, 8, 16 }, default = 0,
                        doc = "gemm_cm: parts K is split into, each its own workgroup, summed by the last (0: auto, doubling while the grid has < 128 workgroups and each part keeps >= 3 K slices, or a part has > 32 slices; 1: off)" }
M.known.attention_prefill_lanes = { kind = "int", choices = { 0, 1, 2, 4, 8, 16, 32, 64 }, default = 0,
                        doc = "tiled flash prefill: lanes per (token, q head) row, <= the subgroup size and dividing head_dim (0: the largest power of two <= min(subgroup, head_dim / 8) dividing head_dim)" }
M.known.attention_prefill_rows = { kind = "int", choices = { 0, 4, 8, 16, 32 }, default = 0,
                        doc = "tiled flash prefill (attention_prefill.comp): (token, q head) rows per workgroup (0: 16); fewer rows, more workgroups" }
M.known.attention_prefill_cm_split = { kind = "int", choices = { 0, 1, 2, 4, 8 }, default = 0,
                        doc = "flash prefill on cooperative matrices (attention_prefill_cm.comp): subgroups sharing a 16-row tile, each with head_dim / this many dims (0: 1 for head_dim <= 128, else 4, or the most that divide head_dim / 16)" }
M.known.attention_prefill_cm_rows = { kind = "int", choices = { 0, 1, 2, 4, 8 }, default = 0,
                        doc = "flash prefill on cooperative matrices: tiles of 16 (token, q head) rows per workgroup, sharing each key tile (0: at split 1 the most of 8, 4, 2 that fit the shared memory with 16 keys, at a larger split 2 where they fit, else 1)" }
M.known.attention_prefill_cm_keys = { kind = "int", choices = { 0, 16, 32, 64 }, default = 0,
                        doc = "flash prefill on cooperative matrices: keys per tile (0: at split 1 with several row tiles the most of 64, 32 that fit the shared memory, else 16)" }
M.known.lm_head_groups = { kind = "int", min = 0, default = 0,
                        doc = "fused final norm + LM head + argmax (fusion lm_head): most workgroups (0: 1024; 16 on a CPU device, raised there to what keeps each invocation's loops under llvmpipe's limit, lower.cpu_loop_blocks)" }
M.known.lm_head_queue = { values = { "auto", "on", "off" }, default = "auto",
                        doc = "quantised LM head (fused/lm_head_q.comp): workgroups take their row blocks from a queue instead of fixed shares, so that workgroups starting late (fewer resident than dispatched) find less left; auto = on for a GPU, off on a CPU device (docs/BENCHMARKS.md 41a, 41b)" }
M.known.lm_head_ticket = { kind = "int", choices = { 0, 1, 2, 4, 8, 16 }, default = 0,
                        doc = "quantised LM head with lm_head_queue: row blocks per team taken from the queue at a time (0: 2)" }
M.known.glu_down_wg = { kind = "int", choices = { 0, 64, 128, 256, 512, 1024 }, default = 0,
                        doc = "the fused MLP (hint glu_down): workgroup size, a multiple of glu_down_rows (0: 8 lanes per row, 16 for float gate+up; 8 x the subgroup size on a CPU device where glu_down_rows is 0 too)" }
M.known.glu_down_rows = { kind = "int", choices = { 0, 8, 16, 32, 64, 128 }, default = 0,
                        doc = "the fused MLP: rows of h per workgroup, each adding its share of down into the sum (0: 32 on a GPU; 8 on a CPU device); must divide the intermediate size, else the MLP is not fused; a multiple of 32 reads a Q4_K / Q6_K down by its blocks (hint glu_down_cols)" }
M.known.tune        = { values = { "on", "off" }, default = "on",
                        doc = "use the per-device tuning cache written by `doppler tune` as defaults (docs/TUNING.md)" }

local function valid_list()
  local names = {}
  for k in pairs(M.known) do names[#names + 1] = k end
  table.sort(names)
  return table.concat(names, ", ")
end

local function check(key, value, source)
  local h = M.known[key]
  if not h then error(("%s: unknown hint '%s'; valid hints: %s"):format(source, key, valid_list()), 0) end
  if h.kind == "names" then   -- a word or a comma list of names (checked where they are used)
    value = tostring(value)
    if not value:match("^%-?[%w_]+$") and not value:match("^[%w_%-]+[%w_,%-]*$") then
      error(("%s: hint %s wants on, off or a comma list of names, got '%s'"):format(source, key, value), 0)
    end
    return value
  end
  if h.kind == "int" then
    local v = math.tointeger(tonumber(value))
    if h.choices then
      for _, c in ipairs(h.choices) do if c == v then return v end end
      local l = {}
      for i, c in ipairs(h.choices) do l[i] = tostring(c) end
      error(("%s: hint %s=%s is not valid; valid values: %s"):format(source, key, tostring(value), table.concat(l, ", ")), 0)
    end
    if not v or (h.min and v < h.min) then
      error(("%s: hint %s wants an integer >= %d, got '%s'"):format(source, key, h.min or 0, tostring(value)), 0)
    end
    return v
  end
  value = tostring(value)
  for _, ok in ipairs(h.values) do if ok == value then return value end end
  error(("%s: hint %s=%s is not valid; valid values: %s"):format(source, key, value, table.concat(h.values, ", ")), 0)
end

-- A hint set: values plus the source of each.
function M.new()
  local s = { values = {}, sources = {} }
  for k, h in pairs(M.known) do s.values[k], s.sources[k] = h.default, "default" end
  return setmetatable(s, { __index = M })
end

function M:set(key, value, source)
  self.values[key] = check(key, value, source)
  self.sources[key] = source
end

-- Applies a table {key = value} from one source.
function M:apply(tbl, source)
  for k, v in pairs(tbl or {}) do self:set(k, v, source) end
end

-- Applies {key, value, line} pairs read from a YAML file (a manifest's kernel_hints, a --hints FILE);
-- an error names file:line.
function M:apply_pairs(list, source, file)
  for _, p in ipairs(list or {}) do
    local ok, err = pcall(self.set, self, p[1], p[2], source)
    if not ok then error(("%s:%d: %s"):format(file or source, p[3] or 0, tostring(err)), 0) end
  end
end

-- Applies "KEY=VALUE" strings (the --hint option).
function M:apply_args(list)
  for _, kv in ipairs(list or {}) do
    local k, v = kv:match("^([%w_]+)=(.+)$")
    if not k then error(("--hint wants KEY=VALUE, got '%s'"):format(kv), 0) end
    self:set(k, v, "--hint")
  end
end

function M:get(key)
  if M.known[key] == nil then error("internal: unknown hint " .. key, 2) end
  return self.values[key]
end

-- "key = value  (source)" lines, sorted: what --show-hints prints.
function M:describe()
  local keys = {}
  for k in pairs(self.values) do keys[#keys + 1] = k end
  table.sort(keys)
  local lines = {}
  for _, k in ipairs(keys) do
    lines[#lines + 1] = ("%-14s = %-8s (%s)"):format(k, tostring(self.values[k]), self.sources[k])
  end
  return table.concat(lines, "\n")
end

return M
