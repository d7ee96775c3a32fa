/*
** lua/l_gpu_recorder.c: kernels (dp.kernel) and recorders (dp.recorder) of the `doppler` module's GPU half
** (lua/l_gpu.c): dev:kernel{...} compiles or finds a kernel; dev:recorder() records dispatches with push
** members set by name, barriers, conditionals, and runs them (a replay when nothing changed). A recorder
** keeps every tensor it recorded alive, so the collector never frees memory its command buffer addresses.
*/
#include <lauxlib.h>
#include <string.h>

#include "gpu/device.h"
#include "gpu/kernel.h"
#include "gpu/prefetch.h"
#include "gpu/recorder.h"
#include "lua/l_gpu.h"
#include "lua/l_gpu_parts.h"
#include "lua/l_util.h"

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
int dp_lua_device_kernel(lua_State *L)
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
int dp_lua_device_recorder(lua_State *L)
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

void dp_lua_register_gpu_recorder(lua_State *L)
{
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
    dp_lua_gpu_new_type(L, MT_KERNEL, kernel_methods, NULL, NULL);
    dp_lua_gpu_new_type(L, MT_RECORDER, recorder_methods, recorder_gc, NULL);
}
