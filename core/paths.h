/*
** core/paths.h: where doppler finds its own files (shaders/, lua/lib/, recipes/, models/) and
** where it caches compiled SPIR-V. One build directory must run from anywhere, including a copy
** of the tree on another machine, so nothing depends on the current directory.
*/
#ifndef DP_CORE_PATHS_H
#define DP_CORE_PATHS_H

#include <stdbool.h>
#include <stddef.h>

/* The first of: $DOPPLER_HOME; the executable's dir + "/.." (build/doppler -> repo); its dir;
** the compile-time source dir — that contains shaders/include/dp_common.glsl.
** Falls back to the source dir. Always NUL-terminates out. Returns false when none qualified. */
bool dp_home_find(char *out, size_t out_size);

/* $DOPPLER_CACHE_DIR, else $XDG_CACHE_HOME/doppler, else $HOME/.cache/doppler, else /tmp/doppler-cache.
** The directory is not created here. */
void dp_cache_dir(char *out, size_t out_size);

/* Creates a directory and its parents (mode 0755); true if it exists afterwards. */
bool dp_mkdir_p(const char *path);

#endif
