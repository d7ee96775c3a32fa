/*
** tests/unit/test_hfconfig.c: config.json normalisation. The transformers 4 and 5 forms of the
** same Gemma 3 model give identical configs; each family's fixture gives the values its file
** states (or transformers' defaults); generation_config.json and tokenizer_config.json read;
** bad configs give DP_EFORMAT naming the file.
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

#include "core/formats/hfconfig.h"
#include "core/formats/json.h"

static void fpath(char *buf, size_t n, const char *model, const char *file)
{
    const char *root = getenv("DOPPLER_FIXTURES");
    snprintf(buf, n, "%s/models/%s/%s", root ? root : "tests/fixtures", model, file);
}

static void read_cfg(const char *model, const char *file, dp_hfconfig *c)
{
    char p[512];
    dp_err err = {0};
    fpath(p, sizeof p, model, file);
    if (dp_hfconfig_read(p, c, &err) != DP_OK) fail_msg("%s", err.msg);
}

static void assert_scaling_equal(const dp_rope_scaling *a, const dp_rope_scaling *b)
{
    assert_string_equal(a->type, b->type);
    assert_true(a->factor == b->factor && a->low_freq_factor == b->low_freq_factor &&
                a->high_freq_factor == b->high_freq_factor && a->beta_fast == b->beta_fast &&
                a->beta_slow == b->beta_slow && a->attention_factor == b->attention_factor);
    assert_int_equal(a->original_max_position_embeddings, b->original_max_position_embeddings);
}

/* Every normalised field (raw excepted: the files differ). */
static void assert_config_equal(const dp_hfconfig *a, const dp_hfconfig *b)
{
    assert_string_equal(a->architecture, b->architecture);
    assert_string_equal(a->model_type, b->model_type);
    assert_int_equal(a->hidden_size, b->hidden_size);
    assert_int_equal(a->intermediate_size, b->intermediate_size);
    assert_int_equal(a->num_hidden_layers, b->num_hidden_layers);
    assert_int_equal(a->num_attention_heads, b->num_attention_heads);
    assert_int_equal(a->num_key_value_heads, b->num_key_value_heads);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->vocab_size, b->vocab_size);
    assert_int_equal(a->max_position_embeddings, b->max_position_embeddings);
    assert_true(a->rms_norm_eps == b->rms_norm_eps);
    assert_string_equal(a->hidden_activation, b->hidden_activation);
    assert_true(a->rope_theta == b->rope_theta && a->rope_local_theta == b->rope_local_theta);
    assert_scaling_equal(&a->rope_scaling, &b->rope_scaling);
    assert_scaling_equal(&a->rope_local_scaling, &b->rope_local_scaling);
    assert_true(a->partial_rotary_factor == b->partial_rotary_factor);
    assert_int_equal(a->sliding_window, b->sliding_window);
    assert_int_equal(a->sliding_window_pattern, b->sliding_window_pattern);
    assert_memory_equal(a->layer_types, b->layer_types, (size_t)a->num_hidden_layers * sizeof *a->layer_types);
    assert_true(a->query_pre_attn_scalar == b->query_pre_attn_scalar);
    assert_true(a->final_logit_softcapping == b->final_logit_softcapping);
    assert_true(a->attn_logit_softcapping == b->attn_logit_softcapping);
    assert_int_equal(a->tie_word_embeddings, b->tie_word_embeddings);
    assert_int_equal(a->attention_bias, b->attention_bias);
    assert_int_equal(a->mlp_bias, b->mlp_bias);
    assert_int_equal(a->num_local_experts, b->num_local_experts);
    assert_int_equal(a->num_experts_per_tok, b->num_experts_per_tok);
    assert_int_equal(a->bos_token_id, b->bos_token_id);
    assert_int_equal(a->pad_token_id, b->pad_token_id);
    assert_int_equal(a->n_eos, b->n_eos);
    assert_memory_equal(a->eos_token_ids, b->eos_token_ids, a->n_eos * sizeof *a->eos_token_ids);
}

