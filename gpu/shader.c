/*
** gpu/shader.c: runtime GLSL -> SPIR-V (shaderc) with an on-disk cache keyed by xxh3-128 (see
** shader.h). The key is computed without compiling: the #include lines are followed by a small
** scan (every include named in the text counts, even one behind an #if: a spurious miss at worst).
*/
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shaderc/shaderc.h>
#include <xxhash.h>

#include "gpu/reflect.h"
#include "gpu/shader.h"

/* Bump when the options below change: old cache entries then simply miss. */
#define CACHE_FORMAT "doppler-spirv-2 vulkan1.2 spv1.5 O=performance g spec-defaults"
#define MAX_INCLUDE_DEPTH 16

struct dp_shader_cache {
    char              dir[PATH_MAX];      /* "" when no usable cache dir */
    char              shaders[PATH_MAX];
    char              include_dir[PATH_MAX];
    char              device_key[1024];
    char              device_define[128];  /* "" or a define every shader of this device gets */
    shaderc_compiler_t compiler;
    dp_shader_stats   st;
    bool              warned;
};

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            } else {
                buf[n] = 0;
                if (len) *len = (size_t)n;
            }
        }
    }
    fclose(f);
    return buf;
}

static dp_status mkdir_p(const char *dir)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return DP_EIO;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return DP_EIO;
    return DP_OK;
}

dp_status dp_shader_default_cache_dir(char *out, size_t cap, dp_err *err)
{
    const char *d = getenv("DOPPLER_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int n;
    if (d && *d) n = snprintf(out, cap, "%s", d);
    else if (x && *x) n = snprintf(out, cap, "%s/doppler", x);
    else if (h && *h) n = snprintf(out, cap, "%s/.cache/doppler", h);
    else return DP_FAIL(err, DP_EIO, "no cache directory: set DOPPLER_CACHE_DIR (HOME is unset)");
    if (n < 0 || (size_t)n >= cap) return DP_FAIL(err, DP_EINVAL, "cache directory path too long");
    return DP_OK;
}

dp_status dp_shader_cache_create(const char *cache_dir, const char *shaders_dir, const char *device_key,
                                 const char *device_define, dp_shader_cache **out, dp_err *err)
{
    dp_status st;
    *out = NULL;
    dp_shader_cache *sc = calloc(1, sizeof *sc);
    if (!sc) return DP_FAIL(err, DP_ENOMEM, "out of host memory creating the shader cache");
    if (cache_dir) snprintf(sc->dir, sizeof sc->dir, "%s", cache_dir);
    else if ((st = dp_shader_default_cache_dir(sc->dir, sizeof sc->dir, err)) != DP_OK) goto fail;
    if (mkdir_p(sc->dir) != DP_OK) {
        fprintf(stderr, "doppler: cannot create the SPIR-V cache %s (%s); shaders will be compiled every run\n",
                sc->dir, strerror(errno));
        sc->dir[0] = 0;
    }
    snprintf(sc->shaders, sizeof sc->shaders, "%s", shaders_dir);
    snprintf(sc->include_dir, sizeof sc->include_dir, "%s/include", shaders_dir);
    snprintf(sc->device_key, sizeof sc->device_key, "%s", device_key ? device_key : "");
    if (device_define && snprintf(sc->device_define, sizeof sc->device_define, "%s", device_define) >=
                             (int)sizeof sc->device_define) {
        st = DP_FAIL(err, DP_EINVAL, "device define too long: %s", device_define);
        goto fail;
    }
    sc->compiler = shaderc_compiler_initialize();
    if (!sc->compiler) { st = DP_FAIL(err, DP_ENOMEM, "shaderc_compiler_initialize failed"); goto fail; }
    *out = sc;
    return DP_OK;
fail:
    dp_shader_cache_destroy(sc);
    return st;
}

void dp_shader_cache_destroy(dp_shader_cache *sc)
{
    if (!sc) return;
    if (sc->compiler) shaderc_compiler_release(sc->compiler);
    free(sc);
}

void dp_spirv_free(dp_spirv *s)
{
    if (!s) return;
    free(s->words);
    s->words = NULL;
    s->n_words = 0;
}

void dp_shader_get_stats(const dp_shader_cache *sc, dp_shader_stats *out) { *out = sc->st; }
const char *dp_shader_cache_dir(const dp_shader_cache *sc) { return sc->dir; }
const char *dp_shader_dir(const dp_shader_cache *sc) { return sc->shaders; }

/* ---- include resolution, shared by the key scan and shaderc's callback ----------------------- */

static void dir_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) { snprintf(out, cap, "."); return; }
    snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/* relative ("x"): the requesting file's directory, then shaders/include; standard (<x>): include only. */
