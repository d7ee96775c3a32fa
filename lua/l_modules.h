/*
** lua/l_modules.h: the binding files that fill the `doppler` Lua module.
** lua/host.c creates the module table and calls each register function with the table's stack
** index; each adds its functions and metatables (named "dp.<type>", checked with luaL_checkudata).
** Errors from core/ and gpu/ become Lua errors only through dp_lua_raise (lua/l_util.h), after
** everything of ours is released, because luaL_error longjmps.
*/
#ifndef DP_LUA_MODULES_H
#define DP_LUA_MODULES_H

#include <lua.h>

#include "core/formats/model_file.h"

/* The model userdata of lua/l_model.c. */
dp_model *dp_lua_check_model(lua_State *L, int idx);

/* Calls every register function below, in dependency order. */
void dp_lua_register_all(lua_State *L, int module);

void dp_lua_register_gpu(lua_State *L, int module);        /* lua/l_gpu*.c: devices, tensors, kernels, recorders */
void dp_lua_register_model(lua_State *L, int module);      /* lua/l_model.c: model files, configs, tensors on the host */
void dp_lua_register_write(lua_State *L, int module);      /* lua/l_write.c: write_safetensors (synthetic models) */
void dp_lua_register_math(lua_State *L, int module);       /* lua/l_math.c: round_to, rope_inv_freq, sample_cpu */
void dp_lua_register_upload(lua_State *L, int module);     /* lua/l_upload.c: dev:upload_model_tensor (after gpu and model) */
void dp_lua_register_tokenizer(lua_State *L, int module);  /* lua/l_tokenizer.c: encode, decode, chat templates */
void dp_lua_register_convert(lua_State *L, int module);    /* lua/l_convert.c: gguf_write (doppler convert), quantize */
void dp_lua_register_manifest(lua_State *L, int module);   /* lua/l_manifest.c: read_manifest, read_hints_file */

#endif
