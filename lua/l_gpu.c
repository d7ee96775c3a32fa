/*
** lua/l_gpu.c: the GPU half of the `doppler` module — devices, device tensors, kernels and
** recorders — enough to write and test a compute kernel from Lua alone:
**
**   local dev = doppler.device()                              -- the shared default device
**   local x = dev:tensor { dtype = "f32", shape = { 4 } }     -- "dp.tensor"
**   x:upload { 1, 2, 3, 4 }
**   local k = dev:kernel { file = "elementwise/scale.comp", constants = { WG = 64 } }
**   local rec = dev:recorder()
**   rec:dispatch(k, { 1, 1, 1 }, { x = x, y = x, n = 4, s = 2.0 })   -- push members by name
**   rec:run()                                                 -- submit, or replay unchanged
**   print(table.concat(x:download(), " "))
**
** This file holds the devices and the module's functions and registers every type; device tensors are
** in l_gpu_tensor.c, kernels and recorders in l_gpu_recorder.c (lua/l_gpu_parts.h: what they share).
**
** Objects hold a reference to what they need (a tensor to its device, a view to its parent, a
** recorder to every tensor it recorded), so Lua's collector never frees memory a recorded
** command buffer still addresses. Errors from gpu/ become Lua errors through dp_lua_raise,
** after our own cleanup.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "gpu/device.h"
#include "gpu/kernel.h"
#include "gpu/pipeline_cache.h"
#include "gpu/pool.h"
#include "gpu/prefetch.h"
#include "gpu/profiler.h"
#include "gpu/warmup.h"
#include "lua/l_gpu.h"
#include "lua/l_gpu_parts.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"


/* {=================================================================
** device
** ================================================================== */

dp_lua_device *dp_lua_check_device(lua_State *L, int idx)
{
    dp_lua_device *d = luaL_checkudata(L, idx, MT_DEVICE);
    if (!d->dev) luaL_error(L, "the device is closed");
    return d;
}

static int device_gc(lua_State *L)
{
    dp_lua_device *d = luaL_checkudata(L, 1, MT_DEVICE);
    if (d->dev) {
        uint64_t n = dp_device_validation_count(d->dev);
        if (n) {
            fprintf(stderr, "doppler: the Vulkan validation layer reported %llu message(s)\n", (unsigned long long)n);
            lua_getfield(L, LUA_REGISTRYINDEX, "doppler.validation_sink");
            uint64_t *sink = lua_touserdata(L, -1);
            if (sink) *sink += n;
            lua_pop(L, 1);
        }
        dp_device_close(d->dev);
        d->dev = NULL;
    }
    return 0;
}

