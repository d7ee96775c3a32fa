/*
** tests/unit/test_tokenizer_lua.c: the Lua binding (lua/l_tokenizer.c) in a bare Lua state, since the
** host (lua/host.c) registers it the same way: encode/decode/decoder/lookups/chat and error paths.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>

#include "lua/l_modules.h"

static const char SCRIPT[] =
    "local dir = ...\n"
    "local tok = doppler.tokenizer(dir .. '/tokenizers/gemma3.tokenizer.json.gz')\n"
    "assert(tostring(tok):find('spm%-bpe'))\n"
    "local ids = tok:encode('Hello world')\n"
    "assert(#ids == 2, #ids)\n"
    "local with = tok:encode('Hello world', {bos = true})\n"
    "assert(#with == 3 and with[1] == 2 and with[2] == ids[1])\n"
    "assert(tok:decode(with) == '<bos>Hello world')\n"
    "assert(tok:decode(with, {skip_special = true}) == 'Hello world')\n"
    "assert(tok:vocab_size() == 262145 and tok:bos() == 2)\n"
    "local eos = tok:eos(); assert(#eos == 2 and eos[1] == 1 and eos[2] == 106)\n"
    "assert(tok:id('<end_of_turn>') == 106 and tok:token(106) == '<end_of_turn>' and tok:id('no such piece') == nil)\n"
    "assert(#tok:special() == 9)\n"
    "local d, out = tok:decoder(), {}\n"
    "for _, id in ipairs(tok:encode('日本語 😀 text')) do out[#out + 1] = d:push(id) end\n"
    "out[#out + 1] = d:finish()\n"
    "assert(table.concat(out) == '日本語 😀 text')\n"
    "local text, has_bos = tok:chat({{role = 'system', content = 'Be brief.'}, {role = 'user', content = 'Hi'}})\n"
    "assert(text == '<bos><start_of_turn>user\\nBe brief.\\n\\nHi<end_of_turn>\\n<start_of_turn>model\\n', text)\n"
    "assert(has_bos == true)\n"
    "local t2 = tok:chat({{role = 'user', content = 'Hi'}}, {template = 'chatml', add_generation_prompt = false})\n"
    "assert(t2 == '<|im_start|>user\\nHi<|im_end|>\\n')\n"
    "local ok, err = pcall(tok.chat, tok, {{role = 'user', content = 'a'}, {role = 'user', content = 'b'}})\n"
    "assert(not ok and tostring(err):find('alternate'))\n"
    "ok, err = pcall(tok.decode, tok, {1, 99999999})\n"
    "assert(not ok and tostring(err):find('out of range'))\n"
    "ok, err = pcall(tok.encode, tok, 'bad \\xff')\n"
    "assert(not ok and tostring(err):find('UTF%-8'))\n"
    "ok, err = pcall(doppler.tokenizer, dir .. '/nonexistent.json')\n"
    "assert(not ok and tostring(err):find('nonexistent.json'))\n"
    "return 'ok'\n";

static void test_lua_binding(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_newtable(L);
    dp_lua_register_tokenizer(L, -1);
    lua_setglobal(L, "doppler");
    const char *f = getenv("DOPPLER_FIXTURES");
    if (luaL_loadstring(L, SCRIPT) != LUA_OK) fail_msg("load: %s", lua_tostring(L, -1));
    lua_pushstring(L, f ? f : DOPPLER_SOURCE_DIR "/tests/fixtures");
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) fail_msg("script: %s", lua_tostring(L, -1));
    assert_string_equal(lua_tostring(L, -1), "ok");
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_lua_binding) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
