/*
** tests/fuzz/fuzz_hfconfig.c: libFuzzer target for the JSON files of a Hugging Face model directory:
** config.json (dp_hfconfig_from_json), generation_config.json (dp_genconfig_from_json) and
** tokenizer_config.json (dp_tokconfig_from_json), each after dp_json_parse_object. The first input byte
** picks the file; the rest is its text. Checks: a failure explains itself; a config that loads holds
** what the engine later relies on (positive sizes, a layer type for every layer, heads that group).
*/
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/hfconfig.h"
#include "core/formats/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_config(const dp_hfconfig *c)
{
    if (c->hidden_size <= 0 || c->num_hidden_layers <= 0 || c->num_attention_heads <= 0 || c->vocab_size <= 0 ||
        c->num_key_value_heads <= 0 || c->head_dim <= 0 || c->num_attention_heads % c->num_key_value_heads)
        abort();
    if (!c->layer_types) abort();
    for (int64_t i = 0; i < c->num_hidden_layers; i++) (void)dp_layer_kind_name(c->layer_types[i]);
    if (c->n_eos && !c->eos_token_ids) abort();
    if (!memchr(c->architecture, 0, sizeof c->architecture) || !memchr(c->model_type, 0, sizeof c->model_type)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    dp_err err = {0};
    struct json_object *obj = NULL;
    if (dp_json_parse_object("fuzz.json", (const char *)data + 1, size - 1, &obj, &err) != DP_OK) {
        if (obj || !err.msg[0]) abort();
        return 0;
    }
    dp_status st;
    switch (data[0] % 3) {
    case 0: {
        dp_hfconfig c;
        if ((st = dp_hfconfig_from_json("fuzz.json", obj, &c, &err)) == DP_OK) check_config(&c);
        dp_hfconfig_free(&c);
        break;
    }
    case 1: {
        dp_genconfig g;
        if ((st = dp_genconfig_from_json("fuzz.json", obj, &g, &err)) == DP_OK && g.n_eos && !g.eos_token_ids) abort();
        dp_genconfig_free(&g);
        break;
    }
    default: {
        dp_tokconfig t;
        st = dp_tokconfig_from_json("fuzz.json", obj, &t, &err);
        dp_tokconfig_free(&t);
        break;
    }
    }
    if (st != DP_OK && !err.msg[0]) abort();
    dp_json_free(obj);
    return 0;
}
