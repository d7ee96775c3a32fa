-- doppler.f32: Lua numbers <-> little-endian f32 bytes, in slices of 256 (string.pack's argument limit), for
-- weights made in Lua (doppler.quantize takes f32 bytes, doppler.dequantize returns them).
--   f32.bytes(v)       the list v as f32 bytes
--   f32.values(s, n)   the first n f32 values of the bytes s, as a list
local M = {}

function M.bytes(v)
  local parts = {}
  for i = 1, #v, 256 do
    local j = math.min(#v, i + 255)
    parts[#parts + 1] = string.pack("<" .. ("f"):rep(j - i + 1), table.unpack(v, i, j))
  end
  return table.concat(parts)
end

function M.values(s, n)
  local out = {}
  for i = 1, n, 256 do
    local j = math.min(n, i + 255)
    local vals = { string.unpack("<" .. ("f"):rep(j - i + 1), s, 4 * i - 3) }
    for m = 1, j - i + 1 do out[i + m - 1] = vals[m] end
  end
  return out
end

return M
