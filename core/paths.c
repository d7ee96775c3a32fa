/*
** core/paths.c: see paths.h.
*/
#include "core/paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_home(const char *dir)
{
    char probe[PATH_MAX];
    struct stat st;
    if (snprintf(probe, sizeof probe, "%s/shaders/include/dp_common.glsl", dir) >= (int)sizeof probe)
        return false;
    return stat(probe, &st) == 0;
}

static bool take(char *out, size_t out_size, const char *dir)
{
    char real[PATH_MAX];
    if (!dir || !*dir || !is_home(dir)) return false;
    const char *use = realpath(dir, real) ? real : dir;
    snprintf(out, out_size, "%s", use);
    return true;
}

bool dp_home_find(char *out, size_t out_size)
{
    if (take(out, out_size, getenv("DOPPLER_HOME"))) return true;

    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char up[PATH_MAX + 4];
            snprintf(up, sizeof up, "%s/..", exe);
            if (take(out, out_size, up) || take(out, out_size, exe)) return true;
        }
    }
#ifdef DOPPLER_SOURCE_DIR
    if (take(out, out_size, DOPPLER_SOURCE_DIR)) return true;
    snprintf(out, out_size, "%s", DOPPLER_SOURCE_DIR);
#else
    snprintf(out, out_size, ".");
#endif
    return false;
}

void dp_cache_dir(char *out, size_t out_size)
{
    const char *v;
    if ((v = getenv("DOPPLER_CACHE_DIR")) && *v) snprintf(out, out_size, "%s", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) snprintf(out, out_size, "%s/doppler", v);
    else if ((v = getenv("HOME")) && *v) snprintf(out, out_size, "%s/.cache/doppler", v);
    else snprintf(out, out_size, "/tmp/doppler-cache");
}

bool dp_mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return false;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return false;
    struct stat st;
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode);
}
