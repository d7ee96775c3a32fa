/*
** gpu/paths.h: where doppler's own files are. The home directory holds shaders/ (and later
** recipes/): $DOPPLER_HOME, else the directory above the running executable (/proc/self/exe),
** else the source tree it was built from (DOPPLER_SOURCE_DIR); the first that contains
** shaders/include/dp_common.glsl wins.
*/
#ifndef DP_GPU_PATHS_H
#define DP_GPU_PATHS_H

#include <stddef.h>

#include "core/status.h"

dp_status dp_home_dir(char *out, size_t cap, dp_err *err);
dp_status dp_shaders_dir(char *out, size_t cap, dp_err *err);   /* dp_home_dir + "/shaders" */

#endif
