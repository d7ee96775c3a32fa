/*
** core/formats/hfconfig.h: Hugging Face configs normalised into one struct. config.json comes in
** two forms: transformers 4 (rope_theta, rope_local_base_freq, rope_scaling,
** sliding_window_pattern) and transformers 5 (rope_parameters, possibly per layer type, and an
** explicit layer_types list). Both give the same dp_hfconfig. The raw JSON is kept so that Lua
** recipes can read keys this struct does not name. generation_config.json and
** tokenizer_config.json are read into their own small structs.
** Not here: GGUF metadata -> config (model_file.c), tokenizer.json (core/text/).
*/
#ifndef DP_FORMATS_HFCONFIG_H
#define DP_FORMATS_HFCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct json_object;

typedef enum dp_layer_kind {
    DP_LAYER_FULL = 0,      /* "full_attention": causal over the whole context */
    DP_LAYER_SLIDING = 1,   /* "sliding_attention": causal within sliding_window */
} dp_layer_kind;

typedef struct dp_rope_scaling {
    char    type[24];              /* "default" (none), "linear", "llama3", "yarn", "longrope", "dynamic" */
    double  factor;                /* 1 when none */
    double  low_freq_factor, high_freq_factor;       /* llama3 */
    int64_t original_max_position_embeddings;        /* 0 when absent */
    double  beta_fast, beta_slow, attention_factor;  /* yarn (0 when absent) */
} dp_rope_scaling;

typedef struct dp_hfconfig {
    char    architecture[64];     /* architectures[0], e.g. "Gemma3ForCausalLM" ("" if absent) */
    char    model_type[32];       /* "gemma3_text", "llama", ... */
    int64_t hidden_size, intermediate_size, num_hidden_layers;
    int64_t num_attention_heads, num_key_value_heads, head_dim;   /* head_dim defaults to hidden/heads */
    int64_t vocab_size, max_position_embeddings;
    double  rms_norm_eps;
    char    hidden_activation[32];   /* hidden_activation or hidden_act */

    /* RoPE: "global" applies to full-attention layers, "local" to sliding ones. Families without
    ** per-type parameters have local == global. */
    double          rope_theta, rope_local_theta;
    dp_rope_scaling rope_scaling, rope_local_scaling;
    double          partial_rotary_factor;   /* 1 unless set */

    int64_t        sliding_window;           /* 0 = none */
    int64_t        sliding_window_pattern;   /* 0 unless the v4 key (or gemma3's default 6) applies */
    dp_layer_kind *layer_types;              /* num_hidden_layers entries */

    double  query_pre_attn_scalar;                           /* 0 when absent */
    double  final_logit_softcapping, attn_logit_softcapping; /* 0 when null/absent */
    bool    tie_word_embeddings, attention_bias, mlp_bias;
    int64_t num_local_experts, num_experts_per_tok;          /* 0 for dense models */

    int64_t  bos_token_id, pad_token_id;   /* -1 when null/absent */
    int64_t *eos_token_ids;                /* config's eos_token_id (an int or a list) */
    size_t   n_eos;

    struct json_object *raw;   /* the whole config.json (owned); NULL for configs derived from GGUF */
} dp_hfconfig;

/* Parses a config.json object (borrowed; the config takes its own reference). name labels messages. */
dp_status dp_hfconfig_from_json(const char *name, struct json_object *obj, dp_hfconfig *cfg, dp_err *err);
dp_status dp_hfconfig_read(const char *path, dp_hfconfig *cfg, dp_err *err);
void      dp_hfconfig_free(dp_hfconfig *cfg);   /* frees members; cfg itself is the caller's */

const char *dp_layer_kind_name(dp_layer_kind k);   /* "full_attention" / "sliding_attention" */
/* Fills layer_types for cfg->num_hidden_layers layers from a v4-style pattern: layer i is full when
** (i + 1) % pattern == 0 (so 1 = all full, as in transformers); 0 = all full; DP_LAYERS_ALL_SLIDING
** (-1) = every layer sliding (Mistral). Allocates cfg->layer_types. */
#define DP_LAYERS_ALL_SLIDING (-1)
dp_status dp_hfconfig_set_layer_pattern(dp_hfconfig *cfg, int64_t pattern, dp_err *err);

typedef struct dp_genconfig {
    int64_t  bos_token_id, pad_token_id;   /* -1 when absent */
    int64_t *eos_token_ids;
    size_t   n_eos;
    bool     do_sample;
    double   temperature, top_p, min_p, repetition_penalty;   /* 1, 1, 0, 1 when absent */
    int64_t  top_k;                                          /* 0 when absent (HF's default is 50) */
    int64_t  max_new_tokens, max_length;                     /* 0 when absent */
    bool     present;                                        /* a file was read */
} dp_genconfig;

/* The _from_json forms parse an object already read (borrowed); name labels messages. */
dp_status dp_genconfig_from_json(const char *name, const struct json_object *obj, dp_genconfig *gen, dp_err *err);
dp_status dp_genconfig_read(const char *path, dp_genconfig *gen, dp_err *err);
void      dp_genconfig_init(dp_genconfig *gen);   /* the defaults above, nothing present */
void      dp_genconfig_free(dp_genconfig *gen);

typedef struct dp_tokconfig {
    char *bos_token, *eos_token, *pad_token, *unk_token;   /* token strings; NULL when absent */
    char *chat_template;            /* the default template; NULL when absent */
    bool  add_bos_token, add_eos_token;
    bool  has_add_bos, has_add_eos; /* the keys were present */
    int64_t model_max_length;       /* 0 when absent or huge */
    bool  present;
} dp_tokconfig;

dp_status dp_tokconfig_from_json(const char *name, const struct json_object *obj, dp_tokconfig *tok, dp_err *err);
dp_status dp_tokconfig_read(const char *path, dp_tokconfig *tok, dp_err *err);
void      dp_tokconfig_free(dp_tokconfig *tok);

#endif
