/*
** lua/l_upload.c: dev:upload_model_tensor(model, name, dtype) -> a device tensor holding the
** model file's tensor `name`, converted to `dtype` (gpu/upload.h).
*/
#include <lauxlib.h>

#include "core/formats/model_file.h"
#include "gpu/upload.h"
#include "lua/l_gpu.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

static int l_upload_model_tensor(lua_State *L)
{
    dp_lua_device *d = dp_lua_check_device(L, 1);
    dp_model *m = dp_lua_check_model(L, 2);
    const char *name = luaL_checkstring(L, 3);
    dp_dtype want;
    if (!dp_dtype_from_name(luaL_checkstring(L, 4), &want)) return luaL_error(L, "unknown dtype '%s'", lua_tostring(L, 4));
    const dp_model_tensor *mt = dp_model_find(m, name);
    if (!mt) return luaL_error(L, "%s: no tensor '%s'", dp_model_path(m), name);
    if (mt->dtype == DP_DTYPE_COUNT)
        return luaL_error(L, "%s: tensor '%s' has type %s, which doppler cannot compute with", dp_model_path(m), name, mt->type_name);
    uint64_t shape[DP_GTENSOR_MAX_DIMS];
    if (mt->ndim < 1 || mt->ndim > DP_GTENSOR_MAX_DIMS)
        return luaL_error(L, "%s: tensor '%s' has %d dimensions", dp_model_path(m), name, mt->ndim);
    for (int i = 0; i < mt->ndim; i++) shape[i] = (uint64_t)mt->shape[i];
    dp_gtensor *t = NULL;
    dp_err err = {0};
    if (dp_upload_convert(d->dev, name, mt->data, mt->dtype, (uint32_t)mt->ndim, shape, want, &t, &err) != DP_OK)
        return dp_lua_raise(L, &err);
    dp_lua_push_tensor(L, t, false, 1);
    return 1;
}

void dp_lua_register_upload(lua_State *L, int module)
{
    luaL_getmetatable(L, "dp.device");
    lua_getfield(L, -1, "__index");
    lua_pushcfunction(L, l_upload_model_tensor);
    lua_setfield(L, -2, "upload_model_tensor");
    lua_pop(L, 2);
    (void)module;
}
