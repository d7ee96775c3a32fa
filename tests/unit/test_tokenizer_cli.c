/*
** tests/unit/test_tokenizer_cli.c: `doppler tokenize` (lua/cmd_tokenize.c) called in-process with
** stdin and stdout redirected to files: the JSON it prints, --bos, --decode, and its errors.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lua/commands.h"

static const char *tok_path(void)
{
    static char path[1024];   /* written once per call with the same value */
    const char *f = getenv("DOPPLER_FIXTURES");
    snprintf(path, sizeof path, "%s/tokenizers/llama3.tokenizer.json.gz", f ? f : DOPPLER_SOURCE_DIR "/tests/fixtures");
    return path;
}

/* Runs the command with `input` on stdin; returns its exit status and what it printed. */
static int run(const char *input, char *out, size_t cap, int argc, char **argv)
{
    char in_path[] = "/tmp/dp_cli_in_XXXXXX", out_path[] = "/tmp/dp_cli_out_XXXXXX";
    int in_fd = mkstemp(in_path), out_fd = mkstemp(out_path);
    assert_true(in_fd >= 0 && out_fd >= 0);
    assert_int_equal(write(in_fd, input, strlen(input)), (ssize_t)strlen(input));
    lseek(in_fd, 0, SEEK_SET);
    fflush(stdout);
    int save_in = dup(0), save_out = dup(1);
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    clearerr(stdin);
    int rc = dp_cmd_tokenize(argc, argv);
    fflush(stdout);
    dup2(save_in, 0);
    dup2(save_out, 1);
    close(save_in);
    close(save_out);
    clearerr(stdin);
    lseek(out_fd, 0, SEEK_SET);
    ssize_t n = read(out_fd, out, cap - 1);
    out[n > 0 ? n : 0] = 0;
    close(in_fd);
    close(out_fd);
    unlink(in_path);
    unlink(out_path);
    return rc;
}

static void test_encode_decode(void **state)
{
    (void)state;
    char out[4096];
    char *enc[] = { "tokenize", "--tokenizer", (char *)tok_path() };
    assert_int_equal(run("Hello world", out, sizeof out, 3, enc), 0);
    assert_string_equal(out, "[9906, 1917]\n");
    char *bos[] = { "tokenize", "--tokenizer", (char *)tok_path(), "--bos" };
    assert_int_equal(run("Hello world", out, sizeof out, 4, bos), 0);
    assert_string_equal(out, "[128000, 9906, 1917]\n");
    assert_int_equal(run("", out, sizeof out, 3, enc), 0);
    assert_string_equal(out, "[]\n");
    char *dec[] = { "tokenize", "--tokenizer", (char *)tok_path(), "--decode" };
    assert_int_equal(run("[128000, 9906, 1917]", out, sizeof out, 4, dec), 0);
    assert_string_equal(out, "<|begin_of_text|>Hello world");
    char *skip[] = { "tokenize", "--tokenizer", (char *)tok_path(), "--decode", "--skip-special" };
    assert_int_equal(run("[128000, 9906, 1917]", out, sizeof out, 5, skip), 0);
    assert_string_equal(out, "Hello world");
}

static void test_errors(void **state)
{
    (void)state;
    char out[4096];
    char *dec[] = { "tokenize", "--tokenizer", (char *)tok_path(), "--decode" };
    assert_int_equal(run("{\"a\": 1}", out, sizeof out, 4, dec), 1);
    assert_int_equal(run("[1, -2]", out, sizeof out, 4, dec), 1);
    assert_int_equal(run("[1, 99999999]", out, sizeof out, 4, dec), 1);
    char *enc[] = { "tokenize", "--tokenizer", (char *)tok_path() };
    assert_int_equal(run("bad \xff utf-8", out, sizeof out, 3, enc), 1);
    assert_string_equal(out, "");
    char *missing[] = { "tokenize", "--tokenizer", "/nonexistent/tokenizer.json" };
    assert_int_equal(run("hi", out, sizeof out, 3, missing), 1);
    char *noarg[] = { "tokenize" };
    assert_int_equal(run("hi", out, sizeof out, 1, noarg), 1);
    char *help[] = { "tokenize", "--help" };
    assert_int_equal(run("", out, sizeof out, 2, help), 0);
    assert_non_null(strstr(out, "--tokenizer"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_decode),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