static bool resolve_include(const dp_shader_cache *sc, const char *name, const char *from, bool relative,
                            char *out, size_t cap)
{
    if (name[0] == '/') {
        snprintf(out, cap, "%s", name);
        return access(out, R_OK) == 0;
    }
    if (relative && from && strchr(from, '/')) {
        char d[PATH_MAX];
        dir_of(from, d, sizeof d);
        if (snprintf(out, cap, "%s/%s", d, name) < (int)cap && access(out, R_OK) == 0) return true;
    }
    return snprintf(out, cap, "%s/%s", sc->include_dir, name) < (int)cap && access(out, R_OK) == 0;
}

/* Hashes every file named by an #include in text, recursively. */
static void hash_includes(const dp_shader_cache *sc, XXH3_state_t *h, const char *text, const char *from, int depth)
{
    if (depth > MAX_INCLUDE_DEPTH) return;
    for (const char *p = text; p && *p;) {
        const char *line = p;
        p = strchr(p, '\n');
        if (p) p++;
        while (*line == ' ' || *line == '\t') line++;
        if (*line != '#') continue;
        line++;
        while (*line == ' ' || *line == '\t') line++;
        if (strncmp(line, "include", 7) != 0) continue;
        line += 7;
        while (*line == ' ' || *line == '\t') line++;
        char close = *line == '"' ? '"' : *line == '<' ? '>' : 0;
        if (!close) continue;
        const char *end = strchr(line + 1, close);
        if (!end || (p && end > p)) continue;
        char name[PATH_MAX], path[PATH_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(end - line - 1), line + 1);
        XXH3_128bits_update(h, name, strlen(name) + 1);
        if (!resolve_include(sc, name, from, close == '"', path, sizeof path)) continue;  /* shaderc reports it */
        size_t len = 0;
        char *body = read_file(path, &len);
        if (!body) continue;
        XXH3_128bits_update(h, body, len);
        hash_includes(sc, h, body, path, depth + 1);
        free(body);
    }
}

typedef struct inc_result {
    shaderc_include_result r;
    char  path[PATH_MAX];
    char *body;
    char  msg[PATH_MAX + 128];
} inc_result;

static shaderc_include_result *on_include(void *user, const char *requested, int type, const char *from, size_t depth)
{
    (void)depth;
    const dp_shader_cache *sc = user;
    inc_result *ir = calloc(1, sizeof *ir);
    if (!ir) return NULL;
    size_t len = 0;
    if (resolve_include(sc, requested, from, type == shaderc_include_type_relative, ir->path, sizeof ir->path))
        ir->body = read_file(ir->path, &len);
    if (ir->body) {
        ir->r.source_name = ir->path;
        ir->r.source_name_length = strlen(ir->path);
        ir->r.content = ir->body;
        ir->r.content_length = len;
    } else {
        /* An empty source_name tells shaderc the include failed; content carries the reason. */
        snprintf(ir->msg, sizeof ir->msg, "cannot find include '%s' (looked next to %s and in %s)", requested,
                 from, sc->include_dir);
        ir->r.content = ir->msg;
        ir->r.content_length = strlen(ir->msg);
    }
    ir->r.user_data = ir;
    return &ir->r;
}

