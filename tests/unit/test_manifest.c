/*
** tests/unit/test_manifest.c: model manifests (core/formats/manifest.h). A full manifest parses into its
** fields and kernel_hints in file order; the shipped models/NAME.yaml files parse; every error (unknown key, bad
** quantisation, missing model, duplicate key, hints that are not a mapping, YAML syntax, missing file)
** is a non-zero status whose message names the file and lists what is valid.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/manifest.h"

static dp_manifest *parse_ok(const char *text)
{
    dp_manifest *m = NULL;
    dp_err err = {0};
    if (dp_manifest_parse("m.yaml", text, strlen(text), &m, &err) != DP_OK) fail_msg("%s", err.msg);
    return m;
}

/* Parses text that must fail; checks the status and that msg contains each of the needles. */
static void parse_fails(const char *text, dp_status want, const char *needle1, const char *needle2)
{
    dp_manifest *m = (dp_manifest *)1;
    dp_err err = {0};
    dp_status st = dp_manifest_parse("bad.yaml", text, strlen(text), &m, &err);
    assert_int_equal(st, want);
    assert_null(m);
    assert_non_null(strstr(err.msg, "bad.yaml"));
    if (needle1 && !strstr(err.msg, needle1)) fail_msg("'%s' not in: %s", needle1, err.msg);
    if (needle2 && !strstr(err.msg, needle2)) fail_msg("'%s' not in: %s", needle2, err.msg);
}

static void test_full(void **state)
{
    (void)state;
    dp_manifest *m = parse_ok("# a comment\n"
                              "name: gemma-3-1b\n"
                              "model: synthetic/gemma-3-1b\n"
                              "recipe: gemma3\n"
                              "quantization: q4_k_m\n"
                              "source: google/gemma-3-1b-it\n"
                              "description: test\n"
                              "kernel_hints:\n"
                              "  q_matmul: dequant_f16\n"
                              "  kv_dtype: f16\n"
                              "  prefill_chunk: 128\n");
    assert_string_equal(m->name, "gemma-3-1b");
    assert_string_equal(m->model, "synthetic/gemma-3-1b");
    assert_string_equal(m->recipe, "gemma3");
    assert_string_equal(m->quantization, "q4_k_m");
    assert_string_equal(m->source, "google/gemma-3-1b-it");
    assert_int_equal(m->n_hints, 3);
    assert_string_equal(m->hints[0].key, "q_matmul");
    assert_string_equal(m->hints[0].value, "dequant_f16");
    assert_int_equal(m->hints[0].line, 9);
    assert_string_equal(m->hints[2].key, "prefill_chunk");
    assert_string_equal(m->hints[2].value, "128");
    dp_manifest_free(m);
}

static void test_minimal(void **state)
{
    (void)state;
    dp_manifest *m = parse_ok("model: /abs/model.gguf\nkernel_hints:\n");
    assert_string_equal(m->model, "/abs/model.gguf");
    assert_null(m->name);
    assert_null(m->recipe);
    assert_int_equal(m->n_hints, 0);
    dp_manifest_free(m);
    m = parse_ok("{model: x, kernel_hints: {kv_dtype: f32}}");   /* flow style is YAML too */
    assert_int_equal(m->n_hints, 1);
    dp_manifest_free(m);
}

static void test_shipped(void **state)
{
    (void)state;
    const char *home = getenv("DOPPLER_HOME");
    const char *files[] = {"models/gemma-3-1b.yaml", "models/llama-3.2-1b.yaml"};
    const char *recipes[] = {"gemma3", "llama3"};
    for (int i = 0; i < 2; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", home ? home : ".", files[i]);
        dp_manifest *m = NULL;
        dp_err err = {0};
        if (dp_manifest_read(p, &m, &err) != DP_OK) fail_msg("%s", err.msg);
        assert_string_equal(m->recipe, recipes[i]);
        assert_non_null(strstr(m->model, "synthetic/"));
        assert_true(m->n_hints > 0);
        dp_manifest_free(m);
    }
}

