-- attention_prefill_cm (attention/attention_prefill_cm.comp, flash attention on cooperative matrices) through
-- the planner (doppler.lower R.attention).
-- Where the device has VK_NV_cooperative_matrix 16 x 16 x 16 f16 tiles (the H100; scripts/device/h100-bench.sh
-- runs this file there): one attention node of T tokens after p0 cached positions, against a Lua reference
-- in double precision, for head_dim 64 / 128 / 256, GQA ratios 1, 2 and 4, T not a multiple of the 16-row
-- tile, a sliding window, softcap, a ring cache that wraps, and every split / keys-per-tile hint; workgroups of
-- several row tiles (attention_prefill_cm_rows), whose last workgroup has a partial tile and tiles past the
-- rows, and whose rows see different key spans. Cache slots the queries must not see hold NaN, so reading one
-- poisons the output.
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

-- The auto rule for split, keys and rows (on fake devices: it depends only on the shared memory)
check.case("attention_prefill_cm auto: split, keys per tile and row tiles that fit the shared memory", function()
  local params = require("doppler.lower").attention_prefill_cm_params
  local function on(shared) return { dev = { caps = function() return { max_shared_memory = shared } end } } end
  local function eq(ctx, D, hints, want, what)
    check.eq(table.concat({ params(ctx, D, hints) }, " "), want, what .. " (split keys rows)")
  end
  local h100 = on(49152)
  eq(h100, 64, {}, "1 16 8", "head_dim 64 (Llama 3.2 1B): 8 row tiles of 16 keys")
  eq(h100, 128, {}, "1 32 4", "head_dim 128: 8 row tiles do not fit, 4 of 32 keys")
  eq(h100, 256, {}, "4 16 2", "head_dim 256 (Gemma 3): 4 subgroups per row tile, 2 row tiles of 16 keys")
  eq(on(40960), 256, {}, "4 16 1", "40 KiB: head_dim 256 takes one row tile")
  eq(h100, 256, { attention_prefill_cm_split = 1 }, "1 32 2", "head_dim 256 at split 1: 2 row tiles of 32 keys")
  eq(h100, 64, { attention_prefill_cm_keys = 64 }, "1 64 4", "64 keys hinted: the most row tiles that fit them")
  eq(h100, 64, { attention_prefill_cm_rows = 2 }, "1 64 2", "2 row tiles hinted: the most keys that fit")
  eq(h100, 128, { attention_prefill_cm_split = 2 }, "2 16 2", "split 2 hinted: 2 row tiles of 16 keys")
  eq(h100, 256, { attention_prefill_cm_split = 8 }, "8 16 1", "split 8 hinted: 2 row tiles do not fit")
  eq(h100, 256, { attention_prefill_cm_rows = 1 }, "4 16 1", "one row tile hinted")
  eq(on(65536), 128, {}, "1 16 8", "64 KiB of shared memory: head_dim 128 takes 8 row tiles")
  eq(on(32768), 64, {}, "1 32 4", "32 KiB: head_dim 64 takes 4 row tiles of 32 keys")
  eq(on(16384), 64, {}, "1 16 2", "16 KiB: head_dim 64 takes 2 row tiles of 16 keys")
end)

local s = caps.coopmat_shape
if caps.coopmat_nv and caps.subgroup_size == 32 and s and s[1] == 16 and s[2] == 16 and s[3] == 16 then
  local cases = {
    { T = 5, Hq = 4, Hkv = 1, D = 256 },                                 -- fewer rows than one tile
    { T = 37, Hq = 4, Hkv = 1, D = 256, p0 = 20 },                       -- Gemma 3 1B's heads, cached keys
    { T = 40, Hq = 8, Hkv = 4, D = 128, p0 = 9, window = 24 },           -- sliding window inside the pass
    { T = 33, Hq = 4, Hkv = 4, D = 64, p0 = 50, softcap = 30 },          -- G = 1, softcap
    { T = 24, Hq = 4, Hkv = 2, D = 128, p0 = 100, cap = 64, window = 40 }, -- ring cache that wraps
    { T = 70, Hq = 8, Hkv = 2, D = 64, p0 = 300, cap = 512 },            -- 280 rows: 4 row tiles and a partial
    { T = 45, Hq = 4, Hkv = 1, D = 256, p0 = 60, window = 50 },          -- 180 rows, a window, Gemma's heads
  }
  for _, c in ipairs(cases) do
    -- every split the head_dim allows; 32 keys per tile; several row tiles per workgroup; 64 keys and 8 row
    -- tiles where the shared memory holds them (maxD)
    for _, v in ipairs { { split = 1 }, { split = 2 }, { split = 4 }, { split = 8 }, { split = 4, keys = 32 },
                         { split = 2, keys = 64, maxD = 64 }, { split = 2, rows = 2 }, { split = 4, rows = 2 },
                         { split = 1, rows = 4, maxD = 128 }, { split = 1, rows = 4, keys = 64, maxD = 64 },
                         { split = 1, rows = 8, maxD = 64 } } do
      if c.D % (16 * v.split) == 0 and c.D <= (v.maxD or 256) then
        c.split, c.keys, c.rows = v.split, v.keys, v.rows
        check.case(("attention_prefill_cm T=%d Hq=%d Hkv=%d D=%d p0=%d window=%d softcap=%s split=%d keys=%s rows=%s"):format(
          c.T, c.Hq, c.Hkv, c.D, c.p0 or 0, c.window or 0, tostring(c.softcap), v.split, v.keys or "auto",
          v.rows or "auto"), function()
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
