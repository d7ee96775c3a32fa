/*
** lua/l_gpu_parts.h: what the three files of the `doppler` module's GPU half share, private to them:
**   l_gpu.c           devices (dp.device) and the module's functions; registers the types
**   l_gpu_tensor.c    device tensors (dp.tensor)
**   l_gpu_recorder.c  kernels (dp.kernel) and recorders (dp.recorder)
** Other binding files use lua/l_gpu.h.
*/
#ifndef DP_LUA_GPU_PARTS_H
#define DP_LUA_GPU_PARTS_H

#include <lauxlib.h>
#include <lua.h>

#define MT_DEVICE   "dp.device"
#define MT_TENSOR   "dp.tensor"
#define MT_KERNEL   "dp.kernel"
#define MT_RECORDER "dp.recorder"

/* l_gpu.c: a metatable `name` whose __index holds `methods`, with __gc and __tostring where not NULL. */
void dp_lua_gpu_new_type(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc,
                         lua_CFunction tostring);

/* l_gpu_tensor.c: dev:tensor{dtype=, shape={...}, host=false}, and the dp.tensor type. */
int  dp_lua_device_tensor(lua_State *L);
void dp_lua_register_gpu_tensor(lua_State *L);

/* l_gpu_recorder.c: dev:kernel{...}, dev:recorder([opts]), and the dp.kernel and dp.recorder types. */
int  dp_lua_device_kernel(lua_State *L);
int  dp_lua_device_recorder(lua_State *L);
void dp_lua_register_gpu_recorder(lua_State *L);

#endif
