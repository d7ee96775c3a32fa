/*
** lua/l_convert.c: the C half of `doppler convert` (lua/lib/doppler/convert.lua decides names, types
** and metadata; this file moves the bytes). The tensors stream: for one tensor at a time, rows are read
** from the mapped source file, widened to f32, transformed (a constant added, RoPE row pairing, zero
** padding of each row), then quantised by core/quantize.h on every CPU or narrowed to f16/bf16/f32,
** and written; so converting holds one tensor's output in memory, not the model.
**   doppler.gguf_write(path, kv, tensors, opts)
**     kv      = { {key, type, value}, ... }   type: str u32 i32 u64 f32 bool, or arr:str arr:f32 arr:i32 arr:u32
**     tensors = { {name=, type="q8_0", shape={rows.., cols} (row-major),
**                  src=model, src_name= | data=f32 string,
**                  add=x, rope_interleave=n_heads, pad_cols=width}, ... }
**     opts    = { threads = 0 (all CPUs), progress = function(i, n, name) }
**   doppler.quantize(type, f32_string, row_len) -> block bytes (rows end to end)
**   doppler.dequantize(type, bytes, n) -> f32 string
**   doppler.tensor_bytes(model, name) -> the stored bytes of a tensor
**   doppler.tensor_f32(model, name) -> its values as f32 (CPU reference), the logical shape: rows a file
**     pads to whole blocks (doppler convert --pad-k) lose their padding
**   doppler.gguf_tensor_name(arch, hf_name) / doppler.hf_tensor_name(arch, gguf_name) -> name or nil
*/
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/formats/gguf.h"
#include "core/formats/model_file.h"
#include "core/formats/tensor_names.h"
#include "core/quant.h"
#include "core/quantize.h"
#include "lua/l_modules.h"
#include "lua/l_util.h"

#define CHUNK_BYTES (64u << 20)   /* f32 scratch per step: bounds memory on 300 MB embeddings */

typedef struct conv_tensor {
    const char            *name;
    dp_dtype               type;
    int64_t                rows, cols, out_cols;   /* out_cols >= cols when rows are zero-padded */
    const dp_model_tensor *src;                    /* or data */
    const float           *data;
    double                 add;
    int64_t                interleave_heads;       /* 0: rows as stored */
} conv_tensor;

typedef struct conv_job {
    lua_State   *L;
    conv_tensor *t;
    size_t       n;
    int          threads;
    int          progress;   /* stack index of the callback, or 0 */
} conv_job;

/* Row r of the output comes from this source row. HF stores each head's rotary pairs half-split
** (j, j + d/2); llama.cpp's converter reorders a head's rows to (2j, 2j + 1) adjacent pairs. */
static int64_t source_row(const conv_tensor *t, int64_t r)
{
    if (!t->interleave_heads) return r;
    int64_t per_head = t->rows / t->interleave_heads, half = per_head / 2;
    int64_t h = r / per_head, i = r % per_head;
    return h * per_head + (i % 2) * half + i / 2;
}

static dp_status read_row(const conv_tensor *t, int64_t r, float *dst, dp_err *err)
{
    if (t->data) {
        memcpy(dst, t->data + r * t->cols, (size_t)t->cols * sizeof(float));
        return DP_OK;
    }
    const dp_dtype_info *di = dp_dtype_get(t->src->dtype);
    /* a source that pads its rows (model_file.h "Padded rows") stores padded_cols per row; cols are read */
    uint64_t stored = (uint64_t)(t->src->padded_cols ? t->src->padded_cols : t->cols);
    uint64_t row_bytes = stored / di->block * di->type_size;
    const uint8_t *p = (const uint8_t *)t->src->data + (uint64_t)r * row_bytes;
    if (stored == (uint64_t)t->cols) {
        if (dp_quant_dequantize_row(t->src->dtype, p, dst, t->cols) != DP_OK)
            return DP_FAIL(err, DP_EINVAL, "convert: tensor %s: cannot read %s values", t->src->name, di->name);
        return DP_OK;
    }
    float *row = malloc(stored * sizeof(float));
    if (!row) return DP_FAIL(err, DP_ENOMEM, "convert: tensor %s: out of host memory", t->src->name);
    dp_status st = dp_quant_dequantize_row(t->src->dtype, p, row, (int64_t)stored);
    if (st == DP_OK) memcpy(dst, row, (size_t)t->cols * sizeof(float));
    free(row);
    if (st != DP_OK) return DP_FAIL(err, DP_EINVAL, "convert: tensor %s: cannot read %s values", t->src->name, di->name);
    return DP_OK;
}