static void push_caps(lua_State *L, const dp_device_caps *c)
{
    lua_newtable(L);
    lua_pushinteger(L, c->index), lua_setfield(L, -2, "index");
    lua_pushstring(L, c->name), lua_setfield(L, -2, "name");
    lua_pushstring(L, c->driver_name), lua_setfield(L, -2, "driver");
    lua_pushstring(L, c->driver_info), lua_setfield(L, -2, "driver_info");        /* the tune cache's key */
    lua_pushinteger(L, (lua_Integer)c->driver_version), lua_setfield(L, -2, "driver_version");
    lua_pushstring(L, c->type_name), lua_setfield(L, -2, "type");
    lua_pushinteger(L, c->subgroup_size), lua_setfield(L, -2, "subgroup_size");
    lua_pushboolean(L, c->fp16), lua_setfield(L, -2, "fp16");
    lua_pushboolean(L, c->bf16), lua_setfield(L, -2, "bf16");
    lua_pushboolean(L, c->storage8), lua_setfield(L, -2, "storage8");
    lua_pushboolean(L, c->storage16), lua_setfield(L, -2, "storage16");
    lua_pushboolean(L, c->integer_dot), lua_setfield(L, -2, "integer_dot");
    lua_pushboolean(L, c->int64_atomics), lua_setfield(L, -2, "int64_atomics");
    lua_pushboolean(L, c->integer_dot_fast), lua_setfield(L, -2, "integer_dot_fast");
    lua_pushboolean(L, c->coopmat), lua_setfield(L, -2, "coopmat");
    lua_pushboolean(L, c->coopmat_nv), lua_setfield(L, -2, "coopmat_nv");
    lua_pushboolean(L, c->side_queue), lua_setfield(L, -2, "side_queue");
    lua_pushboolean(L, c->conditional_rendering), lua_setfield(L, -2, "conditional_rendering");
    if (c->coopmat_nv) {   /* {M, N, K} of gemm_cm's f16 x f16 -> f32 tiles */
        lua_createtable(L, 3, 0);
        lua_pushinteger(L, c->coopmat_m), lua_rawseti(L, -2, 1);
        lua_pushinteger(L, c->coopmat_n), lua_rawseti(L, -2, 2);
        lua_pushinteger(L, c->coopmat_k), lua_rawseti(L, -2, 3);
        lua_setfield(L, -2, "coopmat_shape");
    }
    lua_pushinteger(L, c->max_shared_memory), lua_setfield(L, -2, "max_shared_memory");
    lua_pushinteger(L, c->max_wg_invocations), lua_setfield(L, -2, "max_wg_invocations");
    lua_pushinteger(L, c->max_storage_buffer_range), lua_setfield(L, -2, "max_storage_buffer_range");
    lua_pushinteger(L, (lua_Integer)c->max_buffer_size), lua_setfield(L, -2, "max_buffer_size");
    lua_pushinteger(L, c->max_push_constants), lua_setfield(L, -2, "max_push_constants");
    lua_pushboolean(L, c->timestamps), lua_setfield(L, -2, "timestamps");
    lua_pushnumber(L, c->timestamp_period_ns), lua_setfield(L, -2, "timestamp_period_ns");
    uint64_t local = 0;
    for (uint32_t i = 0; i < c->heap_count; i++)
        if (c->heaps[i].device_local && c->heaps[i].size > local) local = c->heaps[i].size;
    lua_pushinteger(L, (lua_Integer)local), lua_setfield(L, -2, "device_local_bytes");
}

