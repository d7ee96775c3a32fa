/*
** lua/l_modules.c: the list of binding files that fill the `doppler` module (see l_modules.h).
*/
#include "lua/l_modules.h"

void dp_lua_register_all(lua_State *L, int module)
{
    dp_lua_register_gpu(L, module);
    dp_lua_register_model(L, module);
    dp_lua_register_upload(L, module);
    dp_lua_register_tokenizer(L, module);
    dp_lua_register_write(L, module);
    dp_lua_register_math(L, module);
    dp_lua_register_convert(L, module);
    dp_lua_register_manifest(L, module);
}
