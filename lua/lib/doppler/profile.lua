-- doppler.profile: what a generation costs, per token: GPU time per kernel (timestamps written around
-- every dispatch, gpu/profiler.h), submits, bytes read back and uploaded, and device memory. Used by
-- `--profile` (doppler.run) and by the benchmark scripts (recipes/bench/).
--
--   local prof = profile.start(s)     -- before the first pass: switches the profiler on
--   ... prefill ...; prof:first_token()   -- splits the prompt's passes from the decode steps
--   ... decode ...;  prof:report(io.stderr)
--
-- The profiler applies to recordings made after it is switched on (a recorded pass replays its
-- timestamp queries), so start() must come before the passes are recorded, or the session's plans
-- must be dropped (s:drop_plans()). Dispatches that no barrier separates overlap on the GPU, so one
-- kernel's time can include waiting for its neighbours; the sum over kernels is close to the GPU time
-- of the pass, not a strict partition of it.
local doppler = require "doppler"

local M = {}
local Tracker = {}
Tracker.__index = Tracker

-- Counters of a session now (to subtract two of them).
function M.snapshot(s)
  return {
    t = doppler.clock(), submits = s.dev:submits(), readback = s.readback_bytes or 0,
    upload = s.upload_bytes or 0, passes = s.passes or 0, pos = s.pos, prefetch = s.dev:prefetch_counts(),
  }
end

-- b - a, per `per` units (tokens): submits, readback_bytes, upload_bytes, passes, seconds, and the side
-- prefetcher's stages reached, late and skipped (gpu/prefetch.h; a running side kernel's so far).
function M.delta(a, b, per)
  per = (per and per > 0) and per or 1
  local pa, pb = a.prefetch, b.prefetch
  return {
    seconds = b.t - a.t, submits = (b.submits - a.submits) / per, readback_bytes = (b.readback - a.readback) / per,
    upload_bytes = (b.upload - a.upload) / per, passes = (b.passes - a.passes) / per, tokens = b.pos - a.pos,
    prefetch_stages = (pb.stages - pa.stages) / per, prefetch_late = (pb.late - pa.late) / per,
    prefetch_skipped = (pb.skipped - pa.skipped) / per,
  }
end

-- The profiler's statistics as { [kernel] = GPU milliseconds / per } (per: tokens; 1 for totals).
function M.kernel_ms(dev, per)
  per = (per and per > 0) and per or 1
  local out = {}
  for name, e in pairs(dev:profile()) do out[name] = e.total_us / 1000 / per end
  return out
end

-- Clears the profiler's statistics and leaves it on.
function M.clear(dev)
  dev:profile(false)
  dev:profile(true)
end

-- The element types of the matrix weights on the device, most bytes first, joined by "+"
-- ("f16", "q4_k+q6_k", ...): what "quant" means in benchmark output.
function M.quant(s)
  local bytes = {}
  for _, t in pairs(s.weights or {}) do
    if #t:shape() >= 2 then
      local dt = t:dtype()
      bytes[dt] = (bytes[dt] or 0) + t:nbytes()
    end
  end
  local names = {}
  for dt in pairs(bytes) do names[#names + 1] = dt end
  table.sort(names, function(a, b) if bytes[a] ~= bytes[b] then return bytes[a] > bytes[b] end return a < b end)
  return #names > 0 and table.concat(names, "+") or "none"
end

-- Device memory from the pool: peak_bytes (the most ever handed out at once, device-local and
-- host-visible staging together, since the device was opened), live_bytes (now), held_bytes (memory
-- blocks held now).
function M.memory(dev)
  local p = dev:pool_stats()
  return { peak_bytes = p.peak_bytes, live_bytes = p.live_bytes, held_bytes = p.block_bytes }
end

-- Starts profiling the session's passes from now on.
function M.start(s)
  s.dev:profile(true)
  s:drop_plans()
  local tr = setmetatable({ s = s, dev = s.dev, begin = M.snapshot(s) }, Tracker)
  tr.timestamps = s.dev:caps().timestamps
  return tr
end

-- Call when the first generated id is known: what came before is the prompt.
function Tracker:first_token()
  if self.first then return end
  self.first = M.snapshot(self.s)
  self.prefill_ms = M.kernel_ms(self.dev)
  M.clear(self.dev)
end

-- The measurements so far: { prefill = {tokens, seconds, submits, readback_bytes, gpu_ms = {kernel = ms}},
-- decode = {tokens, seconds, per token: submits, readback_bytes, upload_bytes; gpu_ms = {kernel = ms per
-- token}}, memory = M.memory }.
function Tracker:result()
  local now = M.snapshot(self.s)
  local first = self.first or now
  local pre = M.delta(self.begin, first, 1)
  local dec_tokens = now.pos - first.pos
  local dec = M.delta(first, now, dec_tokens)
  return {
    prefill = { tokens = first.pos - self.begin.pos, seconds = pre.seconds, submits = pre.submits,
                readback_bytes = pre.readback_bytes, gpu_ms = self.prefill_ms or M.kernel_ms(self.dev) },
    decode = { tokens = dec_tokens, seconds = dec.seconds, submits = dec.submits, readback_bytes = dec.readback_bytes,
               upload_bytes = dec.upload_bytes, gpu_ms = self.first and M.kernel_ms(self.dev, dec_tokens) or {} },
    memory = M.memory(self.dev),
  }
end

local function kernel_lines(lines, ms, unit)
  local names, total = {}, 0
  for k, v in pairs(ms) do names[#names + 1] = k; total = total + v end
  table.sort(names, function(a, b) if ms[a] ~= ms[b] then return ms[a] > ms[b] end return a < b end)
  for _, k in ipairs(names) do
    lines[#lines + 1] = ("  %-40s %10.4f ms%s %5.1f%%"):format(k, ms[k], unit, total > 0 and 100 * ms[k] / total or 0)
  end
  lines[#lines + 1] = ("  %-40s %10.4f ms%s"):format("(sum)", total, unit)
end

-- The human-readable report `--profile` prints.
function Tracker:report(f)
  local r = self:result()
  local lines = { "profile:" }
  if not self.timestamps then lines[#lines + 1] = "  (this device has no timestamp queries: no GPU times)" end
  local p, d = r.prefill, r.decode
  lines[#lines + 1] = ("prompt: %d tokens, %.2f ms wall, %d submits, %d bytes read back; GPU time per kernel:"):format(
    p.tokens, p.seconds * 1e3, math.floor(p.submits), math.floor(p.readback_bytes))
  kernel_lines(lines, p.gpu_ms, "      ")
  if d.tokens > 0 then
    lines[#lines + 1] = ("decode: %d steps, %.3f ms wall per token, per token: %.2f submits, %.1f bytes read back, " ..
      "%.1f bytes uploaded; GPU time per kernel per token:"):format(d.tokens, d.seconds * 1e3 / d.tokens, d.submits,
      d.readback_bytes, d.upload_bytes)
    kernel_lines(lines, d.gpu_ms, "/tok  ")
  end
  local m = r.memory
  lines[#lines + 1] = ("device memory: peak %.1f MB in use, %.1f MB in use now, %.1f MB held by the pool"):format(
    m.peak_bytes / 1e6, m.live_bytes / 1e6, m.held_bytes / 1e6)
  f:write(table.concat(lines, "\n"), "\n")
end

return M
