-- doppler.cli: declarative command-line options for recipes and Lua subcommands, with --help.
--
--   local opts = cli.parse(arg, {
--     usage = "doppler recipes/gemma3.lua [options]",
--     about = "Generates text with Gemma 3.",
--     options = {
--       { "--model", "PATH", "model directory, GGUF file or manifest" },
--       { "--max-tokens", "N", "tokens to generate", type = "int", default = 128 },
--       { "--chat", nil, "multi-turn chat" },                 -- a flag (no value)
--       { "--hint", "KEY=VALUE", "kernel hint", repeat_ = true },
--     } })
--   opts.model, opts.max_tokens, opts.chat, opts.hint (a list)
-- Unknown options and bad values raise an error that lists what is valid; --help prints and exits 0.

local M = {}

local function key_of(name) return (name:gsub("^%-%-", ""):gsub("%-", "_")) end

function M.help(spec)
  local lines = { "usage: " .. spec.usage }
  if spec.about then lines[#lines + 1] = ""; lines[#lines + 1] = spec.about end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "options:"
  for _, o in ipairs(spec.options) do
    local left = o[1] .. (o[2] and (" " .. o[2]) or "")
    local right = o[3] or ""
    if o.default ~= nil then right = right .. (" (default: %s)"):format(tostring(o.default)) end
    if o.repeat_ then right = right .. " (repeatable)" end
    lines[#lines + 1] = ("  %-24s %s"):format(left, right)
  end
  lines[#lines + 1] = ("  %-24s %s"):format("-h, --help", "this text")
  if spec.epilog then lines[#lines + 1] = ""; lines[#lines + 1] = spec.epilog end
  return table.concat(lines, "\n")
end

local function convert(o, raw)
  if o.type == "int" then
    local v = math.tointeger(tonumber(raw))
    if not v then error(("%s wants an integer, got '%s'"):format(o[1], raw), 0) end
    if o.min and v < o.min then error(("%s must be at least %d, got %d"):format(o[1], o.min, v), 0) end
    return v
  elseif o.type == "number" then
    local v = tonumber(raw)
    if not v then error(("%s wants a number, got '%s'"):format(o[1], raw), 0) end
    if o.min and v < o.min then error(("%s must be at least %s, got %s"):format(o[1], o.min, raw), 0) end
    return v
  elseif o.choices then
    for _, c in ipairs(o.choices) do if c == raw then return raw end end
    error(("%s must be one of %s, got '%s'"):format(o[1], table.concat(o.choices, ", "), raw), 0)
  end
  return raw
end

-- Returns the options table (keys with '-' as '_'), and the positional arguments as opts._.
function M.parse(argv, spec)
  local byname, out = {}, { _ = {} }
  for _, o in ipairs(spec.options) do
    byname[o[1]] = o
    local k = key_of(o[1])
    if o.repeat_ then out[k] = {} elseif o.default ~= nil then out[k] = o.default
    elseif not o[2] then out[k] = false end
  end
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "-h" or a == "--help" then
      print(M.help(spec))
      os.exit(0)
    end
    local name, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    name = name or a
    local o = byname[name]
    if o then
      local k = key_of(o[1])
      if o[2] then
        local raw = inline
        if not raw then
          i = i + 1
          raw = argv[i]
          if raw == nil then error(("%s needs a value (%s)"):format(o[1], o[2]), 0) end
        end
        local v = convert(o, raw)
        if o.repeat_ then out[k][#out[k] + 1] = v else out[k] = v end
      else
        if inline then error(("%s takes no value"):format(o[1]), 0) end
        out[k] = true
      end
    elseif a:sub(1, 1) == "-" and #a > 1 then
      local names = {}
      for _, opt in ipairs(spec.options) do names[#names + 1] = opt[1] end
      error(("unknown option '%s'; valid options: %s (or --help)"):format(a, table.concat(names, ", ")), 0)
    else
      out._[#out._ + 1] = a
    end
    i = i + 1
  end
  return out
end

return M
