-- tests/lua/lib/check.lua: a tiny test harness for Lua tests run by `doppler FILE.lua`.
--   local check = require "check"
--   check.case("name", function() check.near(a, b, tol, "what") end)
--   check.done()      -- prints "N passed, N failed" and exits non-zero on any failure
-- Also: running the doppler CLI, reading float files and fixtures.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local doppler = require "doppler"

local M = { passed = 0, failed = 0 }

function M.case(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    M.passed = M.passed + 1
    print("ok     " .. name)
  else
    M.failed = M.failed + 1
    print("FAILED " .. name .. "\n  " .. tostring(err):gsub("\n", "\n  "))
  end
end

function M.done()
  print(("%d passed, %d failed"):format(M.passed, M.failed))
  -- Close GPU objects first so that validation messages are counted before we exit.
  collectgarbage()
  os.exit(M.failed == 0 and 0 or 1, true)
end

function M.truthy(v, what) if not v then error((what or "expected true"), 2) end end
function M.eq(a, b, what)
  if a ~= b then error(("%s: expected %s, got %s"):format(what or "value", tostring(b), tostring(a)), 2) end
end
function M.near(a, b, tol, what)
  if not (math.abs(a - b) <= tol) then
    error(("%s: %.9g vs %.9g differ by %.3g > %.3g"):format(what or "value", a, b, math.abs(a - b), tol), 2)
  end
end

M.fixtures = os.getenv("DOPPLER_FIXTURES") or (doppler.home() .. "/tests/fixtures")
M.bin = os.getenv("DOPPLER_BIN") or (doppler.home() .. "/build/doppler")

function M.read_file(path)
  local f = assert(io.open(path, "rb"), "cannot open " .. path)
  local s = f:read("a")
  f:close()
  return s
end

-- f32 little-endian file -> list of numbers
function M.read_f32(path)
  local s = M.read_file(path)
  local out, n = {}, #s // 4
  local pos = 1
  for i = 1, n do
    out[i], pos = string.unpack("<f", s, pos)
  end
  return out
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.quote = shell_quote

-- Runs the doppler CLI with args (a list); returns ok, stdout, stderr.
function M.run(args)
  local err = os.tmpname()
  local parts = { shell_quote(M.bin) }
  for _, a in ipairs(args) do parts[#parts + 1] = shell_quote(a) end
  local cmd = table.concat(parts, " ") .. " 2>" .. err
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local ok = p:close()
  local e = M.read_file(err)
  os.remove(err)
  return ok, out, e
end

function M.must_run(args)
  local ok, out, e = M.run(args)
  if not ok then error("doppler " .. table.concat(args, " ") .. " failed:\n" .. e, 2) end
  return out, e
end

-- f32 logits [T, V] for every position of ids, through the command line's own entry points: `first` is
-- a recipe file (`doppler RECIPE.lua ...`: doppler.run.main) or "run" (`doppler run ...`:
-- doppler.run.for_model). They run in this process, not in a child: its device keeps the kernels it
-- built, so a test's later runs build no pipeline twice, and no run pays a process's start (a device,
-- and under the sanitizers ~1 s). The tests that read what the CLI prints, or its exit status, still
-- start it (M.run, M.must_run). The file goes to out_path (a scratch path the caller owns).
function M.logits(first, model, ids, extra, out_path)
  local args = { "--model", model, "--ids", M.join(ids), "--max-tokens", "0", "--logits-out", out_path, "--quiet" }
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  M.run_here(first, args, 3)
  return M.read_f32(out_path)
end

-- The command line `doppler FIRST ARGS...` (FIRST a recipe file, or "run") in this process, as M.logits runs
-- it; returns the ids it generated (what --print-ids would print). Errors at the caller's `level` (default:
-- the caller of run_here).
function M.run_here(first, args, level)
  local run = require "doppler.run"
  local ok, rc, ids = pcall(function()
    if first == "run" then return run.for_model(args) end
    return run.main(require("doppler.recipes").load(first), args)
  end)
  collectgarbage()   -- the session's device memory goes back before the next run
  if ok and rc ~= 0 then ok, rc = false, "exit status " .. tostring(rc) end   -- as the CLI would exit
  if not ok then
    error(("doppler %s %s failed:\n%s"):format(first, table.concat(args, " "), tostring(rc)), level or 2)
  end
  return ids
end

-- Max abs difference over every row of two [T, V] lists (NaN counts as infinite) and the row where it
-- is; checks the value count first.
function M.max_diff(a, b, T, V)
  M.eq(#a, T * V, "logits values")
  local worst, row = 0, -1
  for i = 1, T * V do
    local d = math.abs(a[i] - b[i])
    if d ~= d then return math.huge, (i - 1) // V end
    if d > worst then worst, row = d, (i - 1) // V end
  end
  return worst, row
end

-- The index of the largest value of row t (0-based) of a [T, V] list; ties go to the lower index.
function M.argmax_row(l, V, t)
  local best, id = -math.huge, 0
  for i = 0, V - 1 do
    local v = l[t * V + i + 1]
    if v > best then best, id = v, i end
  end
  return id
end

-- "[1,2,3]" -> {1,2,3}
function M.parse_ids(s)
  local ids = {}
  for v in s:gmatch("%-?%d+") do ids[#ids + 1] = math.tointeger(tonumber(v)) end
  return ids
end

function M.join(ids) local t = {} for i, v in ipairs(ids) do t[i] = tostring(v) end return table.concat(t, ",") end

-- A quantised weight [rows, cols] of seeded uniform values (variance 1 / cols) on device dev, uploaded row_wise:
-- the tensor and the values as dequantised (what the kernels see). The seed is math.randomseed(seed, salt).
function M.quant_weight(dev, dtype, rows, cols, seed, salt)
  local f32 = require "doppler.f32"
  math.randomseed(seed, salt)
  local v = {}
  for i = 1, rows * cols do v[i] = (2 * math.random() - 1) * math.sqrt(3 / cols) end
  local bytes = doppler.quantize(dtype, f32.bytes(v), cols)
  local t = dev:tensor { dtype = dtype, shape = { rows, cols } }
  t:upload(bytes)
  return t, f32.values(doppler.dequantize(dtype, bytes, rows * cols), rows * cols)
end

-- Whether `list` holds `name` (e.g. a kernel name in a plan's kernel_log).
function M.has(list, name)
  for _, v in ipairs(list) do if v == name then return true end end
  return false
end

-- How many entries of `list` equal `name` (e.g. dispatches of a kernel in a plan's kernel_log).
function M.count(list, name)
  local c = 0
  for _, v in ipairs(list) do if v == name then c = c + 1 end end
  return c
end

-- How many dispatches of a plan's kernel_specs (of shader `file`, or of any with file nil) were made with `define`.
function M.define_count(specs, file, define)
  local c = 0
  for _, s in ipairs(specs) do
    if file == nil or s.file == file then c = c + M.count(s.defines or {}, define) end
  end
  return c
end

return M
