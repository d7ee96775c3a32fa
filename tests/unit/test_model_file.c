/*
** tests/unit/test_model_file.c: "open a model". Every fixture directory opens with the tensors
** its config implies; every fixture GGUF opens with a config equal (field by field) to the HF
** config it was made from, and its tensor names map to the HF names and shapes; `doppler inspect`
** prints and fails as it should; the Lua binding exposes the same.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "core/formats/json.h"
#include "core/formats/model_file.h"
#include "core/formats/tensor_names.h"
#include "lua/commands.h"
#include "lua/l_modules.h"
#include "test_model_expect.h"

static const char *const MODELS[] = {"gemma3-tiny", "gemma3-tiny-scaled", "llama3-tiny", "mistral-tiny",
                                     "mixtral-tiny", "phi3-tiny",   "qwen2-tiny",         "qwen3-tiny"};
static const char *const GGUFS[] = {"gguf/gemma3-q/model-Q8_0.gguf", "gguf/gemma3-q/model-Q4_0.gguf",
                                    "gguf/gemma3-q/model-Q5_0.gguf", "gguf/gemma3-q/model-Q4_K_M.gguf",
                                    "gguf/gemma3-q/model-Q5_K_M.gguf", "gguf/llama-q/model-Q8_0.gguf",
                                    "gguf/llama-q/model-Q4_K_M.gguf"};

static void fix(char *buf, size_t n, const char *rel)
{
    const char *root = getenv("DOPPLER_FIXTURES");
    snprintf(buf, n, "%s/%s", root ? root : "tests/fixtures", rel);
}

static expect_tensor want[1024];

static void test_hf_dirs(void **state)
{
    (void)state;
    for (size_t m = 0; m < DP_ARRAY_LEN(MODELS); m++) {
        char rel[128], dir[512];
        snprintf(rel, sizeof rel, "models/%s", MODELS[m]);
        fix(dir, sizeof dir, rel);
        dp_err err = {0};
        dp_model *mdl;
        if (dp_model_open(dir, &mdl, &err) != DP_OK) fail_msg("%s", err.msg);
        assert_int_equal(dp_model_kind_of(mdl), DP_MODEL_SAFETENSORS);
        const dp_hfconfig *c = dp_model_config(mdl);
        assert_non_null(c);
        size_t n = expect_hf_tensors(c, want, DP_ARRAY_LEN(want));
        assert_int_equal(dp_model_tensor_count(mdl), n);
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++) {
            const dp_model_tensor *t = dp_model_find(mdl, want[i].name);
            if (!t) fail_msg("%s: no %s", dir, want[i].name);
            assert_int_equal(t->ndim, want[i].ndim);
            for (int d = 0; d < t->ndim; d++) assert_int_equal(t->shape[d], want[i].shape[d]);
            assert_string_equal(t->type_name, "f32");
            total += t->bytes;
        }
        assert_int_equal(dp_model_total_bytes(mdl), total);
        assert_true(dp_model_genconfig(mdl)->present);
        assert_false(dp_model_tokconfig(mdl)->present);
        assert_null(dp_model_tokenizer_json(mdl));
        assert_null(dp_model_gguf(mdl));
        dp_model_close(mdl);
    }
}

static void test_single_file_without_config(void **state)
{
    (void)state;
    char p[512];
    fix(p, sizeof p, "models/gemma3-tiny/model-bf16.safetensors");
    dp_err err = {0};
    dp_model *m;
    assert_int_equal(dp_model_open(p, &m, &err), DP_OK);
    assert_non_null(dp_model_config(m));   /* config.json sits beside it */
    assert_string_equal(dp_model_find(m, "model.norm.weight")->type_name, "bf16");
    assert_int_equal(dp_model_find(m, "model.norm.weight")->dtype, DP_BF16);
    dp_model_close(m);
}

