/*
** lua/l_gpu.h: the userdata of lua/l_gpu.c and lua/l_gpu_tensor.c, for other binding files that take or
** return device objects (model uploads, samplers).
*/
#ifndef DP_LUA_GPU_H
#define DP_LUA_GPU_H

#include <lua.h>
#include <stdbool.h>

#include "gpu/device.h"
#include "gpu/tensor.h"

typedef struct dp_lua_device {
    dp_device *dev;     /* NULL once closed */
} dp_lua_device;

typedef struct dp_lua_tensor {
    dp_gtensor *t;      /* NULL once released */
    bool        is_u32; /* stored as i32; read and written as unsigned */
} dp_lua_tensor;

dp_lua_tensor *dp_lua_check_tensor(lua_State *L, int idx);
dp_lua_device *dp_lua_check_device(lua_State *L, int idx);
/* Pushes a tensor userdata owning gt; the value at `owner` (the device or a parent tensor) is kept alive. */
dp_lua_tensor *dp_lua_push_tensor(lua_State *L, dp_gtensor *gt, bool is_u32, int owner);

#endif