static dp_status narrow(dp_dtype type, const float *src, void *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (type == DP_F32) ((float *)dst)[i] = src[i];
        else if (type == DP_F16) ((uint16_t *)dst)[i] = dp_f32_to_f16(src[i]);
        else ((uint16_t *)dst)[i] = dp_f32_to_bf16(src[i]);
    }
    return DP_OK;
}

static dp_status fill(void *user, size_t index, void *dst, uint64_t bytes, dp_err *err)
{
    conv_job *job = user;
    const conv_tensor *t = &job->t[index];
    bool ok = true;
    uint64_t out_row = dp_dtype_bytes(t->type, (uint64_t)t->out_cols, &ok);
    if (!ok || out_row * (uint64_t)t->rows != bytes)
        return DP_FAIL(err, DP_EINVAL, "convert: tensor %s: %lld columns do not fit %s blocks", t->name,
                       (long long)t->out_cols, dp_dtype_name(t->type));
    int64_t chunk = (int64_t)(CHUNK_BYTES / ((uint64_t)t->out_cols * sizeof(float)));
    if (chunk < 1) chunk = 1;
    if (chunk > t->rows) chunk = t->rows;
    float *buf = calloc((size_t)(chunk * t->out_cols), sizeof(float));
    if (!buf) return DP_FAIL(err, DP_ENOMEM, "convert: tensor %s: out of host memory", t->name);
    dp_status st = DP_OK;
    for (int64_t r0 = 0; r0 < t->rows && st == DP_OK; r0 += chunk) {
        int64_t n = t->rows - r0 < chunk ? t->rows - r0 : chunk;
        for (int64_t r = 0; r < n && st == DP_OK; r++) {
            float *row = buf + r * t->out_cols;
            st = read_row(t, source_row(t, r0 + r), row, err);
            for (int64_t c = 0; c < t->cols; c++) row[c] = (float)(row[c] + t->add);
            for (int64_t c = t->cols; c < t->out_cols; c++) row[c] = 0.0f;   /* padding quantises to 0 */
        }
        if (st != DP_OK) break;
        uint8_t *out = (uint8_t *)dst + (uint64_t)r0 * out_row;
        if (dp_dtype_get(t->type)->is_quant)
            st = dp_quantize_rows(t->type, buf, out, n, t->out_cols, job->threads, err);
        else
            st = narrow(t->type, buf, out, n * t->out_cols);
    }
    free(buf);
    if (st == DP_OK && job->progress) {   /* a failing callback becomes our error, not a longjmp */
        lua_State *L = job->L;
        lua_pushvalue(L, job->progress);
        lua_pushinteger(L, (lua_Integer)index + 1);
        lua_pushinteger(L, (lua_Integer)job->n);
        lua_pushstring(L, t->name);
        if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
            st = DP_FAIL(err, DP_EINVAL, "convert: progress callback: %s", lua_tostring(L, -1));
            lua_pop(L, 1);
        }
    }
    return st;
}

/* ---- reading the Lua description ---- */

static const struct { const char *name; dp_gguf_type type; } kv_types[] = {
    {"str", DP_GGUF_STRING}, {"u32", DP_GGUF_UINT32}, {"i32", DP_GGUF_INT32}, {"u64", DP_GGUF_UINT64},
    {"f32", DP_GGUF_FLOAT32}, {"bool", DP_GGUF_BOOL},
};

static bool kv_type(const char *name, dp_gguf_type *out)
{
    for (size_t i = 0; i < sizeof kv_types / sizeof kv_types[0]; i++)
        if (strcmp(kv_types[i].name, name) == 0) {
            *out = kv_types[i].type;
            return true;
        }
    return false;
}

