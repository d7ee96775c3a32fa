/*
** lua/l_gpu_tensor.c: device tensors (dp.tensor) of the `doppler` module's GPU half (lua/l_gpu.c):
** dev:tensor{dtype=, shape=}, and a tensor's upload, download, read, view, shape and release. A tensor
** keeps its owner alive (the device, or the parent of a view); "u32" is stored as i32 (the same bytes) and
** read and written as unsigned.
*/
#include <lauxlib.h>
#include <string.h>

#include "gpu/device.h"
#include "gpu/tensor.h"
#include "lua/l_gpu.h"
#include "lua/l_gpu_parts.h"
#include "lua/l_util.h"

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
int dp_lua_device_tensor(lua_State *L)
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

void dp_lua_register_gpu_tensor(lua_State *L)
{
    static const luaL_Reg tensor_methods[] = {
        {"upload", tensor_upload},   {"download", tensor_download}, {"read", tensor_read},
        {"view", tensor_view},       {"shape", tensor_shape},       {"dtype", tensor_dtype},
        {"strides", tensor_strides},
        {"nbytes", tensor_nbytes},   {"numel", tensor_numel},       {"address", tensor_address},
        {"release", tensor_release}, {NULL, NULL},
    };
    dp_lua_gpu_new_type(L, MT_TENSOR, tensor_methods, tensor_gc, tensor_tostring);
}
