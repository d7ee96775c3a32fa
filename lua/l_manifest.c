/*
** lua/l_manifest.c: manifests and hint files from Lua (core/formats/manifest.h).
**   doppler.read_manifest(path) -> { path=, name=, model=, recipe=, quantization=, source=, description=,
**                                    kernel_hints = { {key, value, line}, ... } (file order) }
**   doppler.read_hints_file(path) -> { {key, value, line}, ... }
** Lists rather than maps, so that errors can be reported in file order with their line.
*/
#include <lauxlib.h>
#include <lua.h>

#include "core/formats/manifest.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

static void set_str(lua_State *L, const char *k, const char *v)
{
    if (!v) return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

/* Pushes the pairs; no Lua error can strike while C memory is live (the caller frees first). */
static void push_pairs(lua_State *L, const dp_manifest_pair *p, size_t n)
{
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_createtable(L, 3, 0);
        lua_pushstring(L, p[i].key);
        lua_rawseti(L, -2, 1);
        lua_pushstring(L, p[i].value);
        lua_rawseti(L, -2, 2);
        lua_pushinteger(L, p[i].line);
        lua_rawseti(L, -2, 3);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int l_read_manifest(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    dp_manifest *m;
    dp_err err = {0};
    if (dp_manifest_read(path, &m, &err) != DP_OK) return dp_lua_raise(L, &err);
    /* Lua allocation failures here would leak m; manifests are tiny, and a memory error ends the run. */
    lua_newtable(L);
    set_str(L, "path", m->path);
    set_str(L, "name", m->name);
    set_str(L, "model", m->model);
    set_str(L, "recipe", m->recipe);
    set_str(L, "quantization", m->quantization);
    set_str(L, "source", m->source);
    set_str(L, "description", m->description);
    push_pairs(L, m->hints, m->n_hints);
    lua_setfield(L, -2, "kernel_hints");
    dp_manifest_free(m);
    return 1;
}

static int l_read_hints_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    dp_manifest_pair *p;
    size_t n;
    dp_err err = {0};
    if (dp_manifest_read_pairs(path, &p, &n, &err) != DP_OK) return dp_lua_raise(L, &err);
    push_pairs(L, p, n);
    dp_manifest_pairs_free(p, n);
    return 1;
}

void dp_lua_register_manifest(lua_State *L, int module)
{
    module = lua_absindex(L, module);
    lua_pushcfunction(L, l_read_manifest);
    lua_setfield(L, module, "read_manifest");
    lua_pushcfunction(L, l_read_hints_file);
    lua_setfield(L, module, "read_hints_file");
}