static void test_v4_equals_v5(void **state)
{
    (void)state;
    const char *const models[] = {"gemma3-tiny", "gemma3-tiny-scaled"};
    for (int m = 0; m < 2; m++) {
        dp_hfconfig a, b;
        read_cfg(models[m], "config.json", &a);
        read_cfg(models[m], "config.v4.json", &b);
        assert_config_equal(&a, &b);
        assert_non_null(a.raw);
        assert_non_null(dp_json_get(a.raw, "rope_parameters"));
        assert_non_null(dp_json_get(b.raw, "rope_local_base_freq"));
        dp_hfconfig_free(&a);
        dp_hfconfig_free(&b);
    }
}

static void test_gemma3_values(void **state)
{
    (void)state;
    dp_hfconfig c;
    read_cfg("gemma3-tiny-scaled", "config.json", &c);
    assert_string_equal(c.architecture, "Gemma3ForCausalLM");
    assert_string_equal(c.model_type, "gemma3_text");
    assert_int_equal(c.hidden_size, 64);
    assert_int_equal(c.num_key_value_heads, 2);
    assert_int_equal(c.head_dim, 16);
    assert_true(c.rope_theta == 1e6 && c.rope_local_theta == 1e4);
    assert_string_equal(c.rope_scaling.type, "linear");
    assert_true(c.rope_scaling.factor == 8.0);
    assert_string_equal(c.rope_local_scaling.type, "default");
    assert_int_equal(c.sliding_window, 6);
    assert_int_equal(c.sliding_window_pattern, 6);
    for (int i = 0; i < 6; i++) assert_int_equal(c.layer_types[i], i == 5 ? DP_LAYER_FULL : DP_LAYER_SLIDING);
    assert_true(c.query_pre_attn_scalar == 16.0);
    assert_true(c.tie_word_embeddings);
    assert_string_equal(c.hidden_activation, "gelu_pytorch_tanh");
    assert_int_equal(c.bos_token_id, 2);
    assert_int_equal(c.n_eos, 1);
    assert_int_equal(c.eos_token_ids[0], 1);
    assert_int_equal(c.pad_token_id, 0);
    assert_true(c.final_logit_softcapping == 0 && c.attn_logit_softcapping == 0);
    dp_hfconfig_free(&c);
}

static void test_other_families(void **state)
{
    (void)state;
    dp_hfconfig c;
    read_cfg("llama3-tiny", "config.json", &c);
    assert_string_equal(c.rope_scaling.type, "llama3");
    assert_true(c.rope_scaling.factor == 32 && c.rope_scaling.low_freq_factor == 1 && c.rope_scaling.high_freq_factor == 4);
    assert_int_equal(c.rope_scaling.original_max_position_embeddings, 64);
    assert_true(c.rope_theta == 5e5 && c.rope_local_theta == 5e5);
    assert_string_equal(c.rope_local_scaling.type, "llama3");
    for (int i = 0; i < 3; i++) assert_int_equal(c.layer_types[i], DP_LAYER_FULL);
    assert_int_equal(c.pad_token_id, -1);
    dp_hfconfig_free(&c);

    read_cfg("mistral-tiny", "config.json", &c);
    assert_int_equal(c.sliding_window, 8);
    for (int i = 0; i < 3; i++) assert_int_equal(c.layer_types[i], DP_LAYER_SLIDING);
    assert_false(c.tie_word_embeddings);
    dp_hfconfig_free(&c);

    read_cfg("qwen2-tiny", "config.json", &c);
    for (int i = 0; i < 3; i++) assert_int_equal(c.layer_types[i], DP_LAYER_FULL);
    assert_int_equal(c.n_eos, 0);
    assert_int_equal(c.bos_token_id, -1);
    dp_hfconfig_free(&c);

    read_cfg("mixtral-tiny", "config.json", &c);
    assert_int_equal(c.num_local_experts, 8);
    assert_int_equal(c.num_experts_per_tok, 2);
    assert_int_equal(c.head_dim, 16);   /* null: hidden / heads */
    assert_true(c.rms_norm_eps == 1e-5);
    assert_int_equal(c.sliding_window, 0);
    dp_hfconfig_free(&c);

    read_cfg("phi3-tiny", "config.json", &c);
    assert_int_equal(c.num_key_value_heads, 4);
    assert_true(c.partial_rotary_factor == 1.0);
    assert_string_equal(c.hidden_activation, "silu");
    dp_hfconfig_free(&c);

    read_cfg("qwen3-tiny", "config.json", &c);
    assert_int_equal(c.head_dim, 32);
    assert_true(c.tie_word_embeddings);
    dp_hfconfig_free(&c);
}

