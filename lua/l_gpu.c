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
#include "gpu/recorder.h"
#include "gpu/tensor.h"
#include "gpu/warmup.h"
#include "lua/l_gpu.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

#define MT_DEVICE   "dp.device"
#define MT_TENSOR   "dp.tensor"
#define MT_KERNEL   "dp.kernel"
#define MT_RECORDER "dp.recorder"

/* {=================================================================
** dtype names: the device tensor dtypes plus "u32" (stored as i32: same bytes)
** ================================================================== */

static int check_dtype(lua_State *L, int idx, dp_dtype *dt, bool *is_u32)
{
    const char *name = luaL_checkstring(L, idx);
    *is_u32 = strcmp(name, "u32") == 0;
    if (*is_u32) {
        *dt = DP_I32;
        return 1;
    }
    if (!dp_dtype_from_name(name, dt)) return luaL_error(L, "unknown dtype '%s'", name);
    return 1;
}

/* }================================================================= */

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

/* {=================================================================
** tensors
** ================================================================== */

dp_lua_tensor *dp_lua_check_tensor(lua_State *L, int idx)
{
    dp_lua_tensor *t = luaL_checkudata(L, idx, MT_TENSOR);
    if (!t->t) luaL_error(L, "the tensor was released");
    return t;
}

static int tensor_gc(lua_State *L)
{
    dp_lua_tensor *t = luaL_checkudata(L, 1, MT_TENSOR);
    dp_gtensor_release(t->t);
    t->t = NULL;
    return 0;
}

/* Pushes a new tensor userdata; `owner` (stack index) is kept alive as its user value (the
** device, or the parent of a view). */
dp_lua_tensor *dp_lua_push_tensor(lua_State *L, dp_gtensor *gt, bool is_u32, int owner)
{
    owner = lua_absindex(L, owner);
    dp_lua_tensor *t = lua_newuserdatauv(L, sizeof *t, 1);
    t->t = gt;
    t->is_u32 = is_u32;
    luaL_setmetatable(L, MT_TENSOR);
    lua_pushvalue(L, owner);
    lua_setiuservalue(L, -2, 1);
    return t;
}

static int read_shape(lua_State *L, int idx, uint64_t shape[DP_GTENSOR_MAX_DIMS])
{
    luaL_checktype(L, idx, LUA_TTABLE);
    int n = (int)luaL_len(L, idx);
    if (n < 1 || n > DP_GTENSOR_MAX_DIMS) return luaL_error(L, "shape must have 1 to %d dimensions, got %d", DP_GTENSOR_MAX_DIMS, n);
    for (int i = 0; i < n; i++) {
        lua_geti(L, idx, i + 1);
        lua_Integer d = luaL_checkinteger(L, -1);
        lua_pop(L, 1);
        if (d < 1) return luaL_error(L, "shape dimension %d is %d; dimensions must be >= 1", i + 1, (int)d);
        shape[i] = (uint64_t)d;
    }
    return n;
}

/* dev:tensor{dtype=, shape={...}, host=false}: host = true puts it in mapped host-visible memory */
static int device_tensor(lua_State *L)
{
    dp_lua_device *d = dp_lua_check_device(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "dtype");
    dp_dtype dt;
    bool is_u32;
    check_dtype(L, -1, &dt, &is_u32);
    lua_getfield(L, 2, "shape");
    uint64_t shape[DP_GTENSOR_MAX_DIMS];
    int nd = read_shape(L, lua_gettop(L), shape);
    lua_getfield(L, 2, "host");
    dp_mem kind = lua_toboolean(L, -1) ? DP_MEM_HOST : DP_MEM_DEVICE;
    lua_pop(L, 3);
    dp_gtensor *gt = NULL;
    dp_err err = {0};
    if (dp_gtensor_create_in(d->dev, kind, dt, (uint32_t)nd, shape, &gt, &err) != DP_OK) return dp_lua_raise(L, &err);
    dp_lua_push_tensor(L, gt, is_u32, 1);
    return 1;
}

static const char *tensor_dtype_name(const dp_lua_tensor *t)
{
    return t->is_u32 ? "u32" : dp_dtype_name(t->t->dtype);
}