/* Sets one {key, type, value} entry (at the top of the stack). Lua errors here are safe: the writer
** is owned by a userdata whose __gc destroys it. */
static void set_kv(lua_State *L, dp_gguf_writer *w)
{
    int e = lua_gettop(L);
    lua_geti(L, e, 1);
    const char *key = luaL_checkstring(L, -1);
    lua_geti(L, e, 2);
    const char *tname = luaL_checkstring(L, -1);
    lua_geti(L, e, 3);
    int v = lua_gettop(L);
    dp_err err = {0};
    dp_status st = DP_OK;
    dp_gguf_type t = DP_GGUF_UINT32;   /* set by kv_type below; the initialiser quiets -O2 */
    if (strncmp(tname, "arr:", 4) == 0) {
        if (!kv_type(tname + 4, &t) || t == DP_GGUF_BOOL || t == DP_GGUF_UINT64)
            luaL_error(L, "gguf_write: %s: unknown array type '%s'", key, tname);
        luaL_checktype(L, v, LUA_TTABLE);
        lua_Integer n = luaL_len(L, v);
        if (t == DP_GGUF_STRING) {
            const char **s = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n ? n : 1), 0);
            lua_createtable(L, (int)n, 0);   /* keeps the converted strings alive */
            for (lua_Integer i = 1; i <= n; i++) {
                lua_geti(L, v, i);
                s[i - 1] = luaL_checkstring(L, -1);
                lua_rawseti(L, -2, i);
            }
            st = dp_gguf_writer_set_str_array(w, key, s, (uint64_t)n, &err);
        } else {
            uint32_t *d = lua_newuserdatauv(L, 4 * (size_t)(n ? n : 1), 0);   /* every array type here is 4 bytes */
            for (lua_Integer i = 1; i <= n; i++) {
                lua_geti(L, v, i);
                if (t == DP_GGUF_FLOAT32) {
                    float f = (float)luaL_checknumber(L, -1);
                    memcpy(&d[i - 1], &f, 4);
                } else {
                    d[i - 1] = (uint32_t)luaL_checkinteger(L, -1);
                }
                lua_pop(L, 1);
            }
            st = dp_gguf_writer_set_array(w, key, t, d, (uint64_t)n, &err);
        }
    } else if (!kv_type(tname, &t)) {
        luaL_error(L, "gguf_write: %s: unknown type '%s'", key, tname);
    } else if (t == DP_GGUF_STRING) {
        st = dp_gguf_writer_set_str(w, key, luaL_checkstring(L, v), &err);
    } else if (t == DP_GGUF_UINT32) {
        st = dp_gguf_writer_set_u32(w, key, (uint32_t)luaL_checkinteger(L, v), &err);
    } else if (t == DP_GGUF_INT32) {
        st = dp_gguf_writer_set_i32(w, key, (int32_t)luaL_checkinteger(L, v), &err);
    } else if (t == DP_GGUF_FLOAT32) {
        st = dp_gguf_writer_set_f32(w, key, (float)luaL_checknumber(L, v), &err);
    } else if (t == DP_GGUF_BOOL) {
        st = dp_gguf_writer_set_bool(w, key, lua_toboolean(L, v), &err);
    } else {
        dp_gguf_value val = {.type = DP_GGUF_UINT64, .v.u64 = (uint64_t)luaL_checkinteger(L, v)};
        st = dp_gguf_writer_set(w, key, &val, &err);
    }
    if (st != DP_OK) dp_lua_raise(L, &err);
    lua_settop(L, e);
}

