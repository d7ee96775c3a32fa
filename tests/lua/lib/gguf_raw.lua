-- tests/lua/lib/gguf_raw.lua: a GGUF reader written from the format's specification (ggml's docs/gguf.md), for
-- tests that compare files at the level llama.cpp reads them: the raw value type of every metadata key, each
-- tensor's ne (ggml order), ggml type id and data offset, the alignment and where the data section starts.
-- Independent of core/formats/gguf_read.c on purpose (a test of the writer should not share the reader).
--   local gguf = require "lib.gguf_raw"
--   local f = gguf.read(path)   -- { version, alignment, data_start, size, kv = { [key] = {type=, value=, elem=} },
--                               --   keys = { in file order }, tensors = { {name, ne = {...}, type, offset, bytes} } }
local M = {}

-- value type ids (gguf.md)
M.T = { u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, bool = 7, str = 8, arr = 9, u64 = 10, i64 = 11, f64 = 12 }
M.type_name = {}
for k, v in pairs(M.T) do M.type_name[v] = k end

local SCALAR = { [0] = "<I1", [1] = "<i1", [2] = "<I2", [3] = "<i2", [4] = "<I4", [5] = "<i4", [6] = "<f", [10] = "<I8",
                 [11] = "<i8", [12] = "<d" }

-- ggml type id -> { name, elements per block, bytes per block } (ggml.h / ggml.c type traits)
M.ggml = {
  [0] = { "f32", 1, 4 }, [1] = { "f16", 1, 2 }, [2] = { "q4_0", 32, 18 }, [3] = { "q4_1", 32, 20 },
  [6] = { "q5_0", 32, 22 }, [7] = { "q5_1", 32, 24 }, [8] = { "q8_0", 32, 34 }, [12] = { "q4_k", 256, 144 },
  [13] = { "q5_k", 256, 176 }, [14] = { "q6_k", 256, 210 }, [30] = { "bf16", 1, 2 },
}

function M.read(path)
  local fh = assert(io.open(path, "rb"))
  local s = fh:read("a")
  fh:close()
  local pos = 1
  local function take(fmt)
    local v, nxt = string.unpack(fmt, s, pos)
    pos = nxt
    return v
  end
  local function str()
    local n = take("<I8")
    local v = s:sub(pos, pos + n - 1)
    pos = pos + n
    return v
  end
  local function value(t)
    if t == M.T.str then return str() end
    if t == M.T.bool then return take("<I1") ~= 0 end
    if SCALAR[t] then return take(SCALAR[t]) end
    error(("%s: value type %d"):format(path, t))
  end
  assert(s:sub(1, 4) == "GGUF", path .. ": no GGUF magic")
  pos = 5
  local f = { version = take("<I4"), kv = {}, keys = {}, tensors = {}, size = #s }
  local n_tensors, n_kv = take("<I8"), take("<I8")
  for _ = 1, n_kv do
    local key, t = str(), take("<I4")
    local e = { type = t }
    if t == M.T.arr then
      e.elem = take("<I4")
      local n = take("<I8")
      e.value = {}
      for i = 1, n do e.value[i] = value(e.elem) end
    else
      e.value = value(t)
    end
    assert(not f.kv[key], path .. ": key " .. key .. " twice")
    f.kv[key] = e
    f.keys[#f.keys + 1] = key
  end
  for _ = 1, n_tensors do
    local t = { name = str(), ne = {} }
    local nd = take("<I4")
    for d = 1, nd do t.ne[d] = take("<I8") end
    t.type, t.offset = take("<I4"), take("<I8")
    local tr = M.ggml[t.type]
    assert(tr, ("%s: tensor %s has ggml type %d, unknown here"):format(path, t.name, t.type))
    local n = 1
    for _, d in ipairs(t.ne) do n = n * d end
    assert(t.ne[1] % tr[2] == 0, path .. ": " .. t.name .. " rows are not whole blocks")
    t.bytes = n // tr[2] * tr[3]
    f.tensors[#f.tensors + 1] = t
  end
  local al = f.kv["general.alignment"]
  f.alignment = al and al.value or 32
  f.header_end = pos - 1   -- bytes before the padding that precedes the data section
  f.data_start = (f.header_end + f.alignment - 1) // f.alignment * f.alignment
  return f
end

return M
