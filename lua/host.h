/*
** lua/host.h: the embedded Lua 5.4 interpreter that runs recipes, scripts and the REPL.
** The host owns the lua_State, fills the `doppler` module (lua/l_modules.h) and runs chunks
** the way lua.c does: a message handler adds a traceback, and Ctrl-C interrupts through a hook.
*/
#ifndef DP_LUA_HOST_H
#define DP_LUA_HOST_H

#include <lua.h>
#include <stdint.h>

typedef struct dp_host dp_host;

typedef struct dp_host_opts {
    int device_index;   /* -1: DOPPLER_DEVICE or automatic choice */
} dp_host_opts;

/* NULL only when the interpreter cannot be created (out of memory); the message goes to stderr. */
dp_host   *dp_host_create(const dp_host_opts *opts);
/* NULL-safe. Returns the number of Vulkan validation messages seen (DOPPLER_VALIDATION=1):
** a caller turns a non-zero count into a failing exit status. */
uint64_t   dp_host_destroy(dp_host *h);
lua_State *dp_host_state(dp_host *h);

/* Runs a Lua file with `arg` = { [0] = path, args... }. Returns the process exit status:
** 0 on success, 1 after printing the error and traceback to stderr. */
int dp_host_run_file(dp_host *h, const char *path, int argc, char **argv);

/* Runs a chunk with the message handler and SIGINT hook; on error leaves the message on the
** stack and returns the lua_pcall status. Used by the REPL and dp_host_run_file. */
int dp_host_docall(dp_host *h, int nargs, int nresults);

/* Prints the error message at the top of the stack to stderr with the program name, and pops it. */
void dp_host_report(dp_host *h, int status);

/* The directory holding shaders/ and lua/lib/ ($DOPPLER_HOME, beside the executable, or the source dir). */
const char *dp_host_home(const dp_host *h);

/* The REPL (lua/repl.c): reads lines until EOF, printing values and errors. Returns 0. */
int dp_repl_run(dp_host *h);

/* doppler.readline(prompt) (lua/repl.c): one line of input with editing and history, nil at EOF. */
int dp_repl_lua_readline(lua_State *L);

#endif