static int64_t int_field(lua_State *L, int t, const char *k, int64_t dflt)
{
    lua_getfield(L, t, k);
    int64_t v = lua_isnil(L, -1) ? dflt : (int64_t)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Reads tensors[i] (at stack index t) into c. The table's strings stay referenced by the table. */
static void read_tensor(lua_State *L, int t, conv_tensor *c, int64_t *ne, uint32_t *n_dims)
{
    lua_getfield(L, t, "name");
    c->name = luaL_checkstring(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, t, "type");
    const char *tn = luaL_checkstring(L, -1);
    if (!dp_dtype_from_name(tn, &c->type) ||
        !(c->type == DP_F32 || c->type == DP_F16 || c->type == DP_BF16 || dp_quantize_supported(c->type)))
        luaL_error(L, "gguf_write: tensor %s: cannot write type '%s'", c->name, tn);
    lua_pop(L, 1);
    lua_getfield(L, t, "shape");
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_Integer nd = luaL_len(L, -1);
    if (nd < 1 || nd > DP_GGUF_MAX_DIMS) luaL_error(L, "gguf_write: tensor %s: rank %d", c->name, (int)nd);
    *n_dims = (uint32_t)nd;
    int64_t numel = 1;
    for (lua_Integer d = 1; d <= nd; d++) {
        lua_geti(L, -1, d);
        int64_t v = (int64_t)luaL_checkinteger(L, -1);
        if (v < 1) luaL_error(L, "gguf_write: tensor %s: dimension %d is %lld", c->name, (int)d, (long long)v);
        ne[nd - d] = v;   /* ggml order: innermost first */
        numel *= v;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    c->cols = ne[0];
    c->rows = numel / c->cols;
    c->out_cols = int_field(L, t, "pad_cols", c->cols);
    if (c->out_cols < c->cols) luaL_error(L, "gguf_write: tensor %s: pad_cols below the row length", c->name);
    ne[0] = c->out_cols;
    c->interleave_heads = int_field(L, t, "rope_interleave", 0);
    if (c->interleave_heads &&
        (c->rows % c->interleave_heads || (c->rows / c->interleave_heads) % 2))
        luaL_error(L, "gguf_write: tensor %s: %lld rows do not split into %lld heads of even size", c->name,
                   (long long)c->rows, (long long)c->interleave_heads);
    lua_getfield(L, t, "add");
    c->add = luaL_optnumber(L, -1, 0.0);
    lua_pop(L, 1);
    lua_getfield(L, t, "data");
    if (!lua_isnil(L, -1)) {
        size_t len;
        c->data = (const float *)luaL_checklstring(L, -1, &len);
        if (len != (size_t)numel * sizeof(float))
            luaL_error(L, "gguf_write: tensor %s: data holds %d bytes, the shape needs %d", c->name, (int)len,
                       (int)(numel * 4));
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    lua_getfield(L, t, "src");
    dp_model *m = dp_lua_check_model(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, t, "src_name");
    const char *sn = luaL_checkstring(L, -1);
    c->src = dp_model_find(m, sn);
    if (!c->src) luaL_error(L, "gguf_write: %s: no tensor %s in %s", c->name, sn, dp_model_path(m));
    lua_pop(L, 1);
    if ((int64_t)c->src->numel != numel)
        luaL_error(L, "gguf_write: tensor %s: source %s has %lld elements, the shape %lld", c->name, sn,
                   (long long)c->src->numel, (long long)numel);
    if (!dp_quant_can_dequantize(c->src->dtype))
        luaL_error(L, "gguf_write: tensor %s: cannot read source type %s", c->name, c->src->type_name);
    if ((c->src->padded_cols ? c->src->padded_cols : c->cols) % dp_dtype_get(c->src->dtype)->block)
        luaL_error(L, "gguf_write: tensor %s: rows of %lld do not hold whole %s blocks", c->name, (long long)c->cols,
                   c->src->type_name);
}

typedef struct writer_box { dp_gguf_writer *w; } writer_box;

static int writer_box_gc(lua_State *L)
{
    writer_box *b = lua_touserdata(L, 1);
    dp_gguf_writer_destroy(b->w);
    b->w = NULL;
    return 0;
}

static int l_gguf_write(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TTABLE);
    conv_job job = {.L = L};
    if (lua_istable(L, 4)) {
        job.threads = (int)int_field(L, 4, "threads", 0);
        lua_getfield(L, 4, "progress");
        if (lua_isfunction(L, -1)) job.progress = lua_gettop(L);
        else lua_pop(L, 1);
    }
    writer_box *box = lua_newuserdatauv(L, sizeof *box, 0);
    box->w = NULL;
    if (luaL_newmetatable(L, "dp.gguf_writer_box")) {
        lua_pushcfunction(L, writer_box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    dp_err err = {0};
    if (dp_gguf_writer_create(&box->w, &err) != DP_OK) return dp_lua_raise(L, &err);

    lua_Integer nkv = luaL_len(L, 2);
    for (lua_Integer i = 1; i <= nkv; i++) {
        lua_geti(L, 2, i);
        luaL_checktype(L, -1, LUA_TTABLE);
        set_kv(L, box->w);
        lua_pop(L, 1);
    }
    job.n = (size_t)luaL_len(L, 3);
    job.t = lua_newuserdatauv(L, sizeof(conv_tensor) * (job.n ? job.n : 1), 0);
    memset(job.t, 0, sizeof(conv_tensor) * (job.n ? job.n : 1));
    for (size_t i = 0; i < job.n; i++) {
        lua_geti(L, 3, (lua_Integer)i + 1);
        luaL_checktype(L, -1, LUA_TTABLE);
        int64_t ne[DP_GGUF_MAX_DIMS] = {1, 1, 1, 1};
        uint32_t nd = 0;
        read_tensor(L, lua_gettop(L), &job.t[i], ne, &nd);
        lua_pop(L, 1);
        uint64_t une[DP_GGUF_MAX_DIMS];
        for (int d = 0; d < DP_GGUF_MAX_DIMS; d++) une[d] = (uint64_t)ne[d];
        uint32_t ggml;
        bool ok = true;
        size_t bytes = dp_dtype_bytes(job.t[i].type, (uint64_t)job.t[i].rows * (uint64_t)job.t[i].out_cols, &ok);
        if (!dp_ggml_type_from_dtype(job.t[i].type, &ggml) || !ok || job.t[i].out_cols % dp_dtype_get(job.t[i].type)->block)
            return luaL_error(L, "gguf_write: tensor %s: rows of %d do not hold whole %s blocks", job.t[i].name,
                              (int)job.t[i].out_cols, dp_dtype_name(job.t[i].type));
        if (dp_gguf_writer_add_tensor(box->w, job.t[i].name, ggml, nd, une, NULL, bytes, &err) != DP_OK)
            return dp_lua_raise(L, &err);
    }
    dp_status st = dp_gguf_writer_write_file_fill(box->w, path, fill, &job, &err);
    dp_gguf_writer_destroy(box->w);
    box->w = NULL;
    if (st != DP_OK) {
        remove(path);   /* never leave a half-written model behind */
        return dp_lua_raise(L, &err);
    }
    return 0;
}

/* ---- small helpers for tests and tools ---- */

static dp_dtype check_dtype(lua_State *L, int idx)
{
    dp_dtype t = DP_F32;
    const char *n = luaL_checkstring(L, idx);
    if (!dp_dtype_from_name(n, &t)) luaL_error(L, "unknown dtype '%s'", n);
    return t;
}

static int l_quantize(lua_State *L)
{
    dp_dtype t = check_dtype(L, 1);
    size_t len;
    const char *src = luaL_checklstring(L, 2, &len);
    int64_t row = (int64_t)luaL_checkinteger(L, 3);
    int64_t n = (int64_t)(len / sizeof(float));
    if (len % sizeof(float) || row < 1 || n % row) return luaL_error(L, "quantize: %d bytes are not rows of %d f32", (int)len, (int)row);
    bool ok = true;
    size_t out = dp_dtype_bytes(t, (uint64_t)n, &ok);
    if (!ok || !dp_quantize_supported(t)) return luaL_error(L, "quantize: cannot make %s of rows of %d", dp_dtype_name(t), (int)row);
    float *f = lua_newuserdatauv(L, len ? len : 4, 0);   /* an aligned copy */
    memcpy(f, src, len);
    luaL_Buffer b;
    char *dst = luaL_buffinitsize(L, &b, out);
    dp_err err = {0};
    if (dp_quantize_rows(t, f, dst, n / row, row, 1, &err) != DP_OK) return dp_lua_raise(L, &err);
    luaL_pushresultsize(&b, out);
    return 1;
}

static int l_dequantize(lua_State *L)
{
    dp_dtype t = check_dtype(L, 1);
    size_t len;
    const char *src = luaL_checklstring(L, 2, &len);
    int64_t n = (int64_t)luaL_checkinteger(L, 3);
    bool ok = true;
    if (n < 0 || dp_dtype_bytes(t, (uint64_t)n, &ok) != len || !ok)
        return luaL_error(L, "dequantize: %d bytes are not %d elements of %s", (int)len, (int)n, dp_dtype_name(t));
    luaL_Buffer b;
    float *dst = (float *)luaL_buffinitsize(L, &b, (size_t)n * sizeof(float));
    if (dp_quant_dequantize_row(t, src, dst, n) != DP_OK) return luaL_error(L, "dequantize: no dequantisation for %s", dp_dtype_name(t));
    luaL_pushresultsize(&b, (size_t)n * sizeof(float));
    return 1;
}

static int l_tensor_bytes(lua_State *L)
{
    dp_model *m = dp_lua_check_model(L, 1);
    const char *name = luaL_checkstring(L, 2);
    const dp_model_tensor *t = dp_model_find(m, name);
    if (!t) return luaL_error(L, "%s: no tensor %s", dp_model_path(m), name);
    lua_pushlstring(L, t->data, (size_t)t->bytes);
    return 1;
}

static int l_tensor_f32(lua_State *L)
{
    dp_model *m = dp_lua_check_model(L, 1);
    const char *name = luaL_checkstring(L, 2);
    const dp_model_tensor *t = dp_model_find(m, name);
    if (!t) return luaL_error(L, "%s: no tensor %s", dp_model_path(m), name);
    if (t->dtype == DP_DTYPE_COUNT || !dp_quant_can_dequantize(t->dtype))
        return luaL_error(L, "%s: tensor %s has type %s, which cannot be dequantised", dp_model_path(m), name, t->type_name);
    const int64_t cols = t->ndim ? t->shape[t->ndim - 1] : 1, stored = t->padded_cols ? t->padded_cols : cols;
    const int64_t rows = cols ? (int64_t)t->numel / cols : 0;
    bool ok = true;
    const size_t row_bytes = dp_dtype_bytes(t->dtype, (uint64_t)stored, &ok);
    if (!ok || (uint64_t)rows * row_bytes != t->bytes)
        return luaL_error(L, "%s: tensor %s: %llu bytes are not %lld rows of %lld %s", dp_model_path(m), name,
                          (unsigned long long)t->bytes, (long long)rows, (long long)stored, t->type_name);
    float *row = lua_newuserdatauv(L, (size_t)stored * sizeof(float) + 1, 0);   /* freed by the GC on error */
    luaL_Buffer b;
    char *dst = luaL_buffinitsize(L, &b, (size_t)(rows * cols) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        if (dp_quant_dequantize_row(t->dtype, (const uint8_t *)t->data + (size_t)r * row_bytes, row, stored) != DP_OK)
            return luaL_error(L, "%s: tensor %s: cannot dequantise %s", dp_model_path(m), name, t->type_name);
        memcpy(dst + (size_t)(r * cols) * sizeof(float), row, (size_t)cols * sizeof(float));
    }
    luaL_pushresultsize(&b, (size_t)(rows * cols) * sizeof(float));
    return 1;
}

static int push_name(lua_State *L, bool (*map)(const char *, const char *, char *, size_t))
{
    char buf[256];
    if (map(luaL_checkstring(L, 1), luaL_checkstring(L, 2), buf, sizeof buf)) lua_pushstring(L, buf);
    else lua_pushnil(L);
    return 1;
}
static int l_gguf_tensor_name(lua_State *L) { return push_name(L, dp_tensor_name_hf_to_gguf); }
static int l_hf_tensor_name(lua_State *L) { return push_name(L, dp_tensor_name_gguf_to_hf); }

void dp_lua_register_convert(lua_State *L, int module)
{
    static const luaL_Reg fns[] = {
        {"gguf_write", l_gguf_write},
        {"quantize", l_quantize},
        {"dequantize", l_dequantize},
        {"tensor_bytes", l_tensor_bytes},
        {"tensor_f32", l_tensor_f32},
        {"gguf_tensor_name", l_gguf_tensor_name},
        {"hf_tensor_name", l_hf_tensor_name},
        {NULL, NULL},
    };
    module = lua_absindex(L, module);
    for (const luaL_Reg *f = fns; f->name; f++) {
        lua_pushcfunction(L, f->func);
        lua_setfield(L, module, f->name);
    }
}