/* doppler.devices() -> list of capability tables */
static int l_devices(lua_State *L)
{
    dp_device_caps *caps = NULL;
    uint32_t n = 0;
    dp_err err = {0};
    if (dp_device_list(&caps, &n, &err) != DP_OK) return dp_lua_raise(L, &err);
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 0; i < n; i++) {
        push_caps(L, &caps[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    free(caps);
    return 1;
}

/* doppler.open_device{index=, validation=, side_queue=} -> a new device (most code wants doppler.device());
** side_queue = "main" runs the side prefetcher's kernel on the main queue (tests on one-queue devices). */
static int l_open_device(lua_State *L)
{
    dp_device_opts opts;
    dp_device_opts_default(&opts);
    if (lua_istable(L, 1)) {
        lua_getfield(L, 1, "index");
        opts.index = (int)luaL_optinteger(L, -1, -1);
        lua_getfield(L, 1, "validation");
        opts.validation = lua_toboolean(L, -1);
        lua_getfield(L, 1, "side_queue");
        const char *sq = luaL_optstring(L, -1, "auto");
        if (strcmp(sq, "main") != 0 && strcmp(sq, "auto") != 0)
            return luaL_error(L, "open_device: side_queue must be \"auto\" or \"main\", not \"%s\"", sq);
        opts.side_on_main = strcmp(sq, "main") == 0;
        lua_pop(L, 3);
    }
    if (opts.index < 0) {
        lua_getfield(L, LUA_REGISTRYINDEX, "doppler.device_index");
        opts.index = (int)luaL_optinteger(L, -1, -1);
        lua_pop(L, 1);
    }
    dp_lua_device *d = lua_newuserdatauv(L, sizeof *d, 0);
    d->dev = NULL;
    luaL_setmetatable(L, MT_DEVICE);
    dp_err err = {0};
    if (dp_device_open(&opts, &d->dev, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 1;
}

/* doppler.device() -> the shared default device, opened on first use */
static int l_device(lua_State *L)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, "doppler.default_device") == LUA_TUSERDATA) return 1;
    lua_pop(L, 1);
    lua_settop(L, 0);
    l_open_device(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "doppler.default_device");
    return 1;
}

static int device_caps(lua_State *L)
{
    push_caps(L, dp_device_get_caps(dp_lua_check_device(L, 1)->dev));
    return 1;
}

static int device_pool_stats(lua_State *L)
{
    dp_pool_stats s;
    dp_pool_get_stats(dp_device_pool(dp_lua_check_device(L, 1)->dev), &s);
    lua_newtable(L);
    lua_pushinteger(L, (lua_Integer)s.live_bytes), lua_setfield(L, -2, "live_bytes");
    lua_pushinteger(L, (lua_Integer)s.peak_bytes), lua_setfield(L, -2, "peak_bytes");
    lua_pushinteger(L, (lua_Integer)s.block_bytes), lua_setfield(L, -2, "block_bytes");
    lua_pushinteger(L, (lua_Integer)s.acquires), lua_setfield(L, -2, "allocations");
    lua_pushinteger(L, (lua_Integer)s.releases), lua_setfield(L, -2, "releases");
    lua_pushinteger(L, (lua_Integer)s.reuses), lua_setfield(L, -2, "reuses");
    lua_pushinteger(L, (lua_Integer)s.live_slices), lua_setfield(L, -2, "live_slices");
    return 1;
}

/* dev:profile(true|false) switches timestamps for recordings started afterwards;
** dev:profile() returns { [kernel] = {count=, total_us=, mean_us=} } and keeps counting. */
static int device_profile(lua_State *L)
{
    dp_profiler *p = dp_device_profiler(dp_lua_check_device(L, 1)->dev);
    if (lua_isboolean(L, 2)) {
        dp_profiler_enable(p, lua_toboolean(L, 2));
        if (!lua_toboolean(L, 2)) dp_profiler_reset(p);
        return 0;
    }
    uint32_t n = 0;
    const dp_profile_entry *e = dp_profiler_entries(p, &n);
    lua_newtable(L);
    for (uint32_t i = 0; i < n; i++) {
        lua_newtable(L);
        lua_pushinteger(L, (lua_Integer)e[i].count), lua_setfield(L, -2, "count");
        lua_pushnumber(L, e[i].total_us), lua_setfield(L, -2, "total_us");
        lua_pushnumber(L, e[i].count ? e[i].total_us / (double)e[i].count : 0), lua_setfield(L, -2, "mean_us");
        lua_setfield(L, -2, e[i].name);
    }
    return 1;
}

static int device_submits(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_device_submit_count(dp_lua_check_device(L, 1)->dev));
    return 1;
}

static int device_side_submits(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_device_side_submit_count(dp_lua_check_device(L, 1)->dev));
    return 1;
}

/* dev:prefetch_counts() -> { stages =, late =, skipped = }: what the side prefetcher's kernels have found since
** the device opened (gpu/prefetch.h, dp_prefetch_counts). */
static int device_prefetch_counts(lua_State *L)
{
    dp_prefetch_counts c;
    dp_prefetch_get_counts(dp_lua_check_device(L, 1)->dev, &c);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, (lua_Integer)c.stages), lua_setfield(L, -2, "stages");
    lua_pushinteger(L, (lua_Integer)c.late), lua_setfield(L, -2, "late");
    lua_pushinteger(L, (lua_Integer)c.skipped), lua_setfield(L, -2, "skipped");
    return 1;
}

/* dev:warmup_start(polls) -> whether the clock warm-up runs now (gpu/warmup.h; false where the device has no
** side queue); dev:warmup_stop(); dev:warmup_stats() -> { starts =, last_polls =, running = } */
static int device_warmup_start(lua_State *L)
{
    dp_device *dev = dp_lua_check_device(L, 1)->dev;
    lua_Integer polls = luaL_checkinteger(L, 2);
    luaL_argcheck(L, polls >= 0 && polls <= UINT32_MAX, 2, "polls out of range (0 .. 2^32 - 1)");
    bool started = false;
    dp_err err = {0};
    if (dp_warmup_start(dev, (uint32_t)polls, &started, &err) != DP_OK) return dp_lua_raise(L, &err);
    lua_pushboolean(L, started);
    return 1;
}

static int device_warmup_stop(lua_State *L)
{
    dp_warmup_stop(dp_lua_check_device(L, 1)->dev);
    return 0;
}

