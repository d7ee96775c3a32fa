/*
** tests/unit/test_safetensors.c: the safetensors reader. Every fixture model loads with the
** tensor names and shapes its config.json implies; the bf16 fixture holds exactly the f32
** weights rounded to bf16; a sharded copy (index + two shards) reads the same tensors; broken
** files give DP_EFORMAT naming the file (and the tensor).
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json.h>

#include "core/formats/hfconfig.h"
#include "core/formats/safetensors.h"
#include "test_model_expect.h"

static const char *const MODELS[] = {"gemma3-tiny", "gemma3-tiny-scaled", "llama3-tiny", "mistral-tiny",
                                     "mixtral-tiny", "phi3-tiny",   "qwen2-tiny",         "qwen3-tiny"};

static void model_path(char *buf, size_t n, const char *model, const char *file)
{
    const char *root = getenv("DOPPLER_FIXTURES");
    snprintf(buf, n, "%s/models/%s%s%s", root ? root : "tests/fixtures", model, file ? "/" : "", file ? file : "");
}

static void test_fixture_models(void **state)
{
    (void)state;
    static expect_tensor want[1024];
    for (size_t m = 0; m < DP_ARRAY_LEN(MODELS); m++) {
        char dir[512], cfgp[512];
        dp_err err = {0};
        dp_hfconfig cfg;
        model_path(dir, sizeof dir, MODELS[m], NULL);
        model_path(cfgp, sizeof cfgp, MODELS[m], "config.json");
        assert_int_equal(dp_hfconfig_read(cfgp, &cfg, &err), DP_OK);
        size_t n = expect_hf_tensors(&cfg, want, DP_ARRAY_LEN(want));
        assert_true(n > 0);
        dp_safetensors *st;
        if (dp_safetensors_open(dir, &st, &err) != DP_OK) fail_msg("%s", err.msg);
        if (dp_safetensors_count(st) != n) fail_msg("%s: %zu tensors, config implies %zu", dir, dp_safetensors_count(st), n);
        for (size_t i = 0; i < n; i++) {
            const dp_st_tensor *t = dp_safetensors_find(st, want[i].name);
            if (!t) fail_msg("%s: no tensor %s", dir, want[i].name);
            assert_int_equal(t->dtype, DP_F32);
            assert_int_equal(t->ndim, want[i].ndim);
            for (int d = 0; d < t->ndim; d++) assert_int_equal(t->shape[d], want[i].shape[d]);
            assert_int_equal(t->bytes, t->numel * 4);
            assert_non_null(t->data);
        }
        assert_string_equal(dp_safetensors_metadata_get(st, "format"), "pt");
        dp_safetensors_close(st);
        dp_hfconfig_free(&cfg);
    }
}

static void test_bf16_is_rounded_f32(void **state)
{
    (void)state;
    char p32[512], p16[512];
    model_path(p32, sizeof p32, "gemma3-tiny", "model.safetensors");
    model_path(p16, sizeof p16, "gemma3-tiny", "model-bf16.safetensors");
    dp_err err = {0};
    dp_safetensors *a, *b;
    assert_int_equal(dp_safetensors_open(p32, &a, &err), DP_OK);
    assert_int_equal(dp_safetensors_open(p16, &b, &err), DP_OK);
    assert_int_equal(dp_safetensors_count(a), dp_safetensors_count(b));
    for (size_t i = 0; i < dp_safetensors_count(a); i++) {
        const dp_st_tensor *x = dp_safetensors_at(a, i), *y = dp_safetensors_find(b, x->name);
        assert_non_null(y);
        assert_int_equal(y->dtype, DP_BF16);
        assert_int_equal(y->numel, x->numel);
        for (uint64_t k = 0; k < x->numel; k++) {
            float f;
            uint16_t h;
            memcpy(&f, (const uint8_t *)x->data + 4 * k, 4);
            memcpy(&h, (const uint8_t *)y->data + 2 * k, 2);
            assert_int_equal(h, dp_f32_to_bf16(f));
        }
    }
    dp_safetensors_close(a);
    dp_safetensors_close(b);
}

/* ---- a small safetensors writer for the tests ---- */

typedef struct st_entry { const char *name; const char *dtype; int ndim; int64_t shape[4]; const void *data; size_t bytes; } st_entry;

