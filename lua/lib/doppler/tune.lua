-- doppler.tune: the per-device tuning cache that `doppler tune` writes and every run reads (docs/TUNING.md).
--
-- The winners of a tuning run are hint values (gemv_wg, attention_splits, decode_chunk, ...). They are
-- stored in one small JSON file per (device, driver, model shape and quantisation), under the cache
-- directory ($DOPPLER_CACHE_DIR, else $XDG_CACHE_HOME/doppler, else ~/.cache/doppler: the SPIR-V cache's):
--
--   CACHE/tune/<device>--<driver>--<arch>-h<hidden>-l<layers>-v<vocab>-<quant>.json
--   { "version": 1, "key": { device, driver, driver_version, arch, hidden, layers, heads, kv_heads,
--     vocab, quant }, "hints": { "gemv_wg": 64, ... }, "results": [...], "model": PATH }
--
-- Applied as defaults: a tuned value replaces a hint only while the hint still has its built-in value
-- (source "default"), so the precedence is default < tune < recipe < manifest < --hints FILE < --hint;
-- --show-hints names the source "tune (FILE)". Hint tune=off ignores the cache. A file that cannot be
-- read, is not JSON, has another version or key (stale), or holds a hint that is not (or no longer) valid
-- is reported as a warning naming the file and the cause, and ignored: never an error of the run.
local doppler = require "doppler"
local json = require "doppler.json"

local M = {}
M.VERSION = 1

-- A knob's winner: the value it started from (its default: the tuner measures it too) unless another candidate
-- scored at least MARGIN lower (scores are ms per token, lower is better). rows: { value, score } per candidate
-- measured (score nil: failed). Returns the value, whether a faster candidate lost to the margin, and the
-- start's score (nil: not measured, or failed). Why a margin: on the H100 a tune's scores of one unchanged
-- configuration spread by ~0.8 %, and winners that each beat the default's score by less than 1 % made Gemma 3
-- 1B Q4_K_M decode 1.2-1.6 % slower than the defaults they replaced (docs/BENCHMARKS.md 44e, 44g).
M.MARGIN = 0.01
function M.pick(start, rows, margin)
  margin = margin or M.MARGIN
  local start_score, best_v, best_score
  for _, r in ipairs(rows) do
    if r.score then
      if tostring(r.value) == tostring(start) then start_score = r.score end
      if not best_score or r.score < best_score then best_v, best_score = r.value, r.score end
    end
  end
  if best_v == nil then return start, false end
  if start_score == nil or tostring(best_v) == tostring(start) then return best_v, false, start_score end
  if best_score <= start_score * (1 - margin) then return best_v, false, start_score end
  return start, true, start_score
end

-- A knob's winner as pick() finds it, checked again where it is not the start: remeasure(v) (a score, or nil if
-- the measurement failed) times the start and then the winner once more, and the winner stays only if it also
-- beats the start's new score by the margin. Returns the value, whether the start stays although a candidate
-- was faster (by less than the margin, or not in the check), and the check's rows ({ value, score }; empty
-- when nothing was checked). Why: each knob's start is measured first, right after the previous knob's
-- candidates, and there the same configuration read up to 1.5 % slower than elsewhere in the tune (H100: Llama
-- 3.2 1B Q4_K_M's q_matmul_head=auto 1.2201 ms per token first, 1.2093 in its check; docs/BENCHMARKS.md 53a,
-- 53b). Without the check a tune of Gemma 3 1B Q4_K_M there kept four winners that led their starts by 1.0-1.2 %
-- of GPU time, and decoded no faster with them (883.6 against 883.7 tok/s, 53a). In the check the start no
-- longer comes first.
function M.decide(start, rows, remeasure, margin)
  local v, kept, start_score = M.pick(start, rows, margin)
  -- nothing to check: the start stays, or it failed (then nothing to check against)
  if kept or tostring(v) == tostring(start) or start_score == nil then return v, kept, {} end
  local again = { { value = start, score = remeasure(start) } }
  again[2] = { value = v, score = remeasure(v) }
  if again[1].score == nil then return v, false, again end   -- the start failed now: the winner as measured
  if again[2].score == nil then return start, true, again end  -- the winner failed now: the start stays
  local v2 = M.pick(start, again, margin)
  return v2, tostring(v2) == tostring(start), again
end

function M.cache_dir()
  local d = os.getenv("DOPPLER_CACHE_DIR")
  if d and d ~= "" then return d end
  local x = os.getenv("XDG_CACHE_HOME")
  if x and x ~= "" then return x .. "/doppler" end
  local h = os.getenv("HOME")
  if h and h ~= "" then return h .. "/.cache/doppler" end
  return nil
end

