-- doppler convert SRC --quant TYPE --out OUT.gguf: a Hugging Face directory to a GGUF that llama.cpp
-- loads (standard names and metadata, tokenizer embedded), quantised by our own quantiser on every CPU,
-- plus a manifest (models/NAME.yaml) that points at it. The decisions live in doppler.convert.
local doppler = require "doppler"
local cli = require "doppler.cli"
local convert = require "doppler.convert"

local spec = {
  usage = "doppler convert SRC --quant TYPE --out OUT.gguf [options]",
  about = "Converts a Hugging Face model directory (config.json, *.safetensors, tokenizer.json) to GGUF.\n" ..
          "q4_k_m follows llama.cpp's tensor-type rules (Q6_K output and 'more bits' layers; rows that are\n" ..
          "not a multiple of 256 fall back to Q5_0/Q8_0); --pad-k instead zero-pads such rows to keep\n" ..
          "K-quants (doppler only: llama.cpp cannot load that variant). Also writes a manifest.",
  options = {
    { "--quant", "TYPE", "tensor types", default = "q4_k_m", choices = convert.quants },
    { "--out", "FILE", "the GGUF file to write" },
    { "--pad-k", nil, "q4_k_m: pad rows to 256 instead of falling back to Q5_0/Q8_0 (doppler-only variant)" },
    { "--layout", "NAME", "block layout on disk (ggml: llama.cpp's; the only one so far)", default = "ggml",
      choices = { "ggml" } },
    { "--name", "NAME", "model name (general.name and the manifest's; default: SRC's directory name)" },
    { "--manifest", "FILE", "where to write the manifest (default: models/NAME.yaml in doppler's home)" },
    { "--no-manifest", nil, "write no manifest" },
    { "--threads", "N", "quantiser threads (0 = one per CPU)", type = "int", default = 0, min = 0 },
    { "--quiet", nil, "no progress bar" },
  },
}

local function dirname(p) return p:match("^(.*)/[^/]*$") or "." end

local function abspath(p)
  if p:sub(1, 1) == "/" then return p end
  local pwd = os.getenv("PWD") or io.popen("pwd"):read("l")
  return pwd .. "/" .. p
end

-- path relative to dir when it lies beneath it, else absolute
local function relative_to(path, dir)
  path, dir = abspath(path), abspath(dir)
  if path:sub(1, #dir + 1) == dir .. "/" then return path:sub(#dir + 2) end
  return path
end

local function main(argv)
  local o = cli.parse(argv, spec)
  local src = o._[1]
  if not src or #o._ > 1 then error("give one SRC model directory (see --help)", 0) end
  if not o.out then error("--out FILE.gguf is required", 0) end
  local name = o.name or src:gsub("/+$", ""):match("([^/]+)$")
  local log = o.quiet and function() end or function(...) io.stderr:write(string.format(...)) end
  local t0 = doppler.clock()
  local width = 30
  local summary = convert.convert {
    src = src, out = o.out, quant = o.quant, pad_k = o.pad_k, name = name, threads = o.threads, log = log,
    progress = not o.quiet and function(i, n, tname)
      local fill = (width * i) // n
      io.stderr:write(("\rconvert [%s%s] %3d%% %-34s"):format(("#"):rep(fill), ("."):rep(width - fill),
                                                              (100 * i) // n, tname:sub(1, 34)))
      if i == n then io.stderr:write("\n") end
    end or nil,
  }
  local mix = {}
  for t, c in pairs(summary.types) do mix[#mix + 1] = ("%s x%d"):format(t, c) end
  table.sort(mix)
  log("wrote %s: %s, %d tensors (%s), %.1f MB in %.1f s\n", o.out, summary.arch, #summary.tensors,
      table.concat(mix, ", "), summary.bytes / 1e6, doppler.clock() - t0)
  if not o.no_manifest then
    local mpath = o.manifest or (doppler.home() .. "/models/" .. name .. ".yaml")
    local f = io.open(mpath, "w")
    if not f then error("cannot write the manifest " .. mpath .. " (use --manifest FILE or --no-manifest)", 0) end
    f:write(convert.manifest_text(name, relative_to(o.out, dirname(mpath)), summary.recipe,
                                  o.pad_k and "q4_k_m-padk" or o.quant, src))
    f:close()
    log("wrote %s\n", mpath)
  end
  return 0
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("doppler convert: ", tostring(err), "\n")
  os.exit(1)
end