static void test_gguf_config_matches_hf(void **state)
{
    (void)state;
    for (size_t f = 0; f < DP_ARRAY_LEN(GGUFS); f++) {
        char p[512], hp[512], rel[128];
        fix(p, sizeof p, GGUFS[f]);
        snprintf(rel, sizeof rel, "%.*s/hf_config.json", (int)(strrchr(GGUFS[f], '/') - GGUFS[f]), GGUFS[f]);
        fix(hp, sizeof hp, rel);
        dp_err err = {0};
        dp_model *m;
        dp_hfconfig h;
        if (dp_model_open(p, &m, &err) != DP_OK) fail_msg("%s", err.msg);
        assert_int_equal(dp_hfconfig_read(hp, &h, &err), DP_OK);
        assert_int_equal(dp_model_kind_of(m), DP_MODEL_GGUF);
        const dp_hfconfig *g = dp_model_config(m);
        assert_string_equal(g->model_type, h.model_type);
        assert_int_equal(g->hidden_size, h.hidden_size);
        assert_int_equal(g->intermediate_size, h.intermediate_size);
        assert_int_equal(g->num_hidden_layers, h.num_hidden_layers);
        assert_int_equal(g->num_attention_heads, h.num_attention_heads);
        assert_int_equal(g->num_key_value_heads, h.num_key_value_heads);
        assert_int_equal(g->head_dim, h.head_dim);
        assert_int_equal(g->vocab_size, h.vocab_size);
        assert_int_equal(g->max_position_embeddings, h.max_position_embeddings);
        assert_true((float)g->rms_norm_eps == (float)h.rms_norm_eps);   /* GGUF stores f32 */
        assert_true(g->rope_theta == h.rope_theta && g->rope_local_theta == h.rope_local_theta);
        assert_string_equal(g->rope_scaling.type, h.rope_scaling.type);
        assert_int_equal(g->sliding_window, h.sliding_window);
        assert_memory_equal(g->layer_types, h.layer_types, (size_t)h.num_hidden_layers * sizeof *h.layer_types);
        if (h.query_pre_attn_scalar) assert_true(g->query_pre_attn_scalar == h.query_pre_attn_scalar);
        assert_int_equal(g->tie_word_embeddings, h.tie_word_embeddings);
        assert_string_equal(g->hidden_activation, h.hidden_activation);
        assert_int_equal(g->bos_token_id, h.bos_token_id);
        assert_int_equal(g->n_eos, h.n_eos);
        assert_int_equal(g->eos_token_ids[0], h.eos_token_ids[0]);
        assert_null(g->raw);

        /* Every GGUF tensor is an HF tensor under its mapped name, with the reversed shape. */
        char arch[32];
        assert_true(dp_gguf_get_string(dp_model_gguf(m), "general.architecture", arch, sizeof arch));
        size_t n = expect_hf_tensors(&h, want, DP_ARRAY_LEN(want));
        assert_int_equal(dp_model_tensor_count(m), n);
        for (size_t i = 0; i < dp_model_tensor_count(m); i++) {
            const dp_model_tensor *t = dp_model_tensor_at(m, i);
            char hf[128], back[128];
            if (!dp_tensor_name_gguf_to_hf(arch, t->name, hf, sizeof hf)) fail_msg("%s: %s does not map", p, t->name);
            assert_true(dp_tensor_name_hf_to_gguf(arch, hf, back, sizeof back));
            assert_string_equal(back, t->name);
            size_t k = 0;
            while (k < n && strcmp(want[k].name, hf) != 0) k++;
            if (k == n) fail_msg("%s: %s -> %s is not a tensor of this model", p, t->name, hf);
            assert_int_equal(t->ndim, want[k].ndim);
            for (int d = 0; d < t->ndim; d++) assert_int_equal(t->shape[d], want[k].shape[d]);
            want[k].name[0] = 0;   /* each HF tensor once */
        }
        dp_hfconfig_free(&h);
        dp_model_close(m);
    }
}

