/*
** lua/l_tokenizer.c: the tokenizer and chat templates in Lua.
**   local tok = doppler.tokenizer(path)            -- tokenizer.json[.gz], a model directory or a GGUF file
**   tok:encode(text, {bos = false})  -> {ids...}   -- special tokens in text are matched
**   tok:decode(ids, {skip_special = false}) -> string
**   tok:decoder({skip_special = false}) -> d;  d:push(id) -> string (maybe "");  d:finish() -> string
**   tok:token(id) -> piece | nil;  tok:id(piece) -> id | nil;  tok:vocab_size();  tok:bos() -> id | nil
**   tok:eos() -> {stop ids}  (eos and end-of-turn);  tok:special() -> {special ids}
**   tok:chat(messages, {add_generation_prompt = true, template = name, arch = name, date = s})
**       -> text, has_bos   (encode text with bos = not has_bos: the template may already hold BOS)
** Scratch arrays live in Lua userdata, so a Lua error raised half-way leaks nothing.
*/
#include <stdlib.h>
#include <string.h>

#include "core/text/chat.h"
#include "core/text/tokenizer.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

#define TOK_MT   "dp.tokenizer"
#define DETOK_MT "dp.detok"

static dp_tokenizer *check_tok(lua_State *L, int idx)
{
    dp_tokenizer **p = luaL_checkudata(L, idx, TOK_MT);
    if (!*p) luaL_error(L, "tokenizer is closed");
    return *p;
}