static void on_include_release(void *user, shaderc_include_result *r)
{
    (void)user;
    if (!r) return;
    inc_result *ir = r->user_data;
    free(ir->body);
    free(ir);
}

/* ---- cache files ------------------------------------------------------------------------------- */

static bool cache_load(dp_shader_cache *sc, const char *key, dp_spirv *out)
{
    if (!sc->dir[0]) return false;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s.spv", sc->dir, key);
    size_t len = 0;
    char *buf = read_file(path, &len);
    if (!buf) return false;
    const uint32_t *w = (const uint32_t *)buf;
    if (len < 20 || len % 4 != 0 || w[0] != 0x07230203u) {   /* torn or foreign: recompile */
        free(buf);
        return false;
    }
    out->words = (uint32_t *)buf;
    out->n_words = len / 4;
    return true;
}

static void cache_store(dp_shader_cache *sc, const char *key, const dp_spirv *s)
{
    if (!sc->dir[0]) return;
    char path[PATH_MAX + 64], tmp[PATH_MAX + 96];
    snprintf(path, sizeof path, "%s/%s.spv", sc->dir, key);
    snprintf(tmp, sizeof tmp, "%s/.%s.%ld.tmp", sc->dir, key, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(s->words, 4, s->n_words, f) == s->n_words;
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) == 0) {
        sc->st.disk_writes++;
        return;
    }
    unlink(tmp);
    if (!sc->warned) {
        fprintf(stderr, "doppler: cannot write the SPIR-V cache entry %s (%s)\n", path, strerror(errno));
        sc->warned = true;
    }
}

/* ---- compile ----------------------------------------------------------------------------------- */

static void add_define(shaderc_compile_options_t o, const char *def)
{
    const char *eq = strchr(def, '=');
    if (eq) shaderc_compile_options_add_macro_definition(o, def, (size_t)(eq - def), eq + 1, strlen(eq + 1));
    else shaderc_compile_options_add_macro_definition(o, def, strlen(def), "1", 1);
}

static dp_status run_shaderc(dp_shader_cache *sc, const char *text, size_t len, const char *path,
                             shaderc_compile_options_t o, dp_spirv *out, dp_err *err)
{
    dp_status st = DP_OK;
    shaderc_compilation_result_t res = shaderc_compile_into_spv(sc->compiler, text, len, shaderc_compute_shader,
                                                                path, "main", o);
    if (!res || shaderc_result_get_compilation_status(res) != shaderc_compilation_status_success) {
        sc->st.failures++;
        const char *log = res ? shaderc_result_get_error_message(res) : "shaderc returned nothing";
        st = DP_FAIL(err, DP_ESHADER, "%s", log && *log ? log : "shader compilation failed (no log)");
        /* Drop the trailing newline so that messages print as one block. */
        size_t n = strlen(err ? err->msg : "");
        while (err && n && err->msg[n - 1] == '\n') err->msg[--n] = 0;
    } else {
        size_t bytes = shaderc_result_get_length(res);
        out->words = malloc(bytes ? bytes : 4);
        if (!out->words) {
            st = DP_FAIL(err, DP_ENOMEM, "out of host memory for %s's SPIR-V", path);
        } else {
            memcpy(out->words, shaderc_result_get_bytes(res), bytes);
            out->n_words = bytes / 4;
        }
    }
    if (res) shaderc_result_release(res);
    return st;
}

