/*
** lua/l_math.c: numeric helpers recipes and the Lua library need, done by core/ so that Lua and
** the CPU references share one implementation:
**   doppler.round_to(dtype, x)                 x rounded to f16 / bf16 / f32
**   doppler.rope_inv_freq(theta, dim, scaling) RoPE inverse frequencies (core/ref/rope.c)
**   doppler.sample_cpu(logits, opts)           the sampling reference (core/sample.c)
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/ref/ref.h"
#include "core/sample.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

static int l_round_to(lua_State *L)
{
    const char *dt = luaL_checkstring(L, 1);
    float x = (float)luaL_checknumber(L, 2);
    if (strcmp(dt, "f16") == 0) x = dp_f16_to_f32(dp_f32_to_f16(x));
    else if (strcmp(dt, "bf16") == 0) x = dp_bf16_to_f32(dp_f32_to_bf16(x));
    else if (strcmp(dt, "f32") != 0) return luaL_error(L, "round_to: dtype '%s' is not f32, f16 or bf16", dt);
    lua_pushnumber(L, x);
    return 1;
}

static float opt_field(lua_State *L, int t, const char *name, float dflt)
{
    lua_getfield(L, t, name);
    float v = (float)luaL_optnumber(L, -1, dflt);
    lua_pop(L, 1);
    return v;
}

/* scaling: nil, or a table with type/rope_type = "default" | "linear" | "llama3" and its factors. */
static int l_rope_inv_freq(lua_State *L)
{
    double theta = luaL_checknumber(L, 1);
    lua_Integer dim = luaL_checkinteger(L, 2);
    if (dim < 2 || dim > 4096 || dim % 2) return luaL_error(L, "rope_inv_freq: rotated dims %d must be even, 2..4096", (int)dim);
    dp_rope_freq_scaling sc = {.kind = DP_ROPE_DEFAULT};
    if (lua_istable(L, 3)) {
        lua_getfield(L, 3, "rope_type");
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            lua_getfield(L, 3, "type");
        }
        const char *kind = luaL_optstring(L, -1, "default");
        if (strcmp(kind, "linear") == 0) sc.kind = DP_ROPE_LINEAR;
        else if (strcmp(kind, "llama3") == 0) sc.kind = DP_ROPE_LLAMA3;
        else if (strcmp(kind, "default") != 0)
            return luaL_error(L, "rope scaling type '%s' is not supported (default, linear, llama3)", kind);
        lua_pop(L, 1);
        sc.factor = opt_field(L, 3, "factor", 1.0f);
        sc.low_freq_factor = opt_field(L, 3, "low_freq_factor", 1.0f);
        sc.high_freq_factor = opt_field(L, 3, "high_freq_factor", 4.0f);
        sc.original_max_pos = opt_field(L, 3, "original_max_position_embeddings", 8192.0f);
    }
    float *out = lua_newuserdatauv(L, sizeof(float) * (size_t)dim / 2, 0);
    dp_err err = {0};
    if (dp_rope_inv_freq(theta, (uint32_t)dim, &sc, out, &err) != DP_OK) return dp_lua_raise(L, &err);
    lua_createtable(L, (int)dim / 2, 0);
    for (lua_Integer i = 0; i < dim / 2; i++) {
        lua_pushnumber(L, out[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* doppler.sample_cpu(logits, {temperature, top_k, top_p, min_p, repeat_penalty, seed, step, history})
** logits: a list of numbers; history: a set {[id] = true} of ids already seen. */
static int l_sample_cpu(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    size_t n = (size_t)luaL_len(L, 1);
    if (n == 0) return luaL_error(L, "sample_cpu: empty logits");
    float *z = lua_newuserdatauv(L, n * sizeof(float), 0);
    bool *seen = lua_newuserdatauv(L, n, 0);
    void *scratch = lua_newuserdatauv(L, dp_sample_scratch_bytes(n), 0);
    memset(seen, 0, n);
    for (size_t i = 0; i < n; i++) {
        lua_geti(L, 1, (lua_Integer)i + 1);
        z[i] = (float)lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    dp_sample_params p = {
        .temperature = opt_field(L, 2, "temperature", 0), .top_k = (int32_t)opt_field(L, 2, "top_k", 0),
        .top_p = opt_field(L, 2, "top_p", 1), .min_p = opt_field(L, 2, "min_p", 0),
        .repeat_penalty = opt_field(L, 2, "repeat_penalty", 1),
    };
    lua_getfield(L, 2, "seed");
    p.seed = (uint64_t)luaL_optinteger(L, -1, 0);
    lua_getfield(L, 2, "step");
    p.step = (uint64_t)luaL_optinteger(L, -1, 1);
    lua_pop(L, 2);
    if (lua_getfield(L, 2, "history") == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_isinteger(L, -2)) {
                lua_Integer id = lua_tointeger(L, -2);
                if (id >= 0 && (size_t)id < n && lua_toboolean(L, -1)) seen[id] = true;
            }
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    dp_err err = {0};
    int32_t id = dp_sample(z, n, seen, &p, scratch, &err);
    if (id < 0) return dp_lua_raise(L, &err);
    lua_pushinteger(L, id);
    return 1;
}

void dp_lua_register_math(lua_State *L, int module)
{
    static const luaL_Reg funcs[] = {
        {"round_to", l_round_to}, {"rope_inv_freq", l_rope_inv_freq}, {"sample_cpu", l_sample_cpu}, {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
    (void)module;
}
