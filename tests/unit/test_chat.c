/*
** tests/unit/test_chat.c: each chat template against the string its official Jinja template renders
** for the same messages (worked out from the templates; the Gemma and Llama 3.2 outputs are the ones
** their model cards show), template detection, and the single-BOS rule when a rendering is tokenised.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/chat.h"

static void expect_render(dp_chat_kind kind, const dp_chat_msg *m, size_t n, bool gen, const char *want)
{
    dp_chat_template t = { .kind = kind };
    dp_chat_opts o = { .add_generation_prompt = gen };
    dp_err err = {0};
    char *got = NULL;
    if (dp_chat_render(&t, m, n, &o, &got, &err) != DP_OK) fail_msg("%s: %s", dp_chat_kind_name(kind), err.msg);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "%s:\n  got  \"%s\"\n  want \"%s\"\n", dp_chat_kind_name(kind), got, want);
        free(got);
        fail();
    }
    free(got);
}

static const dp_chat_msg CONV[] = {
    { "system", "You are terse." },
    { "user", "  Hi there \n" },
    { "assistant", "Hello! " },
    { "user", "Why is the sky blue?" },
};

static void test_gemma3(void **state)
{
    (void)state;
    expect_render(DP_CHAT_GEMMA3, &CONV[3], 1, true,
                  "<bos><start_of_turn>user\nWhy is the sky blue?<end_of_turn>\n<start_of_turn>model\n");
    expect_render(DP_CHAT_GEMMA3, CONV, 4, true,
                  "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n"
                  "<start_of_turn>model\nHello!<end_of_turn>\n"
                  "<start_of_turn>user\nWhy is the sky blue?<end_of_turn>\n<start_of_turn>model\n");
    expect_render(DP_CHAT_GEMMA3, CONV, 3, false,
                  "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n"
                  "<start_of_turn>model\nHello!<end_of_turn>\n");
    /* Python's strip() removes Unicode spaces too (U+3000, U+00A0) */
    const dp_chat_msg u[] = { { "user", "\xE3\x80\x80\xC2\xA0q\xC2\xA0" } };
    expect_render(DP_CHAT_GEMMA3, u, 1, false, "<bos><start_of_turn>user\nq<end_of_turn>\n");

    dp_chat_template t = { .kind = DP_CHAT_GEMMA3 };
    dp_err err = {0};
    char *out = (char *)&err;
    const dp_chat_msg bad[] = { { "user", "a" }, { "user", "b" } };
    assert_int_equal(dp_chat_render(&t, bad, 2, NULL, &out, &err), DP_EINVAL);
    assert_null(out);
    assert_non_null(strstr(err.msg, "alternate"));
}

