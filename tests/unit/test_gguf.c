/*
** tests/unit/test_gguf.c: the GGUF reader and writer. Every fixture file reads (tensor types as
** the fixture's reference json lists them) and writes back to the same bytes; a file with every
** value type and several tensor types round-trips bit-exactly; broken files (truncated, wrong
** magic or version, bad offsets, bad names, bad values) give DP_EFORMAT naming the file.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json.h>

#include "core/formats/gguf.h"
#include "core/formats/json.h"
#include "core/formats/mapped_file.h"
#include "core/quant.h"

static const char *const FIXTURES[] = {
    "gemma3-q/model-Q8_0", "gemma3-q/model-Q4_0", "gemma3-q/model-Q5_0", "gemma3-q/model-Q4_K_M",
    "gemma3-q/model-Q5_K_M", "llama-q/model-Q8_0", "llama-q/model-Q4_K_M",
};

static void fixture_path(char *buf, size_t n, const char *stem, const char *ext)
{
    const char *root = getenv("DOPPLER_FIXTURES");
    snprintf(buf, n, "%s/gguf/%s%s", root ? root : "tests/fixtures", stem, ext);
}

static void test_fixtures_read(void **state)
{
    (void)state;
    for (size_t f = 0; f < DP_ARRAY_LEN(FIXTURES); f++) {
        char path[512], ref[512];
        fixture_path(path, sizeof path, FIXTURES[f], ".gguf");
        /* reference-<Q>.json sits beside model-<Q>.gguf */
        fixture_path(ref, sizeof ref, FIXTURES[f], ".json");
        char *slash = strrchr(ref, '/');
        memmove(slash + 1 + 9, slash + 1 + 5, strlen(slash + 1 + 5) + 1);
        memcpy(slash + 1, "reference", 9);
        dp_err err = {0};
        dp_gguf *g;
        assert_int_equal(dp_gguf_open(path, &g, &err), DP_OK);
        assert_int_equal(dp_gguf_version(g), 3);
        assert_int_equal(dp_gguf_alignment(g), 32);
        char arch[32];
        assert_true(dp_gguf_get_string(g, "general.architecture", arch, sizeof arch));
        assert_string_equal(arch, strncmp(FIXTURES[f], "gemma3", 6) == 0 ? "gemma3" : "llama");
        struct json_object *r;
        assert_int_equal(dp_json_read_object_file(ref, &r, &err), DP_OK);
        struct json_object *types = dp_json_get(r, "tensor_types");
        assert_non_null(types);
        assert_int_equal(dp_gguf_tensor_count(g), json_object_object_length(types));
        for (size_t i = 0; i < dp_gguf_tensor_count(g); i++) {
            const dp_gguf_tensor *t = dp_gguf_tensor_at(g, i);
            const char *want = dp_json_get_string(types, t->name, NULL);
            assert_non_null(want);
            assert_int_equal(strcasecmp(want, dp_ggml_type_name(t->ggml_type)), 0);
            assert_true(t->dtype < DP_DTYPE_COUNT);
            assert_int_equal((dp_gguf_data_offset(g) + t->offset) % 32, 0);
            assert_ptr_equal(dp_gguf_find_tensor(g, t->name), t);
        }
        json_object_put(r);
        dp_gguf_close(g);
    }
}

