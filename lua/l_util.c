/*
** lua/l_util.c: see l_util.h.
*/
#include "lua/l_util.h"

int dp_lua_raise(lua_State *L, const dp_err *err)
{
    return luaL_error(L, "%s", err->msg[0] ? err->msg : dp_status_name(err->status));
}