static dp_status from_text(const char *name, const char *text, dp_hfconfig *c, dp_err *err)
{
    struct json_object *o;
    dp_status st = dp_json_parse_object(name, text, strlen(text), &o, err);
    if (st != DP_OK) return st;
    st = dp_hfconfig_from_json(name, o, c, err);
    json_object_put(o);
    return st;
}

static void test_forms(void **state)
{
    (void)state;
    dp_hfconfig c;
    dp_err err = {0};
    /* Released Gemma 3 1B style (v4, no pattern key: the class default 6), eos list. */
    assert_int_equal(from_text("g1b", "{\"model_type\":\"gemma3_text\",\"hidden_size\":1152,\"num_hidden_layers\":26,"
                                      "\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":256,"
                                      "\"vocab_size\":262144,\"rope_theta\":1000000.0,\"eos_token_id\":[1,106]}",
                               &c, &err), DP_OK);
    assert_int_equal(c.n_eos, 2);
    assert_int_equal(c.eos_token_ids[1], 106);
    assert_true(c.rope_local_theta == 10000.0);
    for (int i = 0; i < 26; i++) assert_int_equal(c.layer_types[i], (i + 1) % 6 == 0 ? DP_LAYER_FULL : DP_LAYER_SLIDING);
    dp_hfconfig_free(&c);
    /* Multimodal wrapper: the decoder lives in text_config. */
    assert_int_equal(from_text("g4b", "{\"model_type\":\"gemma3\",\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
                                      "\"text_config\":{\"hidden_size\":2560,\"num_hidden_layers\":34,"
                                      "\"num_attention_heads\":8,\"num_key_value_heads\":4,\"head_dim\":256,"
                                      "\"vocab_size\":262208,\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":8.0}}}",
                               &c, &err), DP_OK);
    assert_string_equal(c.model_type, "gemma3_text");
    assert_int_equal(c.hidden_size, 2560);
    assert_string_equal(c.rope_scaling.type, "linear");
    assert_string_equal(c.rope_local_scaling.type, "default");
    assert_int_equal(c.layer_types[5], DP_LAYER_FULL);
    dp_hfconfig_free(&c);
    /* Old v4 "type" spelling; head_dim default; tie default (true). */
    assert_int_equal(from_text("old", "{\"model_type\":\"llama\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                                      "\"num_attention_heads\":4,\"vocab_size\":10,"
                                      "\"rope_scaling\":{\"type\":\"dynamic\",\"factor\":2}}", &c, &err), DP_OK);
    assert_string_equal(c.rope_scaling.type, "dynamic");
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.num_key_value_heads, 4);
    assert_true(c.tie_word_embeddings);
    dp_hfconfig_free(&c);
}

static void expect_bad_text(const char *name, const char *text, const char *needle)
{
    dp_hfconfig c;
    dp_err err = {0};
    dp_status st = from_text(name, text, &c, &err);
    if (st != DP_EFORMAT) fail_msg("%s: expected DP_EFORMAT, got %s", name, dp_status_name(st));
    if (!strstr(err.msg, name)) fail_msg("message does not name the file: %s", err.msg);
    if (needle && !strstr(err.msg, needle)) fail_msg("message lacks \"%s\": %s", needle, err.msg);
}

