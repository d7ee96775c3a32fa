-- recipes/bench/glu_down.lua: a probe of one fused dispatch for a layer's MLP (gate+up, the activation, down).
--   doppler recipes/bench/glu_down.lua [--shape gemma|llama|tiny] [--modes fused,split,...] [--r 32] ...
-- doppler's decode runs gate+up (with the GLU) and down as two dependent dispatches. This probe runs the chain
-- of a model's --layers MLPs (each layer's x is the layer before's y) two ways, on the same kernel
-- (shaders/probe/glu_down.comp, whose header says how):
--   split:  per layer, a dispatch of the R rows of h per workgroup, then a dispatch of down on them;
--   fused:  per layer, one dispatch: each workgroup makes its R rows of h and adds their share of down to y
--           with 64-bit fixed-point atomics (down stored by columns); `fused_nopref` without requesting the
--           down columns before making h; `fused_tail` with the last workgroup handing y on as f32 (the
--           next layer reads that);
--   h, down: one of split's two dispatches per layer alone (down reads the h left by the last h run).
-- Both give the same bits (the atomics add integers), and with --check (the default for --shape tiny) a CPU
-- reference is compared. Each mode prints one JSON line: µs per layer over --tokens tokens per submit.
-- Weights: 4-bit codes, one f32 scale per 32 (gate, up) or per column of 32 (down: a * q - b), made on the GPU;
-- --gate f16 holds gate and up as a float model does (f16 rows), --down f16 down's columns as f16.
local doppler = require "doppler"
local cli = require "doppler.cli"
local json = require "doppler.json"

local SHAPES = {   -- hidden (x, y), intermediate (h), layers
  gemma = { K = 1152, I = 6912, layers = 26 },    -- Gemma 3 1B
  llama = { K = 2048, I = 8192, layers = 16 },    -- Llama 3.2 1B
  tiny  = { K = 64, I = 64, layers = 2 },
}
local FILE = "probe/glu_down.comp"

local spec = {
  usage = "doppler recipes/bench/glu_down.lua [options]",
  about = "Times a model's chain of MLPs as two dispatches per layer (h, then down) and as one fused\n" ..
          "dispatch per layer (down added by atomics); one JSON line per mode.",
  options = {
    { "--shape", "NAME", "gemma (Gemma 3 1B), llama (Llama 3.2 1B) or tiny", default = "gemma" },
    { "--modes", "LIST", "split, fused, fused_nopref, fused_tail, h, down",
      default = "split,fused,fused_nopref,fused_tail" },
    { "--down", "TYPE", "down's columns: q4 (4-bit, a scale pair per 32) or f16", default = "q4" },
    { "--gate", "TYPE", "gate and up: q4 (4-bit, a scale per 32) or f16 (rows of a float model)", default = "q4" },
    { "--gu", "N", "--gate f16: 16-byte chunks of each row a lane requests at once", type = "int", default = 2, min = 1 },
    { "--r", "N", "rows of h per workgroup (a multiple of 32; of 8 with --down f16)", type = "int", default = 32, min = 8 },
    { "--wg", "N", "workgroup size (R x lanes per row)", type = "int", default = 256, min = 32 },
    { "--tokens", "N", "tokens per submit", type = "int", default = 16, min = 1 },
    { "--runs", "N", "timed submits per mode", type = "int", default = 5, min = 1 },
    { "--check", nil, "compare with a CPU reference (slow beyond --shape tiny)" },
    { "--label", "TEXT", "extra 'label' key in every line" },
  },
}

local function hash(i)
  local h = (i * 0x9E3779B9 + 0x7F4A7C15) & 0xffffffff
  h = h ~ (h >> 16); h = (h * 0x85EBCA6B) & 0xffffffff
  h = h ~ (h >> 13); h = (h * 0xC2B2AE35) & 0xffffffff
  return h ~ (h >> 16)
end
local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end