/* Reading a llama.cpp file and writing it back gives llama.cpp's bytes. */
static void test_fixtures_rewrite_bit_exact(void **state)
{
    (void)state;
    for (size_t f = 0; f < DP_ARRAY_LEN(FIXTURES); f++) {
        char path[512];
        fixture_path(path, sizeof path, FIXTURES[f], ".gguf");
        dp_err err = {0};
        dp_gguf *g;
        dp_gguf_writer *w;
        assert_int_equal(dp_gguf_open(path, &g, &err), DP_OK);
        assert_int_equal(dp_gguf_writer_create(&w, &err), DP_OK);
        for (size_t i = 0; i < dp_gguf_kv_count(g); i++)
            assert_int_equal(dp_gguf_writer_set(w, dp_gguf_kv_key(g, i), dp_gguf_kv_value(g, i), &err), DP_OK);
        for (size_t i = 0; i < dp_gguf_tensor_count(g); i++) {
            const dp_gguf_tensor *t = dp_gguf_tensor_at(g, i);
            assert_int_equal(dp_gguf_writer_add_tensor(w, t->name, t->ggml_type, t->n_dims, t->ne, t->data, t->bytes, &err),
                             DP_OK);
        }
        void *buf;
        size_t size;
        assert_int_equal(dp_gguf_writer_write_mem(w, &buf, &size, &err), DP_OK);
        dp_mapped_file *mf;
        assert_int_equal(dp_mapped_file_open(path, &mf, &err), DP_OK);
        assert_int_equal(size, mf->size);
        assert_memory_equal(buf, mf->data, size);
        free(buf);
        dp_mapped_file_close(mf);
        dp_gguf_writer_destroy(w);
        dp_gguf_close(g);
    }
}

static float *dequant_all(const dp_gguf_tensor *t)
{
    uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *y = malloc(n * sizeof *y);
    assert_non_null(y);
    /* Row by row, as GPU code will call it. */
    for (uint64_t r = 0; r < n / t->ne[0]; r++) {
        const uint8_t *src = (const uint8_t *)t->data + r * (t->bytes / (n / t->ne[0]));
        assert_int_equal(dp_quant_dequantize_row(t->dtype, src, y + r * t->ne[0], (int64_t)t->ne[0]), DP_OK);
    }
    for (uint64_t i = 0; i < n; i++) assert_true(isfinite(y[i]));
    return y;
}

/* The quantised files come from one set of F32 weights: a 4/5/6-bit tensor dequantised must sit
** close to the same tensor in the Q8_0 file (itself within ~0.4% of the original). The bound is
** on the RMS error relative to the RMS of the weights: uniform quantisation with 2^b levels per
** block leaves about range / (2^b sqrt(12)). Measured on these files: q4_0 8.7%, q4_K 7.2%,
** q5_0 4.4%, q5_K 3.7%, q6_K 1.9%; the bounds leave ~40% headroom. A wrong nibble, bit or scale
** map gives errors near 100%. */
static void test_fixture_dequant_cross_check(void **state)
{
    (void)state;
    const char *const models[] = {"gemma3-q", "llama-q"};
    for (size_t mdl = 0; mdl < 2; mdl++) {
        char stem[128], path[512];
        dp_err err = {0};
        dp_gguf *ref;
        snprintf(stem, sizeof stem, "%s/model-Q8_0", models[mdl]);
        fixture_path(path, sizeof path, stem, ".gguf");
        assert_int_equal(dp_gguf_open(path, &ref, &err), DP_OK);
        for (size_t f = 0; f < DP_ARRAY_LEN(FIXTURES); f++) {
            if (strncmp(FIXTURES[f], models[mdl], strlen(models[mdl])) != 0) continue;
            dp_gguf *g;
            fixture_path(path, sizeof path, FIXTURES[f], ".gguf");
            assert_int_equal(dp_gguf_open(path, &g, &err), DP_OK);
            for (size_t i = 0; i < dp_gguf_tensor_count(g); i++) {
                const dp_gguf_tensor *t = dp_gguf_tensor_at(g, i), *r = dp_gguf_find_tensor(ref, t->name);
                assert_non_null(r);
                assert_memory_equal(t->ne, r->ne, sizeof t->ne);
                float *a = dequant_all(t), *b = dequant_all(r);
                uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
                double se = 0, sv = 0;
                for (uint64_t k = 0; k < n; k++) {
                    se += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
                    sv += (double)b[k] * b[k];
                }
                double rel = sqrt(se / sv);
                double bound = t->dtype == DP_Q8_0 || t->dtype == DP_F32 ? 0.0   /* same bytes */
                             : t->dtype == DP_Q6_K ? 0.03 : (t->dtype == DP_Q5_0 || t->dtype == DP_Q5_K) ? 0.06 : 0.12;
                if (rel > bound) fail_msg("%s %s (%s): relative RMS error %.4f > %.2f", path, t->name,
                                          dp_ggml_type_name(t->ggml_type), rel, bound);
                free(a);
                free(b);
            }
            dp_gguf_close(g);
        }
        dp_gguf_close(ref);
    }
}

