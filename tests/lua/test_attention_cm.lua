-- attention_prefill_cm (attention/attention_prefill_cm.comp, flash attention on cooperative matrices) through
-- the planner (doppler.lower R.attention).
-- Where the device has VK_NV_cooperative_matrix 16 x 16 x 16 f16 tiles (the H100; scripts/device/h100-bench.sh
-- runs this file there): one attention node of T tokens after p0 cached positions, against a Lua reference
-- in double precision, for head_dim 64 / 128 / 256, GQA ratios 1, 2 and 4, T not a multiple of the 16-row
-- tile, a sliding window, softcap, a ring cache that wraps, and every split / keys-per-tile hint. Cache
-- slots the queries must not see hold NaN, so reading one poisons the output.
-- Bound (lib/attention_case.lua): the kernel rounds the softmax weights to f16 before P V and the output to
-- f16: 2^-10 * (max|v| + |o|) + 1e-4. A wrong key, mask or head moves outputs by ~0.1 with these values.
-- Where the device has none (lavapipe): auto must keep attention_prefill, and hint attention_prefill=coopmat
-- must fail with a message that says why.
package.path = arg[0]:match("^(.*/)") .. "?.lua;" .. package.path
local check = require "lib.check"
local doppler = require "doppler"

local dev = doppler.device()
local caps = dev:caps()

local A = require "lib.attention_case"
local run, used, compare = A.run, A.used, A.compare

local s = caps.coopmat_shape
if caps.coopmat_nv and caps.subgroup_size == 32 and s and s[1] == 16 and s[2] == 16 and s[3] == 16 then
  local cases = {
    { T = 5, Hq = 4, Hkv = 1, D = 256 },                                 -- fewer rows than one tile
    { T = 37, Hq = 4, Hkv = 1, D = 256, p0 = 20 },                       -- Gemma 3 1B's heads, cached keys
    { T = 40, Hq = 8, Hkv = 4, D = 128, p0 = 9, window = 24 },           -- sliding window inside the pass
    { T = 33, Hq = 4, Hkv = 4, D = 64, p0 = 50, softcap = 30 },          -- G = 1, softcap
    { T = 24, Hq = 4, Hkv = 2, D = 128, p0 = 100, cap = 64, window = 40 }, -- ring cache that wraps
  }
  for _, c in ipairs(cases) do
    -- every split the head_dim allows; 32 keys per tile; 64 where the shared memory holds them (D = 64)
    for _, v in ipairs { { split = 1 }, { split = 2 }, { split = 4 }, { split = 8 }, { split = 4, keys = 32 },
                         { split = 2, keys = 64 } } do
      if c.D % (16 * v.split) == 0 and (v.keys ~= 64 or c.D <= 64) then
        c.split, c.keys = v.split, v.keys
        check.case(("attention_prefill_cm T=%d Hq=%d Hkv=%d D=%d p0=%d window=%d softcap=%s split=%d keys=%d"):format(
          c.T, c.Hq, c.Hkv, c.D, c.p0 or 0, c.window or 0, tostring(c.softcap), v.split, v.keys or 16), function()
          local o, want, vmax, names = run(c)
          check.truthy(used(names, "attention_prefill_cm"), "attention_prefill_cm ran")
          compare(o, want, vmax, "cm")
        end)
      end
    end
  end
  check.case("auto picks attention_prefill_cm for f16 prefill", function()
    local _, _, _, names = run { T = 9, Hq = 2, Hkv = 1, D = 64, mode = "auto" }
    check.truthy(used(names, "attention_prefill_cm"), "auto: attention_prefill_cm")
  end)
else
  check.case("no cooperative matrices: auto keeps attention_prefill", function()
    local o, want, vmax, names = run { T = 9, Hq = 4, Hkv = 2, D = 64, p0 = 3, mode = "auto" }
    check.truthy(used(names, "attention_prefill") and not used(names, "attention_prefill_cm"), "attention_prefill ran")
    -- the FMA kernel keeps f32 weights: the same bound holds with room to spare
    compare(o, want, vmax, "flash")
  end)
  check.case("no cooperative matrices: attention_prefill=coopmat fails and says why", function()
    local ok, err = pcall(run, { T = 9, Hq = 4, Hkv = 2, D = 64 })
    check.truthy(not ok, "compile failed")
    check.truthy(tostring(err):find("VK_NV_cooperative_matrix", 1, true), "message names the extension: " .. tostring(err))
  end)
end

check.done()
