/*
** gpu/shader.h: GLSL -> SPIR-V with shaderc at run time, and the on-disk SPIR-V cache.
** Target: Vulkan 1.2 (SPIR-V 1.5), optimised for performance, debug names kept (reflection
** needs OpName/OpMemberName). `#include "x"` is looked up in the including file's directory,
** then in shaders/include; `#include <x>` in shaders/include only.
** Cache: <dir>/<xxh3-128>.spv where the key covers the source, every resolved include's
** contents, the defines, the shaderc version + options and the device string; written to a
** temporary file and renamed so that a crash never leaves a torn entry.
** Compile errors => DP_ESHADER with shaderc's "file:line: error: ..." log.
*/
#ifndef DP_GPU_SHADER_H
#define DP_GPU_SHADER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dp_shader_cache dp_shader_cache;

typedef struct dp_shader_src {
    const char *file;     /* path: absolute, or relative to the shaders dir ("elementwise/add.comp") */
    const char *source;   /* GLSL text instead of a file (then `file` only names it in messages) */
    const char *const *defines;   /* "NAME=VALUE" or "NAME" */
    size_t      n_defines;
} dp_shader_src;

typedef struct dp_spirv {
    uint32_t *words;      /* malloc'ed */
    size_t    n_words;
} dp_spirv;

typedef struct dp_shader_stats {
    uint64_t compiles;     /* shaderc runs that produced SPIR-V */
    uint64_t failures;     /* shaderc runs that failed */
    uint64_t disk_hits;    /* served from the on-disk cache */
    uint64_t disk_writes;  /* entries written */
} dp_shader_stats;

/* cache_dir NULL: $DOPPLER_CACHE_DIR, else $XDG_CACHE_HOME/doppler, else ~/.cache/doppler (created
** if missing; a cache that cannot be written only costs compile time, a message goes to stderr once).
** shaders_dir: holds include/dp_common.glsl. device_key: e.g. "10de:2330:535.104" (may be "").
** device_define: NULL, or a define ("NAME" or "NAME=VALUE") given to every shader compiled for this device
** (gpu/device.c: DP_DEVICE_CPU on a CPU device; dp_common.glsl's DP_UNROLL reads it); part of the key. */
dp_status dp_shader_cache_create(const char *cache_dir, const char *shaders_dir, const char *device_key,
                                 const char *device_define, dp_shader_cache **out, dp_err *err);
void      dp_shader_cache_destroy(dp_shader_cache *sc);   /* NULL-safe */

dp_status dp_shader_compile(dp_shader_cache *sc, const dp_shader_src *src, dp_spirv *out, dp_err *err);
void      dp_spirv_free(dp_spirv *s);

void        dp_shader_get_stats(const dp_shader_cache *sc, dp_shader_stats *out);
const char *dp_shader_cache_dir(const dp_shader_cache *sc);
const char *dp_shader_dir(const dp_shader_cache *sc);

/* The cache directory the rules above pick (no device needed). */
dp_status dp_shader_default_cache_dir(char *out, size_t cap, dp_err *err);

#endif
