/*
** lua/host.c: creating the interpreter, the `doppler` module, and running chunks.
** The shape follows lua.c (Lua 5.4): docall installs a message handler that appends a traceback
** and a SIGINT handler that only sets a hook, because a signal handler may not touch Lua state.
*/
#include "lua/host.h"

#include <lauxlib.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lua/l_modules.h"
#include <lualib.h>
#include "core/paths.h"

struct dp_host {
    lua_State *L;
    char       home[PATH_MAX];
    uint64_t   validation_messages;   /* added to by lua/l_gpu.c when a device closes */
};

/*
** The one piece of process-wide state: the interpreter a SIGINT should stop. A signal handler
** receives no user pointer, so lua.c keeps the same static; it is set only around a call.
*/
static lua_State *volatile sigint_target = NULL;

static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void on_sigint(int sig)
{
    signal(sig, SIG_DFL);   /* a second Ctrl-C kills the process, as in lua.c */
    lua_State *L = sigint_target;
    if (L) lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* The error object as a string on top of the stack (plain_msghandler: what doppler.run.main's errors show). */
static int plain_msghandler(lua_State *L)
{
    if (lua_tostring(L, 1) != NULL) return 1;
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    return 1;
}

/* The message with a traceback appended (a script's errors); as in lua.c, an error object with __tostring is
** its own message, without one. */
static int msghandler(lua_State *L)
{
    if (lua_tostring(L, 1) == NULL && luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    plain_msghandler(L);
    luaL_traceback(L, L, lua_tostring(L, -1), 1);
    return 1;
}

static int docall(dp_host *h, int nargs, int nresults, lua_CFunction handler)
{
    lua_State *L = h->L;
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, handler);
    lua_insert(L, base);
    sigint_target = L;
    signal(SIGINT, on_sigint);
    int status = lua_pcall(L, nargs, nresults, base);
    signal(SIGINT, SIG_DFL);
    sigint_target = NULL;
    lua_remove(L, base);
    return status;
}

int dp_host_docall(dp_host *h, int nargs, int nresults) { return docall(h, nargs, nresults, msghandler); }

void dp_host_report(dp_host *h, int status)
{
    if (status == LUA_OK) return;
    const char *msg = lua_tostring(h->L, -1);
    fprintf(stderr, "doppler: %s\n", msg ? msg : "(error with no message)");
    fflush(stderr);
    lua_pop(h->L, 1);
}

/* doppler.home(): where shaders/ and lua/lib/ live. */
static int l_home(lua_State *L)
{
    dp_host *h = lua_touserdata(L, lua_upvalueindex(1));
    lua_pushstring(L, h->home);
    return 1;
}

/* doppler.catch_interrupts(): Ctrl-C raises "interrupted!" in the running Lua code again. The
** handler disarms itself after one signal (a second Ctrl-C kills, as in lua.c); a conversation
** loop that caught the error re-arms it with this. */
static int l_catch_interrupts(lua_State *L)
{
    sigint_target = L;
    signal(SIGINT, on_sigint);
    return 0;
}

/* doppler.isatty(fd) -> whether file descriptor fd (0, 1, 2) is a terminal: progress bars and
** prompts are only drawn for people, not into logs and pipes. */
static int l_isatty(lua_State *L)
{
    lua_pushboolean(L, isatty((int)luaL_checkinteger(L, 1)));
    return 1;
}

static void set_package_path(dp_host *h)
{
    lua_State *L = h->L;
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/lua/lib/?.lua;%s/lua/lib/?/init.lua;%s/?.lua;./?.lua",
                    h->home, h->home, h->home);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
}

/* Builds package.loaded.doppler from the binding files; Lua-side code extends it (lua/lib/doppler/). */
static void open_doppler_module(dp_host *h, const dp_host_opts *opts)
{
    lua_State *L = h->L;
    lua_newtable(L);
    int module = lua_gettop(L);
    lua_pushstring(L, DOPPLER_VERSION);
    lua_setfield(L, module, "version");
    lua_pushlightuserdata(L, h);
    lua_pushcclosure(L, l_home, 1);
    lua_setfield(L, module, "home");
    lua_pushcfunction(L, dp_repl_lua_readline);
    lua_setfield(L, module, "readline");
    lua_pushcfunction(L, l_isatty);
    lua_setfield(L, module, "isatty");
    lua_pushcfunction(L, l_catch_interrupts);
    lua_setfield(L, module, "catch_interrupts");
    dp_lua_register_all(L, module);
    lua_pushlightuserdata(L, &h->validation_messages);
    lua_setfield(L, LUA_REGISTRYINDEX, "doppler.validation_sink");
    lua_pushinteger(L, opts ? opts->device_index : -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "doppler.device_index");
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, module);
    lua_setfield(L, -2, "doppler");
    lua_pop(L, 2);
}