static void test_name_table(void **state)
{
    (void)state;
    char b[128];
    assert_true(dp_tensor_name_gguf_to_hf("gemma3", "blk.12.ffn_norm.weight", b, sizeof b));
    assert_string_equal(b, "model.layers.12.pre_feedforward_layernorm.weight");
    assert_true(dp_tensor_name_gguf_to_hf("llama", "blk.3.ffn_norm.weight", b, sizeof b));
    assert_string_equal(b, "model.layers.3.post_attention_layernorm.weight");
    assert_true(dp_tensor_name_gguf_to_hf("qwen2", "blk.0.attn_q.bias", b, sizeof b));
    assert_string_equal(b, "model.layers.0.self_attn.q_proj.bias");
    assert_true(dp_tensor_name_hf_to_gguf("gemma3", "model.layers.5.post_feedforward_layernorm.weight", b, sizeof b));
    assert_string_equal(b, "blk.5.post_ffw_norm.weight");
    assert_true(dp_tensor_name_hf_to_gguf("llama", "lm_head.weight", b, sizeof b));
    assert_string_equal(b, "output.weight");
    assert_false(dp_tensor_name_gguf_to_hf("llama", "blk.0.ffn_gate_exps.weight", b, sizeof b));
    assert_false(dp_tensor_name_gguf_to_hf("falcon", "token_embd.weight", b, sizeof b));
    assert_false(dp_tensor_name_gguf_to_hf("llama", "blk.x.attn_q.weight", b, sizeof b));
    assert_false(dp_tensor_name_gguf_to_hf("llama", "blk.0.attn_q.weight", b, 10));   /* too short */
    assert_string_equal(b, "");
}

static void test_open_errors(void **state)
{
    (void)state;
    char p[512];
    dp_err err = {0};
    dp_model *m = (dp_model *)1;
    fix(p, sizeof p, "tokenizers");
    assert_int_equal(dp_model_open(p, &m, &err), DP_EFORMAT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "config.json"));
    char tmp[] = "/tmp/dp_bad_XXXXXX.gguf";
    int fd = mkstemps(tmp, 5);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "GGUF\x07\0\0\0 and some more bytes to pass 24", 40), 40);
    close(fd);
    dp_err_clear(&err);
    assert_int_equal(dp_model_open(tmp, &m, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, tmp));
    assert_non_null(strstr(err.msg, "version 7"));
    unlink(tmp);
    dp_err_clear(&err);
    assert_int_equal(dp_model_open("/nonexistent", &m, &err), DP_EIO);
}

/* Runs `doppler inspect` with stdout captured into a malloc'd string. */
static int run_inspect(int argc, char **argv, char **out)
{
    char tmp[] = "/tmp/dp_inspect_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = dp_cmd_inspect(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    off_t len = lseek(fd, 0, SEEK_END);
    *out = calloc((size_t)len + 1, 1);
    assert_int_equal(pread(fd, *out, (size_t)len, 0), len);
    close(fd);
    unlink(tmp);
    return rc;
}

static void test_inspect(void **state)
{
    (void)state;
    char p[512], *out;
    fix(p, sizeof p, "gguf/gemma3-q/model-Q4_K_M.gguf");
    char *a1[] = {"inspect", p};
    assert_int_equal(run_inspect(2, a1, &out), 0);
    assert_non_null(strstr(out, "token_embd.weight"));
    assert_non_null(strstr(out, "q6_K"));
    assert_non_null(strstr(out, "[512, 256]"));
    assert_non_null(strstr(out, "(512 total)"));   /* the token list is abbreviated */
    assert_non_null(strstr(out, "general.file_type"));
    free(out);
    char *a2[] = {"inspect", p, "--json"};
    assert_int_equal(run_inspect(3, a2, &out), 0);
    struct json_object *o;
    dp_err err = {0};
    assert_int_equal(dp_json_parse_object("inspect output", out, strlen(out), &o, &err), DP_OK);
    assert_int_equal(json_object_array_length(dp_json_get(o, "tensors")), 80);
    assert_string_equal(dp_json_get_string(o, "kind", ""), "gguf");
    assert_int_equal(dp_json_get_int(dp_json_get(o, "config"), "hidden_size", 0), 256);
    json_object_put(o);
    free(out);
    fix(p, sizeof p, "models/qwen2-tiny");
    char *a3[] = {"inspect", p};
    assert_int_equal(run_inspect(2, a3, &out), 0);
    assert_non_null(strstr(out, "model.layers.0.self_attn.q_proj.bias"));
    assert_non_null(strstr(out, "total: "));
    free(out);
    char *a4[] = {"inspect", "/nonexistent/model"};
    assert_int_equal(run_inspect(2, a4, &out), 1);
    free(out);
    char *a5[] = {"inspect", "--help"};
    assert_int_equal(run_inspect(2, a5, &out), 0);
    assert_non_null(strstr(out, "usage"));
    free(out);
    char *a6[] = {"inspect"};
    assert_int_equal(run_inspect(1, a6, &out), 1);
    free(out);
}

