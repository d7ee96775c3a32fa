-- Run 38j (session 31): the pipeline cache file in its committed format (9bfe545: doppler's 16-byte header with an
-- xxh64) on this device. Run twice with one DOPPLER_CACHE_DIR: the first process makes a kernel and writes the
-- file at close, the second reads it back (loaded_bytes > 0) and makes the same kernel from it.
local doppler = require "doppler"
local dev = doppler.open_device {}
local pc = dev:pipeline_cache()
local t = doppler.clock()
dev:kernel { file = "elementwise/add.comp", constants = { WG = 128 } }
print(("file %s, loaded %d bytes; a kernel made in %.2f ms"):format(pc.file, pc.loaded_bytes, (doppler.clock() - t) * 1e3))
dev:close()
