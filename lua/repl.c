/*
** lua/repl.c: the interactive `doppler` prompt, after lua.c's doREPL: a line is first tried as
** `return <line>` so that an expression prints its value; a statement whose syntax error ends at
** <eof> keeps reading lines (multi-line input); errors are shown and the prompt continues.
** Line editing and history come from libedit (BSD licence) when built with it, else plain stdio.
*/
#include <lauxlib.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/paths.h"
#include "lua/host.h"

#if DP_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#define PROMPT1 "doppler> "
#define PROMPT2 ">> "
#define EOFMARK "<eof>"

typedef struct repl {
    dp_host *host;
    bool     interactive;          /* stdin is a terminal: prompts, editing, history */
    char     history[PATH_MAX];    /* "" when history is off */
} repl;

/* Reads one line without its newline into a malloc'd string; NULL at end of input. */
static char *read_line(repl *r, const char *prompt)
{
#if DP_HAVE_LIBEDIT
    if (r->interactive) return readline(prompt);
#endif
    if (r->interactive) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    size_t cap = 0;
    char *line = NULL;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
    return line;
}

static void remember(repl *r, const char *line)
{
#if DP_HAVE_LIBEDIT
    if (r->interactive && line[0]) add_history(line);
#else
    (void)r;
    (void)line;
#endif
}

static bool incomplete(lua_State *L, int status)
{
    if (status != LUA_ERRSYNTAX) return false;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    size_t mark = sizeof(EOFMARK) - 1;
    if (len >= mark && strcmp(msg + len - mark, EOFMARK) == 0) {
        lua_pop(L, 1);
        return true;
    }
    return false;
}

/* Compiles `return <line>`; leaves the chunk on the stack and returns LUA_OK, or pops and fails. */
static int try_expression(lua_State *L, const char *line)
{
    const char *code = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, code, strlen(code), "=stdin");
    lua_remove(L, -2);                 /* the code string */
    if (status != LUA_OK) lua_pop(L, 1);
    return status;
}

/* Reads a complete chunk (one or more lines) and compiles it. Returns -1 at end of input. */
static int load_chunk(repl *r)
{
    lua_State *L = dp_host_state(r->host);
    char *line = read_line(r, PROMPT1);
    if (!line) return -1;
    if (try_expression(L, line) == LUA_OK) {
        remember(r, line);
        free(line);
        return LUA_OK;
    }
    lua_pushstring(L, line);           /* the statement so far */
    free(line);
    for (;;) {
        size_t len;
        const char *code = lua_tolstring(L, -1, &len);
        int status = luaL_loadbuffer(L, code, len, "=stdin");
        if (!incomplete(L, status)) {
            remember(r, lua_tostring(L, -2));
            lua_remove(L, -2);         /* keep the chunk or the error message */
            return status;
        }
        char *more = read_line(r, PROMPT2);
        if (!more) {                   /* end of input in the middle of a statement */
            lua_pop(L, 1);
            return -1;
        }
        lua_pushliteral(L, "\n");
        lua_pushstring(L, more);
        lua_concat(L, 3);              /* previous text .. "\n" .. new line */
        free(more);
    }
}

static void print_results(lua_State *L)
{
    int n = lua_gettop(L);
    if (n == 0) return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    lua_getglobal(L, "print");
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
        fprintf(stderr, "doppler: error calling 'print' (%s)\n", lua_tostring(L, -1));
}

/* doppler.readline(prompt) -> the next line of input (without its newline), or nil at end of
** input. With a terminal and libedit: line editing, and the line joins the history. For programs
** with a conversation loop of their own (chat). */
int dp_repl_lua_readline(lua_State *L)
{
    const char *prompt = luaL_optstring(L, 1, "");
    repl r = {.interactive = isatty(STDIN_FILENO)};
    char *line = read_line(&r, prompt);
    if (!line) {
        lua_pushnil(L);
        return 1;
    }
    remember(&r, line);
    lua_pushstring(L, line);
    free(line);
    return 1;
}

int dp_repl_run(dp_host *h)
{
    repl r = {.host = h, .interactive = isatty(STDIN_FILENO)};
    lua_State *L = dp_host_state(h);
#if DP_HAVE_LIBEDIT
    const char *home = getenv("HOME");
    if (r.interactive && home && *home) {
        char dir[PATH_MAX / 2];
        if (snprintf(dir, sizeof dir, "%s/.local/state/doppler", home) < (int)sizeof dir && dp_mkdir_p(dir)) {
            snprintf(r.history, sizeof r.history, "%s/history", dir);
            read_history(r.history);
        }
    }
#endif
    if (r.interactive)
        printf("doppler %s (Lua 5.4) - `doppler --help` lists commands; Ctrl-D leaves\n", DOPPLER_VERSION);
    int status;
    lua_settop(L, 0);
    while ((status = load_chunk(&r)) != -1) {
        if (status == LUA_OK) status = dp_host_docall(h, 0, LUA_MULTRET);
        if (status == LUA_OK) print_results(L);
        else dp_host_report(h, status);
        lua_settop(L, 0);
    }
    if (r.interactive) putchar('\n');
#if DP_HAVE_LIBEDIT
    if (r.history[0]) write_history(r.history);
#endif
    return 0;
}
