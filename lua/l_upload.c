/*
** lua/l_upload.c: dev:upload_model_tensor(model, name, dtype [, opts]) -> a device tensor holding
** the model file's tensor `name`, converted to `dtype` (gpu/upload.h), and (second result) where a
** repacked tensor came from: "cache" or "repacked" (nil when nothing was repacked).
** opts.deinterleave_heads = H: the rows of this 2-D tensor are, per head of D = rows / H rows, in
** interleaved pair order (row 2i + j holds what row i + j*D/2 holds in the wanted order); upload
** them in that wanted (half-split) order. llama.cpp's converter stores Llama's q/k projections
** this way for its adjacent-pair RoPE; undoing it at load time lets one recipe and one RoPE
** kernel serve both file kinds. A row is whole quantisation blocks, so moving raw rows is exact.
** opts.layout = "column_wise" | "flat": a quantised 2-D tensor kept as blocks is then repacked into
** that layout (core/quant_layout.h, after any deinterleaving), through the on-disk cache next to the
** model unless opts.cache == false (opts.cache_dir: another directory).
** A tensor whose rows the file pads to whole blocks (model_file.h "Padded rows", doppler convert --pad-k):
** kept as blocks, the device tensor holds the stored rows, [rows, padded_cols] (doppler.weights records the
** logical width for the kernels, doppler.lower.set_padded); converted to a float type, the padding is
** dropped on the CPU and the device tensor is the logical [rows, K].
** doppler.quant_pack(bytes, dtype, rows, cols, layout) / doppler.quant_unpack(...): the repacking of
** a string of row_wise blocks (and back), for tests and tools.
*/
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/model_file.h"
#include "core/quant_layout.h"
#include "gpu/upload.h"
#include "lua/l_gpu.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

static dp_qlayout check_layout(lua_State *L, const char *name)
{
    dp_qlayout l;
    if (!dp_qlayout_from_name(name, &l))
        luaL_error(L, "unknown quantised layout '%s' (row_wise, column_wise, flat)", name);
    return l;
}

/* The repacked upload. Returns NULL with err set, or the tensor; *from says "cache" or "repacked". */
static dp_gtensor *upload_layout(dp_lua_device *d, dp_model *m, const dp_model_tensor *mt, const void *src,
                                 lua_Integer heads, dp_qlayout l, bool cache, const char *cache_dir, const char **from,
                                 dp_err *err)
{
    const uint64_t shape[2] = {(uint64_t)mt->shape[0], (uint64_t)(mt->padded_cols ? mt->padded_cols : mt->shape[1])};
    const char *path = dp_model_path(m);
    /* the cache key names what was repacked: the file's rows, or the deinterleaved ones */
    char key[1024];
    if (heads) snprintf(key, sizeof key, "%s (deinterleaved, %lld heads)", mt->name, (long long)heads);
    else snprintf(key, sizeof key, "%s", mt->name);
    uint8_t *buf = malloc(mt->bytes ? mt->bytes : 1);
    dp_gtensor *t = NULL;
    if (!buf) {
        DP_FAIL(err, DP_ENOMEM, "%s: out of host memory repacking %s", path, mt->name);
        return NULL;
    }
    /* the cache is best effort: a miss or a failed store only costs the repack */
    if (cache && dp_qlayout_cache_load(path, cache_dir, key, mt->dtype, shape[0], shape[1], l, buf, mt->bytes)) {
        *from = "cache";
    } else {
        if (dp_qlayout_pack(mt->dtype, shape[0], shape[1], l, src, buf, err) != DP_OK) goto done;
        if (cache) dp_qlayout_cache_store(path, cache_dir, key, mt->dtype, shape[0], shape[1], l, buf, mt->bytes);
        *from = "repacked";
    }
    if (dp_gtensor_create(d->dev, mt->dtype, 2, shape, &t, err) != DP_OK) goto done;
    if (dp_gtensor_upload(t, 0, buf, t->bytes, err) != DP_OK) {
        dp_gtensor_release(t);
        t = NULL;
    }
done:
    free(buf);
    return t;
}

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
    const uint64_t stored_row = (uint64_t)(mt->padded_cols ? mt->padded_cols : mt->shape[mt->ndim - 1]);
    if (want == mt->dtype) shape[mt->ndim - 1] = stored_row;   /* blocks kept: the padded rows as stored */
    lua_Integer heads = 0;
    dp_qlayout layout = DP_QLAYOUT_ROW;
    bool cache = true;
    const char *cache_dir = NULL;
    if (lua_istable(L, 5)) {
        lua_getfield(L, 5, "deinterleave_heads");
        heads = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
        lua_pop(L, 1);
        if (lua_getfield(L, 5, "layout") != LUA_TNIL) layout = check_layout(L, luaL_checkstring(L, -1));
        if (lua_getfield(L, 5, "cache") != LUA_TNIL) cache = lua_toboolean(L, -1);
        /* the three values stay on the stack: cache_dir's string is anchored there until we return */
        if (lua_getfield(L, 5, "cache_dir") != LUA_TNIL) cache_dir = luaL_checkstring(L, -1);
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
    const char *from = NULL;
    if (layout != DP_QLAYOUT_ROW) {
        if (want != mt->dtype || mt->ndim != 2 || !dp_qlayout_supports(mt->dtype))
            return luaL_error(L, "%s: tensor '%s' (%s, %d-D, as %s) cannot be stored %s: only 2-D blocks of a type "
                              "with GPU kernels kept as they are", dp_model_path(m), name, mt->type_name, mt->ndim,
                              dp_dtype_name(want), dp_qlayout_name(layout));
        t = upload_layout(d, m, mt, src, heads, layout, cache, cache_dir, &from, &err);
        if (!t) return dp_lua_raise(L, &err);
    } else if (dp_upload_convert_rows(d->dev, name, src, mt->dtype, (uint32_t)mt->ndim, shape, stored_row, want, &t,
                                      &err) != DP_OK) {
        return dp_lua_raise(L, &err);
    }
    dp_lua_push_tensor(L, t, false, 1);
    if (from) lua_pushstring(L, from);
    else lua_pushnil(L);
    return 2;
}

