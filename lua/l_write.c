/*
** lua/l_write.c: doppler.write_safetensors(path, tensors, opts) — writes a .safetensors file whose
** tensors are either given as binary strings or generated from a seeded distribution:
**   tensors = { {name=, dtype="f16", shape={...}, init={"normal", std} | {"const", v} | data=string}, ... }
**   opts = { seed = 0, metadata = '{"format":"pt"}' }
** `doppler synth` uses it to make a model at a real architecture's shapes without downloading one.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "core/formats/safetensors_writer.h"
#include "core/random.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

typedef enum init_kind { INIT_DATA, INIT_NORMAL, INIT_CONST } init_kind;

typedef struct out_spec {
    init_kind   kind;
    double      value;         /* std for normal, the constant for const */
    const char *data;          /* INIT_DATA: bytes owned by the Lua string (kept on the stack) */
    size_t      data_len;
    dp_rng      rng;
} out_spec;

typedef struct write_job {
    dp_st_out_tensor *tensors;
    out_spec         *specs;
    uint64_t          seed;
} write_job;

static void store(dp_dtype t, void *dst, size_t i, double v)
{
    switch (t) {
    case DP_F32: ((float *)dst)[i] = (float)v; break;
    case DP_F16: ((uint16_t *)dst)[i] = dp_f32_to_f16((float)v); break;
    case DP_BF16: ((uint16_t *)dst)[i] = dp_f32_to_bf16((float)v); break;
    case DP_I32: ((int32_t *)dst)[i] = (int32_t)v; break;
    case DP_I8: ((int8_t *)dst)[i] = (int8_t)v; break;
    case DP_U8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
    default: break;
    }
}

static dp_status fill(void *user, int index, uint64_t offset, void *dst, size_t bytes, dp_err *err)
{
    write_job *job = user;
    out_spec *s = &job->specs[index];
    dp_dtype t = job->tensors[index].dtype;
    if (s->kind == INIT_DATA) {
        if (offset + bytes > s->data_len)
            return DP_FAIL(err, DP_EINVAL, "tensor '%s': data is %zu bytes, shape needs more",
                           job->tensors[index].name, s->data_len);
        memcpy(dst, s->data + offset, bytes);
        return DP_OK;
    }
    if (offset == 0) dp_rng_seed(&s->rng, job->seed, (uint64_t)index);   /* chunks arrive in order */
    size_t n = bytes / dp_dtype_get(t)->type_size;
    for (size_t i = 0; i < n; i++)
        store(t, dst, i, s->kind == INIT_CONST ? s->value : s->value * dp_rng_normal(&s->rng));
    return DP_OK;
}

static int l_write_safetensors(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    uint64_t seed = 0;
    const char *meta = NULL;
    if (lua_istable(L, 3)) {
        lua_getfield(L, 3, "seed");
        seed = (uint64_t)luaL_optinteger(L, -1, 0);
        lua_getfield(L, 3, "metadata");
        meta = luaL_optstring(L, -1, NULL);   /* stays on the stack, so the pointer stays valid */
    }
    int count = (int)luaL_len(L, 2);
    /* Userdata, not malloc: a Lua error while reading the specs then leaks nothing. */
    write_job job = {
        .tensors = lua_newuserdatauv(L, sizeof(dp_st_out_tensor) * (size_t)(count ? count : 1), 0),
        .specs = lua_newuserdatauv(L, sizeof(out_spec) * (size_t)(count ? count : 1), 0),
        .seed = seed,
    };
    memset(job.specs, 0, sizeof(out_spec) * (size_t)(count ? count : 1));
    for (int i = 0; i < count; i++) {
        luaL_checkstack(L, 12, "write_safetensors: too many tensors");
        lua_geti(L, 2, i + 1);
        int t = lua_gettop(L);                 /* the tensor table stays on the stack: its strings live */
        luaL_checktype(L, t, LUA_TTABLE);
        dp_st_out_tensor *o = &job.tensors[i];
        lua_getfield(L, t, "name");
        o->name = luaL_checkstring(L, -1);
        lua_getfield(L, t, "dtype");
        if (!dp_dtype_from_name(luaL_checkstring(L, -1), &o->dtype))
            return luaL_error(L, "write_safetensors: tensor '%s': unknown dtype '%s'", o->name, lua_tostring(L, -1));
        lua_getfield(L, t, "shape");
        luaL_checktype(L, -1, LUA_TTABLE);
        o->ndim = (int)luaL_len(L, -1);
        if (o->ndim > 4) return luaL_error(L, "write_safetensors: tensor '%s' has rank %d > 4", o->name, o->ndim);
        for (int d = 0; d < o->ndim; d++) {
            lua_geti(L, -1, d + 1);
            o->shape[d] = luaL_checkinteger(L, -1);
            lua_pop(L, 1);
        }
        out_spec *s = &job.specs[i];
        lua_getfield(L, t, "data");
        if (lua_isstring(L, -1)) {
            s->kind = INIT_DATA;
            s->data = lua_tolstring(L, -1, &s->data_len);
        } else {
            lua_getfield(L, t, "init");
            luaL_checktype(L, -1, LUA_TTABLE);
            lua_geti(L, -1, 1);
            const char *kind = luaL_checkstring(L, -1);
            lua_geti(L, -2, 2);
            s->value = luaL_checknumber(L, -1);
            if (strcmp(kind, "normal") == 0) s->kind = INIT_NORMAL;
            else if (strcmp(kind, "const") == 0) s->kind = INIT_CONST;
            else return luaL_error(L, "write_safetensors: tensor '%s': init '%s' is not normal or const", o->name, kind);
        }
        /* leave everything of this tensor on the stack until the file is written */
    }
    dp_err err = {0};
    if (dp_st_write(path, job.tensors, count, meta, fill, &job, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 0;
}

/* doppler.copy_file(src, dst) copies a file; a gzip-compressed src is decompressed on the way
** (zlib's gzread passes plain files through unchanged, so one path serves both). */
static int l_copy_file(lua_State *L)
{
    const char *src = luaL_checkstring(L, 1), *dst = luaL_checkstring(L, 2);
    gzFile in = gzopen(src, "rb");
    if (!in) return luaL_error(L, "%s: cannot open: %s", src, strerror(errno));
    FILE *out = fopen(dst, "wb");
    if (!out) {
        gzclose(in);
        return luaL_error(L, "%s: cannot create: %s", dst, strerror(errno));
    }
    char buf[1 << 16];
    int n, bad = 0;
    while ((n = gzread(in, buf, sizeof buf)) > 0)
        if (fwrite(buf, 1, (size_t)n, out) != (size_t)n) { bad = 1; break; }
    int gz_failed = n < 0;
    gzclose(in);
    if (fclose(out) != 0) bad = 1;
    if (gz_failed) return luaL_error(L, "%s: corrupt or truncated gzip data", src);
    if (bad) return luaL_error(L, "%s: write failed: %s", dst, strerror(errno));
    return 0;
}

void dp_lua_register_write(lua_State *L, int module)
{
    lua_pushcfunction(L, l_copy_file);
    lua_setfield(L, module, "copy_file");
    lua_pushcfunction(L, l_write_safetensors);
    lua_setfield(L, module, "write_safetensors");
}