static int device_warmup_stats(lua_State *L)
{
    dp_warmup_stats s;
    dp_warmup_get_stats(dp_lua_check_device(L, 1)->dev, &s);
    lua_newtable(L);
    lua_pushinteger(L, (lua_Integer)s.starts), lua_setfield(L, -2, "starts");
    lua_pushinteger(L, (lua_Integer)s.last_polls), lua_setfield(L, -2, "last_polls");
    lua_pushboolean(L, s.running), lua_setfield(L, -2, "running");
    return 1;
}

/* dev:pipeline_cache() -> { file = path or "", loaded_bytes = n } (gpu/pipeline_cache.h) */
static int device_pipeline_cache(lua_State *L)
{
    dp_device *dev = dp_lua_check_device(L, 1)->dev;
    lua_newtable(L);
    lua_pushstring(L, dp_pipeline_cache_file(dev)), lua_setfield(L, -2, "file");
    lua_pushinteger(L, (lua_Integer)dp_pipeline_cache_loaded(dev)), lua_setfield(L, -2, "loaded_bytes");
    return 1;
}

/* dev:kernel_times() -> { lookups, built, lookup_s, shader_s, reflect_s, layout_s, pipeline_s } (gpu/kernel.h) */
static int device_kernel_times(lua_State *L)
{
    dp_kernel_times t;
    dp_kernel_get_times(dp_lua_check_device(L, 1)->dev, &t);
    lua_newtable(L);
    lua_pushinteger(L, (lua_Integer)t.lookups), lua_setfield(L, -2, "lookups");
    lua_pushinteger(L, (lua_Integer)t.built), lua_setfield(L, -2, "built");
    lua_pushnumber(L, t.lookup_s), lua_setfield(L, -2, "lookup_s");
    lua_pushnumber(L, t.shader_s), lua_setfield(L, -2, "shader_s");
    lua_pushnumber(L, t.reflect_s), lua_setfield(L, -2, "reflect_s");
    lua_pushnumber(L, t.layout_s), lua_setfield(L, -2, "layout_s");
    lua_pushnumber(L, t.pipeline_s), lua_setfield(L, -2, "pipeline_s");
    return 1;
}

static int device_validation_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_device_validation_count(dp_lua_check_device(L, 1)->dev));
    return 1;
}

static int device_close(lua_State *L)
{
    return device_gc(L);
}

/* }================================================================= */

/* doppler.clock() -> seconds on a monotonic clock (for timings in scripts) */
static int l_clock(lua_State *L)
{
    lua_pushnumber(L, dp_clock_seconds());
    return 1;
}

/* A metatable `name` whose __index holds `methods`, with __gc and __tostring where given. */
void dp_lua_gpu_new_type(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc,
                         lua_CFunction tostring)
{
    luaL_newmetatable(L, name);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    if (gc) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
    }
    if (tostring) {
        lua_pushcfunction(L, tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pop(L, 1);
}

void dp_lua_register_gpu(lua_State *L, int module)
{
    static const luaL_Reg device_methods[] = {
        {"tensor", dp_lua_device_tensor}, {"kernel", dp_lua_device_kernel}, {"recorder", dp_lua_device_recorder},
        {"caps", device_caps},           {"pool_stats", device_pool_stats}, {"profile", device_profile},
        {"submits", device_submits},     {"side_submits", device_side_submits},
        {"prefetch_counts", device_prefetch_counts},
        {"warmup_start", device_warmup_start}, {"warmup_stop", device_warmup_stop},
        {"warmup_stats", device_warmup_stats}, {"pipeline_cache", device_pipeline_cache},
        {"kernel_times", device_kernel_times},
        {"validation_count", device_validation_count}, {"close", device_close}, {NULL, NULL},
    };
    dp_lua_gpu_new_type(L, MT_DEVICE, device_methods, device_gc, NULL);
    dp_lua_register_gpu_tensor(L);
    dp_lua_register_gpu_recorder(L);
    static const luaL_Reg funcs[] = {
        {"devices", l_devices}, {"device", l_device}, {"open_device", l_open_device}, {"clock", l_clock}, {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
    (void)module;
}