dp_host *dp_host_create(const dp_host_opts *opts)
{
    dp_host *h = calloc(1, sizeof *h);
    if (!h) {
        fputs("doppler: out of memory creating the interpreter\n", stderr);
        return NULL;
    }
    h->L = luaL_newstate();
    if (!h->L) {
        fputs("doppler: out of memory creating the interpreter\n", stderr);
        free(h);
        return NULL;
    }
    /* Generational collection: a decode or prefill pass makes a few KiB of short-lived Lua values; in the
    ** incremental mode a collector step inside a timed pass (tracing every live object, finalizing objects
    ** released earlier) slowed 5 of 32 512-token prefills on the H100 by 6-17 %, in this mode none of 48
    ** (docs/BENCHMARKS.md 40l, 40n). Young objects go in minor collections; whatever holds device memory
    ** is released explicitly (close, drop_plans) or by the full collections the code asks for. */
    lua_gc(h->L, LUA_GCGEN, 0, 0);
    dp_home_find(h->home, sizeof h->home);
    luaL_openlibs(h->L);
    set_package_path(h);
    open_doppler_module(h, opts);
    return h;
}

uint64_t dp_host_destroy(dp_host *h)
{
    if (!h) return 0;
    lua_close(h->L);   /* runs every __gc: device objects go before the device itself */
    uint64_t n = h->validation_messages;
    free(h);
    return n;
}

lua_State *dp_host_state(dp_host *h) { return h->L; }
const char *dp_host_home(const dp_host *h) { return h->home; }

/* True when the value at idx is a table made by doppler.recipe.define (metatable "dp.recipe"). */
static int is_recipe(lua_State *L, int idx)
{
    if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return 0;
    lua_getfield(L, -1, "__name");
    int yes = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "dp.recipe") == 0;
    lua_pop(L, 2);
    return yes;
}

/* Calls require("doppler.run").main(recipe, arg) with the recipe on top of the stack; replaces it
** with main's result (or the error message). main is the program's command line, as `doppler run` is
** (lua/lib/doppler/cmd/run.lua), so its errors are reported as `doppler run` reports them: the message
** alone, which names the file and line where a recipe's own code failed. A traceback there would bury an
** unknown option or a missing model file under frames of doppler.run; a script that is not a recipe keeps
** its traceback (dp_host_docall). */
static int run_recipe(dp_host *h, const char *path)
{
    lua_State *L = h->L;
    int recipe = lua_gettop(L);
    lua_pushstring(L, path);
    lua_setfield(L, recipe, "path");
    lua_getglobal(L, "require");
    lua_pushliteral(L, "doppler.run");
    int status = dp_host_docall(h, 1, 1);
    if (status != LUA_OK) {
        lua_remove(L, recipe);
        return status;
    }
    lua_getfield(L, -1, "main");
    lua_remove(L, -2);                 /* the module */
    lua_pushvalue(L, recipe);
    lua_getglobal(L, "arg");
    status = docall(h, 2, 1, plain_msghandler);
    lua_remove(L, recipe);
    return status;
}

int dp_host_run_file(dp_host *h, const char *path, int argc, char **argv)
{
    lua_State *L = h->L;
    lua_createtable(L, argc, 1);
    lua_pushstring(L, path);
    lua_rawseti(L, -2, 0);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setglobal(L, "arg");

    int status = luaL_loadfile(L, path);
    if (status == LUA_OK) {
        /* A C function is guaranteed only LUA_MINSTACK free slots: more arguments than that overran the stack
        ** (a crash with 17 --hint options, docs/BENCHMARKS.md 31h). lua.c's pushargs checks the same way. */
        if (!lua_checkstack(L, argc + 3)) {
            lua_pop(L, 1);
            lua_pushfstring(L, "%s: too many arguments (%d)", path, argc);
            status = LUA_ERRRUN;
        }
    }
    if (status == LUA_OK) {
        for (int i = 0; i < argc; i++) lua_pushstring(L, argv[i]);   /* ... as in lua.c */
        status = dp_host_docall(h, argc, 1);
    }
    int exit_code = 0;
    if (status == LUA_OK && is_recipe(L, -1)) {
        /* A recipe file declares a model family; running it means "generate with it". */
        status = run_recipe(h, path);
        if (status == LUA_OK) {
            exit_code = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 0;
            lua_pop(L, 1);
        }
    } else if (status == LUA_OK) {
        lua_pop(L, 1);
    }
    if (status != LUA_OK) {
        dp_host_report(h, status);
        return 1;
    }
    return exit_code;
}
