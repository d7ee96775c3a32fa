/*
** tests/unit/test_gpu_cli.c: `doppler devices` and `doppler shaders` as functions: exit codes, the
** JSON form, and --precompile filling a fresh cache so that a second run compiles nothing.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lua/commands.h"

/* Runs f(argc, argv) with stdout going to a temporary file; returns its exit code, output in buf. */
static int capture(int (*f)(int, char **), int argc, char **argv, char *buf, size_t cap)
{
    fflush(stdout);
    int saved = dup(1);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    dup2(fileno(tmp), 1);
    int rc = f(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, cap - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    return rc;
}

static void test_devices(void **state)
{
    (void)state;
    static char out[65536];
    char *a1[] = {"devices"};
    assert_int_equal(capture(dp_cmd_devices, 1, a1, out, sizeof out), 0);
    assert_non_null(strstr(out, "device 0:"));
    assert_non_null(strstr(out, "subgroup size"));
    assert_non_null(strstr(out, "conditional rendering"));
    char *a2[] = {"devices", "--json"};
    assert_int_equal(capture(dp_cmd_devices, 2, a2, out, sizeof out), 0);
    assert_true(out[0] == '[');
    assert_non_null(strstr(out, "\"subgroup_size\": "));
    assert_non_null(strstr(out, "\"conditional_rendering\": "));
    char *a3[] = {"devices", "--help"};
    assert_int_equal(capture(dp_cmd_devices, 2, a3, out, sizeof out), 0);
    assert_non_null(strstr(out, "usage"));
    char *a4[] = {"devices", "--bogus"};
    assert_int_equal(capture(dp_cmd_devices, 2, a4, out, sizeof out), 2);
}

static void test_shaders_precompile(void **state)
{
    (void)state;
    static char out[65536];
    char dir[] = "/tmp/doppler-precompile-XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("DOPPLER_CACHE_DIR", dir, 1);
    char *list[] = {"shaders"};
    assert_int_equal(capture(dp_cmd_shaders, 1, list, out, sizeof out), 0);
    assert_non_null(strstr(out, "elementwise/add.comp"));
    assert_null(strstr(out, "include/"));
    char *pre[] = {"shaders", "--precompile"};
    assert_int_equal(capture(dp_cmd_shaders, 2, pre, out, sizeof out), 0);
    if (!strstr(out, " 0 already cached, 0 failed")) fail_msg("first precompile: %s", out);
    assert_int_equal(capture(dp_cmd_shaders, 2, pre, out, sizeof out), 0);
    if (!strstr(out, ": 0 compiled,")) fail_msg("second precompile: %s", out);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_shaders_precompile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