static int tensor_shape(lua_State *L)
{
    dp_lua_tensor *t = dp_lua_check_tensor(L, 1);
    lua_createtable(L, (int)t->t->ndim, 0);
    for (uint32_t i = 0; i < t->t->ndim; i++) {
        lua_pushinteger(L, (lua_Integer)t->t->shape[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int tensor_strides(lua_State *L)
{
    dp_lua_tensor *t = dp_lua_check_tensor(L, 1);
    lua_createtable(L, (int)t->t->ndim, 0);
    for (uint32_t i = 0; i < t->t->ndim; i++) {
        lua_pushinteger(L, (lua_Integer)t->t->stride[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int tensor_dtype(lua_State *L)
{
    lua_pushstring(L, tensor_dtype_name(dp_lua_check_tensor(L, 1)));
    return 1;
}

static int tensor_nbytes(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_lua_check_tensor(L, 1)->t->bytes);
    return 1;
}

static int tensor_numel(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_lua_check_tensor(L, 1)->t->numel);
    return 1;
}

static int tensor_address(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_lua_check_tensor(L, 1)->t->buf.addr);
    return 1;
}

static int tensor_tostring(lua_State *L)
{
    dp_lua_tensor *t = luaL_checkudata(L, 1, MT_TENSOR);
    if (!t->t) {
        lua_pushliteral(L, "dp.tensor (released)");
        return 1;
    }
    char desc[128];
    dp_gtensor_describe(t->t, desc, sizeof desc);
    lua_pushfstring(L, "dp.tensor %s%s", desc, t->is_u32 ? " (u32)" : "");
    return 1;
}

/* Converts Lua numbers to the element type, one element at a time. */
static void store_number(dp_dtype dt, bool is_u32, void *dst, size_t i, lua_Number v)
{
    switch (dt) {
    case DP_F32: ((float *)dst)[i] = (float)v; break;
    case DP_F16: ((uint16_t *)dst)[i] = dp_f32_to_f16((float)v); break;
    case DP_BF16: ((uint16_t *)dst)[i] = dp_f32_to_bf16((float)v); break;
    case DP_I32:
        if (is_u32) ((uint32_t *)dst)[i] = (uint32_t)(int64_t)v;
        else ((int32_t *)dst)[i] = (int32_t)v;
        break;
    case DP_U8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
    case DP_I8: ((int8_t *)dst)[i] = (int8_t)v; break;
    default: break;
    }
}

static void push_number(lua_State *L, dp_dtype dt, bool is_u32, const void *src, size_t i)
{
    switch (dt) {
    case DP_F32: lua_pushnumber(L, ((const float *)src)[i]); break;
    case DP_F16: lua_pushnumber(L, dp_f16_to_f32(((const uint16_t *)src)[i])); break;
    case DP_BF16: lua_pushnumber(L, dp_bf16_to_f32(((const uint16_t *)src)[i])); break;
    case DP_I32:
        if (is_u32) lua_pushinteger(L, ((const uint32_t *)src)[i]);
        else lua_pushinteger(L, ((const int32_t *)src)[i]);
        break;
    case DP_U8: lua_pushinteger(L, ((const uint8_t *)src)[i]); break;
    case DP_I8: lua_pushinteger(L, ((const int8_t *)src)[i]); break;
    default: lua_pushnil(L); break;
    }
}

static bool numeric_dtype(dp_dtype dt)
{
    return dt == DP_F32 || dt == DP_F16 || dt == DP_BF16 || dt == DP_I32 || dt == DP_U8 || dt == DP_I8;
}

/* t:upload(list_of_numbers [, offset_elements]) or t:upload(binary_string [, offset_bytes]) */
static int tensor_upload(lua_State *L)
{
    dp_lua_tensor *t = dp_lua_check_tensor(L, 1);
    dp_err err = {0};
    if (lua_type(L, 2) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, 2, &len);
        lua_Integer off = luaL_optinteger(L, 3, 0);
        if (off < 0 || (uint64_t)off + len > t->t->bytes)
            return luaL_error(L, "upload: %d bytes at offset %d do not fit a %d-byte tensor", (int)len, (int)off, (int)t->t->bytes);
        if (dp_gtensor_upload(t->t, (uint64_t)off, s, len, &err) != DP_OK) return dp_lua_raise(L, &err);
        return 0;
    }
    luaL_checktype(L, 2, LUA_TTABLE);
    dp_dtype dt = t->t->dtype;
    if (!numeric_dtype(dt)) return luaL_error(L, "upload: a %s tensor takes a binary string, not numbers", dp_dtype_name(dt));
    size_t n = (size_t)luaL_len(L, 2);
    lua_Integer off = luaL_optinteger(L, 3, 0);
    size_t esz = dp_dtype_get(dt)->type_size;
    if (off < 0 || (uint64_t)(off + (lua_Integer)n) > t->t->numel)
        return luaL_error(L, "upload: %d values at element %d do not fit %d elements", (int)n, (int)off, (int)t->t->numel);
    if (n == 0) return 0;
    void *buf = lua_newuserdatauv(L, n * esz, 0);   /* collected by Lua: no leak if a value is bad */
    for (size_t i = 0; i < n; i++) {
        lua_geti(L, 2, (lua_Integer)i + 1);
        int ok;
        lua_Number v = lua_tonumberx(L, -1, &ok);
        if (!ok) return luaL_error(L, "upload: element %d is not a number", (int)i + 1);
        lua_pop(L, 1);
        store_number(dt, t->is_u32, buf, i, v);
    }
    if (dp_gtensor_upload(t->t, (uint64_t)off * esz, buf, n * esz, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 0;
}

/* t:download{offset = elements, count = elements} -> list of numbers */
static int tensor_download(lua_State *L)
{
    dp_lua_tensor *t = dp_lua_check_tensor(L, 1);
    dp_dtype dt = t->t->dtype;
    if (!numeric_dtype(dt)) return luaL_error(L, "download: a %s tensor is read with t:read()", dp_dtype_name(dt));
    lua_Integer off = 0, count = (lua_Integer)t->t->numel;
    if (lua_istable(L, 2)) {
        lua_getfield(L, 2, "offset");
        off = luaL_optinteger(L, -1, 0);
        lua_getfield(L, 2, "count");
        count = luaL_optinteger(L, -1, (lua_Integer)t->t->numel - off);
        lua_pop(L, 2);
    }
    if (off < 0 || count < 0 || (uint64_t)(off + count) > t->t->numel)
        return luaL_error(L, "download: elements [%d, %d) are outside %d", (int)off, (int)(off + count), (int)t->t->numel);
    size_t esz = dp_dtype_get(dt)->type_size;
    void *buf = lua_newuserdatauv(L, (size_t)count * esz + 1, 0);
    dp_err err = {0};
    if (count && dp_gtensor_download(t->t, (uint64_t)off * esz, buf, (uint64_t)count * esz, &err) != DP_OK)
        return dp_lua_raise(L, &err);
    lua_createtable(L, (int)count, 0);
    for (lua_Integer i = 0; i < count; i++) {
        push_number(L, dt, t->is_u32, buf, (size_t)i);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* t:read([offset_bytes [, bytes]]) -> binary string */
static int tensor_read(lua_State *L)
{
    dp_lua_tensor *t = dp_lua_check_tensor(L, 1);
    lua_Integer off = luaL_optinteger(L, 2, 0);
    lua_Integer n = luaL_optinteger(L, 3, (lua_Integer)t->t->bytes - off);
    if (off < 0 || n < 0 || (uint64_t)(off + n) > t->t->bytes)
        return luaL_error(L, "read: bytes [%d, %d) are outside %d", (int)off, (int)(off + n), (int)t->t->bytes);
    luaL_Buffer b;
    char *dst = luaL_buffinitsize(L, &b, (size_t)n);
    dp_err err = {0};
    if (n && dp_gtensor_download(t->t, (uint64_t)off, dst, (uint64_t)n, &err) != DP_OK) return dp_lua_raise(L, &err);
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

/* t:view{offset = bytes, dtype = , shape = {...}, strides = {...}} -> a tensor sharing t's memory;
** strides (elements, outermost first) make a strided view, e.g. one slice of a fused projection. */
static int tensor_view(lua_State *L)
{
    dp_lua_tensor *t = dp_lua_check_tensor(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "offset");
    lua_Integer off = luaL_optinteger(L, -1, 0);
    lua_getfield(L, 2, "dtype");
    dp_dtype dt = t->t->dtype;
    bool is_u32 = t->is_u32;
    if (!lua_isnil(L, -1)) check_dtype(L, -1, &dt, &is_u32);
    lua_getfield(L, 2, "shape");
    uint64_t shape[DP_GTENSOR_MAX_DIMS], strides[DP_GTENSOR_MAX_DIMS];
    int nd = read_shape(L, lua_gettop(L), shape);
    bool strided = lua_getfield(L, 2, "strides") == LUA_TTABLE;
    if (strided) {
        if ((int)luaL_len(L, -1) != nd) return luaL_error(L, "view: %d strides for %d dimensions", (int)luaL_len(L, -1), nd);
        for (int i = 0; i < nd; i++) {
            lua_geti(L, -1, i + 1);
            lua_Integer v = luaL_checkinteger(L, -1);
            if (v < 0) return luaL_error(L, "view: stride %d is negative", i + 1);
            strides[i] = (uint64_t)v;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 4);
    if (off < 0) return luaL_error(L, "view: negative offset");
    dp_gtensor *v = NULL;
    dp_err err = {0};
    if (dp_gtensor_view_strided(t->t, (uint64_t)off, dt, (uint32_t)nd, shape, strided ? strides : NULL, &v, &err) != DP_OK)
        return dp_lua_raise(L, &err);
    dp_lua_push_tensor(L, v, is_u32, 1);
    return 1;
}

static int tensor_release(lua_State *L)
{
    return tensor_gc(L);
}

/* }================================================================= */

/* {=================================================================
** kernels and recorders
** ================================================================== */

typedef struct lua_kernel {
    dp_kernel *k;   /* owned by the device's kernel cache */
} lua_kernel;

/* Reads a list of strings at t[field] into out (pointers into Lua strings, which stay referenced
** by the argument table for the duration of the call). */
static uint32_t read_strings(lua_State *L, int t, const char *field, const char **out, uint32_t max)
{
    uint32_t n = 0;
    if (lua_getfield(L, t, field) == LUA_TTABLE) {
        int list = lua_gettop(L);
        lua_Integer len = luaL_len(L, list);
        if (len > (lua_Integer)max) luaL_error(L, "kernel: more than %d %s", (int)max, field);
        for (lua_Integer i = 1; i <= len; i++) {
            lua_geti(L, list, i);
            out[n++] = luaL_checkstring(L, -1);
            lua_pop(L, 1);   /* the string stays alive: the list holds it */
        }
    }
    lua_pop(L, 1);
    return n;
}

/* dev:kernel{file= | source=, name=, defines={"A", "B=1"}, constants={WG=64}} */
static int device_kernel(lua_State *L)
{
    dp_lua_device *d = dp_lua_check_device(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    dp_kernel_desc desc = {0};
    const char *defines[64];
    dp_kconst constants[32];
    lua_getfield(L, 2, "file");
    desc.file = luaL_optstring(L, -1, NULL);
    lua_getfield(L, 2, "source");
    desc.source = luaL_optstring(L, -1, NULL);
    lua_getfield(L, 2, "name");
    desc.name = luaL_optstring(L, -1, NULL);
    lua_pop(L, 3);
    if (!desc.file == !desc.source) return luaL_error(L, "kernel: give exactly one of file= and source=");
    desc.n_defines = read_strings(L, 2, "defines", defines, 64);
    desc.defines = defines;
    if (lua_getfield(L, 2, "constants") == LUA_TTABLE) {
        int ct = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, ct)) {
            if (desc.n_constants == 32) return luaL_error(L, "kernel: more than 32 constants");
            if (lua_type(L, -2) != LUA_TSTRING) return luaL_error(L, "kernel: constants are set by name");
            constants[desc.n_constants].name = lua_tostring(L, -2);
            constants[desc.n_constants].value = lua_isboolean(L, -1) ? lua_toboolean(L, -1) : luaL_checknumber(L, -1);
            desc.n_constants++;
            lua_pop(L, 1);
        }
    }
    desc.constants = constants;
    dp_kernel *k = NULL;
    dp_err err = {0};
    if (dp_kernel_get(d->dev, &desc, &k, &err) != DP_OK) return dp_lua_raise(L, &err);
    lua_kernel *lk = lua_newuserdatauv(L, sizeof *lk, 1);
    lk->k = k;
    luaL_setmetatable(L, MT_KERNEL);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);   /* the device outlives its kernels */
    return 1;
}

static int kernel_name(lua_State *L)
{
    lua_kernel *k = luaL_checkudata(L, 1, MT_KERNEL);
    lua_pushstring(L, dp_kernel_name(k->k));
    return 1;
}

/* k:push_members() -> { {name=, kind=, offset=, access=}, ... } (reflection, for tooling and tests) */
static int kernel_push_members(lua_State *L)
{
    lua_kernel *k = luaL_checkudata(L, 1, MT_KERNEL);
    const dp_reflection *r = dp_kernel_reflection(k->k);
    static const char *const access[] = {"none", "read", "write", "readwrite"};
    lua_createtable(L, (int)r->n_push, 0);
    for (uint32_t i = 0; i < r->n_push; i++) {
        lua_newtable(L);
        lua_pushstring(L, r->push[i].name), lua_setfield(L, -2, "name");
        lua_pushstring(L, dp_refl_kind_name(r->push[i].kind)), lua_setfield(L, -2, "kind");
        lua_pushinteger(L, r->push[i].offset), lua_setfield(L, -2, "offset");
        lua_pushstring(L, access[r->push[i].access & 3]), lua_setfield(L, -2, "access");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

typedef struct lua_recorder {
    dp_recorder *rec;
    bool         dirty;    /* commands recorded since the last submit */
    bool         begun;
    int          refs;     /* entries in the user-value table (tensors kept alive) */
} lua_recorder;

static lua_recorder *check_recorder(lua_State *L, int idx)
{
    lua_recorder *r = luaL_checkudata(L, idx, MT_RECORDER);
    if (!r->rec) luaL_error(L, "the recorder was released");
    return r;
}

static int recorder_gc(lua_State *L)
{
    lua_recorder *r = luaL_checkudata(L, 1, MT_RECORDER);
    dp_recorder_destroy(r->rec);
    r->rec = NULL;
    return 0;
}

/* opts.prefetch.<name>: an integer >= 0, or dflt where absent. */
static uint64_t prefetch_field(lua_State *L, int t, const char *name, uint64_t dflt)
{
    lua_getfield(L, t, name);
    uint64_t v = dflt;
    if (!lua_isnil(L, -1)) {
        int ok;
        lua_Integer i = lua_tointegerx(L, -1, &ok);
        if (!ok || i < 0) luaL_error(L, "recorder: prefetch.%s must be a non-negative integer", name);
        v = (uint64_t)i;
    }
    lua_pop(L, 1);
    return v;
}

/* dev:recorder([{ prefetch = { depth, light_lead, groups, wg, min_kb, max_mb, copies, skip } }]): with prefetch, a
** replay reads the weights of each stage ahead of it on the device's side queue, where it has one (gpu/prefetch.h). */
static int device_recorder(lua_State *L)
{
    dp_lua_device *d = dp_lua_check_device(L, 1);
    bool prefetch = false;
    dp_prefetch_opts po;
    dp_prefetch_opts_default(&po);
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        if (lua_getfield(L, 2, "prefetch") == LUA_TTABLE) {
            int t = lua_gettop(L);
            prefetch = true;
            po.depth = (uint32_t)prefetch_field(L, t, "depth", po.depth);
            po.light_lead = (uint32_t)prefetch_field(L, t, "light_lead", po.light_lead);
            po.groups = (uint32_t)prefetch_field(L, t, "groups", po.groups);
            po.wg = (uint32_t)prefetch_field(L, t, "wg", po.wg);
            po.min_bytes = prefetch_field(L, t, "min_kb", po.min_bytes >> 10) << 10;
            po.max_bytes = prefetch_field(L, t, "max_mb", po.max_bytes >> 20) << 20;
            po.copies = (uint32_t)prefetch_field(L, t, "copies", po.copies);
            po.skip = (uint32_t)prefetch_field(L, t, "skip", po.skip);
        } else if (!lua_isnil(L, -1)) {
            return luaL_error(L, "recorder: prefetch must be a table");
        }
        lua_pop(L, 1);
    }
    lua_recorder *r = lua_newuserdatauv(L, sizeof *r, 2);
    memset(r, 0, sizeof *r);
    luaL_setmetatable(L, MT_RECORDER);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);       /* the device */
    lua_newtable(L);
    lua_setiuservalue(L, -2, 2);       /* tensors the recording addresses */
    dp_err err = {0};
    if (dp_recorder_create(d->dev, &r->rec, &err) != DP_OK) return dp_lua_raise(L, &err);
    if (prefetch && dp_recorder_prefetch(r->rec, &po, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 1;
}

static void keep_alive(lua_State *L, int rec_idx, int value_idx)
{
    lua_recorder *r = lua_touserdata(L, rec_idx);
    value_idx = lua_absindex(L, value_idx);
    lua_getiuservalue(L, rec_idx, 2);
    lua_pushvalue(L, value_idx);
    lua_rawseti(L, -2, ++r->refs);
    lua_pop(L, 1);
}

static dp_status ensure_begun(lua_recorder *r, dp_err *err)
{
    if (r->begun && r->dirty) return DP_OK;
    if (!r->begun || !r->dirty) {
        dp_status st = dp_recorder_begin(r->rec, err);
        if (st != DP_OK) return st;
        r->begun = true;
        r->dirty = true;
    }
    return DP_OK;
}

/* Fills a dispatch of kernel k from the push table at index `push` (tensors are kept alive by the
** recorder at index 1). */
static dp_dispatch *fill_dispatch(lua_State *L, lua_kernel *k, int push)
{
    dp_dispatch *d = lua_newuserdatauv(L, sizeof *d, 0);   /* large: keep it off the C stack */
    dp_dispatch_init(d, k->k);
    lua_pushnil(L);
    while (lua_next(L, push)) {
        if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "dispatch: push members are set by name");
        const char *name = lua_tostring(L, -2);
        if (lua_type(L, -1) == LUA_TUSERDATA) {
            dp_lua_tensor *t = dp_lua_check_tensor(L, -1);
            dp_dispatch_tensor(d, name, t->t);
            keep_alive(L, 1, -1);
        } else if (lua_isboolean(L, -1)) {
            dp_dispatch_number(d, name, lua_toboolean(L, -1));
        } else {
            int ok;
            lua_Number v = lua_tonumberx(L, -1, &ok);
            if (!ok) luaL_error(L, "dispatch: push member '%s' must be a number or a tensor", name);
            dp_dispatch_number(d, name, v);
        }
        lua_pop(L, 1);
    }
    return d;
}

/* rec:dispatch(kernel, {gx, gy, gz}, {member = number | tensor, ...} [, {self_ordered = true}])
** self_ordered: the kernel waits in the shader for the dispatches before it, so no hazard barrier goes
** before it (gpu/recorder.h, dp_dispatch.self_ordered; recipes/bench/persistent.lua's chain mode). */
static int recorder_dispatch(lua_State *L)
{
    lua_recorder *r = check_recorder(L, 1);
    lua_kernel *k = luaL_checkudata(L, 2, MT_KERNEL);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    uint32_t g[3] = {1, 1, 1};
    for (int i = 0; i < 3; i++) {
        if (lua_geti(L, 3, i + 1) != LUA_TNIL) {
            lua_Integer v = luaL_checkinteger(L, -1);
            if (v < 1) return luaL_error(L, "dispatch: group count %d is %d", i + 1, (int)v);
            g[i] = (uint32_t)v;
        }
        lua_pop(L, 1);
    }
    bool self_ordered = false;
    if (!lua_isnoneornil(L, 5)) {
        luaL_checktype(L, 5, LUA_TTABLE);
        self_ordered = lua_getfield(L, 5, "self_ordered") != LUA_TNIL && lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    lua_settop(L, 4);   /* fill_dispatch's userdata goes above the arguments */
    dp_dispatch *d = fill_dispatch(L, k, 4);
    d->self_ordered = self_ordered;
    dp_err err = {0};
    if (ensure_begun(r, &err) != DP_OK || dp_recorder_dispatch(r->rec, d, g[0], g[1], g[2], &err) != DP_OK)
        return dp_lua_raise(L, &err);
    return 0;
}

/* rec:dispatch_indirect(kernel, groups, offset, {member = ...}): the group counts are read when the
** command runs, from the u32 tensor `groups` at byte `offset` (x, y, z: a VkDispatchIndirectCommand).
** A GPU-resident loop (doppler.loop) zeroes them to skip the work after a stop. */
static int recorder_dispatch_indirect(lua_State *L)
{
    lua_recorder *r = check_recorder(L, 1);
    lua_kernel *k = luaL_checkudata(L, 2, MT_KERNEL);
    dp_lua_tensor *groups = dp_lua_check_tensor(L, 3);
    lua_Integer offset = luaL_checkinteger(L, 4);
    luaL_checktype(L, 5, LUA_TTABLE);
    if (offset < 0) return luaL_error(L, "dispatch_indirect: offset %d is negative", (int)offset);
    keep_alive(L, 1, 3);
    dp_dispatch *d = fill_dispatch(L, k, 5);
    dp_err err = {0};
    if (ensure_begun(r, &err) != DP_OK ||
        dp_recorder_dispatch_indirect(r->rec, d, &groups->t->buf, (uint64_t)offset, &err) != DP_OK)
        return dp_lua_raise(L, &err);
    return 0;
}

/* rec:begin_conditional(pred, offset, run_if_zero) ... rec:end_conditional(): the dispatches between run only
** while the u32 of tensor `pred` at byte `offset` is zero (run_if_zero true) or non-zero (gpu/recorder.h;
** caps.conditional_rendering). doppler.loop skips a chunk's steps after a stop this way. */
static int recorder_begin_conditional(lua_State *L)
{
    lua_recorder *r = check_recorder(L, 1);
    dp_lua_tensor *pred = dp_lua_check_tensor(L, 2);
    lua_Integer offset = luaL_checkinteger(L, 3);
    bool if_zero = lua_toboolean(L, 4);
    if (offset < 0) return luaL_error(L, "begin_conditional: offset %d is negative", (int)offset);
    keep_alive(L, 1, 2);
    dp_err err = {0};
    if (ensure_begun(r, &err) != DP_OK ||
        dp_recorder_begin_conditional(r->rec, &pred->t->buf, (uint64_t)offset, if_zero, &err) != DP_OK)
        return dp_lua_raise(L, &err);
    return 0;
}

static int recorder_end_conditional(lua_State *L)
{
    lua_recorder *r = check_recorder(L, 1);
    dp_err err = {0};
    if (dp_recorder_end_conditional(r->rec, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 0;
}

/* rec:side_restart(): after a replay whose conditional blocks skipped work (gpu/recorder.h) */
static int recorder_side_restart(lua_State *L)
{
    lua_recorder *r = check_recorder(L, 1);
    dp_recorder_side_restart(r->rec);
    return 0;
}

/* rec:barrier() — a full barrier for hazards the recorder cannot see */
static int recorder_barrier(lua_State *L)
{
    lua_recorder *r = check_recorder(L, 1);
    dp_err err = {0};
    if (ensure_begun(r, &err) != DP_OK || dp_recorder_barrier(r->rec, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 0;
}

/* rec:run() submits what was recorded since the last run and waits; with nothing new, it
** replays the last recording unchanged (no re-recording). */
static int recorder_run(lua_State *L)
{
    lua_recorder *r = check_recorder(L, 1);
    dp_err err = {0};
    dp_status st;
    if (r->dirty) {
        st = dp_recorder_submit(r->rec, &err);
        r->dirty = false;
    } else if (r->begun) {
        st = dp_recorder_replay(r->rec, &err);
    } else {
        return luaL_error(L, "run: nothing was recorded");
    }
    if (st != DP_OK) return dp_lua_raise(L, &err);
    return 0;
}

static int recorder_stats(lua_State *L)
{
    dp_recorder_stats s;
    dp_recorder_get_stats(check_recorder(L, 1)->rec, &s);
    lua_newtable(L);
    lua_pushinteger(L, (lua_Integer)s.dispatches), lua_setfield(L, -2, "dispatches");
    lua_pushinteger(L, (lua_Integer)s.barriers), lua_setfield(L, -2, "barriers");
    lua_pushinteger(L, (lua_Integer)s.transfers), lua_setfield(L, -2, "transfers");
    lua_pushinteger(L, (lua_Integer)s.conditionals), lua_setfield(L, -2, "conditionals");
    lua_pushinteger(L, (lua_Integer)s.submits), lua_setfield(L, -2, "submits");
    lua_pushboolean(L, s.prefetch), lua_setfield(L, -2, "prefetch");
    lua_pushinteger(L, (lua_Integer)s.prefetch_stages), lua_setfield(L, -2, "prefetch_stages");
    lua_pushinteger(L, (lua_Integer)s.prefetch_ranges), lua_setfield(L, -2, "prefetch_ranges");
    lua_pushinteger(L, (lua_Integer)s.prefetch_led), lua_setfield(L, -2, "prefetch_led");
    return 1;
}

/* }================================================================= */

/* doppler.clock() -> seconds on a monotonic clock (for timings in scripts) */
static int l_clock(lua_State *L)
{
    lua_pushnumber(L, dp_clock_seconds());
    return 1;
}

void dp_lua_register_gpu(lua_State *L, int module)
{
    static const luaL_Reg device_methods[] = {
        {"tensor", device_tensor},       {"kernel", device_kernel},     {"recorder", device_recorder},
        {"caps", device_caps},           {"pool_stats", device_pool_stats}, {"profile", device_profile},
        {"submits", device_submits},     {"side_submits", device_side_submits},
        {"prefetch_counts", device_prefetch_counts},
        {"warmup_start", device_warmup_start}, {"warmup_stop", device_warmup_stop},
        {"warmup_stats", device_warmup_stats}, {"pipeline_cache", device_pipeline_cache},
        {"kernel_times", device_kernel_times},
        {"validation_count", device_validation_count}, {"close", device_close}, {NULL, NULL},
    };
    static const luaL_Reg tensor_methods[] = {
        {"upload", tensor_upload},   {"download", tensor_download}, {"read", tensor_read},
        {"view", tensor_view},       {"shape", tensor_shape},       {"dtype", tensor_dtype},
        {"strides", tensor_strides},
        {"nbytes", tensor_nbytes},   {"numel", tensor_numel},       {"address", tensor_address},
        {"release", tensor_release}, {NULL, NULL},
    };
    static const luaL_Reg kernel_methods[] = {
        {"name", kernel_name}, {"push_members", kernel_push_members}, {NULL, NULL},
    };
    static const luaL_Reg recorder_methods[] = {
        {"dispatch", recorder_dispatch}, {"dispatch_indirect", recorder_dispatch_indirect},
        {"begin_conditional", recorder_begin_conditional}, {"end_conditional", recorder_end_conditional},
        {"side_restart", recorder_side_restart},
        {"barrier", recorder_barrier}, {"run", recorder_run},
        {"stats", recorder_stats},       {NULL, NULL},
    };
    struct { const char *name; const luaL_Reg *methods; lua_CFunction gc; lua_CFunction tostring; } types[] = {
        {MT_DEVICE, device_methods, device_gc, NULL},
        {MT_TENSOR, tensor_methods, tensor_gc, tensor_tostring},
        {MT_KERNEL, kernel_methods, NULL, NULL},
        {MT_RECORDER, recorder_methods, recorder_gc, NULL},
    };
    for (size_t i = 0; i < DP_ARRAY_LEN(types); i++) {
        luaL_newmetatable(L, types[i].name);
        lua_newtable(L);
        luaL_setfuncs(L, types[i].methods, 0);
        lua_setfield(L, -2, "__index");
        if (types[i].gc) {
            lua_pushcfunction(L, types[i].gc);
            lua_setfield(L, -2, "__gc");
        }
        if (types[i].tostring) {
            lua_pushcfunction(L, types[i].tostring);
            lua_setfield(L, -2, "__tostring");
        }
        lua_pop(L, 1);
    }
    static const luaL_Reg funcs[] = {
        {"devices", l_devices}, {"device", l_device}, {"open_device", l_open_device}, {"clock", l_clock}, {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
    (void)module;
}