static void test_errors(void **state)
{
    (void)state;
    parse_fails("model: x\nmodle_path: y\n", DP_EINVAL, "unknown key 'modle_path'", "valid keys: name, model");
    parse_fails("model: x\nquantization: q3_xs\n", DP_EINVAL, "q3_xs", "valid values: f32, f16, bf16, q8_0");
    parse_fails("recipe: gemma3\n", DP_EINVAL, "'model' is missing", NULL);
    parse_fails("model: x\nmodel: y\n", DP_EINVAL, "given twice", NULL);
    parse_fails("model: x\nkernel_hints: [a, b]\n", DP_EFORMAT, "kernel_hints must be a mapping", NULL);
    parse_fails("model: x\nkernel_hints:\n  kv_dtype: [f16]\n", DP_EFORMAT, "plain value", NULL);
    parse_fails("model: x\nkernel_hints:\n  kv_dtype: f16\n  kv_dtype: f32\n", DP_EFORMAT, "given twice", NULL);
    parse_fails("model: [x]\n", DP_EFORMAT, "'model' must be a non-empty string", NULL);
    parse_fails("- model\n- x\n", DP_EFORMAT, "a manifest is a mapping", NULL);
    parse_fails("model: x\n  bad: : indent\n", DP_EFORMAT, "YAML", NULL);
    parse_fails("", DP_EFORMAT, "empty", NULL);
}

static void test_missing_file(void **state)
{
    (void)state;
    dp_manifest *m = (dp_manifest *)1;
    dp_err err = {0};
    assert_int_equal(dp_manifest_read("/nonexistent/none.yaml", &m, &err), DP_EIO);
    assert_null(m);
    assert_non_null(strstr(err.msg, "/nonexistent/none.yaml"));
    dp_manifest_pair *p = (dp_manifest_pair *)1;
    size_t n = 7;
    assert_int_equal(dp_manifest_read_pairs("/nonexistent/h.yaml", &p, &n, &err), DP_EIO);
    assert_null(p);
    assert_int_equal(n, 0);
}

/* The hints file's reader on text in memory (what the fuzz target drives). */
static void test_pairs_text(void **state)
{
    (void)state;
    dp_manifest_pair *p = NULL;
    size_t n = 0;
    dp_err err = {0};
    const char *ok = "kv_dtype: f16\n\ndecode_chunk: 8\n";
    if (dp_manifest_parse_pairs("h.yaml", ok, strlen(ok), &p, &n, &err) != DP_OK) fail_msg("%s", err.msg);
    assert_int_equal(n, 2);
    assert_string_equal(p[1].key, "decode_chunk");
    assert_int_equal(p[1].line, 3);
    dp_manifest_pairs_free(p, n);
    const char *twice = "a: 1\na: 2\n";
    p = (dp_manifest_pair *)1;
    assert_int_equal(dp_manifest_parse_pairs("h.yaml", twice, strlen(twice), &p, &n, &err), DP_EFORMAT);
    assert_null(p);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err.msg, "h.yaml:2"));
    assert_non_null(strstr(err.msg, "given twice"));
}

static void test_pairs_file(void **state)
{
    (void)state;
    char path[] = "/tmp/dp_hintsXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("matmul: gemv\nprefill_chunk: 16\n", f);
    fclose(f);
    dp_manifest_pair *p = NULL;
    size_t n = 0;
    dp_err err = {0};
    if (dp_manifest_read_pairs(path, &p, &n, &err) != DP_OK) fail_msg("%s", err.msg);
    assert_int_equal(n, 2);
    assert_string_equal(p[1].key, "prefill_chunk");
    assert_string_equal(p[1].value, "16");
    assert_int_equal(p[1].line, 2);
    dp_manifest_pairs_free(p, n);
    f = fopen(path, "w");
    fputs("- not\n- a mapping\n", f);
    fclose(f);
    assert_int_equal(dp_manifest_read_pairs(path, &p, &n, &err), DP_EFORMAT);
    assert_null(p);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),         cmocka_unit_test(test_minimal),      cmocka_unit_test(test_shipped),
        cmocka_unit_test(test_errors),       cmocka_unit_test(test_missing_file), cmocka_unit_test(test_pairs_file),
        cmocka_unit_test(test_pairs_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