static int repack(lua_State *L, bool pack)
{
    size_t len;
    const char *src = luaL_checklstring(L, 1, &len);
    dp_dtype t;
    if (!dp_dtype_from_name(luaL_checkstring(L, 2), &t)) return luaL_error(L, "unknown dtype '%s'", lua_tostring(L, 2));
    const lua_Integer rows = luaL_checkinteger(L, 3), cols = luaL_checkinteger(L, 4);
    const dp_qlayout l = check_layout(L, luaL_checkstring(L, 5));
    const dp_dtype_info *info = dp_dtype_get(t);
    if (rows < 1 || cols < 1 || !info->is_quant || (uint64_t)cols % info->block ||
        (uint64_t)rows * ((uint64_t)cols / info->block) * info->type_size != len)
        return luaL_error(L, "quant_%s: %zu bytes are not a [%lld, %lld] %s tensor", pack ? "pack" : "unpack", len,
                          (long long)rows, (long long)cols, info->name);
    luaL_Buffer b;
    char *dst = luaL_buffinitsize(L, &b, len);
    dp_err err = {0};
    dp_status st = pack ? dp_qlayout_pack(t, (uint64_t)rows, (uint64_t)cols, l, src, dst, &err)
                        : dp_qlayout_unpack(t, (uint64_t)rows, (uint64_t)cols, l, src, dst, &err);
    if (st != DP_OK) return dp_lua_raise(L, &err);
    luaL_pushresultsize(&b, len);
    return 1;
}

static int l_quant_pack(lua_State *L) { return repack(L, true); }
static int l_quant_unpack(lua_State *L) { return repack(L, false); }

void dp_lua_register_upload(lua_State *L, int module)
{
    module = lua_absindex(L, module);
    luaL_getmetatable(L, "dp.device");
    lua_getfield(L, -1, "__index");
    lua_pushcfunction(L, l_upload_model_tensor);
    lua_setfield(L, -2, "upload_model_tensor");
    lua_pop(L, 2);
    lua_pushcfunction(L, l_quant_pack);
    lua_setfield(L, module, "quant_pack");
    lua_pushcfunction(L, l_quant_unpack);
    lua_setfield(L, module, "quant_unpack");
}