static void test_llama3(void **state)
{
    (void)state;
    expect_render(DP_CHAT_LLAMA3, CONV, 4, true,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nWhy is the sky blue?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render(DP_CHAT_LLAMA31, &CONV[3], 1, true,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                  "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nWhy is the sky blue?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render(DP_CHAT_LLAMA31, CONV, 2, false,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                  "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are terse.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>");
    dp_chat_template t = { .kind = DP_CHAT_LLAMA31 };
    dp_chat_opts o = { .add_generation_prompt = false, .date = "01 Jan 2025" };
    dp_err err = {0};
    char *out = NULL;
    assert_int_equal(dp_chat_render(&t, NULL, 0, &o, &out, &err), DP_OK);
    assert_string_equal(out, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                             "Cutting Knowledge Date: December 2023\nToday Date: 01 Jan 2025\n\n<|eot_id|>");
    free(out);
}

static void test_chatml(void **state)
{
    (void)state;
    /* ChatML does not trim */
    expect_render(DP_CHAT_CHATML, CONV, 4, true,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n  Hi there \n<|im_end|>\n"
                  "<|im_start|>assistant\nHello! <|im_end|>\n<|im_start|>user\nWhy is the sky blue?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    dp_chat_template t;
    dp_err err = {0};
    assert_int_equal(dp_chat_detect("{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
                                    "You are a helpful assistant.<|im_end|>\\n' }}", NULL, NULL, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_CHATML);
    char *out = NULL;
    assert_int_equal(dp_chat_render(&t, &CONV[3], 1, NULL, &out, &err), DP_OK);
    assert_string_equal(out, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                             "<|im_end|>\n<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n");
    free(out);
}

static void test_mistral_phi3(void **state)
{
    (void)state;
    expect_render(DP_CHAT_MISTRAL, CONV, 4, true,
                  "<s>[INST]   Hi there \n[/INST] Hello!</s>[INST] You are terse.\n\nWhy is the sky blue?[/INST]");
    expect_render(DP_CHAT_PHI3, CONV, 4, true,
                  "<|system|>\nYou are terse.<|end|>\n<|user|>\n  Hi there \n<|end|>\n<|assistant|>\nHello! <|end|>\n"
                  "<|user|>\nWhy is the sky blue?<|end|>\n<|assistant|>\n");
    expect_render(DP_CHAT_PHI3, &CONV[1], 1, false, "<|user|>\n  Hi there \n<|end|>\n<|endoftext|>");
}

static void test_detect(void **state)
{
    (void)state;
    dp_chat_template t;
    dp_err err = {0};
    assert_int_equal(dp_chat_detect("{{ bos_token }}...<start_of_turn>...", NULL, NULL, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_GEMMA3);
    assert_int_equal(dp_chat_detect("<|start_header_id|>...Cutting Knowledge Date", "gemma3", NULL, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_LLAMA31);
    assert_int_equal(dp_chat_detect("...<|start_header_id|>...", NULL, NULL, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_LLAMA3);
    assert_int_equal(dp_chat_detect(NULL, "gemma3_text", NULL, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_GEMMA3);
    assert_int_equal(dp_chat_detect(NULL, "qwen3", NULL, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_CHATML);
    assert_null(t.default_system);
    assert_int_equal(dp_chat_detect(NULL, "phi3", NULL, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_PHI3);
    assert_int_equal(dp_chat_detect(NULL, "llama", NULL, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_LLAMA31);
    assert_int_equal(dp_chat_detect("{{ messages }}", "bert", NULL, &t, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "bert"));
    dp_chat_kind k;
    assert_int_equal(dp_chat_kind_parse("qwen", &k, &err), DP_OK);
    assert_int_equal(k, DP_CHAT_CHATML);
    assert_true(dp_chat_has_bos(DP_CHAT_GEMMA3));
    assert_false(dp_chat_has_bos(DP_CHAT_CHATML));
}

/* The rendered Gemma prompt, tokenised without auto-BOS, starts with exactly one BOS and the turn
** markers become their special ids. */
static void test_gemma3_tokens(void **state)
{
    (void)state;
    char path[1024];
    const char *f = getenv("DOPPLER_FIXTURES");
    snprintf(path, sizeof path, "%s/tokenizers/gemma3.tokenizer.json.gz", f ? f : DOPPLER_SOURCE_DIR "/tests/fixtures");
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    assert_int_equal(dp_tokenizer_load(path, &tok, &err), DP_OK);
    dp_chat_template t;
    assert_int_equal(dp_chat_detect(NULL, NULL, tok, &t, &err), DP_OK);
    assert_int_equal(t.kind, DP_CHAT_GEMMA3);
    char *text = NULL;
    assert_int_equal(dp_chat_render(&t, &CONV[3], 1, NULL, &text, &err), DP_OK);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(dp_tokenizer_encode(tok, text, strlen(text), !dp_chat_has_bos(t.kind), &ids, &n, &err), DP_OK);
    assert_true(n > 8);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 105);
    /* ... <end_of_turn> "\n" <start_of_turn> "model" "\n" */
    assert_int_equal(ids[n - 5], 106);
    assert_int_equal(ids[n - 4], 107);
    assert_int_equal(ids[n - 3], 105);
    assert_int_equal(ids[n - 1], 107);
    for (size_t i = 1; i < n; i++) assert_int_not_equal(ids[i], 2);
    free(ids);
    free(text);
    dp_tokenizer_destroy(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_chatml),
        cmocka_unit_test(test_mistral_phi3),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_gemma3_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
