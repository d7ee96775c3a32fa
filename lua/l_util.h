/*
** lua/l_util.h: small helpers shared by the binding files.
*/
#ifndef DP_LUA_UTIL_H
#define DP_LUA_UTIL_H

#include <lua.h>
#include <lauxlib.h>

#include "core/status.h"

/* Raises err as a Lua error (luaL_error adds the recipe's file:line). Never returns. Call it only
** when nothing of ours is live on the C stack. */
int dp_lua_raise(lua_State *L, const dp_err *err);

#endif
