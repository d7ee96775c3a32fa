/*
** lua/commands.h: the `doppler SUBCOMMAND` entry points. Each takes the subcommand's own argv
** (argv[0] is the subcommand name), prints --help on request, and returns the process exit status.
** lua/main.c dispatches to them; a script path (FILE.lua) or no argument goes to the Lua host instead.
*/
#ifndef DP_LUA_COMMANDS_H
#define DP_LUA_COMMANDS_H

int dp_cmd_devices(int argc, char **argv);   /* lua/cmd_devices.c: list Vulkan devices + capabilities */
int dp_cmd_shaders(int argc, char **argv);   /* lua/cmd_shaders.c: --precompile warms the SPIR-V cache */
int dp_cmd_inspect(int argc, char **argv);   /* lua/cmd_inspect.c: model metadata + tensor table */
int dp_cmd_tokenize(int argc, char **argv);  /* lua/cmd_tokenize.c: text <-> ids as JSON */

#endif