static bool opt_bool(lua_State *L, int opts, const char *key, bool dflt)
{
    if (lua_isnoneornil(L, opts)) return dflt;
    luaL_checktype(L, opts, LUA_TTABLE);
    lua_getfield(L, opts, key);
    bool v = lua_isnil(L, -1) ? dflt : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* A string option; the string stays referenced by the options table, which stays on the stack. */
static const char *opt_str(lua_State *L, int opts, const char *key)
{
    if (lua_isnoneornil(L, opts)) return NULL;
    luaL_checktype(L, opts, LUA_TTABLE);
    lua_getfield(L, opts, key);
    const char *s = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
    lua_pop(L, 1);
    return s;
}

static void push_ids(lua_State *L, const int32_t *ids, size_t n)
{
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, ids[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int l_tokenizer_new(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    dp_tokenizer **p = lua_newuserdatauv(L, sizeof *p, 0);
    *p = NULL;
    luaL_setmetatable(L, TOK_MT);
    dp_err err = {0};
    if (dp_tokenizer_load(path, p, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 1;
}

static int l_tok_gc(lua_State *L)
{
    dp_tokenizer **p = luaL_checkudata(L, 1, TOK_MT);
    dp_tokenizer_destroy(*p);
    *p = NULL;
    return 0;
}

static int l_tok_tostring(lua_State *L)
{
    dp_tokenizer *t = check_tok(L, 1);
    lua_pushfstring(L, "dp.tokenizer(%s, %d tokens)", dp_tokenizer_model(t) == DP_TOK_SPM_BPE ? "spm-bpe" : "byte-bpe",
                    (int)dp_tokenizer_vocab_size(t));
    return 1;
}

static int l_tok_encode(lua_State *L)
{
    dp_tokenizer *t = check_tok(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 2, &len);
    bool bos = opt_bool(L, 3, "bos", false);
    int32_t *ids = NULL;
    size_t n = 0;
    dp_err err = {0};
    if (dp_tokenizer_encode(t, text, len, bos, &ids, &n, &err) != DP_OK) return dp_lua_raise(L, &err);
    /* copy into a userdata first: lua_createtable may raise, and ids must not leak then */
    int32_t *copy = lua_newuserdatauv(L, (n ? n : 1) * sizeof *copy, 0);
    memcpy(copy, ids, n * sizeof *ids);
    free(ids);
    push_ids(L, copy, n);
    return 1;
}

/* Reads a Lua array of ids into a userdata left on the stack. */
static int32_t *check_ids(lua_State *L, int idx, size_t *n)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer len = luaL_len(L, idx);
    int32_t *ids = lua_newuserdatauv(L, (size_t)(len > 0 ? len : 1) * sizeof *ids, 0);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, idx, i);
        int isnum;
        lua_Integer v = lua_tointegerx(L, -1, &isnum);
        if (!isnum || v < 0 || v > INT32_MAX) luaL_error(L, "ids[%d] is not a token id", (int)i);
        ids[i - 1] = (int32_t)v;
        lua_pop(L, 1);
    }
    *n = (size_t)(len > 0 ? len : 0);
    return ids;
}

static int l_tok_decode(lua_State *L)
{
    dp_tokenizer *t = check_tok(L, 1);
    bool skip = opt_bool(L, 3, "skip_special", false);
    size_t n;
    int32_t *ids = check_ids(L, 2, &n);
    char *text = NULL;
    size_t len = 0;
    dp_err err = {0};
    if (dp_tokenizer_decode(t, ids, n, skip, &text, &len, &err) != DP_OK) return dp_lua_raise(L, &err);
    luaL_Buffer b;   /* luaL_pushresult copies; a memory error while copying would leak text: accepted */
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, text, len);
    free(text);
    luaL_pushresult(&b);
    return 1;
}

/* ---- streaming decoder: holds its tokenizer in a user value so that it outlives no one ------- */

static int l_tok_decoder(lua_State *L)
{
    dp_tokenizer *t = check_tok(L, 1);
    bool skip = opt_bool(L, 2, "skip_special", false);
    dp_detok **p = lua_newuserdatauv(L, sizeof *p, 1);
    *p = NULL;
    luaL_setmetatable(L, DETOK_MT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    dp_err err = {0};
    if (dp_detok_create(t, skip, p, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 1;
}

static int l_detok_gc(lua_State *L)
{
    dp_detok **p = luaL_checkudata(L, 1, DETOK_MT);
    dp_detok_destroy(*p);
    *p = NULL;
    return 0;
}

static int l_detok_push(lua_State *L)
{
    dp_detok **p = luaL_checkudata(L, 1, DETOK_MT);
    lua_Integer id = luaL_checkinteger(L, 2);
    if (!*p) return luaL_error(L, "decoder is closed");
    if (id < 0 || id > INT32_MAX) return luaL_error(L, "token id %d out of range", (int)id);
    const char *piece;
    size_t len;
    dp_err err = {0};
    if (dp_detok_push(*p, (int32_t)id, &piece, &len, &err) != DP_OK) return dp_lua_raise(L, &err);
    lua_pushlstring(L, piece, len);   /* piece belongs to the decoder: nothing to free */
    return 1;
}

static int l_detok_finish(lua_State *L)
{
    dp_detok **p = luaL_checkudata(L, 1, DETOK_MT);
    if (!*p) return luaL_error(L, "decoder is closed");
    const char *piece;
    size_t len;
    dp_err err = {0};
    if (dp_detok_finish(*p, &piece, &len, &err) != DP_OK) return dp_lua_raise(L, &err);
    lua_pushlstring(L, piece, len);
    return 1;
}

/* ---- lookups -------------------------------------------------------------------------------- */

static int l_tok_token(lua_State *L)
{
    dp_tokenizer *t = check_tok(L, 1);
    lua_Integer id = luaL_checkinteger(L, 2);
    size_t len;
    const char *p = id >= 0 && id <= INT32_MAX ? dp_tokenizer_token(t, (int32_t)id, &len) : NULL;
    if (p) lua_pushlstring(L, p, len);
    else lua_pushnil(L);
    return 1;
}

static int l_tok_id(lua_State *L)
{
    dp_tokenizer *t = check_tok(L, 1);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    int32_t id = dp_tokenizer_id(t, s, len);
    if (id >= 0) lua_pushinteger(L, id);
    else lua_pushnil(L);
    return 1;
}

static int l_tok_vocab_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dp_tokenizer_vocab_size(check_tok(L, 1)));
    return 1;
}

static int l_tok_bos(lua_State *L)
{
    int32_t id = dp_tokenizer_bos(check_tok(L, 1));
    if (id >= 0) lua_pushinteger(L, id);
    else lua_pushnil(L);
    return 1;
}

static int l_tok_eos(lua_State *L)
{
    int32_t ids[8];
    size_t n = dp_tokenizer_stop_ids(check_tok(L, 1), ids, 8);
    push_ids(L, ids, n < 8 ? n : 8);
    return 1;
}

static int l_tok_special(lua_State *L)
{
    dp_tokenizer *t = check_tok(L, 1);
    size_t n = dp_tokenizer_special_ids(t, NULL, 0);
    int32_t *ids = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ids, 0);
    dp_tokenizer_special_ids(t, ids, n);
    push_ids(L, ids, n);
    return 1;
}

/* ---- chat ----------------------------------------------------------------------------------- */

static int l_tok_chat(lua_State *L)
{
    dp_tokenizer *t = check_tok(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    dp_chat_opts o = { .add_generation_prompt = opt_bool(L, 3, "add_generation_prompt", true),
                       .date = opt_str(L, 3, "date") };
    const char *name = opt_str(L, 3, "template"), *arch = opt_str(L, 3, "arch");
    dp_err err = {0};
    dp_chat_template tpl = {0};
    if (name) {
        if (dp_chat_kind_parse(name, &tpl.kind, &err) != DP_OK) return dp_lua_raise(L, &err);
    } else if (dp_chat_detect(dp_tokenizer_chat_template(t), arch, t, &tpl, &err) != DP_OK) {
        return dp_lua_raise(L, &err);
    }
    lua_Integer n = luaL_len(L, 2);
    dp_chat_msg *m = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *m, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, 2, i) != LUA_TTABLE) return luaL_error(L, "messages[%d] is not a table", (int)i);
        lua_getfield(L, -1, "role");
        lua_getfield(L, -2, "content");
        if (!lua_isstring(L, -2) || !lua_isstring(L, -1))
            return luaL_error(L, "messages[%d] needs string role and content", (int)i);
        /* the strings stay alive: the message tables are reachable from argument 2 */
        m[i - 1].role = lua_tostring(L, -2);
        m[i - 1].content = lua_tostring(L, -1);
        lua_pop(L, 3);
    }
    char *text = NULL;
    if (dp_chat_render(&tpl, m, (size_t)(n > 0 ? n : 0), &o, &text, &err) != DP_OK) return dp_lua_raise(L, &err);
    lua_pushstring(L, text);
    free(text);
    lua_pushboolean(L, dp_chat_has_bos(tpl.kind));
    return 2;
}

void dp_lua_register_tokenizer(lua_State *L, int module)
{
    static const luaL_Reg tok_methods[] = {
        { "encode", l_tok_encode }, { "decode", l_tok_decode }, { "decoder", l_tok_decoder },
        { "token", l_tok_token }, { "id", l_tok_id }, { "vocab_size", l_tok_vocab_size },
        { "bos", l_tok_bos }, { "eos", l_tok_eos }, { "special", l_tok_special }, { "chat", l_tok_chat },
        { NULL, NULL },
    };
    static const luaL_Reg detok_methods[] = { { "push", l_detok_push }, { "finish", l_detok_finish }, { NULL, NULL } };
    module = lua_absindex(L, module);

    luaL_newmetatable(L, TOK_MT);
    luaL_newlib(L, tok_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_tok_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_tok_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);

    luaL_newmetatable(L, DETOK_MT);
    luaL_newlib(L, detok_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_detok_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);

    lua_pushcfunction(L, l_tokenizer_new);
    lua_setfield(L, module, "tokenizer");
}