static size_t build_file(uint8_t *out, size_t cap, const st_entry *e, size_t n)
{
    struct json_object *h = json_object_new_object(), *md = json_object_new_object();
    json_object_object_add(md, "format", json_object_new_string("pt"));
    json_object_object_add(h, "__metadata__", md);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *t = json_object_new_object(), *sh = json_object_new_array(), *of = json_object_new_array();
        json_object_object_add(t, "dtype", json_object_new_string(e[i].dtype));
        for (int d = 0; d < e[i].ndim; d++) json_object_array_add(sh, json_object_new_int64(e[i].shape[d]));
        json_object_object_add(t, "shape", sh);
        json_object_array_add(of, json_object_new_int64((int64_t)off));
        json_object_array_add(of, json_object_new_int64((int64_t)(off + e[i].bytes)));
        json_object_object_add(t, "data_offsets", of);
        json_object_object_add(h, e[i].name, t);
        off += e[i].bytes;
    }
    const char *js = json_object_to_json_string_ext(h, JSON_C_TO_STRING_PLAIN);
    size_t hl = strlen(js), padded = (hl + 7) / 8 * 8;
    assert_true(8 + padded + off <= cap);
    uint64_t n64 = padded;
    memcpy(out, &n64, 8);
    memcpy(out + 8, js, hl);
    memset(out + 8 + hl, ' ', padded - hl);
    size_t pos = 8 + padded;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + pos, e[i].data, e[i].bytes);
        pos += e[i].bytes;
    }
    json_object_put(h);
    return pos;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void test_sharded(void **state)
{
    (void)state;
    char src[512], tmpl[] = "/tmp/dp_st_XXXXXX";
    model_path(src, sizeof src, "gemma3-tiny", "model.safetensors");
    dp_err err = {0};
    dp_safetensors *orig;
    assert_int_equal(dp_safetensors_open(src, &orig, &err), DP_OK);
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    /* Even-numbered tensors into shard 1, odd into shard 2. */
    size_t n = dp_safetensors_count(orig);
    st_entry *parts[2];
    size_t cnt[2] = {0, 0};
    parts[0] = calloc(n, sizeof(st_entry));
    parts[1] = calloc(n, sizeof(st_entry));
    struct json_object *idx = json_object_new_object(), *wm = json_object_new_object();
    const char *names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    for (size_t i = 0; i < n; i++) {
        const dp_st_tensor *t = dp_safetensors_at(orig, i);
        st_entry *e = &parts[i % 2][cnt[i % 2]++];
        e->name = t->name;
        e->dtype = "F32";
        e->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e->shape[d] = t->shape[d];
        e->data = t->data;
        e->bytes = t->bytes;
        json_object_object_add(wm, t->name, json_object_new_string(names[i % 2]));
    }
    json_object_object_add(idx, "weight_map", wm);
    uint8_t *buf = malloc(2 << 20);
    for (int s = 0; s < 2; s++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[s]);
        size_t len = build_file(buf, 2 << 20, parts[s], cnt[s]);
        write_file(p, buf, len);
    }
    char ip[600];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", dir);
    const char *js = json_object_to_json_string(idx);
    write_file(ip, js, strlen(js));

    dp_safetensors *sh;
    if (dp_safetensors_open(dir, &sh, &err) != DP_OK) fail_msg("%s", err.msg);
    assert_int_equal(dp_safetensors_shard_count(sh), 2);
    assert_int_equal(dp_safetensors_count(sh), n);
    for (size_t i = 0; i < n; i++) {
        const dp_st_tensor *a = dp_safetensors_at(orig, i), *b = dp_safetensors_find(sh, a->name);
        assert_non_null(b);
        assert_int_equal(b->shard, (int)(i % 2));
        assert_int_equal(b->bytes, a->bytes);
        assert_memory_equal(b->data, a->data, a->bytes);
    }
    dp_safetensors_close(sh);

    /* A stale index: lists a tensor that no shard holds. */
    json_object_object_add(wm, "model.ghost.weight", json_object_new_string(names[0]));
    js = json_object_to_json_string(idx);
    write_file(ip, js, strlen(js));
    dp_err_clear(&err);
    assert_int_equal(dp_safetensors_open(ip, &sh, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "model.ghost.weight"));
    assert_non_null(strstr(err.msg, "index.json"));
    /* And one that misses a tensor a shard holds. */
    json_object_object_del(wm, "model.ghost.weight");
    json_object_object_del(wm, "model.norm.weight");
    js = json_object_to_json_string(idx);
    write_file(ip, js, strlen(js));
    dp_err_clear(&err);
    assert_int_equal(dp_safetensors_open(dir, &sh, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "model.norm.weight"));

    char p[600];
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[s]);
        unlink(p);
    }
    unlink(ip);
    rmdir(dir);
    json_object_put(idx);
    free(buf);
    free(parts[0]);
    free(parts[1]);
    dp_safetensors_close(orig);
}

/* ---- broken files ---- */

static size_t raw_file(uint8_t *out, const char *header, size_t data_bytes)
{
    uint64_t n = strlen(header);
    memcpy(out, &n, 8);
    memcpy(out + 8, header, n);
    memset(out + 8 + n, 0x3f, data_bytes);
    return 8 + n + data_bytes;
}

static void expect_bad(const uint8_t *buf, size_t n, const char *name, const char *needle)
{
    dp_err err = {0};
    dp_safetensors *st = (dp_safetensors *)1;
    dp_status s = dp_safetensors_parse(name, buf, n, &st, &err);
    if (s != DP_EFORMAT) fail_msg("%s: expected DP_EFORMAT, got %s", name, dp_status_name(s));
    assert_null(st);
    if (!strstr(err.msg, name)) fail_msg("message does not name the file: %s", err.msg);
    if (needle && !strstr(err.msg, needle)) fail_msg("message lacks \"%s\": %s", needle, err.msg);
}

