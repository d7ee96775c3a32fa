-- doppler.lower.cpu: what differs where the device is a CPU (caps.type "cpu": lavapipe). Its workgroups run
-- as SIMD vectors one after another on a few cores, so an idle lane costs as much as a busy one and a split
-- gains nothing (the rules in gemv.lua, attention.lua, mlp.lua and head.lua ask on_cpu); and llvmpipe bounds
-- the loop iterations of an invocation, so kernels whose loops grow with the model bound their work here.
local B = require "doppler.lower.base"
local M = B.M

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
-- device) and ~5 + D / LK in attention_decode.comp (f16 caches on lavapipe through attention.lua's auto variants:
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

-- Every GEMV's workgroup and rows on a CPU device: CPU_ROWS rows of one subgroup-wide vector of lanes each (why:
-- M.gemv_params in gemv.lua).
local CPU_ROWS = 8
local function cpu_gemv(ctx) return CPU_ROWS * math.max(1, ctx.dev:caps().subgroup_size or 1), CPU_ROWS end

-- for the rule files whose defaults differ on a CPU device
return {
  on_cpu = on_cpu, cpu_gemv = cpu_gemv,
}
