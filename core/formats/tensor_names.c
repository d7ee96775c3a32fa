/*
** core/formats/tensor_names.c: see tensor_names.h. Names follow llama.cpp's gguf-py
** constants.py TENSOR_NAMES and convert_hf_to_gguf.py.
*/
#include "core/formats/tensor_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct name_pair { const char *gguf, *hf; } name_pair;

static const name_pair global_names[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};

/* Per layer: blk.N.<gguf> <-> model.layers.N.<hf>. */
static const name_pair layer_common[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_qkv", "self_attn.qkv_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"ffn_gate_inp", "block_sparse_moe.gate"},
};

/* Gemma norms sit after attention and around the MLP; llama's post_attention_layernorm is the pre-MLP norm. */
static const name_pair layer_gemma[] = {
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};
static const name_pair layer_llama[] = {
    {"ffn_norm", "post_attention_layernorm"},
};

static bool known_arch(const char *arch, bool *gemma)
{
    static const char *const archs[] = {"gemma3", "llama", "mistral", "qwen2", "qwen3"};
    *gemma = strcmp(arch, "gemma3") == 0;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(arch, archs[i]) == 0) return true;
    return false;
}

/* Splits "<stem>.<weight|bias>"; false for other suffixes. */
static bool split_suffix(const char *name, size_t *stem_len, const char **suffix)
{
    const char *dot = strrchr(name, '.');
    if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0)) return false;
    *stem_len = (size_t)(dot - name);
    *suffix = dot;
    return true;
}

static bool find_pair(const name_pair *t, size_t n, const char *key, size_t key_len, bool from_gguf, const char **out)
{
    for (size_t i = 0; i < n; i++) {
        const char *k = from_gguf ? t[i].gguf : t[i].hf;
        if (strlen(k) == key_len && strncmp(k, key, key_len) == 0) {
            *out = from_gguf ? t[i].hf : t[i].gguf;
            return true;
        }
    }
    return false;
}

static bool map_name(const char *arch, const char *name, bool from_gguf, char *buf, size_t bufsize)
{
    bool gemma;
    size_t stem_len;
    const char *suffix, *to = NULL;
    if (bufsize) buf[0] = 0;
    if (!known_arch(arch, &gemma) || !split_suffix(name, &stem_len, &suffix)) return false;
    if (find_pair(global_names, sizeof global_names / sizeof global_names[0], name, stem_len, from_gguf, &to)) {
        int n = snprintf(buf, bufsize, "%s%s", to, suffix);
        return n >= 0 && (size_t)n < bufsize;
    }
    const char *prefix = from_gguf ? "blk." : "model.layers.";
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0) return false;
    char *end;
    unsigned long layer = strtoul(name + pl, &end, 10);
    if (end == name + pl || *end != '.' || end[1] == 0) return false;
    const char *role = end + 1;
    size_t role_len = stem_len - (size_t)(role - name);
    if ((size_t)(role - name) > stem_len) return false;
    bool found = gemma ? find_pair(layer_gemma, sizeof layer_gemma / sizeof layer_gemma[0], role, role_len, from_gguf, &to)
                       : find_pair(layer_llama, sizeof layer_llama / sizeof layer_llama[0], role, role_len, from_gguf, &to);
    if (!found) found = find_pair(layer_common, sizeof layer_common / sizeof layer_common[0], role, role_len, from_gguf, &to);
    if (!found) return false;
    int n = snprintf(buf, bufsize, "%s%lu.%s%s", from_gguf ? "model.layers." : "blk.", layer, to, suffix);
    if (n < 0 || (size_t)n >= bufsize) {
        if (bufsize) buf[0] = 0;
        return false;
    }
    return true;
}

bool dp_tensor_name_gguf_to_hf(const char *arch, const char *gguf_name, char *buf, size_t bufsize)
{
    return map_name(arch, gguf_name, true, buf, bufsize);
}

bool dp_tensor_name_hf_to_gguf(const char *arch, const char *hf_name, char *buf, size_t bufsize)
{
    return map_name(arch, hf_name, false, buf, bufsize);
}