static void test_valid_small(void **state)
{
    (void)state;
    uint8_t buf[512];
    size_t n = raw_file(buf,
                        "{\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]},"
                        "\"z\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
                        "\"u\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[4,8]}}    ", 8);
    dp_err err = {0};
    dp_safetensors *st;
    assert_int_equal(dp_safetensors_parse("ok.safetensors", buf, n, &st, &err), DP_OK);
    assert_int_equal(dp_safetensors_count(st), 3);
    const dp_st_tensor *s = dp_safetensors_find(st, "s");
    assert_int_equal(s->ndim, 0);
    assert_int_equal(s->numel, 1);
    assert_int_equal(dp_safetensors_find(st, "z")->numel, 0);
    assert_int_equal(dp_safetensors_find(st, "u")->dtype, DP_U8);
    assert_null(dp_safetensors_find(st, "missing"));
    assert_int_equal(dp_safetensors_metadata_count(st), 0);
    dp_safetensors_close(st);
}

static void test_truncated_everywhere(void **state)
{
    (void)state;
    uint8_t buf[512];
    size_t full = raw_file(buf, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}", 12);
    dp_err err = {0};
    dp_safetensors *st;
    assert_int_equal(dp_safetensors_parse("full.safetensors", buf, full, &st, &err), DP_OK);
    dp_safetensors_close(st);
    for (size_t n = 0; n < full; n++) expect_bad(buf, n, "cut.safetensors", NULL);
}

static void test_bad_files(void **state)
{
    (void)state;
    uint8_t buf[1024] = {0};
    size_t n;
    expect_bad(buf, 0, "empty.safetensors", "too short");
    n = raw_file(buf, "{}", 0);
    uint64_t big = 1000;
    memcpy(buf, &big, 8);
    expect_bad(buf, n, "hlen.safetensors", "past the end");
    big = 200000000;
    memcpy(buf, &big, 8);
    expect_bad(buf, n, "hbig.safetensors", "limit");
    n = raw_file(buf, "[1, 2]", 0);
    expect_bad(buf, n, "array.safetensors", "object");
    n = raw_file(buf, "{\"a\": ", 0);
    expect_bad(buf, n, "eof.safetensors", "JSON");
    n = raw_file(buf, "{\"a\": 1,}", 0);
    expect_bad(buf, n, "comma.safetensors", "JSON");
    n = raw_file(buf, "{} x", 0);
    expect_bad(buf, n, "trailing.safetensors", "after the JSON");
    n = raw_file(buf, "{}\0  ", 0);
    n = 8 + 5;
    buf[0] = 5;
    memcpy(buf + 8, "{}\0  ", 5);
    expect_bad(buf, n, "nul.safetensors", "NUL");
    n = raw_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4);
    expect_bad(buf, n, "range.safetensors", "w: data_offsets");
    n = raw_file(buf, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
    expect_bad(buf, n, "overlap.safetensors", "overlap");
    n = raw_file(buf, "{\"w\":{\"dtype\":\"F7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    expect_bad(buf, n, "dtype.safetensors", "unknown dtype");
    n = raw_file(buf, "{\"w\":{\"dtype\":\"BOOL\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8);
    expect_bad(buf, n, "bool.safetensors", "not supported");
    n = raw_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    expect_bad(buf, n, "size.safetensors", "w: 8 bytes stored but shape x F32 needs 12");
    n = raw_file(buf, "{\"w\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    expect_bad(buf, n, "utf8.safetensors", NULL);
    n = raw_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8);
    expect_bad(buf, n, "neg.safetensors", "shape[0]");
    n = raw_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8);
    expect_bad(buf, n, "float.safetensors", "shape[0]");
    n = raw_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8);
    expect_bad(buf, n, "nooffs.safetensors", "data_offsets");
    n = raw_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8);
    expect_bad(buf, n, "backwards.safetensors", "before begin");
    n = raw_file(buf, "{\"w\":[1]}", 0);
    expect_bad(buf, n, "entry.safetensors", "not an object");
    n = raw_file(buf, "{\"__metadata__\":{\"format\":1}}", 0);
    expect_bad(buf, n, "meta.safetensors", "__metadata__");
    n = raw_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8);
    expect_bad(buf, n, "overflow.safetensors", "overflows");
}

static void test_open_errors(void **state)
{
    (void)state;
    dp_err err = {0};
    dp_safetensors *st;
    assert_int_equal(dp_safetensors_open("/nonexistent/model.safetensors", &st, &err), DP_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/model.safetensors"));
    assert_null(st);
    char dir[512];
    dp_err_clear(&err);
    const char *root = getenv("DOPPLER_FIXTURES");
    snprintf(dir, sizeof dir, "%s/tokenizers", root ? root : "tests/fixtures");
    assert_int_equal(dp_safetensors_open(dir, &st, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "no model.safetensors"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_models),    cmocka_unit_test(test_bf16_is_rounded_f32),
        cmocka_unit_test(test_sharded),           cmocka_unit_test(test_valid_small),
        cmocka_unit_test(test_truncated_everywhere), cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
