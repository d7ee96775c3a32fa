-- recipes/bench/hints.lua: a hint sweep. Runs one of the benchmarks (--mode decode|prefill|ttft) once per
-- combination of the --sweep values, each in its own doppler process (so that one setting's memory
-- peak, pool and compiled plans do not leak into the next), and passes the JSON lines through (or
-- gathers them into one markdown table with --table).
--   doppler recipes/bench/hints.lua --model PATH --sweep matmul=gemv,gemm --sweep act_dtype=f16,f32
-- Without --sweep: matmul=gemv,gemm and precision=default,f32. Options this script does not know are
-- handed to the benchmark (--prompt-tokens, --tokens, --runs, --hint, --recipe, --no-profile, ...).
package.path = (arg[0]:match("^(.*/)") or "./") .. "?.lua;" .. package.path
local doppler = require "doppler"
local hints = require "doppler.hints"
local json = require "doppler.json"
local lib = require "bench_lib"

local USAGE = [[
usage: doppler recipes/bench/hints.lua --model PATH [--sweep KEY=V1,V2,...]... [--mode decode|prefill|ttft]
                                      [--table] [--bin DOPPLER] [benchmark options]

Runs recipes/bench/MODE.lua once per combination of the swept hint values (every --sweep multiplies
the combinations), each in a fresh process, and prints its JSON lines (or one markdown table, --table).
Default sweep: matmul=gemv,gemm and precision=default,f32. Other options go to the benchmark
(see doppler recipes/bench/decode.lua --help). --bin: the doppler executable (default $DOPPLER_BIN,
else build/doppler under the doppler home).]]

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function parse(argv)
  local o = { sweep = {}, mode = "decode", pass = {} }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local function value()
      i = i + 1
      if argv[i] == nil then error(a .. " needs a value", 0) end
      return argv[i]
    end
    if a == "-h" or a == "--help" then print(USAGE); os.exit(0)
    elseif a == "--sweep" then o.sweep[#o.sweep + 1] = value()
    elseif a == "--mode" then o.mode = value()
    elseif a == "--bin" then o.bin = value()
    elseif a == "--table" then o.table = true
    elseif a == "--model" then o.model = value(); o.pass[#o.pass + 1] = "--model"; o.pass[#o.pass + 1] = o.model
    else o.pass[#o.pass + 1] = a end
    i = i + 1
  end
  if not lib.modes[o.mode] then error(("--mode must be decode, prefill or ttft, got '%s'"):format(o.mode), 0) end
  if not o.model then error("--model PATH is required", 0) end
  if #o.sweep == 0 then o.sweep = { "matmul=gemv,gemm", "precision=default,f32" } end
  return o
end

-- "KEY=V1,V2" list -> { {key, {values}} }, each value checked against doppler.hints.
local function axes(list)
  local out = {}
  for _, s in ipairs(list) do
    local k, vs = s:match("^([%w_]+)=(.+)$")
    if not k then error(("--sweep wants KEY=V1,V2,..., got '%s'"):format(s), 0) end
    local vals = {}
    local h = hints.new()
    for v in vs:gmatch("[^,]+") do
      h:set(k, v, "--sweep")   -- an unknown key or value fails here, before anything runs
      vals[#vals + 1] = v
    end
    out[#out + 1] = { k, vals }
  end
  return out
end

-- Every combination: a list of lists of "KEY=VALUE".
local function combinations(ax)
  local out = { {} }
  for _, a in ipairs(ax) do
    local nxt = {}
    for _, c in ipairs(out) do
      for _, v in ipairs(a[2]) do
        local n = { table.unpack(c) }
        n[#n + 1] = a[1] .. "=" .. v
        nxt[#nxt + 1] = n
      end
    end
    out = nxt
  end
  return out
end

local function main(argv)
  local o = parse(argv)
  local bin = o.bin or os.getenv("DOPPLER_BIN") or (doppler.home() .. "/build/doppler")
  local script = (arg[0]:match("^(.*/)") or "./") .. o.mode .. ".lua"
  local device = doppler.device():caps().index
  local rows = {}
  local tmp = os.tmpname()
  for _, combo in ipairs(combinations(axes(o.sweep))) do
    local parts = { shell_quote(bin), "--device", tostring(device), shell_quote(script) }
    for _, a in ipairs(o.pass) do parts[#parts + 1] = shell_quote(a) end
    for _, kv in ipairs(combo) do parts[#parts + 1] = "--hint"; parts[#parts + 1] = shell_quote(kv) end
    local p = assert(io.popen(table.concat(parts, " "), "r"))
    for line in p:lines() do
      if o.table then
        local f = assert(io.open(tmp, "w"))
        f:write(line)
        f:close()
        local ok, row = pcall(doppler.read_json, tmp)
        if not ok or type(row) ~= "table" then error("the benchmark printed a line that is not JSON: " .. line, 0) end
        row.hints = row.hints or {}
        rows[#rows + 1] = row
      else
        print(line)
        io.stdout:flush()
      end
    end
    if not p:close() then
      os.remove(tmp)
      error(("the benchmark failed for %s (its error is above)"):format(table.concat(combo, " ")), 0)
    end
  end
  os.remove(tmp)
  if o.table then print(lib.table(rows)) end
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("hints: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