static void test_bad_configs(void **state)
{
    (void)state;
    expect_bad_text("list.json", "[1, 2]", "expected a JSON object");
    expect_bad_text("str.json", "\"x\"", "expected a JSON object");
    expect_bad_text("broken.json", "{\"a\":\n  tru}", "line 2");
    expect_bad_text("empty.json", "", "ends early");
    expect_bad_text("nohidden.json", "{\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}", "hidden_size");
    expect_bad_text("lt.json", "{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10,"
                               "\"layer_types\":[\"full_attention\"]}", "layer_types");
    expect_bad_text("lt2.json", "{\"hidden_size\":64,\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10,"
                                "\"layer_types\":[\"chunked_attention\"]}", "chunked_attention");
    expect_bad_text("eos.json", "{\"hidden_size\":64,\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10,"
                                "\"eos_token_id\":[\"x\"]}", "eos_token_id");
    expect_bad_text("kv.json", "{\"hidden_size\":64,\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10,"
                               "\"num_key_value_heads\":3}", "num_key_value_heads");
    expect_bad_text("layers.json", "{\"hidden_size\":64,\"num_hidden_layers\":1000000000,\"num_attention_heads\":4,"
                                   "\"vocab_size\":10}", "num_hidden_layers");
    dp_hfconfig c;
    dp_err err = {0};
    assert_int_equal(dp_hfconfig_read("/nonexistent/config.json", &c, &err), DP_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/config.json"));
}

static void write_tmp(char *path, const char *text)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void test_generation_and_tokenizer_config(void **state)
{
    (void)state;
    char p[512];
    dp_err err = {0};
    dp_genconfig g;
    fpath(p, sizeof p, "gemma3-tiny", "generation_config.json");
    assert_int_equal(dp_genconfig_read(p, &g, &err), DP_OK);
    assert_true(g.present);
    assert_int_equal(g.bos_token_id, 2);
    assert_int_equal(g.n_eos, 1);
    assert_int_equal(g.eos_token_ids[0], 1);
    assert_int_equal(g.pad_token_id, 0);
    assert_true(g.temperature == 1.0 && !g.do_sample);
    dp_genconfig_free(&g);

    char gp[] = "/tmp/dp_gen_XXXXXX";
    write_tmp(gp, "{\"eos_token_id\":[1,106],\"do_sample\":true,\"temperature\":0.7,\"top_k\":64,\"top_p\":0.95}");
    assert_int_equal(dp_genconfig_read(gp, &g, &err), DP_OK);
    assert_int_equal(g.n_eos, 2);
    assert_int_equal(g.eos_token_ids[1], 106);
    assert_true(g.do_sample && g.temperature == 0.7 && g.top_k == 64 && g.top_p == 0.95);
    dp_genconfig_free(&g);
    unlink(gp);

    char tp[] = "/tmp/dp_tok_XXXXXX";
    write_tmp(tp, "{\"bos_token\":{\"content\":\"<bos>\",\"lstrip\":false},\"eos_token\":\"<eos>\",\"add_bos_token\":true,"
                  "\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"},{\"name\":\"default\",\"template\":\"{{ x }}\"}],"
                  "\"model_max_length\":1000000000000000019884624838656}");
    dp_tokconfig t;
    assert_int_equal(dp_tokconfig_read(tp, &t, &err), DP_OK);
    assert_string_equal(t.bos_token, "<bos>");
    assert_string_equal(t.eos_token, "<eos>");
    assert_null(t.pad_token);
    assert_true(t.has_add_bos && t.add_bos_token && !t.has_add_eos);
    assert_string_equal(t.chat_template, "{{ x }}");
    assert_int_equal(t.model_max_length, 0);
    dp_tokconfig_free(&t);
    unlink(tp);

    char bp[] = "/tmp/dp_tokbad_XXXXXX";
    write_tmp(bp, "{\"chat_template\": 5}");
    assert_int_equal(dp_tokconfig_read(bp, &t, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, bp));
    unlink(bp);

    /* The in-memory forms (what the fuzz target drives): a top-level value that is not an object fails
    ** naming the source, and leaves nothing to free. */
    struct json_object *arr = NULL;
    assert_int_equal(dp_json_parse("mem.json", "[1]", 3, &arr, &err), DP_OK);
    err = (dp_err){0};
    assert_int_equal(dp_genconfig_from_json("gen.json", arr, &g, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "gen.json"));
    assert_null(g.eos_token_ids);
    err = (dp_err){0};
    assert_int_equal(dp_tokconfig_from_json("tok.json", arr, &t, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "tok.json"));
    assert_null(t.chat_template);
    dp_json_free(arr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v4_equals_v5),  cmocka_unit_test(test_gemma3_values),
        cmocka_unit_test(test_other_families), cmocka_unit_test(test_forms),
        cmocka_unit_test(test_bad_configs),   cmocka_unit_test(test_generation_and_tokenizer_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
