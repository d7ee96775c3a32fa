-- recipes/bench/copy_bandwidth.lua: device memory bandwidth, measured by copying one buffer into another
-- with the copy kernel (shaders/copy/copy.comp), counting read + write bytes (2 x --bytes per copy).
--   doppler recipes/bench/copy_bandwidth.lua [--bytes N] [--iters N] [--groups auto|N,N,...] [--table]
-- One recording holds --per-submit copies (a barrier between them: each rewrites dst); it is replayed
-- --iters times. Two timings per setting: GPU timestamps around each dispatch (gpu/profiler.h; the
-- mean copy), and wall clock over the replays (submit + wait included, so lower). Before timing, a
-- pattern is written at the start, middle and end of src and read back from dst after the first copy,
-- so a kernel that copies nothing fails instead of reporting a speed. Prints one JSON line per
-- --groups value.
local doppler = require "doppler"
local cli = require "doppler.cli"
local json = require "doppler.json"

local spec = {
  usage = "doppler recipes/bench/copy_bandwidth.lua [options]",
  about = "Copies --bytes from one device buffer to another with a compute kernel and reports GB/s\n" ..
          "(read + write, i.e. 2 x bytes per copy) from GPU timestamps and from the wall clock.",
  options = {
    { "--bytes", "N", "bytes per copy", type = "int", default = 1 << 30, min = 1 },
    { "--iters", "N", "timed replays of the recording", type = "int", default = 20, min = 1 },
    { "--per-submit", "N", "copies per recording (per submit)", type = "int", default = 1, min = 1 },
    { "--groups", "LIST", "workgroup counts to try, comma-separated (auto: see the header)", default = "auto" },
    { "--wg", "N", "workgroup size (spec constant WG)", type = "int", default = 256, min = 1 },
    { "--unroll", "N", "uvec4s per invocation per trip (spec constant UNROLL)", type = "int", default = 4, min = 1 },
    { "--label", "TEXT", "extra 'label' key in every line" },
    { "--table", nil, "print a markdown table instead of JSON lines" },
  },
}

-- The kernel header's advice: a few waves of the device, never more than ceil(bytes / 16 / WG).
-- The SM count is not known here; 4096 groups of 256 is about 4 waves of a 132-SM GPU.
local function auto_groups(bytes, wg)
  local needed = math.max(1, (bytes + 16 * wg - 1) // (16 * wg))
  return math.min(needed, math.max(1, (4096 * 256) // wg))
end

local function parse_groups(s, bytes, wg)
  local out = {}
  for tok in s:gmatch("[^,%s]+") do
    local v = tok == "auto" and auto_groups(bytes, wg) or math.tointeger(tonumber(tok))
    if not v or v < 1 or v > 0x7fffffff then error(("--groups: '%s' is not a workgroup count"):format(tok), 0) end
    out[#out + 1] = v
  end
  if #out == 0 then error("--groups: no value given", 0) end
  return out
end

-- Offsets and a byte pattern for the check: up to 4 KiB at the start, the middle and the end.
local function probes(bytes)
  local n = math.min(4096, bytes)
  local out = {}
  for _, off in ipairs({ 0, (bytes - n) // 2, bytes - n }) do
    local b = {}   -- a function of the absolute position, so that probes may overlap
    for j = 1, n do b[j] = string.char(((off + j) * 31 + 7) % 251) end
    out[#out + 1] = { off = off, data = table.concat(b) }
  end
  return out
end

local function measure(dev, k, src, dst, o, groups)
  dev:profile(true)                          -- applies to the recording started below
  local rec = dev:recorder()
  for _ = 1, o.per_submit do
    rec:dispatch(k, { groups, 1, 1 }, { src = src, dst = dst, bytes = o.bytes })
  end
  rec:run()                                  -- first submit: warm-up, and the copy the check reads
  for _, p in ipairs(probes(o.bytes)) do
    if dst:read(p.off, #p.data) ~= p.data then
      error(("copy: dst differs from src at bytes [%d, %d) (groups %d)"):format(p.off, p.off + #p.data, groups), 0)
    end
  end
  dev:profile(false)                         -- forgets the warm-up's times; the recording keeps its queries
  dev:profile(true)
  local t0 = doppler.clock()
  for _ = 1, o.iters do rec:run() end
  local wall = doppler.clock() - t0
  local e = dev:profile()[k:name()]
  dev:profile(false)
  local copies = o.iters * o.per_submit
  local moved = 2 * o.bytes
  local r = { groups = groups, wall_ms_per_copy = wall * 1e3 / copies, wall_gb_s = moved * copies / wall / 1e9 }
  if e and e.count > 0 then
    r.gpu_ms_per_copy = e.mean_us / 1e3
    r.gpu_gb_s = moved / (e.mean_us * 1e-6) / 1e9
    r.gpu_copies_timed = e.count
  end
  return r
end

local function main(argv)
  local o = cli.parse(argv, spec)
  local dev = doppler.device()
  local caps = dev:caps()
  local groups = parse_groups(o.groups, o.bytes, o.wg)
  local src = dev:tensor { dtype = "u8", shape = { o.bytes } }
  local dst = dev:tensor { dtype = "u8", shape = { o.bytes } }
  for _, p in ipairs(probes(o.bytes)) do src:upload(p.data, p.off) end
  local k = dev:kernel { file = "copy/copy.comp", constants = { WG = o.wg, UNROLL = o.unroll } }
  local rows = {}
  for _, g in ipairs(groups) do
    local r = measure(dev, k, src, dst, o, g)
    r.bytes, r.iters, r.per_submit, r.wg, r.unroll = o.bytes, o.iters, o.per_submit, o.wg, o.unroll
    r.device, r.driver, r.timestamps, r.label = caps.name, caps.driver, caps.timestamps, o.label
    if o.table then rows[#rows + 1] = r else print(json.encode(r)); io.stdout:flush() end
  end
  if o.table then
    print("| device | bytes | groups | WG | UNROLL | GPU ms/copy | GPU GB/s (r+w) | wall ms/copy | wall GB/s (r+w) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    local function f(fmt, v) return v and fmt:format(v) or "-" end
    for _, r in ipairs(rows) do
      print(("| %s | %d | %d | %d | %d | %s | %s | %s | %s |"):format(r.device, r.bytes, r.groups, r.wg, r.unroll,
        f("%.4f", r.gpu_ms_per_copy), f("%.1f", r.gpu_gb_s), f("%.4f", r.wall_ms_per_copy), f("%.1f", r.wall_gb_s)))
    end
  end
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("copy_bandwidth: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
