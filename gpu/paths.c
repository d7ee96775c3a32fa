/*
** gpu/paths.c: finding doppler's home directory (see paths.h).
*/
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/paths.h"

#define MARKER "/shaders/include/dp_common.glsl"

static bool has_marker(const char *dir)
{
    char p[PATH_MAX + 64];
    if (!dir || !*dir) return false;
    snprintf(p, sizeof p, "%s" MARKER, dir);
    return access(p, R_OK) == 0;
}

static dp_status put(char *out, size_t cap, const char *dir, dp_err *err)
{
    char real[PATH_MAX];
    const char *d = realpath(dir, real) ? real : dir;
    if (strlen(d) + 1 > cap) return DP_FAIL(err, DP_EINVAL, "doppler home path too long: %s", d);
    memcpy(out, d, strlen(d) + 1);
    return DP_OK;
}

dp_status dp_home_dir(char *out, size_t cap, dp_err *err)
{
    const char *env = getenv("DOPPLER_HOME");
    if (has_marker(env)) return put(out, cap, env, err);

    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 4);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            strcpy(slash, "/..");
            if (has_marker(exe)) return put(out, cap, exe, err);
            *slash = 0;           /* tests live one level deeper than the executable (build/) */
            strcat(exe, "/../..");
            if (has_marker(exe)) return put(out, cap, exe, err);
        }
    }
#ifdef DOPPLER_SOURCE_DIR
    if (has_marker(DOPPLER_SOURCE_DIR)) return put(out, cap, DOPPLER_SOURCE_DIR, err);
#endif
    return DP_FAIL(err, DP_EIO, "cannot find doppler's shaders (no " MARKER " under $DOPPLER_HOME=%s, next to the "
                   "executable or in the source tree); set DOPPLER_HOME to the doppler directory",
                   env ? env : "(unset)");
}

dp_status dp_shaders_dir(char *out, size_t cap, dp_err *err)
{
    dp_status st = dp_home_dir(out, cap, err);
    if (st != DP_OK) return st;
    size_t n = strlen(out);
    if (n + sizeof "/shaders" > cap) return DP_FAIL(err, DP_EINVAL, "doppler home path too long: %s", out);
    memcpy(out + n, "/shaders", sizeof "/shaders");
    return DP_OK;
}