static void test_lua_binding(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_newtable(L);
    dp_lua_register_model(L, -1);
    lua_setglobal(L, "doppler");
    char root[512];
    fix(root, sizeof root, "");
    lua_pushstring(L, root);
    lua_setglobal(L, "FIX");
    const char *script =
        "local m = doppler.open_model(FIX .. 'models/gemma3-tiny-scaled')\n"
        "assert(m:kind() == 'safetensors')\n"
        "local c = m:config()\n"
        "assert(c.hidden_size == 64 and c.num_key_value_heads == 2 and c.head_dim == 16)\n"
        "assert(c.layer_types[6] == 'full_attention' and c.layer_types[1] == 'sliding_attention')\n"
        "assert(c.rope_scaling.rope_type == 'linear' and c.rope_scaling.factor == 8)\n"
        "assert(c.raw.rope_parameters.full_attention.rope_theta == 1000000.0)\n"
        "assert(c.raw.final_logit_softcapping == nil and c.eos_token_ids[1] == 1)\n"
        "local ts = m:tensors()\n"
        "assert(#ts == 80)\n"
        "local t = m:tensor('model.embed_tokens.weight')\n"
        "assert(t.dtype == 'f32' and t.shape[1] == 512 and t.shape[2] == 64 and t.bytes == 131072)\n"
        "assert(m:tensor('nope') == nil)\n"
        "assert(m:metadata().format == 'pt')\n"
        "assert(m:generation_config().bos_token_id == 2)\n"
        "assert(tostring(m):find('80 tensors'))\n"
        "m:close()\n"
        "assert(not pcall(m.tensors, m))\n"
        "local g = doppler.open_model(FIX .. 'gguf/llama-q/model-Q8_0.gguf')\n"
        "assert(g:kind() == 'gguf')\n"
        "local md = g:metadata()\n"
        "assert(md['general.architecture'] == 'llama' and #md['tokenizer.ggml.tokens'] == 512)\n"
        "assert(md['tokenizer.ggml.tokens'][3] == '<bos>')\n"
        "assert(g:config().raw == nil and g:config().tie_word_embeddings == false)\n"
        "assert(g:tensor('output.weight').dtype == 'q8_0')\n"
        "local ok, e = pcall(doppler.open_model, FIX .. 'tokenizers')\n"
        "assert(not ok and e:find('config.json'))\n"
        "local j = doppler.read_json(FIX .. 'models/llama3-tiny/config.json')\n"
        "assert(j.rope_parameters.rope_type == 'llama3' and j.architectures[1] == 'LlamaForCausalLM')\n"
        "ok, e = pcall(doppler.read_json, FIX .. 'README.md')\n"
        "assert(not ok and e:find('README.md'))\n";
    if (luaL_dostring(L, script) != LUA_OK) fail_msg("%s", lua_tostring(L, -1));
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_dirs),        cmocka_unit_test(test_single_file_without_config),
        cmocka_unit_test(test_gguf_config_matches_hf), cmocka_unit_test(test_name_table),
        cmocka_unit_test(test_open_errors),    cmocka_unit_test(test_inspect),
        cmocka_unit_test(test_lua_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
