/*
** core/formats/hfconfig.c: see hfconfig.h. Where transformers fills a default in the config class
** rather than in the file, the default is written here with the class it comes from.
*/
#include "core/formats/hfconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#include "core/formats/json.h"

#define MAX_LAYERS 100000   /* a bound for allocations from a hostile file; real models have < 200 */

const char *dp_layer_kind_name(dp_layer_kind k)
{
    return k == DP_LAYER_SLIDING ? "sliding_attention" : "full_attention";
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

static void scaling_none(dp_rope_scaling *s)
{
    memset(s, 0, sizeof *s);
    copy_str(s->type, sizeof s->type, "default");
    s->factor = 1.0;
}

/* A rope_scaling (v4) or rope_parameters entry (v5): same keys, "type" in old v4 files. */
static void read_scaling(const struct json_object *o, dp_rope_scaling *s)
{
    scaling_none(s);
    if (!o) return;
    const char *t = dp_json_get_string(o, "rope_type", dp_json_get_string(o, "type", "default"));
    copy_str(s->type, sizeof s->type, t);
    s->factor = dp_json_get_double(o, "factor", 1.0);
    s->low_freq_factor = dp_json_get_double(o, "low_freq_factor", 0);
    s->high_freq_factor = dp_json_get_double(o, "high_freq_factor", 0);
    s->original_max_position_embeddings = dp_json_get_int(o, "original_max_position_embeddings", 0);
    s->beta_fast = dp_json_get_double(o, "beta_fast", 0);
    s->beta_slow = dp_json_get_double(o, "beta_slow", 0);
    s->attention_factor = dp_json_get_double(o, "attention_factor", 0);
}

/* An int or a list of ints (eos_token_id); NULL/absent gives none. */
static dp_status read_id_list(const char *name, const struct json_object *obj, const char *key, int64_t **out,
                              size_t *n, dp_err *err)
{
    *out = NULL;
    *n = 0;
    struct json_object *v = dp_json_get(obj, key);
    if (!v) return DP_OK;
    size_t cnt = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 1;
    int64_t *ids = malloc((cnt ? cnt : 1) * sizeof *ids);
    if (!ids) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    for (size_t i = 0; i < cnt; i++) {
        struct json_object *e = json_object_is_type(v, json_type_array) ? json_object_array_get_idx(v, i) : v;
        if (!e || !dp_json_as_int(e, &ids[i]) || ids[i] < 0) {
            free(ids);
            return DP_FAIL(err, DP_EFORMAT, "%s: %s must be a non-negative integer or a list of them", name, key);
        }
    }
    *out = ids;
    *n = cnt;
    return DP_OK;
}

dp_status dp_hfconfig_set_layer_pattern(dp_hfconfig *cfg, int64_t pattern, dp_err *err)
{
    free(cfg->layer_types);
    cfg->layer_types = calloc((size_t)(cfg->num_hidden_layers ? cfg->num_hidden_layers : 1), sizeof *cfg->layer_types);
    if (!cfg->layer_types) return DP_FAIL(err, DP_ENOMEM, "config: out of host memory");
    for (int64_t i = 0; i < cfg->num_hidden_layers; i++)
        cfg->layer_types[i] = pattern == DP_LAYERS_ALL_SLIDING ? DP_LAYER_SLIDING
                            : pattern <= 0 ? DP_LAYER_FULL
                            : ((i + 1) % pattern == 0 ? DP_LAYER_FULL : DP_LAYER_SLIDING);
    return DP_OK;
}

static dp_status need_positive(const char *name, const char *key, int64_t v, int64_t max, dp_err *err)
{
    if (v <= 0 || v > max)
        return DP_FAIL(err, DP_EFORMAT, "%s: \"%s\" is missing or out of range (%lld)", name, key, (long long)v);
    return DP_OK;
}

static dp_status read_rope(const char *name, const struct json_object *c, dp_hfconfig *cfg, dp_err *err)
{
    bool gemma = strncmp(cfg->model_type, "gemma3", 6) == 0;
    struct json_object *rp = dp_json_get(c, "rope_parameters");
    cfg->partial_rotary_factor = dp_json_get_double(c, "partial_rotary_factor", 1.0);
    if (rp) {   /* transformers 5 */
        if (!json_object_is_type(rp, json_type_object))
            return DP_FAIL(err, DP_EFORMAT, "%s: \"rope_parameters\" is not an object", name);
        struct json_object *full = dp_json_get(rp, "full_attention"), *slide = dp_json_get(rp, "sliding_attention");
        if (full || slide) {
            struct json_object *f = full ? full : slide, *s = slide ? slide : full;
            read_scaling(f, &cfg->rope_scaling);
            read_scaling(s, &cfg->rope_local_scaling);
            cfg->rope_theta = dp_json_get_double(f, "rope_theta", 10000.0);
            cfg->rope_local_theta = dp_json_get_double(s, "rope_theta", cfg->rope_theta);
            cfg->partial_rotary_factor = dp_json_get_double(f, "partial_rotary_factor", cfg->partial_rotary_factor);
        } else {
            read_scaling(rp, &cfg->rope_scaling);
            cfg->rope_local_scaling = cfg->rope_scaling;
            cfg->rope_theta = cfg->rope_local_theta = dp_json_get_double(rp, "rope_theta", 10000.0);
            cfg->partial_rotary_factor = dp_json_get_double(rp, "partial_rotary_factor", cfg->partial_rotary_factor);
        }
        return DP_OK;
    }
    /* transformers 4 */
    cfg->rope_theta = dp_json_get_double(c, "rope_theta", 10000.0);
    read_scaling(dp_json_get(c, "rope_scaling"), &cfg->rope_scaling);
    if (gemma) {   /* Gemma3TextConfig: the scaling is for global layers; local layers use their own base */
        scaling_none(&cfg->rope_local_scaling);
        cfg->rope_local_theta = dp_json_get_double(c, "rope_local_base_freq", 10000.0);
    } else {
        cfg->rope_local_scaling = cfg->rope_scaling;
        cfg->rope_local_theta = dp_json_get_double(c, "rope_local_base_freq", cfg->rope_theta);
    }
    return DP_OK;
}

static dp_status read_layers(const char *name, const struct json_object *c, dp_hfconfig *cfg, dp_err *err)
{
    bool gemma = strncmp(cfg->model_type, "gemma3", 6) == 0;
    cfg->sliding_window = dp_json_get_int(c, "sliding_window", 0);
    if (cfg->sliding_window < 0) return DP_FAIL(err, DP_EFORMAT, "%s: negative sliding_window", name);
    int64_t pattern = dp_json_get_int(c, "sliding_window_pattern", dp_json_get_int(c, "_sliding_window_pattern", 0));
    if (pattern < 0) return DP_FAIL(err, DP_EFORMAT, "%s: negative sliding_window_pattern", name);
    if (pattern == 0 && gemma) pattern = 6;   /* Gemma3TextConfig's default */
    cfg->sliding_window_pattern = pattern;
    struct json_object *lt = dp_json_get(c, "layer_types");
    if (lt) {
        if (!json_object_is_type(lt, json_type_array) || (int64_t)json_object_array_length(lt) != cfg->num_hidden_layers)
            return DP_FAIL(err, DP_EFORMAT, "%s: \"layer_types\" must list num_hidden_layers (%lld) entries", name,
                           (long long)cfg->num_hidden_layers);
        cfg->layer_types = calloc((size_t)cfg->num_hidden_layers, sizeof *cfg->layer_types);
        if (!cfg->layer_types) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
        for (int64_t i = 0; i < cfg->num_hidden_layers; i++) {
            struct json_object *e = json_object_array_get_idx(lt, (size_t)i);
            const char *s = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : "";
            if (strcmp(s, "full_attention") == 0) cfg->layer_types[i] = DP_LAYER_FULL;
            else if (strcmp(s, "sliding_attention") == 0) cfg->layer_types[i] = DP_LAYER_SLIDING;
            else
                return DP_FAIL(err, DP_EFORMAT, "%s: layer_types[%lld] = \"%.40s\" is not a known layer type", name,
                               (long long)i, s);
        }
        return DP_OK;
    }
    if (gemma || dp_json_get(c, "sliding_window_pattern")) return dp_hfconfig_set_layer_pattern(cfg, pattern, err);
    /* Mistral-style: one window for every layer, unless the config turns it off (Qwen2). */
    bool sliding = cfg->sliding_window > 0 && dp_json_get_bool(c, "use_sliding_window", true);
    return dp_hfconfig_set_layer_pattern(cfg, sliding ? DP_LAYERS_ALL_SLIDING : 0, err);
}

dp_status dp_hfconfig_from_json(const char *name, struct json_object *obj, dp_hfconfig *cfg, dp_err *err)
{
    dp_status st;
    memset(cfg, 0, sizeof *cfg);
    if (!obj || !json_object_is_type(obj, json_type_object))
        return DP_FAIL(err, DP_EFORMAT, "%s: config is not a JSON object", name);
    cfg->raw = json_object_get(obj);
    const struct json_object *c = obj;
    struct json_object *arch = dp_json_get(obj, "architectures");
    if (arch && json_object_is_type(arch, json_type_array) && json_object_array_length(arch) > 0 &&
        json_object_is_type(json_object_array_get_idx(arch, 0), json_type_string))
        copy_str(cfg->architecture, sizeof cfg->architecture, json_object_get_string(json_object_array_get_idx(arch, 0)));
    copy_str(cfg->model_type, sizeof cfg->model_type, dp_json_get_string(obj, "model_type", ""));
    /* Multimodal wrappers (Gemma 3 4B+) keep the decoder's settings in text_config. */
    struct json_object *tc = dp_json_get(obj, "text_config");
    if (tc && json_object_is_type(tc, json_type_object)) {
        c = tc;
        const char *mt = dp_json_get_string(tc, "model_type", NULL);
        if (mt) copy_str(cfg->model_type, sizeof cfg->model_type, mt);
        else if (strcmp(cfg->model_type, "gemma3") == 0) copy_str(cfg->model_type, sizeof cfg->model_type, "gemma3_text");
    }
    cfg->hidden_size = dp_json_get_int(c, "hidden_size", 0);
    cfg->num_hidden_layers = dp_json_get_int(c, "num_hidden_layers", 0);
    cfg->num_attention_heads = dp_json_get_int(c, "num_attention_heads", 0);
    cfg->vocab_size = dp_json_get_int(c, "vocab_size", 0);
    if ((st = need_positive(name, "hidden_size", cfg->hidden_size, 1 << 24, err)) != DP_OK ||
        (st = need_positive(name, "num_hidden_layers", cfg->num_hidden_layers, MAX_LAYERS, err)) != DP_OK ||
        (st = need_positive(name, "num_attention_heads", cfg->num_attention_heads, 1 << 16, err)) != DP_OK ||
        (st = need_positive(name, "vocab_size", cfg->vocab_size, (int64_t)1 << 32, err)) != DP_OK)
        goto fail;
    cfg->intermediate_size = dp_json_get_int(c, "intermediate_size", 0);
    cfg->num_key_value_heads = dp_json_get_int(c, "num_key_value_heads", cfg->num_attention_heads);
    cfg->head_dim = dp_json_get_int(c, "head_dim", cfg->hidden_size / cfg->num_attention_heads);
    if (cfg->num_key_value_heads <= 0 || cfg->head_dim <= 0 || cfg->num_attention_heads % cfg->num_key_value_heads) {
        st = DP_FAIL(err, DP_EFORMAT, "%s: num_key_value_heads (%lld) must divide num_attention_heads (%lld)", name,
                     (long long)cfg->num_key_value_heads, (long long)cfg->num_attention_heads);
        goto fail;
    }
    cfg->max_position_embeddings = dp_json_get_int(c, "max_position_embeddings", 0);
    cfg->rms_norm_eps = dp_json_get_double(c, "rms_norm_eps", 1e-6);
    copy_str(cfg->hidden_activation, sizeof cfg->hidden_activation,
             dp_json_get_string(c, "hidden_activation", dp_json_get_string(c, "hidden_act", "")));
    if ((st = read_rope(name, c, cfg, err)) != DP_OK || (st = read_layers(name, c, cfg, err)) != DP_OK) goto fail;
    cfg->query_pre_attn_scalar = dp_json_get_double(c, "query_pre_attn_scalar", 0);
    cfg->final_logit_softcapping = dp_json_get_double(c, "final_logit_softcapping", 0);
    cfg->attn_logit_softcapping = dp_json_get_double(c, "attn_logit_softcapping", 0);
    /* PretrainedConfig ties by default; the key may sit on the wrapper or the text config. */
    cfg->tie_word_embeddings = dp_json_get_bool(c, "tie_word_embeddings", dp_json_get_bool(obj, "tie_word_embeddings", true));
    cfg->attention_bias = dp_json_get_bool(c, "attention_bias", false);
    cfg->mlp_bias = dp_json_get_bool(c, "mlp_bias", false);
    cfg->num_local_experts = dp_json_get_int(c, "num_local_experts", dp_json_get_int(c, "num_experts", 0));
    cfg->num_experts_per_tok = dp_json_get_int(c, "num_experts_per_tok", 0);
    cfg->bos_token_id = dp_json_get_int(c, "bos_token_id", dp_json_get_int(obj, "bos_token_id", -1));
    cfg->pad_token_id = dp_json_get_int(c, "pad_token_id", dp_json_get_int(obj, "pad_token_id", -1));
    if ((st = read_id_list(name, dp_json_get(c, "eos_token_id") ? c : obj, "eos_token_id", &cfg->eos_token_ids,
                           &cfg->n_eos, err)) != DP_OK)
        goto fail;
    return DP_OK;
fail:
    dp_hfconfig_free(cfg);
    return st;
}

dp_status dp_hfconfig_read(const char *path, dp_hfconfig *cfg, dp_err *err)
{
    struct json_object *obj;
    memset(cfg, 0, sizeof *cfg);
    dp_status st = dp_json_read_object_file(path, &obj, err);
    if (st != DP_OK) return st;
    st = dp_hfconfig_from_json(path, obj, cfg, err);
    json_object_put(obj);
    return st;
}

void dp_hfconfig_free(dp_hfconfig *cfg)
{
    if (!cfg) return;
    free(cfg->layer_types);
    free(cfg->eos_token_ids);
    if (cfg->raw) json_object_put(cfg->raw);
    memset(cfg, 0, sizeof *cfg);
}

/* ---- generation_config.json ---- */

void dp_genconfig_init(dp_genconfig *gen)
{
    memset(gen, 0, sizeof *gen);
    gen->bos_token_id = gen->pad_token_id = -1;
    gen->temperature = gen->top_p = gen->repetition_penalty = 1.0;
}

dp_status dp_genconfig_from_json(const char *name, const struct json_object *o, dp_genconfig *gen, dp_err *err)
{
    dp_genconfig_init(gen);
    if (!o || !json_object_is_type(o, json_type_object))
        return DP_FAIL(err, DP_EFORMAT, "%s: generation config is not a JSON object", name);
    gen->present = true;
    gen->bos_token_id = dp_json_get_int(o, "bos_token_id", -1);
    gen->pad_token_id = dp_json_get_int(o, "pad_token_id", -1);
    gen->do_sample = dp_json_get_bool(o, "do_sample", false);
    gen->temperature = dp_json_get_double(o, "temperature", 1.0);
    gen->top_p = dp_json_get_double(o, "top_p", 1.0);
    gen->min_p = dp_json_get_double(o, "min_p", 0.0);
    gen->repetition_penalty = dp_json_get_double(o, "repetition_penalty", 1.0);
    gen->top_k = dp_json_get_int(o, "top_k", 0);
    gen->max_new_tokens = dp_json_get_int(o, "max_new_tokens", 0);
    gen->max_length = dp_json_get_int(o, "max_length", 0);
    dp_status st = read_id_list(name, o, "eos_token_id", &gen->eos_token_ids, &gen->n_eos, err);
    if (st != DP_OK) dp_genconfig_free(gen);
    return st;
}

dp_status dp_genconfig_read(const char *path, dp_genconfig *gen, dp_err *err)
{
    struct json_object *o;
    dp_genconfig_init(gen);
    dp_status st = dp_json_read_object_file(path, &o, err);
    if (st != DP_OK) return st;
    st = dp_genconfig_from_json(path, o, gen, err);
    json_object_put(o);
    return st;
}

void dp_genconfig_free(dp_genconfig *gen)
{
    if (!gen) return;
    free(gen->eos_token_ids);
    dp_genconfig_init(gen);
}

/* ---- tokenizer_config.json ---- */

/* A special token is a string or an AddedToken object {"content": ...}. */
static dp_status tok_string(const char *path, const struct json_object *o, const char *key, char **out, dp_err *err)
{
    *out = NULL;
    struct json_object *v = dp_json_get(o, key);
    if (!v) return DP_OK;
    const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                              : dp_json_get_string(v, "content", NULL);
    if (!s) return DP_FAIL(err, DP_EFORMAT, "%s: \"%s\" is neither a string nor an object with \"content\"", path, key);
    if (!(*out = strdup(s))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    return DP_OK;
}

dp_status dp_tokconfig_from_json(const char *name, const struct json_object *o, dp_tokconfig *tok, dp_err *err)
{
    dp_status st = DP_OK;
    memset(tok, 0, sizeof *tok);
    if (!o || !json_object_is_type(o, json_type_object))
        return DP_FAIL(err, DP_EFORMAT, "%s: tokenizer config is not a JSON object", name);
    tok->present = true;
    if ((st = tok_string(name, o, "bos_token", &tok->bos_token, err)) != DP_OK ||
        (st = tok_string(name, o, "eos_token", &tok->eos_token, err)) != DP_OK ||
        (st = tok_string(name, o, "pad_token", &tok->pad_token, err)) != DP_OK ||
        (st = tok_string(name, o, "unk_token", &tok->unk_token, err)) != DP_OK)
        goto done;
    tok->has_add_bos = dp_json_get(o, "add_bos_token") != NULL;
    tok->has_add_eos = dp_json_get(o, "add_eos_token") != NULL;
    tok->add_bos_token = dp_json_get_bool(o, "add_bos_token", false);
    tok->add_eos_token = dp_json_get_bool(o, "add_eos_token", false);
    int64_t mml = dp_json_get_int(o, "model_max_length", 0);
    tok->model_max_length = mml > 0 && mml < ((int64_t)1 << 40) ? mml : 0;
    /* chat_template: a string, or a list of {"name", "template"} of which "default" is the one. */
    struct json_object *ct = dp_json_get(o, "chat_template");
    const char *tmpl = NULL;
    if (ct && json_object_is_type(ct, json_type_string)) {
        tmpl = json_object_get_string(ct);
    } else if (ct && json_object_is_type(ct, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(ct); i++) {
            struct json_object *e = json_object_array_get_idx(ct, i);
            const char *nm = dp_json_get_string(e, "name", ""), *t = dp_json_get_string(e, "template", NULL);
            if (t && (!tmpl || strcmp(nm, "default") == 0)) tmpl = t;
        }
    } else if (ct) {
        st = DP_FAIL(err, DP_EFORMAT, "%s: \"chat_template\" is neither a string nor a list", name);
        goto done;
    }
    if (tmpl && !(tok->chat_template = strdup(tmpl))) st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
done:
    if (st != DP_OK) dp_tokconfig_free(tok);
    return st;
}

dp_status dp_tokconfig_read(const char *path, dp_tokconfig *tok, dp_err *err)
{
    struct json_object *o;
    memset(tok, 0, sizeof *tok);
    dp_status st = dp_json_read_object_file(path, &o, err);
    if (st != DP_OK) return st;
    st = dp_tokconfig_from_json(path, o, tok, err);
    json_object_put(o);
    return st;
}

void dp_tokconfig_free(dp_tokconfig *tok)
{
    if (!tok) return;
    free(tok->bos_token);
    free(tok->eos_token);
    free(tok->pad_token);
    free(tok->unk_token);
    free(tok->chat_template);
    memset(tok, 0, sizeof *tok);
}