-- The planes of one layer's weights (byte offsets), as the shader's header lays them out.
local function layout(s, df16, gf16)
  local nb, o, off = s.K // 32, {}, 0
  local function plane(name, bytes) o[name] = off; off = off + (bytes + 255) // 256 * 256 end
  plane("gc", gf16 and s.I * s.K * 2 or s.I * nb * 16); plane("uc", gf16 and s.I * s.K * 2 or s.I * nb * 16)
  plane("gs", gf16 and 0 or s.I * nb * 4); plane("us", gf16 and 0 or s.I * nb * 4)
  plane("dc", (s.I // 32) * s.K * (df16 and 64 or 16)); plane("ds", df16 and 0 or (s.I // 32) * s.K * 8)   -- same bytes for f16 blocks of 8
  o.bytes = off
  return o
end

-- CPU reference of the chain (f64; the GPU's fixed point differs by ~2^-32 per add).
local function f16(bits)
  local sign = (bits & 0x8000) ~= 0 and -1 or 1
  local e, m = (bits >> 10) & 31, bits & 1023
  return sign * (1 + m / 1024) * 2.0 ^ (e - 15)
end

-- f16 value e of the half pairs the shader's fill kind 3 makes from the words at byte offset off
local function f16_fill(off, e)
  local wd = hash(off // 4 + e // 2)
  return f16(((e % 2 == 0) and wd or (wd >> 16)) & 0x83FF | 0x3800)
end

local function reference(s, lay, x, df16, gf16)
  local nb = s.K // 32
  local function code(off, idx) return (hash(off // 4 + idx // 8) >> (4 * (idx % 8))) & 15 end
  local function bscale(off, i) return f32((0.75 + (hash(off // 4 + i) & 255) / 512) * 0.25 / f32(math.sqrt(s.K))) end
  for l = 0, s.layers - 1 do
    local base = 0   -- every layer holds the same values (the shader hashes offsets within a layer)
    local h = {}
    for i = 0, s.I - 1 do
      local gsum, usum = 0, 0
      if gf16 then
        for k = 0, s.K - 1 do
          gsum = gsum + f16_fill(base + lay.gc, i * s.K + k) * x[k + 1]
          usum = usum + f16_fill(base + lay.uc, i * s.K + k) * x[k + 1]
        end
        gsum, usum = gsum / math.sqrt(s.K), usum / math.sqrt(s.K)
      end
      for b = 0, gf16 and -1 or nb - 1 do
        local gd, ud = 0, 0
        for e = 0, 31 do
          local k = b * 32 + e
          gd = gd + (code(base + lay.gc, (i * nb + b) * 32 + e) - 8) * x[k + 1]
          ud = ud + (code(base + lay.uc, (i * nb + b) * 32 + e) - 8) * x[k + 1]
        end
        gsum = gsum + bscale(base + lay.gs, i * nb + b) * gd
        usum = usum + bscale(base + lay.us, i * nb + b) * ud
      end
      h[i] = gsum / (1 + math.exp(-gsum)) * usum
    end
    local y = {}
    for n = 0, s.K - 1 do
      local acc = 0
      for kb = 0, s.I // (df16 and 8 or 32) - 1 do
        local at = kb * s.K + n
        if df16 then
          for e = 0, 7 do acc = acc + f16_fill(base + lay.dc, at * 8 + e) * h[kb * 8 + e] / math.sqrt(s.I) end
        else
          local a = f32((0.75 + (hash((base + lay.ds) // 4 + 2 * at) & 255) / 512) * 0.25 / f32(math.sqrt(s.I)))
          for e = 0, 31 do acc = acc + (a * code(base + lay.dc, at * 32 + e) - 8 * a) * h[kb * 32 + e] end
        end
      end
      y[n + 1] = acc
    end
    x = y
  end
  return x
end

local function main(argv)
  local o = cli.parse(argv, spec)
  if #o._ > 0 then error(("unexpected argument '%s' (options start with --)"):format(o._[1]), 0) end
  local s = SHAPES[o.shape] or error(("--shape: '%s' is not gemma, llama or tiny"):format(o.shape), 0)
  local cb = o.down == "f16" and 8 or 32
  if o.r % cb ~= 0 or s.I % o.r ~= 0 then
    error(("--r %d: must be a multiple of %d that divides the intermediate size %d"):format(o.r, cb, s.I), 0)
  end
  local tpr = o.wg // o.r
  if o.wg % o.r ~= 0 or tpr & (tpr - 1) ~= 0 then
    error(("--wg %d: must be --r (%d) times a power of two"):format(o.wg, o.r), 0)
  end
  local dev = doppler.device()
  local caps = dev:caps()
  if tpr > caps.subgroup_size then
    error(("--wg %d / --r %d: %d lanes per row exceed the subgroup (%d)"):format(o.wg, o.r, tpr, caps.subgroup_size), 0)
  end
  local check = o.check or o.shape == "tiny"
  if o.down ~= "q4" and o.down ~= "f16" then error(("--down: '%s' is not q4 or f16"):format(o.down), 0) end
  local df16 = o.down == "f16"
  if o.gate ~= "q4" and o.gate ~= "f16" then error(("--gate: '%s' is not q4 or f16"):format(o.gate), 0) end
  local gf16 = o.gate == "f16"
  local function kern(mode, pref, tail)
    return dev:kernel { file = FILE, constants = { WG = o.wg, K = s.K, R = o.r, MODE = mode, PREF = pref,
                                                   TAIL = tail or 0, DF16 = df16 and 1 or 0,
                                                   GF16 = gf16 and 1 or 0, GU = o.gu } }
  end
  local k = { init = kern(3, 0), zero = kern(4, 0), fused = kern(0, 1), fused_nopref = kern(0, 0),
              fused_tail = kern(0, 1, 1), h = kern(1, 0), down = kern(2, 0) }
  local lay = layout(s, df16, gf16)
  local ws = {}
  local init = dev:recorder()
  for l = 0, s.layers - 1 do
    ws[l] = dev:tensor { dtype = "u8", shape = { lay.bytes } }
    local function fill(plane, bytes, kind)
      init:dispatch(k.init, { 256 }, { w = ws[l], w_off = plane, words = bytes // 4, kind = kind, kk = s.I,
        x_in = ws[l], y_out = ws[l], h = ws[l], xf_in = ws[l], yf = ws[l], ctr = ws[l],
        gc = 0, uc = 0, gs = 0, us = 0, dc = 0, ds = 0, I = s.I })
    end
    if gf16 then fill(lay.gc, 2 * s.I * s.K * 2, 3)
    else fill(lay.gc, 2 * s.I * (s.K // 32) * 16, 0); fill(lay.gs, 2 * s.I * (s.K // 32) * 4, 1) end
    if df16 then fill(lay.dc, (s.I // 32) * s.K * 64, 3)
    else fill(lay.dc, (s.I // 32) * s.K * 16, 0); fill(lay.ds, (s.I // 32) * s.K * 8, 2) end
  end
  init:run()
  local acc = dev:tensor { dtype = "i64", shape = { (s.layers + 1) * s.K } }
  local hbuf = dev:tensor { dtype = "f32", shape = { s.I } }
  local region = {}
  for l = 0, s.layers do region[l] = acc:view { offset = l * s.K * 8, dtype = "i64", shape = { s.K } } end
  local ys = acc:view { offset = s.K * 8, dtype = "i64", shape = { s.layers * s.K } }
  local accf = dev:tensor { dtype = "f32", shape = { (s.layers + 1) * s.K } }
  local fregion = {}
  for l = 0, s.layers do fregion[l] = accf:view { offset = l * s.K * 4, dtype = "f32", shape = { s.K } } end
  local ctr = dev:tensor { dtype = "u32", shape = { s.layers } }
  ctr:upload(string.rep("\0", 4 * s.layers))
  local cview = {}
  for l = 0, s.layers - 1 do cview[l] = ctr:view { offset = 4 * l, dtype = "u32", shape = { 1 } } end
  local x0, xv, xf0 = {}, {}, {}
  math.randomseed(1)
  for i = 1, s.K do
    local v = f32(2 * math.random() - 1)
    local fx = math.floor(v * 2 ^ 32)
    x0[i] = string.pack("<i8", fx); xv[i] = fx / 2 ^ 32
    xf0[i] = string.pack("<f", xv[i])
  end
  x0, xf0 = table.concat(x0), table.concat(xf0)

  local rows, first_y = {}, nil
  for mode in o.modes:gmatch("[^,%s]+") do
    if not k[mode] and mode ~= "split" or mode == "init" or mode == "zero" then
      error(("--modes: '%s' is not split, fused, fused_nopref, fused_tail, h or down"):format(mode), 0)
    end
    local tail = mode == "fused_tail"
    ys:upload(string.rep("\0", 8 * s.layers * s.K))   -- fused_tail leaves y zero itself; the others zero it first
    local rec = dev:recorder()
    for _ = 1, o.tokens do
      if not tail then
        rec:dispatch(k.zero, { 64 }, { y_out = ys, words = s.layers * s.K, w = ws[0], x_in = ws[0], h = hbuf,
          xf_in = ws[0], yf = accf, ctr = ctr,
          gc = 0, uc = 0, gs = 0, us = 0, dc = 0, ds = 0, w_off = 0, I = s.I, kind = 0, kk = 0 })
      end
      for l = 0, s.layers - 1 do
        local push = { w = ws[l], x_in = region[l], y_out = region[l + 1], h = hbuf, gc = lay.gc, uc = lay.uc,
          xf_in = fregion[l], yf = fregion[l + 1], ctr = cview[l],
          gs = lay.gs, us = lay.us, dc = lay.dc, ds = lay.ds, w_off = 0, I = s.I, words = 0, kind = 0, kk = 0 }
        if mode == "split" then
          rec:dispatch(k.h, { s.I // o.r }, push)
          rec:dispatch(k.down, { s.I // o.r }, push)
        else
          rec:dispatch(k[mode], { s.I // o.r }, push)
        end
      end
    end
    local times = {}
    for r = 0, o.runs do   -- run 0 warms up
      region[0]:upload(x0); fregion[0]:upload(xf0)
      local t0 = doppler.clock()
      rec:run()
      if r > 0 then times[#times + 1] = doppler.clock() - t0 end
    end
    table.sort(times)
    local sec = times[(#times + 1) // 2]
    local y = region[s.layers]:read(0, s.K * 8)
    local yf = {}   -- y as f32 bits: the fixed point rounded as the shader rounds it, or fused_tail's own
    if tail then y = fregion[s.layers]:read(0, s.K * 4)
    else
      for i = 1, s.K do yf[i] = string.pack("<f", string.unpack("<i8", y, 8 * i - 7) / 2 ^ 32) end
      y = table.concat(yf)
    end
    local partial = mode == "h" or mode == "down"
    local st = rec:stats()
    local hb, db = 2 * s.I * (gf16 and 2 * s.K or (s.K // 32) * 20), (s.I // 32) * s.K * (df16 and 64 or 24)
    local bytes = s.layers * ((mode == "down" and 0 or hb) + (mode == "h" and 0 or db))
    local row = { probe = "glu_down", mode = mode, shape = o.shape, down = o.down, gate = o.gate, gu = o.gu, r = o.r,
      wg = o.wg, layers = s.layers,
      tokens = o.tokens, runs = o.runs, us_per_layer = sec * 1e6 / (o.tokens * s.layers),
      gb_s = bytes * o.tokens / sec / 1e9, dispatches = st.dispatches, barriers = st.barriers,
      device = caps.name, driver = caps.driver, label = o.label }
    if not partial then
      row.same_bits = first_y == nil or first_y == y
      first_y = first_y or y
    end
    if check and not partial then
      local ref = reference(s, lay, xv, df16, gf16)
      local worst = 0
      for i = 1, s.K do
        local got = string.unpack("<f", y, 4 * i - 3)
        worst = math.max(worst, math.abs(got - ref[i]) / (1 + math.abs(ref[i])))
      end
      row.check_max_rel_err = worst
      if worst > 1e-4 then error(("%s: y differs from the CPU reference (%.3g)"):format(mode, worst), 0) end
    end
    print(json.encode(row)); io.stdout:flush()
    if row.same_bits == false then error(("%s: y differs from the first mode's bits"):format(mode), 0) end
    rows[#rows + 1] = row
  end
end

local ok, err = pcall(main, arg)
if not ok then
  io.stderr:write("glu_down: ", (tostring(err):gsub("^[^:\n]*%.lua:%d+: ", "")), "\n")
  os.exit(1, true)
end