/* ---- writer -> reader round trip of every value type ---- */

static void test_roundtrip_all_types(void **state)
{
    (void)state;
    dp_err err = {0};
    dp_gguf_writer *w;
    assert_int_equal(dp_gguf_writer_create(&w, &err), DP_OK);
    dp_gguf_value v;
#define SET(tag, member, val)                                          \
    memset(&v, 0, sizeof v);                                           \
    v.type = tag;                                                      \
    v.v.member = val;                                                  \
    assert_int_equal(dp_gguf_writer_set(w, "t." #member, &v, &err), DP_OK)
    SET(DP_GGUF_UINT8, u8, 255);
    SET(DP_GGUF_INT8, i8, -128);
    SET(DP_GGUF_UINT16, u16, 65535);
    SET(DP_GGUF_INT16, i16, -32768);
    SET(DP_GGUF_UINT32, u32, 4294967295u);
    SET(DP_GGUF_INT32, i32, INT32_MIN);
    SET(DP_GGUF_UINT64, u64, UINT64_MAX);
    SET(DP_GGUF_INT64, i64, INT64_MIN);
    SET(DP_GGUF_FLOAT64, f64, -0.0);
    SET(DP_GGUF_BOOL, b, true);
#undef SET
    uint32_t nan_bits = 0x7fa00001u;   /* a signalling NaN payload must survive untouched */
    float nanf_;
    memcpy(&nanf_, &nan_bits, 4);
    assert_int_equal(dp_gguf_writer_set_f32(w, "t.f32", nanf_, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo \xe2\x9c\x93", &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str(w, "t.empty", "", &err), DP_OK);
    const int16_t i16s[3] = {-1, 0, 32767};
    const double f64s[2] = {1e300, -2.5};
    const uint8_t bools[3] = {1, 0, 1};
    assert_int_equal(dp_gguf_writer_set_array(w, "t.arr_i16", DP_GGUF_INT16, i16s, 3, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_array(w, "t.arr_f64", DP_GGUF_FLOAT64, f64s, 2, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_array(w, "t.arr_bool", DP_GGUF_BOOL, bools, 3, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_array(w, "t.arr_empty", DP_GGUF_UINT32, NULL, 0, &err), DP_OK);
    const char *const strs[3] = {"a", "", "<0x0A>"};
    assert_int_equal(dp_gguf_writer_set_str_array(w, "t.arr_str", strs, 3, &err), DP_OK);
    /* nested: [[1, 2, 3], ["x", "yz"]] is not allowed (mixed); use [[i32 x3], [i32 x0]] and [[str]] */
    const int32_t i32s[3] = {7, -8, 9};
    dp_gguf_value inner[2] = {{.type = DP_GGUF_ARRAY}, {.type = DP_GGUF_ARRAY}};
    inner[0].v.arr.type = DP_GGUF_INT32;
    inner[0].v.arr.n = 3;
    inner[0].v.arr.data = i32s;
    inner[1].v.arr.type = DP_GGUF_INT32;
    inner[1].v.arr.n = 0;
    dp_gguf_value outer = {.type = DP_GGUF_ARRAY};
    outer.v.arr.type = DP_GGUF_ARRAY;
    outer.v.arr.n = 2;
    outer.v.arr.items = inner;
    assert_int_equal(dp_gguf_writer_set(w, "t.nested", &outer, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_u32(w, "general.alignment", 64, &err), DP_OK);
    /* Replacing a value keeps its place. */
    assert_int_equal(dp_gguf_writer_set_str(w, "t.empty", "", &err), DP_OK);

    /* Tensors of several types, with sizes that need padding. */
    float f32[3 * 5];
    for (int i = 0; i < 15; i++) f32[i] = (float)i * 0.37f - 2.0f;
    uint16_t f16[64], bf16[64];
    for (int i = 0; i < 64; i++) {
        f16[i] = dp_f32_to_f16((float)i / 8);
        bf16[i] = dp_f32_to_bf16(-(float)i);
    }
    uint8_t q8[2 * 34], q4k[144], mx[17 * 2];
    for (size_t i = 0; i < sizeof q8; i++) q8[i] = (uint8_t)(i * 13);
    for (size_t i = 0; i < sizeof q4k; i++) q4k[i] = (uint8_t)(i * 7 + 1);
    for (size_t i = 0; i < sizeof mx; i++) mx[i] = (uint8_t)(i * 5 + 3);
    int32_t ids[4] = {1, -2, 3, -4};
    const struct { const char *name; uint32_t type, nd; uint64_t ne[4]; const void *data; uint64_t bytes; } ts[] = {
        {"a.f32", 0, 2, {5, 3, 1, 1}, f32, sizeof f32},
        {"b.f16", 1, 3, {4, 4, 4, 1}, f16, sizeof f16},
        {"c.bf16", 30, 1, {64, 1, 1, 1}, bf16, sizeof bf16},
        {"d.q8_0", 8, 2, {32, 2, 1, 1}, q8, sizeof q8},
        {"e.q4_k", 12, 1, {256, 1, 1, 1}, q4k, sizeof q4k},
        {"f.i32", 26, 4, {1, 2, 2, 1}, ids, sizeof ids},
        {"g.mxfp4", 39, 2, {32, 2, 1, 1}, mx, sizeof mx},
    };
    for (size_t i = 0; i < DP_ARRAY_LEN(ts); i++)
        assert_int_equal(dp_gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].nd, ts[i].ne, ts[i].data, ts[i].bytes,
                                                   &err), DP_OK);
    void *buf;
    size_t size;
    assert_int_equal(dp_gguf_writer_write_mem(w, &buf, &size, &err), DP_OK);

    dp_gguf *g;
    assert_int_equal(dp_gguf_parse("roundtrip.gguf", buf, size, &g, &err), DP_OK);
    assert_int_equal(dp_gguf_alignment(g), 64);
    assert_int_equal(dp_gguf_kv_count(g), 20);
    const dp_gguf_value *x;
    assert_non_null(x = dp_gguf_find(g, "t.u8"));
    assert_int_equal(x->type, DP_GGUF_UINT8);
    assert_int_equal(x->v.u8, 255);
    assert_int_equal(dp_gguf_find(g, "t.i8")->v.i8, -128);
    assert_int_equal(dp_gguf_find(g, "t.u16")->v.u16, 65535);
    assert_int_equal(dp_gguf_find(g, "t.i16")->v.i16, -32768);
    assert_int_equal(dp_gguf_find(g, "t.u32")->v.u32, 4294967295u);
    assert_int_equal(dp_gguf_find(g, "t.i32")->v.i32, INT32_MIN);
    assert_true(dp_gguf_find(g, "t.u64")->v.u64 == UINT64_MAX);
    assert_true(dp_gguf_find(g, "t.i64")->v.i64 == INT64_MIN);
    assert_true(signbit(dp_gguf_find(g, "t.f64")->v.f64) && dp_gguf_find(g, "t.f64")->v.f64 == 0.0);
    assert_true(dp_gguf_find(g, "t.b")->v.b);
    assert_memory_equal(&dp_gguf_find(g, "t.f32")->v.f32, &nan_bits, 4);
    x = dp_gguf_find(g, "t.str");
    assert_int_equal(x->v.str.len, strlen("h\xc3\xa9llo \xe2\x9c\x93"));
    assert_memory_equal(x->v.str.ptr, "h\xc3\xa9llo \xe2\x9c\x93", x->v.str.len);
    assert_int_equal(dp_gguf_find(g, "t.empty")->v.str.len, 0);
    assert_string_equal(dp_gguf_kv_key(g, 12), "t.empty");
    int64_t iv;
    double dv;
    x = dp_gguf_find(g, "t.arr_i16");
    assert_true(x->type == DP_GGUF_ARRAY && x->v.arr.type == DP_GGUF_INT16 && x->v.arr.n == 3);
    assert_true(dp_gguf_array_int(x, 0, &iv) && iv == -1);
    assert_true(dp_gguf_array_int(x, 2, &iv) && iv == 32767);
    assert_false(dp_gguf_array_int(x, 3, &iv));
    x = dp_gguf_find(g, "t.arr_f64");
    assert_true(dp_gguf_array_double(x, 0, &dv) && dv == 1e300);
    x = dp_gguf_find(g, "t.arr_bool");
    assert_true(dp_gguf_array_int(x, 1, &iv) && iv == 0);
    assert_int_equal(dp_gguf_find(g, "t.arr_empty")->v.arr.n, 0);
    x = dp_gguf_find(g, "t.arr_str");
    dp_gguf_str s;
    assert_true(dp_gguf_array_str(x, 2, &s) && s.len == 6 && memcmp(s.ptr, "<0x0A>", 6) == 0);
    assert_true(dp_gguf_array_str(x, 1, &s) && s.len == 0);
    x = dp_gguf_find(g, "t.nested");
    assert_true(x->v.arr.type == DP_GGUF_ARRAY && x->v.arr.n == 2);
    assert_true(dp_gguf_array_int(&x->v.arr.items[0], 1, &iv) && iv == -8);
    assert_int_equal(x->v.arr.items[1].v.arr.n, 0);

    assert_int_equal(dp_gguf_tensor_count(g), DP_ARRAY_LEN(ts));
    for (size_t i = 0; i < DP_ARRAY_LEN(ts); i++) {
        const dp_gguf_tensor *t = dp_gguf_tensor_at(g, i);
        assert_string_equal(t->name, ts[i].name);
        assert_int_equal(t->ggml_type, ts[i].type);
        assert_int_equal(t->n_dims, ts[i].nd);
        assert_memory_equal(t->ne, ts[i].ne, sizeof t->ne);
        assert_int_equal(t->bytes, ts[i].bytes);
        assert_memory_equal(t->data, ts[i].data, ts[i].bytes);
        assert_int_equal(((const uint8_t *)t->data - (const uint8_t *)buf) % 64, 0);
    }
    assert_int_equal(dp_gguf_tensor_at(g, 4)->dtype, DP_Q4_K);
    assert_int_equal(dp_gguf_tensor_at(g, 6)->dtype, DP_MXFP4);

    /* And back out again: the same bytes. */
    dp_gguf_writer *w2;
    assert_int_equal(dp_gguf_writer_create(&w2, &err), DP_OK);
    for (size_t i = 0; i < dp_gguf_kv_count(g); i++)
        assert_int_equal(dp_gguf_writer_set(w2, dp_gguf_kv_key(g, i), dp_gguf_kv_value(g, i), &err), DP_OK);
    for (size_t i = 0; i < dp_gguf_tensor_count(g); i++) {
        const dp_gguf_tensor *t = dp_gguf_tensor_at(g, i);
        assert_int_equal(dp_gguf_writer_add_tensor(w2, t->name, t->ggml_type, t->n_dims, t->ne, t->data, t->bytes, &err),
                         DP_OK);
    }
    void *buf2;
    size_t size2;
    assert_int_equal(dp_gguf_writer_write_mem(w2, &buf2, &size2, &err), DP_OK);
    assert_int_equal(size2, size);
    assert_memory_equal(buf2, buf, size);
    free(buf2);
    dp_gguf_writer_destroy(w2);
    dp_gguf_close(g);
    free(buf);
    dp_gguf_writer_destroy(w);
}

static void test_writer_rejects(void **state)
{
    (void)state;
    dp_err err = {0};
    dp_gguf_writer *w;
    assert_int_equal(dp_gguf_writer_create(&w, &err), DP_OK);
    uint8_t d[64] = {0};
    uint64_t ne[2] = {33, 1};
    assert_int_equal(dp_gguf_writer_add_tensor(w, "x", 8, 1, ne, d, 34, &err), DP_EINVAL);   /* 33 % 32 */
    dp_err_clear(&err);
    ne[0] = 16;
    assert_int_equal(dp_gguf_writer_add_tensor(w, "x", 0, 1, ne, d, 60, &err), DP_EINVAL);   /* bytes */
    dp_err_clear(&err);
    assert_int_equal(dp_gguf_writer_add_tensor(w, "x", 4, 1, ne, d, 64, &err), DP_EINVAL);   /* retired type */
    dp_err_clear(&err);
    char longname[80];
    memset(longname, 'n', 64);
    longname[64] = 0;
    assert_int_equal(dp_gguf_writer_add_tensor(w, longname, 0, 1, ne, d, 64, &err), DP_EINVAL);
    dp_err_clear(&err);
    assert_int_equal(dp_gguf_writer_add_tensor(w, "x", 0, 1, ne, d, 64, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_add_tensor(w, "x", 0, 1, ne, d, 64, &err), DP_EINVAL);   /* twice */
    dp_err_clear(&err);
    assert_int_equal(dp_gguf_writer_set_u32(w, "general.alignment", 48, &err), DP_EINVAL);
    dp_err_clear(&err);
    assert_int_equal(dp_gguf_writer_set_str(w, "", "x", &err), DP_EINVAL);
    dp_gguf_writer_destroy(w);
}

/* ---- hand-built broken files ---- */

typedef struct bytes { uint8_t b[4096]; size_t n; } bytes;

static void put(bytes *o, const void *p, size_t n) { memcpy(o->b + o->n, p, n); o->n += n; }
static void u32(bytes *o, uint32_t x) { put(o, &x, 4); }
static void u64(bytes *o, uint64_t x) { put(o, &x, 8); }
static void str(bytes *o, const char *s) { u64(o, strlen(s)); put(o, s, strlen(s)); }
static void header(bytes *o, uint64_t nt, uint64_t nkv) { o->n = 0; put(o, "GGUF", 4); u32(o, 3); u64(o, nt); u64(o, nkv); }
static void tinfo(bytes *o, const char *name, uint32_t nd, uint64_t ne0, uint32_t type, uint64_t off)
{
    str(o, name);
    u32(o, nd);
    for (uint32_t d = 0; d < nd; d++) u64(o, d == 0 ? ne0 : 1);
    u32(o, type);
    u64(o, off);
}
static void pad_data(bytes *o, size_t data_bytes)
{
    while (o->n % 32) o->b[o->n++] = 0;
    memset(o->b + o->n, 0x11, data_bytes);
    o->n += data_bytes;
}

/* A valid file: one kv, two f32 tensors of 8 elements (32 bytes each: no trailing padding). */
static void valid_file(bytes *o)
{
    header(o, 2, 1);
    str(o, "general.architecture");
    u32(o, DP_GGUF_STRING);
    str(o, "llama");
    tinfo(o, "first.weight", 1, 8, 0, 0);
    tinfo(o, "second.weight", 1, 8, 0, 32);
    pad_data(o, 64);
}

static void expect_format_error(const bytes *o, const char *name, const char *needle)
{
    dp_err err = {0};
    dp_gguf *g = (dp_gguf *)1;
    dp_status st = dp_gguf_parse(name, o->b, o->n, &g, &err);
    if (st != DP_EFORMAT) fail_msg("%s: expected DP_EFORMAT, got %s", name, dp_status_name(st));
    assert_null(g);
    if (!strstr(err.msg, name)) fail_msg("message does not name the file: %s", err.msg);
    if (needle && !strstr(err.msg, needle)) fail_msg("message lacks \"%s\": %s", needle, err.msg);
}

static void test_valid_hand_built(void **state)
{
    (void)state;
    bytes o;
    valid_file(&o);
    dp_err err = {0};
    dp_gguf *g;
    assert_int_equal(dp_gguf_parse("ok.gguf", o.b, o.n, &g, &err), DP_OK);
    assert_int_equal(dp_gguf_tensor_count(g), 2);
    dp_gguf_close(g);
}

static void test_truncated_everywhere(void **state)
{
    (void)state;
    bytes o;
    valid_file(&o);
    size_t full = o.n;
    for (size_t n = 0; n < full; n++) {
        o.n = n;
        expect_format_error(&o, "cut.gguf", NULL);
    }
}

static void test_bad_header(void **state)
{
    (void)state;
    bytes o;
    valid_file(&o);
    memcpy(o.b, "GGUG", 4);
    expect_format_error(&o, "magic.gguf", "not a GGUF file");
    memcpy(o.b, "FUGG", 4);
    expect_format_error(&o, "bigendian.gguf", "big-endian");
    valid_file(&o);
    uint32_t v = 1;
    memcpy(o.b + 4, &v, 4);
    expect_format_error(&o, "v1.gguf", "version 1");
    v = 4;
    memcpy(o.b + 4, &v, 4);
    expect_format_error(&o, "v4.gguf", "version 4");
    valid_file(&o);
    uint64_t huge = UINT64_MAX / 2;
    memcpy(o.b + 8, &huge, 8);
    expect_format_error(&o, "count.gguf", "more than the file holds");
    valid_file(&o);
    memcpy(o.b + 16, &huge, 8);
    expect_format_error(&o, "kvcount.gguf", "more than the file holds");
}

static void test_bad_tensors(void **state)
{
    (void)state;
    bytes o;
    /* Found by fuzz_gguf: general.alignment of 4 MiB put the data section past the end of a 582-byte file,
    ** and its zero-byte tensors then pointed outside the mapping. The input is kept in the fuzz corpus. */
    FILE *f = fopen(DOPPLER_SOURCE_DIR "/tests/fuzz/corpus/gguf/regress-data-past-eof.gguf", "rb");
    assert_non_null(f);
    o.n = fread(o.b, 1, sizeof o.b, f);
    fclose(f);
    assert_true(o.n > 0 && o.n < sizeof o.b);
    expect_format_error(&o, "eof.gguf", "larger than the 1 MiB");    /* its alignment: 4 MiB */
    uint32_t four_mib = 4u << 20, one_mib = 1u << 20;
    bool patched = false;
    for (size_t i = 0; i + 4 <= o.n && !patched; i++)
        if (memcmp(o.b + i, &four_mib, 4) == 0) memcpy(o.b + i, &one_mib, 4), patched = true;
    assert_true(patched);
    expect_format_error(&o, "eof.gguf", "past the end of the file");  /* 1 MiB: still past a 582-byte file */
    /* offset past the end */
    header(&o, 1, 0);
    tinfo(&o, "far.weight", 1, 8, 0, 4096);
    pad_data(&o, 32);
    expect_format_error(&o, "past.gguf", "far.weight");
    /* overlapping */
    header(&o, 2, 0);
    tinfo(&o, "one.weight", 1, 16, 0, 0);
    tinfo(&o, "two.weight", 1, 8, 0, 32);
    pad_data(&o, 64);
    expect_format_error(&o, "overlap.gguf", "overlap");
    /* misaligned */
    header(&o, 1, 0);
    tinfo(&o, "odd.weight", 1, 4, 0, 16);
    pad_data(&o, 64);
    expect_format_error(&o, "align.gguf", "odd.weight");
    /* unknown and retired ggml types */
    header(&o, 1, 0);
    tinfo(&o, "what.weight", 1, 8, 77, 0);
    pad_data(&o, 64);
    expect_format_error(&o, "type.gguf", "unknown ggml type id 77");
    header(&o, 1, 0);
    tinfo(&o, "old.weight", 1, 32, 4, 0);
    pad_data(&o, 64);
    expect_format_error(&o, "retired.gguf", "old.weight");
    /* ne[0] not a multiple of the block */
    header(&o, 1, 0);
    tinfo(&o, "q.weight", 1, 33, 8, 0);
    pad_data(&o, 64);
    expect_format_error(&o, "block.gguf", "q.weight");
    /* too many dims, invalid UTF-8 name, name too long, duplicate */
    header(&o, 1, 0);
    tinfo(&o, "five.weight", 5, 8, 0, 0);
    pad_data(&o, 64);
    expect_format_error(&o, "dims.gguf", "five.weight");
    header(&o, 1, 0);
    tinfo(&o, "bad\xff.weight", 1, 8, 0, 0);
    pad_data(&o, 64);
    expect_format_error(&o, "utf8.gguf", "UTF-8");
    char longname[70];
    memset(longname, 'x', 64);
    longname[64] = 0;
    header(&o, 1, 0);
    tinfo(&o, longname, 1, 8, 0, 0);
    pad_data(&o, 64);
    expect_format_error(&o, "long.gguf", "longer than 63");
    header(&o, 2, 0);
    tinfo(&o, "dup.weight", 1, 8, 0, 0);
    tinfo(&o, "dup.weight", 1, 8, 0, 32);
    pad_data(&o, 64);
    expect_format_error(&o, "dup.gguf", "dup.weight");
    /* an element count that overflows */
    header(&o, 1, 0);
    str(&o, "big.weight");
    u32(&o, 2);
    u64(&o, (uint64_t)1 << 40);
    u64(&o, (uint64_t)1 << 40);
    u32(&o, 0);
    u64(&o, 0);
    pad_data(&o, 32);
    expect_format_error(&o, "overflow.gguf", "big.weight");
}

static void test_bad_metadata(void **state)
{
    (void)state;
    bytes o;
    header(&o, 0, 1);
    str(&o, "flag");
    u32(&o, DP_GGUF_BOOL);
    o.b[o.n++] = 2;
    expect_format_error(&o, "bool.gguf", "bool");
    header(&o, 0, 1);
    str(&o, "what");
    u32(&o, 13);
    u32(&o, 0);
    expect_format_error(&o, "vtype.gguf", "unknown value type 13");
    header(&o, 0, 2);
    str(&o, "k");
    u32(&o, DP_GGUF_UINT32);
    u32(&o, 1);
    str(&o, "k");
    u32(&o, DP_GGUF_UINT32);
    u32(&o, 2);
    expect_format_error(&o, "dupkey.gguf", "twice");
    header(&o, 0, 1);
    str(&o, "general.alignment");
    u32(&o, DP_GGUF_UINT32);
    u32(&o, 48);
    expect_format_error(&o, "align48.gguf", "power of two");
    header(&o, 0, 1);
    str(&o, "general.alignment");
    u32(&o, DP_GGUF_UINT64);
    u64(&o, 32);
    expect_format_error(&o, "align64.gguf", "general.alignment");
    header(&o, 0, 1);   /* an array claiming more strings than the file could hold */
    str(&o, "tokens");
    u32(&o, DP_GGUF_ARRAY);
    u32(&o, DP_GGUF_STRING);
    u64(&o, (uint64_t)1 << 60);
    expect_format_error(&o, "arr.gguf", "truncated");
    header(&o, 0, 1);   /* nesting beyond the limit */
    str(&o, "deep");
    u32(&o, DP_GGUF_ARRAY);
    for (int i = 0; i < 8; i++) {
        u32(&o, DP_GGUF_ARRAY);
        u64(&o, 1);
    }
    u32(&o, DP_GGUF_UINT8);
    u64(&o, 0);
    expect_format_error(&o, "deep.gguf", "nested");
    header(&o, 0, 1);
    str(&o, "bad\xc0\xafkey");
    u32(&o, DP_GGUF_UINT8);
    o.b[o.n++] = 0;
    expect_format_error(&o, "key.gguf", "UTF-8");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_read),
        cmocka_unit_test(test_fixtures_rewrite_bit_exact),
        cmocka_unit_test(test_fixture_dequant_cross_check),
        cmocka_unit_test(test_roundtrip_all_types),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_valid_hand_built),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_bad_tensors),
        cmocka_unit_test(test_bad_metadata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
