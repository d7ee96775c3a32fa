/*
** lua/cmd_shaders.c: `doppler shaders [--precompile] [--device N]`: lists the kernels under
** shaders/ and, with --precompile, compiles each with its default defines into the SPIR-V cache
** (so that a first run on a fresh machine starts without compiling). Counts compiled, already
** cached and failed files; any failure prints shaderc's log and exits 1.
*/
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpu/device.h"
#include "gpu/paths.h"
#include "gpu/shader.h"
#include "lua/commands.h"

#define MAX_SHADERS 4096

static void usage(FILE *f)
{
    fputs("usage: doppler shaders [--precompile] [--device N]\n"
          "  Lists every shaders/**/*.comp. --precompile compiles each with its default defines into\n"
          "  the SPIR-V cache ($DOPPLER_CACHE_DIR, else $XDG_CACHE_HOME/doppler, else ~/.cache/doppler),\n"
          "  keyed for device N (default: as `doppler` picks it), and prints how many were compiled,\n"
          "  found in the cache, or failed.\n", f);
}

typedef struct list {
    char *path[MAX_SHADERS];
    int   n;
} list;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends every *.comp under dir (relative to root) except include/. */
static void walk(const char *root, const char *rel, list *l)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s%s%s", root, rel[0] ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && l->n < MAX_SHADERS) {
        if (e->d_name[0] == '.') continue;
        char sub[PATH_MAX], full[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) >= (int)sizeof sub) continue;
        if (snprintf(full, sizeof full, "%s/%s", root, sub) >= (int)sizeof full) continue;
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (strcmp(sub, "include") != 0) walk(root, sub, l);
        } else {
            size_t n = strlen(sub);
            if (n > 5 && strcmp(sub + n - 5, ".comp") == 0) l->path[l->n++] = strdup(sub);
        }
    }
    closedir(d);
}

int dp_cmd_shaders(int argc, char **argv)
{
    bool precompile = false;
    int index = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--precompile") == 0) {
            precompile = true;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 0) {
                fprintf(stderr, "doppler shaders: --device wants an index, got '%s'\n", argv[i]);
                return 2;
            }
            index = (int)v;
        } else {
            fprintf(stderr, "doppler shaders: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    dp_err err = {0};
    char root[PATH_MAX];
    if (dp_shaders_dir(root, sizeof root, &err) != DP_OK) {
        fprintf(stderr, "doppler shaders: %s\n", err.msg);
        return 1;
    }
    list *l = calloc(1, sizeof *l);
    if (!l) return 1;
    walk(root, "", l);
    qsort(l->path, (size_t)l->n, sizeof l->path[0], by_name);
    int rc = 0;
    if (!precompile) {
        for (int i = 0; i < l->n; i++) printf("%s\n", l->path[i]);
        printf("%d shaders in %s\n", l->n, root);
    } else {
        /* The cache key includes the device, so the device is opened (no pipelines are built). */
        dp_device_opts o;
        dp_device_opts_default(&o);
        o.index = index;
        dp_device *dev = NULL;
        if (dp_device_open(&o, &dev, &err) != DP_OK) {
            fprintf(stderr, "doppler shaders: %s\n", err.msg);
            rc = 1;
        } else {
            dp_shader_cache *sc = dp_device_shaders(dev);
            int failed = 0;
            for (int i = 0; i < l->n; i++) {
                dp_shader_src src = {.file = l->path[i]};
                dp_spirv spv = {0};
                dp_err_clear(&err);
                if (dp_shader_compile(sc, &src, &spv, &err) != DP_OK) {
                    fprintf(stderr, "doppler shaders: %s: %s\n", l->path[i], err.msg);
                    failed++;
                }
                dp_spirv_free(&spv);
            }
            dp_shader_stats s;
            dp_shader_get_stats(sc, &s);
            printf("%d shaders: %llu compiled, %llu already cached, %d failed (cache: %s)\n", l->n,
                   (unsigned long long)s.compiles, (unsigned long long)s.disk_hits, failed, dp_shader_cache_dir(sc));
            rc = failed ? 1 : 0;
            dp_device_close(dev);
        }
    }
    for (int i = 0; i < l->n; i++) free(l->path[i]);
    free(l);
    return rc;
}
