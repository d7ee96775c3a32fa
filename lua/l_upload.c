/*
** lua/l_upload.c: dev:upload_model_tensor(model, name, dtype [, opts]) -> a device tensor holding
** the model file's tensor `name`, converted to `dtype` (gpu/upload.h).
** opts.deinterleave_heads = H: the rows of this 2-D tensor are, per head of D = rows / H rows, in
** interleaved pair order (row 2i + j holds what row i + j*D/2 holds in the wanted order); upload
** them in that wanted (half-split) order. llama.cpp's converter stores Llama's q/k projections
** this way for its adjacent-pair RoPE; undoing it at load time lets one recipe and one RoPE
** kernel serve both file kinds. A row is whole quantisation blocks, so moving raw rows is exact.
*/
#include <lauxlib.h>
#include <string.h>

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
    lua_Integer heads = 0;
    if (lua_istable(L, 5)) {
        lua_getfield(L, 5, "deinterleave_heads");
        heads = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
        lua_pop(L, 1);
    }
    const void *src = mt->data;
    void *permuted = NULL;
    if (heads) {
        int64_t rows = mt->ndim == 2 ? mt->shape[0] : 0;
        if (heads < 1 || rows % heads || (rows / heads) % 2)
            return luaL_error(L, "%s: tensor '%s' (%d-D, %d rows) cannot be split into %d heads of pairs of rows",
                              dp_model_path(m), name, mt->ndim, (int)rows, (int)heads);
        /* on the Lua stack (freed by the GC should the upload raise) */
        permuted = lua_newuserdatauv(L, mt->bytes ? mt->bytes : 1, 0);
        size_t row_bytes = mt->bytes / (size_t)rows;
        int64_t D = rows / heads, half = D / 2;
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < half; i++)
                for (int64_t j = 0; j < 2; j++)
                    memcpy((char *)permuted + (size_t)(h * D + j * half + i) * row_bytes,
                           (const char *)mt->data + (size_t)(h * D + 2 * i + j) * row_bytes, row_bytes);
        src = permuted;
    }
    dp_gtensor *t = NULL;
    dp_err err = {0};
    if (dp_upload_convert(d->dev, name, src, mt->dtype, (uint32_t)mt->ndim, shape, want, &t, &err) != DP_OK)
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