-- Matrix weight types of the model file, most bytes first, joined by "+" ("f16", "q4_k+q6_k").
local function file_quant(model)
  local bytes, order = {}, {}
  for _, t in ipairs(model:tensors()) do
    if #t.shape >= 2 then
      if not bytes[t.dtype] then order[#order + 1] = t.dtype end
      bytes[t.dtype] = (bytes[t.dtype] or 0) + t.bytes
    end
  end
  table.sort(order, function(a, b) return bytes[a] > bytes[b] or (bytes[a] == bytes[b] and a < b) end)
  return #order > 0 and table.concat(order, "+") or "none"
end

-- The cache key of (device caps, open model): what a tuning result depends on.
function M.key(caps, model)
  local cfg = model:config() or {}
  local raw = cfg.raw or {}
  local arch = cfg.architecture or cfg.model_type or (raw.architectures and raw.architectures[1]) or "unknown"
  return {
    device = caps.name, driver = caps.driver_info ~= "" and caps.driver_info or caps.driver,
    driver_version = caps.driver_version or 0, arch = arch, hidden = cfg.hidden_size or 0,
    layers = cfg.num_hidden_layers or 0, heads = cfg.num_attention_heads or 0,
    kv_heads = cfg.num_key_value_heads or 0, vocab = cfg.vocab_size or 0, quant = file_quant(model),
  }
end

local KEY_FIELDS = { "device", "driver", "driver_version", "arch", "hidden", "layers", "heads", "kv_heads", "vocab", "quant" }

local function slug(s)
  s = tostring(s):gsub("[^%w%.%-]+", "_"):gsub("^_+", ""):gsub("_+$", "")
  return s:sub(1, 48)
end

-- The cache file of a key (nil when there is no cache directory).
function M.path(key)
  local dir = M.cache_dir()
  if not dir then return nil end
  return ("%s/tune/%s--%s--%s-h%d-l%d-v%d-%s.json"):format(dir, slug(key.device), slug(key.driver),
    slug(key.arch), key.hidden, key.layers, key.vocab, slug(key.quant))
end

local function file_exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

-- Reads a cache file: its table, or nil and why (a message naming the file).
function M.read(path, key)
  if not file_exists(path) then return nil, nil end
  local ok, t = pcall(doppler.read_json, path)
  if not ok then
    local msg = tostring(t)
    if msg:find(path, 1, true) then msg = msg:gsub("^.-" .. path:gsub("%p", "%%%0") .. ":%s*", "") end
    return nil, ("%s: unreadable tune cache (%s)"):format(path, msg)
  end
  if type(t) ~= "table" or type(t.hints) ~= "table" or type(t.key) ~= "table" then
    return nil, ("%s: not a tune cache (wants an object with 'version', 'key' and 'hints')"):format(path)
  end
  if t.version ~= M.VERSION then
    return nil, ("%s: tune cache version %s, this doppler writes %d: stale, run `doppler tune` again"):format(
      path, tostring(t.version), M.VERSION)
  end
  if key then
    for _, f in ipairs(KEY_FIELDS) do
      if tostring(t.key[f]) ~= tostring(key[f]) then
        return nil, ("%s: stale tune cache: %s is '%s', this run has '%s'; run `doppler tune` again"):format(
          path, f, tostring(t.key[f]), tostring(key[f]))
      end
    end
  end
  return t
end

-- Applies the cache for (device, model) to hint set h as defaults. warn(msg) reports a file that is
-- ignored (default: stderr). Returns the file applied, or nil.
function M.apply(h, caps, model, warn)
  warn = warn or function(msg) io.stderr:write("doppler: warning: ", msg, "\n") end
  if h:get("tune") == "off" then return nil end
  local key = M.key(caps, model)
  local path = M.path(key)
  if not path then return nil end
  local t, why = M.read(path, key)
  if not t then
    if why then warn(why .. "; ignored") end
    return nil
  end
  -- validate every entry first: a file with one bad hint is ignored as a whole
  local hints = require "doppler.hints"
  local probe = hints.new()
  local keys = {}
  for k, v in pairs(t.hints) do
    local ok, err = pcall(probe.set, probe, k, v, "tune")
    if not ok then
      warn(("%s: %s; tune cache ignored (run `doppler tune` again)"):format(path, tostring(err)))
      return nil
    end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  local source = ("tune (%s)"):format(path)
  for _, k in ipairs(keys) do
    if h.sources[k] == "default" then h:set(k, t.hints[k], source) end
  end
  return path
end

-- Writes a cache file (creating CACHE/tune); returns the path and the names of the hints kept from the file
-- that was there (sorted). The winners of this run replace their knobs' values; a valid file of the same key
-- keeps its other values, so that tunes of different knobs (a decode tune, a prefill tune, --knobs) add up
-- rather than the last one erasing the others. A file that M.read refuses (stale, corrupt) is replaced whole,
-- and a kept value that is no longer a valid hint is dropped. Errors name the file.
function M.write(key, hint_values, extra)
  local path = M.path(key)
  if not path then error("tune: no cache directory: set DOPPLER_CACHE_DIR (HOME is unset)", 0) end
  local dir = path:match("^(.*)/[^/]*$")
  if not os.execute(("mkdir -p '%s'"):format(dir:gsub("'", "'\\''"))) then
    error(("tune: cannot create %s"):format(dir), 0)
  end
  local merged, kept = {}, {}
  local old = M.read(path, key)
  if old then
    local probe = require("doppler.hints").new()
    for k, v in pairs(old.hints) do
      if hint_values[k] == nil and pcall(probe.set, probe, k, v, "tune") then
        merged[k] = v
        kept[#kept + 1] = k
      end
    end
  end
  table.sort(kept)
  for k, v in pairs(hint_values) do merged[k] = v end
  local t = { version = M.VERSION, key = key, hints = merged }
  for k, v in pairs(extra or {}) do t[k] = v end
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then error(("tune: cannot write %s: %s"):format(tmp, tostring(err)), 0) end
  f:write(json.encode(t, { digits = 9 }), "\n")
  f:close()
  local ok, e = os.rename(tmp, path)
  if not ok then error(("tune: cannot write %s: %s"):format(path, tostring(e)), 0) end
  return path, kept
end

return M
