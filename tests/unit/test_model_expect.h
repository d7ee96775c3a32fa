/*
** tests/unit/test_model_expect.h: the HF tensor names and shapes a config implies, per family
** (MODEL_REFERENCE 2.5), for the fixture tests of safetensors, GGUF and model_file.
*/
#ifndef DP_TEST_MODEL_EXPECT_H
#define DP_TEST_MODEL_EXPECT_H

#include <stdio.h>
#include <string.h>

#include "core/formats/hfconfig.h"

typedef struct expect_tensor {
    char    name[96];
    int     ndim;
    int64_t shape[2];
} expect_tensor;

static inline void expect_add(expect_tensor *out, size_t *n, int ndim, int64_t d0, int64_t d1, const char *fmt, int layer,
                              int expert)
{
    expect_tensor *e = &out[(*n)++];
    if (expert >= 0) snprintf(e->name, sizeof e->name, fmt, layer, expert);
    else snprintf(e->name, sizeof e->name, fmt, layer);
    e->ndim = ndim;
    e->shape[0] = d0;
    e->shape[1] = d1;
}

/* Fills out (room for cap entries) and returns the count; 0 for an unknown model_type. */
static inline size_t expect_hf_tensors(const dp_hfconfig *c, expect_tensor *out, size_t cap)
{
    const char *mt = c->model_type;
    bool gemma = strcmp(mt, "gemma3_text") == 0, qwen2 = strcmp(mt, "qwen2") == 0, qwen3 = strcmp(mt, "qwen3") == 0;
    bool phi3 = strcmp(mt, "phi3") == 0, mixtral = strcmp(mt, "mixtral") == 0;
    if (!gemma && !qwen2 && !qwen3 && !phi3 && !mixtral && strcmp(mt, "llama") != 0 && strcmp(mt, "mistral") != 0)
        return 0;
    int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, hd = c->head_dim;
    int64_t q = c->num_attention_heads * hd, kv = c->num_key_value_heads * hd;
    size_t n = 0;
    expect_add(out, &n, 2, V, H, "model.embed_tokens.weight", 0, -1);
    expect_add(out, &n, 1, H, 0, "model.norm.weight", 0, -1);
    if (!c->tie_word_embeddings) expect_add(out, &n, 2, V, H, "lm_head.weight", 0, -1);
    for (int L = 0; L < (int)c->num_hidden_layers; L++) {
        if (n + 64 > cap) return 0;
        expect_add(out, &n, 1, H, 0, "model.layers.%d.input_layernorm.weight", L, -1);
        expect_add(out, &n, 1, H, 0, "model.layers.%d.post_attention_layernorm.weight", L, -1);
        if (phi3) {
            expect_add(out, &n, 2, q + 2 * kv, H, "model.layers.%d.self_attn.qkv_proj.weight", L, -1);
        } else {
            expect_add(out, &n, 2, q, H, "model.layers.%d.self_attn.q_proj.weight", L, -1);
            expect_add(out, &n, 2, kv, H, "model.layers.%d.self_attn.k_proj.weight", L, -1);
            expect_add(out, &n, 2, kv, H, "model.layers.%d.self_attn.v_proj.weight", L, -1);
        }
        expect_add(out, &n, 2, H, q, "model.layers.%d.self_attn.o_proj.weight", L, -1);
        if (qwen2) {
            expect_add(out, &n, 1, q, 0, "model.layers.%d.self_attn.q_proj.bias", L, -1);
            expect_add(out, &n, 1, kv, 0, "model.layers.%d.self_attn.k_proj.bias", L, -1);
            expect_add(out, &n, 1, kv, 0, "model.layers.%d.self_attn.v_proj.bias", L, -1);
        }
        if (gemma || qwen3) {
            expect_add(out, &n, 1, hd, 0, "model.layers.%d.self_attn.q_norm.weight", L, -1);
            expect_add(out, &n, 1, hd, 0, "model.layers.%d.self_attn.k_norm.weight", L, -1);
        }
        if (gemma) {
            expect_add(out, &n, 1, H, 0, "model.layers.%d.pre_feedforward_layernorm.weight", L, -1);
            expect_add(out, &n, 1, H, 0, "model.layers.%d.post_feedforward_layernorm.weight", L, -1);
        }
        if (mixtral) {
            expect_add(out, &n, 2, c->num_local_experts, H, "model.layers.%d.block_sparse_moe.gate.weight", L, -1);
            for (int e = 0; e < (int)c->num_local_experts; e++) {
                expect_add(out, &n, 2, I, H, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", L, e);
                expect_add(out, &n, 2, H, I, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", L, e);
                expect_add(out, &n, 2, I, H, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", L, e);
            }
        } else if (phi3) {
            expect_add(out, &n, 2, 2 * I, H, "model.layers.%d.mlp.gate_up_proj.weight", L, -1);
            expect_add(out, &n, 2, H, I, "model.layers.%d.mlp.down_proj.weight", L, -1);
        } else {
            expect_add(out, &n, 2, I, H, "model.layers.%d.mlp.gate_proj.weight", L, -1);
            expect_add(out, &n, 2, I, H, "model.layers.%d.mlp.up_proj.weight", L, -1);
            expect_add(out, &n, 2, H, I, "model.layers.%d.mlp.down_proj.weight", L, -1);
        }
    }
    return n;
}

#endif
