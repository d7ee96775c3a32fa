/*
** lua/l_model.c: model files from Lua. doppler.open_model(path) -> "dp.model" userdata with
** :config() (the normalised config; .raw = the whole config.json), :tensors(), :tensor(name),
** :metadata() (GGUF pairs or safetensors __metadata__), :generation_config(),
** :tokenizer_config(), :tokenizer_path() (tokenizer.json, or the GGUF itself when it carries one),
** :chat_template(), :path(), :kind(), :close(). :tensor(name) also finds a GGUF tensor by its HF name.
** doppler.read_json(path) -> the file as nested tables (JSON null becomes nil).
** The userdata owns the dp_model; __gc closes it.
*/
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include <json.h>

#include "core/formats/json.h"
#include "core/formats/model_file.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

#define DP_LUA_MODEL "dp.model"

typedef struct l_model { dp_model *m; } l_model;

dp_model *dp_lua_check_model(lua_State *L, int idx)
{
    l_model *u = luaL_checkudata(L, idx, DP_LUA_MODEL);
    if (!u->m) luaL_error(L, "model is closed");
    return u->m;
}

static dp_model *check_model(lua_State *L)
{
    return dp_lua_check_model(L, 1);
}

/* ---- JSON -> Lua ---- */

static void push_json(lua_State *L, struct json_object *v)
{
    luaL_checkstack(L, 4, "JSON nested too deeply");
    switch (json_object_get_type(v)) {
    case json_type_null: lua_pushnil(L); return;
    case json_type_boolean: lua_pushboolean(L, json_object_get_boolean(v)); return;
    case json_type_int: lua_pushinteger(L, (lua_Integer)json_object_get_int64(v)); return;
    case json_type_double: lua_pushnumber(L, json_object_get_double(v)); return;
    case json_type_string: lua_pushlstring(L, json_object_get_string(v), (size_t)json_object_get_string_len(v)); return;
    case json_type_array: {
        size_t n = json_object_array_length(v);
        lua_createtable(L, (int)(n < 1u << 20 ? n : 0), 0);
        for (size_t i = 0; i < n; i++) {
            push_json(L, json_object_array_get_idx(v, i));
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        return;
    }
    case json_type_object: {
        lua_newtable(L);
        json_object_object_foreach(v, key, val) {
            push_json(L, val);
            lua_setfield(L, -2, key);
        }
        return;
    }
    }
    lua_pushnil(L);
}

static void set_int(lua_State *L, const char *k, int64_t v) { lua_pushinteger(L, (lua_Integer)v); lua_setfield(L, -2, k); }
static void set_num(lua_State *L, const char *k, double v) { lua_pushnumber(L, v); lua_setfield(L, -2, k); }
static void set_bool(lua_State *L, const char *k, bool v) { lua_pushboolean(L, v); lua_setfield(L, -2, k); }
static void set_str(lua_State *L, const char *k, const char *v)
{
    if (!v) return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static void push_ids(lua_State *L, const int64_t *ids, size_t n)
{
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)ids[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static void push_scaling(lua_State *L, const dp_rope_scaling *s)
{
    lua_newtable(L);
    set_str(L, "rope_type", s->type);
    set_num(L, "factor", s->factor);
    if (s->low_freq_factor) set_num(L, "low_freq_factor", s->low_freq_factor);
    if (s->high_freq_factor) set_num(L, "high_freq_factor", s->high_freq_factor);
    if (s->original_max_position_embeddings) set_int(L, "original_max_position_embeddings", s->original_max_position_embeddings);
    if (s->beta_fast) set_num(L, "beta_fast", s->beta_fast);
    if (s->beta_slow) set_num(L, "beta_slow", s->beta_slow);
    if (s->attention_factor) set_num(L, "attention_factor", s->attention_factor);
}

/* Keys follow HF spelling; absent values (0 / -1 sentinels in C) are nil. */
static void push_config(lua_State *L, const dp_hfconfig *c);

static int l_model_config(lua_State *L)
{
    dp_model *m = check_model(L);
    const dp_hfconfig *c = dp_model_config(m);
    if (!c) {
        lua_pushnil(L);
        return 1;
    }
    push_config(L, c);
    return 1;
}

/* doppler.read_config(path) -> the normalised table of a config.json (as model:config()) */
static int l_read_config(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    dp_hfconfig *c = lua_newuserdatauv(L, sizeof *c, 0);
    memset(c, 0, sizeof *c);
    dp_err err = {0};
    if (dp_hfconfig_read(path, c, &err) != DP_OK) {
        dp_hfconfig_free(c);
        return dp_lua_raise(L, &err);
    }
    push_config(L, c);
    dp_hfconfig_free(c);
    return 1;
}

static void push_config(lua_State *L, const dp_hfconfig *c)
{
    lua_newtable(L);
    set_str(L, "architecture", c->architecture[0] ? c->architecture : NULL);
    set_str(L, "model_type", c->model_type);
    set_int(L, "hidden_size", c->hidden_size);
    set_int(L, "intermediate_size", c->intermediate_size);
    set_int(L, "num_hidden_layers", c->num_hidden_layers);
    set_int(L, "num_attention_heads", c->num_attention_heads);
    set_int(L, "num_key_value_heads", c->num_key_value_heads);
    set_int(L, "head_dim", c->head_dim);
    set_int(L, "vocab_size", c->vocab_size);
    if (c->max_position_embeddings) set_int(L, "max_position_embeddings", c->max_position_embeddings);
    set_num(L, "rms_norm_eps", c->rms_norm_eps);
    set_str(L, "hidden_activation", c->hidden_activation);
    set_num(L, "rope_theta", c->rope_theta);
    set_num(L, "rope_local_theta", c->rope_local_theta);
    push_scaling(L, &c->rope_scaling);
    lua_setfield(L, -2, "rope_scaling");
    push_scaling(L, &c->rope_local_scaling);
    lua_setfield(L, -2, "rope_local_scaling");
    set_num(L, "partial_rotary_factor", c->partial_rotary_factor);
    if (c->sliding_window) set_int(L, "sliding_window", c->sliding_window);
    if (c->sliding_window_pattern) set_int(L, "sliding_window_pattern", c->sliding_window_pattern);
    lua_createtable(L, (int)c->num_hidden_layers, 0);   /* 1-based, like every Lua list */
    for (int64_t i = 0; i < c->num_hidden_layers; i++) {
        lua_pushstring(L, dp_layer_kind_name(c->layer_types[i]));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "layer_types");
    if (c->query_pre_attn_scalar) set_num(L, "query_pre_attn_scalar", c->query_pre_attn_scalar);
    if (c->final_logit_softcapping) set_num(L, "final_logit_softcapping", c->final_logit_softcapping);
    if (c->attn_logit_softcapping) set_num(L, "attn_logit_softcapping", c->attn_logit_softcapping);
    set_bool(L, "tie_word_embeddings", c->tie_word_embeddings);
    set_bool(L, "attention_bias", c->attention_bias);
    set_bool(L, "mlp_bias", c->mlp_bias);
    if (c->num_local_experts) set_int(L, "num_local_experts", c->num_local_experts);
    if (c->num_experts_per_tok) set_int(L, "num_experts_per_tok", c->num_experts_per_tok);
    if (c->bos_token_id >= 0) set_int(L, "bos_token_id", c->bos_token_id);
    if (c->pad_token_id >= 0) set_int(L, "pad_token_id", c->pad_token_id);
    push_ids(L, c->eos_token_ids, c->n_eos);
    lua_setfield(L, -2, "eos_token_ids");
    if (c->raw) {
        push_json(L, c->raw);
        lua_setfield(L, -2, "raw");
    }
}

static void push_tensor(lua_State *L, const dp_model_tensor *t)
{
    lua_createtable(L, 0, 5);
    set_str(L, "name", t->name);
    /* doppler's dtype name ("q4_k") where doppler computes with the type, so that it can be handed
    ** back (weight dtypes, upload); GGUF's own spelling ("iq2_xxs") otherwise */
    set_str(L, "dtype", t->dtype != DP_DTYPE_COUNT ? dp_dtype_name(t->dtype) : t->type_name);
    lua_createtable(L, t->ndim, 0);
    for (int d = 0; d < t->ndim; d++) {
        lua_pushinteger(L, (lua_Integer)t->shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "shape");
    set_int(L, "bytes", (int64_t)t->bytes);
    set_int(L, "numel", (int64_t)t->numel);
    if (t->padded_cols) set_int(L, "padded_cols", t->padded_cols);   /* rows stored this long (doppler convert --pad-k) */
}

static int l_model_tensors(lua_State *L)
{
    dp_model *m = check_model(L);
    size_t n = dp_model_tensor_count(m);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        push_tensor(L, dp_model_tensor_at(m, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int l_model_tensor(lua_State *L)
{
    dp_model *m = check_model(L);
    const dp_model_tensor *t = dp_model_find(m, luaL_checkstring(L, 2));
    if (t) push_tensor(L, t);
    else lua_pushnil(L);
    return 1;
}

static void push_gguf_value(lua_State *L, const dp_gguf_value *v)
{
    int64_t i;
    luaL_checkstack(L, 4, "GGUF arrays nested too deeply");
    switch (v->type) {
    case DP_GGUF_STRING: lua_pushlstring(L, v->v.str.ptr, (size_t)v->v.str.len); return;
    case DP_GGUF_BOOL: lua_pushboolean(L, v->v.b); return;
    case DP_GGUF_FLOAT32: lua_pushnumber(L, v->v.f32); return;
    case DP_GGUF_FLOAT64: lua_pushnumber(L, v->v.f64); return;
    case DP_GGUF_UINT64: lua_pushinteger(L, (lua_Integer)v->v.u64); return;   /* wraps above 2^63, as Lua integers do */
    case DP_GGUF_ARRAY:
        lua_createtable(L, (int)(v->v.arr.n < 1u << 24 ? v->v.arr.n : 0), 0);
        for (uint64_t k = 0; k < v->v.arr.n; k++) {
            dp_gguf_value e;
            dp_gguf_array_elem(v, k, &e);
            push_gguf_value(L, &e);
            lua_rawseti(L, -2, (lua_Integer)k + 1);
        }
        return;
    default:
        if (dp_gguf_value_int(v, &i)) lua_pushinteger(L, (lua_Integer)i);
        else lua_pushnil(L);
        return;
    }
}

static int l_model_metadata(lua_State *L)
{
    dp_model *m = check_model(L);
    lua_newtable(L);
    if (dp_model_kind_of(m) == DP_MODEL_GGUF) {
        const dp_gguf *g = dp_model_gguf(m);
        for (size_t i = 0; i < dp_gguf_kv_count(g); i++) {
            push_gguf_value(L, dp_gguf_kv_value(g, i));
            lua_setfield(L, -2, dp_gguf_kv_key(g, i));
        }
    } else {
        const dp_safetensors *st = dp_model_safetensors(m);
        for (size_t i = 0; i < dp_safetensors_metadata_count(st); i++) {
            const char *k, *v;
            dp_safetensors_metadata_at(st, i, &k, &v);
            set_str(L, k, v);
        }
    }
    return 1;
}

static int l_model_generation_config(lua_State *L)
{
    const dp_genconfig *g = dp_model_genconfig(check_model(L));
    if (!g->present) {
        lua_pushnil(L);
        return 1;
    }
    lua_newtable(L);
    if (g->bos_token_id >= 0) set_int(L, "bos_token_id", g->bos_token_id);
    if (g->pad_token_id >= 0) set_int(L, "pad_token_id", g->pad_token_id);
    push_ids(L, g->eos_token_ids, g->n_eos);
    lua_setfield(L, -2, "eos_token_ids");
    set_bool(L, "do_sample", g->do_sample);
    set_num(L, "temperature", g->temperature);
    set_num(L, "top_p", g->top_p);
    set_num(L, "min_p", g->min_p);
    set_num(L, "repetition_penalty", g->repetition_penalty);
    if (g->top_k) set_int(L, "top_k", g->top_k);
    if (g->max_new_tokens) set_int(L, "max_new_tokens", g->max_new_tokens);
    if (g->max_length) set_int(L, "max_length", g->max_length);
    return 1;
}

static int l_model_tokenizer_config(lua_State *L)
{
    const dp_tokconfig *t = dp_model_tokconfig(check_model(L));
    if (!t->present) {
        lua_pushnil(L);
        return 1;
    }
    lua_newtable(L);
    set_str(L, "bos_token", t->bos_token);
    set_str(L, "eos_token", t->eos_token);
    set_str(L, "pad_token", t->pad_token);
    set_str(L, "unk_token", t->unk_token);
    set_str(L, "chat_template", t->chat_template);
    if (t->has_add_bos) set_bool(L, "add_bos_token", t->add_bos_token);
    if (t->has_add_eos) set_bool(L, "add_eos_token", t->add_eos_token);
    if (t->model_max_length) set_int(L, "model_max_length", t->model_max_length);
    return 1;
}

/* A GGUF that carries tokenizer.ggml.* metadata is its own tokenizer file: doppler.tokenizer()
** and dp_tokenizer_load accept it (core/text/tok_gguf.c). */
static int l_model_tokenizer_path(lua_State *L)
{
    dp_model *m = check_model(L);
    const char *p = dp_model_tokenizer_json(m);
    if (!p && dp_model_kind_of(m) == DP_MODEL_GGUF && dp_gguf_find(dp_model_gguf(m), "tokenizer.ggml.tokens"))
        p = dp_model_path(m);
    if (p) lua_pushstring(L, p);
    else lua_pushnil(L);
    return 1;
}

static int l_model_chat_template(lua_State *L)
{
    const char *p = dp_model_chat_template(check_model(L));
    if (p) lua_pushstring(L, p);
    else lua_pushnil(L);
    return 1;
}

static int l_model_path(lua_State *L)
{
    lua_pushstring(L, dp_model_path(check_model(L)));
    return 1;
}

static int l_model_kind(lua_State *L)
{
    lua_pushstring(L, dp_model_kind_name(dp_model_kind_of(check_model(L))));
    return 1;
}

static int l_model_close(lua_State *L)
{
    l_model *u = luaL_checkudata(L, 1, DP_LUA_MODEL);
    dp_model_close(u->m);
    u->m = NULL;
    return 0;
}

static int l_model_tostring(lua_State *L)
{
    l_model *u = luaL_checkudata(L, 1, DP_LUA_MODEL);
    if (!u->m) lua_pushstring(L, "dp.model (closed)");
    else
        lua_pushfstring(L, "dp.model %s (%s, %d tensors)", dp_model_path(u->m),
                        dp_model_kind_name(dp_model_kind_of(u->m)), (int)dp_model_tensor_count(u->m));
    return 1;
}

static int l_open_model(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    l_model *u = lua_newuserdatauv(L, sizeof *u, 0);   /* first, so that nothing leaks if Lua runs out of memory */
    u->m = NULL;
    luaL_setmetatable(L, DP_LUA_MODEL);
    dp_err err = {0};
    if (dp_model_open(path, &u->m, &err) != DP_OK) return dp_lua_raise(L, &err);
    return 1;
}

/* Holds a parsed document while it is converted, so that a Lua error (memory) cannot leak it. */
typedef struct l_json_box { struct json_object *obj; } l_json_box;

static int l_json_box_gc(lua_State *L)
{
    l_json_box *b = lua_touserdata(L, 1);
    dp_json_free(b->obj);
    b->obj = NULL;
    return 0;
}

static int l_read_json(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    l_json_box *box = lua_newuserdatauv(L, sizeof *box, 0);
    box->obj = NULL;
    if (luaL_newmetatable(L, "dp.json_box")) {
        lua_pushcfunction(L, l_json_box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    dp_err err = {0};
    if (dp_json_read_object_file(path, &box->obj, &err) != DP_OK) return dp_lua_raise(L, &err);
    push_json(L, box->obj);
    dp_json_free(box->obj);
    box->obj = NULL;
    return 1;
}

void dp_lua_register_model(lua_State *L, int module)
{
    static const luaL_Reg methods[] = {
        {"config", l_model_config},
        {"tensors", l_model_tensors},
        {"tensor", l_model_tensor},
        {"metadata", l_model_metadata},
        {"generation_config", l_model_generation_config},
        {"tokenizer_config", l_model_tokenizer_config},
        {"tokenizer_path", l_model_tokenizer_path},
        {"chat_template", l_model_chat_template},
        {"path", l_model_path},
        {"kind", l_model_kind},
        {"close", l_model_close},
        {NULL, NULL},
    };
    module = lua_absindex(L, module);
    if (luaL_newmetatable(L, DP_LUA_MODEL)) {
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, l_model_close);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, l_model_close);
        lua_setfield(L, -2, "__close");
        lua_pushcfunction(L, l_model_tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_open_model);
    lua_setfield(L, module, "open_model");
    lua_pushcfunction(L, l_read_json);
    lua_setfield(L, module, "read_json");
    lua_pushcfunction(L, l_read_config);
    lua_setfield(L, module, "read_config");
}