dp_status dp_shader_compile(dp_shader_cache *sc, const dp_shader_src *src, dp_spirv *out, dp_err *err)
{
    dp_status st = DP_OK;
    char path[PATH_MAX];
    char *text = NULL;
    size_t len = 0;
    shaderc_compile_options_t o = NULL;
    XXH3_state_t *h = NULL;
    dp_spirv plain = {0};
    dp_reflection refl;
    memset(out, 0, sizeof *out);

    if (src->source) {
        snprintf(path, sizeof path, "%s", src->file ? src->file : "<source>");
        text = strdup(src->source);
        len = text ? strlen(text) : 0;
        if (!text) return DP_FAIL(err, DP_ENOMEM, "out of host memory compiling %s", path);
    } else {
        if (!src->file) return DP_FAIL(err, DP_EINVAL, "shader: neither a file nor a source string given");
        if (src->file[0] == '/') snprintf(path, sizeof path, "%s", src->file);
        else if (snprintf(path, sizeof path, "%s/%s", sc->shaders, src->file) >= (int)sizeof path)
            return DP_FAIL(err, DP_EINVAL, "%s: shader path too long", src->file);
        text = read_file(path, &len);
        if (!text) return DP_FAIL(err, DP_EIO, "%s: cannot read shader (%s)", path, strerror(errno));
    }

    /* Key: everything that can change the SPIR-V. */
    unsigned spv_version = 0, spv_rev = 0;
    shaderc_get_spv_version(&spv_version, &spv_rev);
    h = XXH3_createState();
    if (!h) { st = DP_FAIL(err, DP_ENOMEM, "out of host memory hashing %s", path); goto done; }
    XXH3_128bits_reset(h);
    XXH3_128bits_update(h, CACHE_FORMAT, sizeof CACHE_FORMAT);
    XXH3_128bits_update(h, &spv_version, sizeof spv_version);
    XXH3_128bits_update(h, &spv_rev, sizeof spv_rev);
    XXH3_128bits_update(h, sc->device_key, strlen(sc->device_key) + 1);
    XXH3_128bits_update(h, sc->device_define, strlen(sc->device_define) + 1);
    XXH3_128bits_update(h, path, strlen(path) + 1);   /* names in messages, and #line paths */
    for (size_t i = 0; i < src->n_defines; i++)
        XXH3_128bits_update(h, src->defines[i], strlen(src->defines[i]) + 1);
    XXH3_128bits_update(h, "\1", 1);
    XXH3_128bits_update(h, text, len);
    hash_includes(sc, h, text, path, 0);
    XXH128_hash_t k = XXH3_128bits_digest(h);
    char key[33];
    snprintf(key, sizeof key, "%016llx%016llx", (unsigned long long)k.high64, (unsigned long long)k.low64);

    if (cache_load(sc, key, out)) {
        sc->st.disk_hits++;
        goto done;
    }

    o = shaderc_compile_options_initialize();
    if (!o) { st = DP_FAIL(err, DP_ENOMEM, "shaderc_compile_options_initialize failed"); goto done; }
    shaderc_compile_options_set_source_language(o, shaderc_source_language_glsl);
    shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compile_options_set_target_spirv(o, shaderc_spirv_version_1_5);
    shaderc_compile_options_set_include_callbacks(o, on_include, on_include_release, sc);
    if (sc->device_define[0]) add_define(o, sc->device_define);
    for (size_t i = 0; i < src->n_defines; i++) add_define(o, src->defines[i]);

    /* First unoptimised: the optimiser drops spec constants the code never reads, and with them
    ** the default of WG when only the workgroup size uses it (glslang gives local_size_x_id a
    ** constant of its own whose default is 1). The unoptimised module still has every named
    ** default; they are copied into the optimised one below. */
    shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_zero);
    if ((st = run_shaderc(sc, text, len, path, o, &plain, err)) != DP_OK) goto done;
    if ((st = dp_reflect(plain.words, plain.n_words, path, &refl, err)) != DP_OK) goto done;
    shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_performance);
    /* Without debug info the optimiser also strips OpName/OpMemberName, which reflection needs. */
    shaderc_compile_options_set_generate_debug_info(o);
    if ((st = run_shaderc(sc, text, len, path, o, out, err)) != DP_OK) goto done;
    dp_spirv_set_spec_defaults(out->words, out->n_words, &refl);
    sc->st.compiles++;
    cache_store(sc, key, out);
done:
    if (o) shaderc_compile_options_release(o);
    XXH3_freeState(h);
    dp_spirv_free(&plain);
    if (st != DP_OK) dp_spirv_free(out);
    free(text);
    return st;
}
