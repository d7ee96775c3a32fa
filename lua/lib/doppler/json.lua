-- doppler.json: a small JSON encoder for machine-readable output (benchmark lines, reports).
--   json.encode({ b = 1, a = { 1, 2 } })  --> {"a":[1,2],"b":1}
-- Object keys are sorted, so the same value always prints the same line (diffs and greps stay stable).
-- A table with keys 1..n (n > 0) and nothing else is an array; any other table is an object (an empty
-- table is {}). Integers print as integers, other numbers with 6 significant digits unless
-- opts.digits says otherwise; NaN and infinities, which JSON cannot carry, print as null.
-- Reading JSON is doppler.read_json (C, json-c).
local M = {}

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
                  ["\r"] = "\\r", ["\t"] = "\\t" }

local function string_literal(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return escapes[c] or ("\\u%04x"):format(c:byte()) end) .. '"'
end

local function is_array(t)
  local n = #t
  if n == 0 then return false end
  local count = 0
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
    count = count + 1
  end
  return count == n
end

local function encode(v, fmt, out, seen)
  local ty = type(v)
  if v == nil then
    out[#out + 1] = "null"
  elseif ty == "boolean" then
    out[#out + 1] = tostring(v)
  elseif ty == "number" then
    if math.type(v) == "integer" then out[#out + 1] = ("%d"):format(v)
    elseif v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = "null"
    elseif v == math.floor(v) and math.abs(v) < 2 ^ 53 then out[#out + 1] = ("%d"):format(math.tointeger(v))
    else out[#out + 1] = fmt:format(v) end
  elseif ty == "string" then
    out[#out + 1] = string_literal(v)
  elseif ty == "table" then
    if seen[v] then error("json.encode: a table contains itself", 0) end
    seen[v] = true
    if is_array(v) then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], fmt, out, seen)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" and type(k) ~= "number" then
          error("json.encode: object keys must be strings or numbers, got " .. type(k), 0)
        end
        keys[#keys + 1] = tostring(k)
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = string_literal(k) .. ":"
        local val = v[k]
        if val == nil then val = v[math.tointeger(tonumber(k)) or tonumber(k)] end
        encode(val, fmt, out, seen)
      end
      out[#out + 1] = "}"
    end
    seen[v] = nil
  else
    error("json.encode: cannot encode a " .. ty, 0)
  end
end

-- One line of JSON for v. opts.digits: significant digits of non-integer numbers (default 6).
function M.encode(v, opts)
  local out = {}
  encode(v, ("%%.%dg"):format(opts and opts.digits or 6), out, {})
  return table.concat(out)
end

return M
