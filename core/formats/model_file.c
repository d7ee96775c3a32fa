/*
** core/formats/model_file.c: see model_file.h. A model is either a safetensors set with its JSON
** side files or one GGUF file; both are flattened into dp_model_tensor entries that point into
** the mappings the underlying readers own.
*/
#include "core/formats/model_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/formats/tensor_names.h"

struct dp_model {
    dp_model_kind    kind;
    char            *path;
    dp_safetensors  *st;
    dp_gguf         *gguf;
    dp_hfconfig      cfg;
    bool             has_cfg;
    dp_genconfig     gen;
    dp_tokconfig     tok;
    char            *tokenizer_json;
    char            *chat_template;   /* owned copy, from whichever source had one */
    char             gguf_arch[64];   /* general.architecture: how HF names map onto this GGUF's */
    dp_model_tensor *tensors;
    size_t           n_tensors;
};

static bool is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static char *read_text_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 4096) {
            char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    buf[len] = 0;
    return buf;
}

/* ---- GGUF -> config ---- */

static int64_t gget_int(const dp_gguf *g, const char *arch, const char *key, int64_t def)
{
    char k[160];
    int64_t v;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return dp_gguf_get_int(g, k, &v) ? v : def;
}

static double gget_double(const dp_gguf *g, const char *arch, const char *key, double def)
{
    char k[160];
    double v;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return dp_gguf_get_double(g, k, &v) ? v : def;
}

dp_status dp_hfconfig_from_gguf(const dp_gguf *g, dp_hfconfig *cfg, dp_err *err)
{
    static const struct { const char *arch, *model_type, *cls, *act; } archs[] = {
        {"gemma3", "gemma3_text", "Gemma3ForCausalLM", "gelu_pytorch_tanh"},
        {"llama", "llama", "LlamaForCausalLM", "silu"},
        {"qwen2", "qwen2", "Qwen2ForCausalLM", "silu"},
        {"qwen3", "qwen3", "Qwen3ForCausalLM", "silu"},
        {"phi3", "phi3", "Phi3ForCausalLM", "silu"},
    };
    const char *path = dp_gguf_path(g);
    char arch[64];
    memset(cfg, 0, sizeof *cfg);
    if (!dp_gguf_get_string(g, "general.architecture", arch, sizeof arch))
        return DP_FAIL(err, DP_EFORMAT, "%s: no general.architecture string", path);
    snprintf(cfg->model_type, sizeof cfg->model_type, "%.31s", arch);
    snprintf(cfg->hidden_activation, sizeof cfg->hidden_activation, "silu");
    for (size_t i = 0; i < DP_ARRAY_LEN(archs); i++) {
        if (strcmp(arch, archs[i].arch) == 0) {
            snprintf(cfg->model_type, sizeof cfg->model_type, "%s", archs[i].model_type);
            snprintf(cfg->architecture, sizeof cfg->architecture, "%s", archs[i].cls);
            snprintf(cfg->hidden_activation, sizeof cfg->hidden_activation, "%s", archs[i].act);
        }
    }
    bool gemma = strcmp(arch, "gemma3") == 0;
    cfg->hidden_size = gget_int(g, arch, "embedding_length", 0);
    cfg->num_hidden_layers = gget_int(g, arch, "block_count", 0);
    cfg->num_attention_heads = gget_int(g, arch, "attention.head_count", 0);
    if (cfg->hidden_size <= 0 || cfg->num_hidden_layers <= 0 || cfg->num_hidden_layers > 100000 ||
        cfg->num_attention_heads <= 0)
        return DP_FAIL(err, DP_EFORMAT, "%s: %s.embedding_length, .block_count or .attention.head_count missing or invalid",
                       path, arch);
    cfg->num_key_value_heads = gget_int(g, arch, "attention.head_count_kv", cfg->num_attention_heads);
    cfg->head_dim = gget_int(g, arch, "attention.key_length", cfg->hidden_size / cfg->num_attention_heads);
    cfg->intermediate_size = gget_int(g, arch, "feed_forward_length", 0);
    cfg->max_position_embeddings = gget_int(g, arch, "context_length", 0);
    cfg->rms_norm_eps = gget_double(g, arch, "attention.layer_norm_rms_epsilon", 1e-6);
    const dp_gguf_value *toks = dp_gguf_find(g, "tokenizer.ggml.tokens");
    const dp_gguf_tensor *emb = dp_gguf_find_tensor(g, "token_embd.weight");
    cfg->vocab_size = gget_int(g, arch, "vocab_size",
                               toks && toks->type == DP_GGUF_ARRAY ? (int64_t)toks->v.arr.n
                               : emb ? (int64_t)emb->ne[1] : 0);
    cfg->rope_theta = gget_double(g, arch, "rope.freq_base", 10000.0);
    cfg->rope_local_theta = gget_double(g, arch, "rope.freq_base_swa", gemma ? 10000.0 : cfg->rope_theta);
    memset(&cfg->rope_scaling, 0, sizeof cfg->rope_scaling);
    char k[160], type[24] = "default";
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    if (!dp_gguf_get_string(g, k, type, sizeof type) || strcmp(type, "none") == 0) snprintf(type, sizeof type, "default");
    snprintf(cfg->rope_scaling.type, sizeof cfg->rope_scaling.type, "%s", type);
    cfg->rope_scaling.factor = gget_double(g, arch, "rope.scaling.factor", 1.0);
    cfg->rope_scaling.original_max_position_embeddings = gget_int(g, arch, "rope.scaling.original_context_length", 0);
    cfg->rope_local_scaling = cfg->rope_scaling;
    if (gemma) {   /* linear scaling applies to the global layers only */
        memset(&cfg->rope_local_scaling, 0, sizeof cfg->rope_local_scaling);
        snprintf(cfg->rope_local_scaling.type, sizeof cfg->rope_local_scaling.type, "default");
        cfg->rope_local_scaling.factor = 1.0;
    }
    int64_t rot = gget_int(g, arch, "rope.dimension_count", cfg->head_dim);
    cfg->partial_rotary_factor = cfg->head_dim > 0 ? (double)rot / (double)cfg->head_dim : 1.0;
    cfg->sliding_window = gget_int(g, arch, "attention.sliding_window", 0);
    cfg->sliding_window_pattern = gemma ? gget_int(g, arch, "attention.sliding_window_pattern", 6) : 0;
    dp_status st = dp_hfconfig_set_layer_pattern(cfg, gemma ? cfg->sliding_window_pattern
                                                            : (cfg->sliding_window > 0 ? DP_LAYERS_ALL_SLIDING : 0), err);
    if (st != DP_OK) return st;
    cfg->query_pre_attn_scalar = gemma ? (double)cfg->head_dim : 0;
    cfg->final_logit_softcapping = gget_double(g, arch, "final_logit_softcapping", 0);
    cfg->attn_logit_softcapping = gget_double(g, arch, "attn_logit_softcapping", 0);
    cfg->tie_word_embeddings = dp_gguf_find_tensor(g, "output.weight") == NULL;
    cfg->attention_bias = dp_gguf_find_tensor(g, "blk.0.attn_output.bias") != NULL;
    cfg->num_local_experts = gget_int(g, arch, "expert_count", 0);
    cfg->num_experts_per_tok = gget_int(g, arch, "expert_used_count", 0);
    int64_t v;
    cfg->bos_token_id = dp_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v) ? v : -1;
    cfg->pad_token_id = dp_gguf_get_int(g, "tokenizer.ggml.padding_token_id", &v) ? v : -1;
    static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    cfg->eos_token_ids = malloc(DP_ARRAY_LEN(eos_keys) * sizeof *cfg->eos_token_ids);
    if (!cfg->eos_token_ids) {
        dp_hfconfig_free(cfg);
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    }
    for (size_t i = 0; i < DP_ARRAY_LEN(eos_keys); i++) {
        if (!dp_gguf_get_int(g, eos_keys[i], &v)) continue;
        bool dup = false;
        for (size_t j = 0; j < cfg->n_eos; j++) dup |= cfg->eos_token_ids[j] == v;
        if (!dup) cfg->eos_token_ids[cfg->n_eos++] = v;
    }
    return DP_OK;
}

/* ---- opening ---- */

static dp_status build_tensors_st(dp_model *m, dp_err *err)
{
    size_t n = dp_safetensors_count(m->st);
    m->tensors = calloc(n ? n : 1, sizeof *m->tensors);
    if (!m->tensors) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
    for (size_t i = 0; i < n; i++) {
        const dp_st_tensor *s = dp_safetensors_at(m->st, i);
        dp_model_tensor *t = &m->tensors[i];
        t->name = s->name;
        t->dtype = s->dtype;
        t->type_name = dp_dtype_name(s->dtype);
        t->ndim = s->ndim;
        for (int d = 0; d < s->ndim; d++) t->shape[d] = s->shape[d];
        t->numel = s->numel;
        t->bytes = s->bytes;
        t->data = s->data;
    }
    m->n_tensors = n;
    return DP_OK;
}

static dp_status build_tensors_gguf(dp_model *m, dp_err *err)
{
    size_t n = dp_gguf_tensor_count(m->gguf);
    m->tensors = calloc(n ? n : 1, sizeof *m->tensors);
    if (!m->tensors) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
    for (size_t i = 0; i < n; i++) {
        const dp_gguf_tensor *s = dp_gguf_tensor_at(m->gguf, i);
        dp_model_tensor *t = &m->tensors[i];
        t->name = s->name;
        t->dtype = s->dtype;
        t->type_name = dp_ggml_type_name(s->ggml_type);
        t->ndim = (int)s->n_dims;
        t->numel = 1;
        for (uint32_t d = 0; d < s->n_dims; d++) {
            t->shape[d] = (int64_t)s->ne[s->n_dims - 1 - d];
            t->numel *= s->ne[d];
        }
        t->bytes = s->bytes;
        t->data = s->data;
    }
    m->n_tensors = n;
    return DP_OK;
}

/* doppler convert --pad-k (model_file.h "Padded rows"): the listed tensors become their logical shape. */
#define PAD_K_BLOCK 256

static dp_status apply_pad_k(dp_model *m, dp_err *err)
{
    const dp_gguf *g = m->gguf;
    const dp_gguf_value *flag = dp_gguf_find(g, "doppler.pad_k");
    const dp_gguf_value *names = dp_gguf_find(g, "doppler.pad_k.tensors");
    const dp_gguf_value *widths = dp_gguf_find(g, "doppler.pad_k.widths");
    if (!flag && !names && !widths) return DP_OK;
    if (!flag || flag->type != DP_GGUF_BOOL || !names || names->type != DP_GGUF_ARRAY ||
        names->v.arr.type != DP_GGUF_STRING || !widths || widths->type != DP_GGUF_ARRAY ||
        widths->v.arr.n != names->v.arr.n)
        return DP_FAIL(err, DP_EFORMAT,
                       "%s: doppler.pad_k metadata is malformed (want doppler.pad_k = bool, doppler.pad_k.tensors = "
                       "array of names, doppler.pad_k.widths = as many integers)", m->path);
    if (!flag->v.b) {
        if (names->v.arr.n)
            return DP_FAIL(err, DP_EFORMAT, "%s: doppler.pad_k is false but doppler.pad_k.tensors lists %llu tensors",
                           m->path, (unsigned long long)names->v.arr.n);
        return DP_OK;
    }
    for (uint64_t k = 0; k < names->v.arr.n; k++) {
        dp_gguf_str nm;
        int64_t w;
        if (!dp_gguf_array_str(names, k, &nm) || !dp_gguf_array_int(widths, k, &w))
            return DP_FAIL(err, DP_EFORMAT, "%s: doppler.pad_k entry %llu is unreadable", m->path, (unsigned long long)k);
        dp_model_tensor *t = NULL;
        for (size_t i = 0; i < m->n_tensors && !t; i++)
            if (strlen(m->tensors[i].name) == nm.len && memcmp(m->tensors[i].name, nm.ptr, nm.len) == 0)
                t = &m->tensors[i];
        if (!t)
            return DP_FAIL(err, DP_EFORMAT, "%s: doppler.pad_k.tensors names %.*s, which the file does not hold",
                           m->path, (int)(nm.len < 200 ? nm.len : 200), nm.ptr);
        const dp_dtype_info *di = t->dtype != DP_DTYPE_COUNT ? dp_dtype_get(t->dtype) : NULL;
        if (!di || !di->is_quant)
            return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s is listed in doppler.pad_k.tensors but is %s, not block-quantised",
                           m->path, t->name, t->type_name);
        if (t->padded_cols)
            return DP_FAIL(err, DP_EFORMAT, "%s: tensor %s is listed twice in doppler.pad_k.tensors", m->path, t->name);
        const int64_t stored = t->shape[t->ndim - 1];
        if (w < 1 || w > stored || stored != (w + PAD_K_BLOCK - 1) / PAD_K_BLOCK * PAD_K_BLOCK)
            return DP_FAIL(err, DP_EFORMAT,
                           "%s: tensor %s is stored with rows of %lld, but doppler.pad_k.widths gives its width as %lld "
                           "(rows are padded to ceil(width / %d) * %d)", m->path, t->name, (long long)stored,
                           (long long)w, PAD_K_BLOCK, PAD_K_BLOCK);
        t->padded_cols = stored;
        t->shape[t->ndim - 1] = w;
        t->numel = t->numel / (uint64_t)stored * (uint64_t)w;
    }
    return DP_OK;
}

static dp_status open_gguf(dp_model *m, dp_err *err)
{
    m->kind = DP_MODEL_GGUF;
    dp_status st = dp_gguf_open(m->path, &m->gguf, err);
    if (st != DP_OK) return st;
    if ((st = dp_hfconfig_from_gguf(m->gguf, &m->cfg, err)) != DP_OK) return st;
    m->has_cfg = true;
    dp_gguf_get_string(m->gguf, "general.architecture", m->gguf_arch, sizeof m->gguf_arch);
    const dp_gguf_value *ct = dp_gguf_find(m->gguf, "tokenizer.chat_template");
    if (ct && ct->type == DP_GGUF_STRING && !(m->chat_template = strndup(ct->v.str.ptr, ct->v.str.len)))
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
    if ((st = build_tensors_gguf(m, err)) != DP_OK) return st;
    return apply_pad_k(m, err);
}

/* dir holds the JSON side files; config_required for a directory given by the user. */
static dp_status open_hf(dp_model *m, const char *dir, bool config_required, dp_err *err)
{
    m->kind = DP_MODEL_SAFETENSORS;
    dp_status st = DP_OK;
    char *p = join(dir, "config.json");
    if (!p) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
    if (is_file(p)) {
        st = dp_hfconfig_read(p, &m->cfg, err);
        m->has_cfg = st == DP_OK;
    } else if (config_required) {
        st = DP_FAIL(err, DP_EFORMAT, "%s: no config.json in this directory", dir);
    }
    free(p);
    if (st != DP_OK) return st;
    if ((st = dp_safetensors_open(m->path, &m->st, err)) != DP_OK) return st;
    if (!(p = join(dir, "generation_config.json"))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
    st = is_file(p) ? dp_genconfig_read(p, &m->gen, err) : DP_OK;
    free(p);
    if (st != DP_OK) return st;
    if (!(p = join(dir, "tokenizer_config.json"))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
    st = is_file(p) ? dp_tokconfig_read(p, &m->tok, err) : DP_OK;
    free(p);
    if (st != DP_OK) return st;
    if (!(p = join(dir, "tokenizer.json"))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
    if (is_file(p)) m->tokenizer_json = p;
    else free(p);
    /* Newer transformers save the template beside tokenizer_config.json. */
    if (m->tok.chat_template) {
        if (!(m->chat_template = strdup(m->tok.chat_template))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
    } else {
        if (!(p = join(dir, "chat_template.jinja"))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", m->path);
        if (is_file(p)) m->chat_template = read_text_file(p);
        free(p);
    }
    return build_tensors_st(m, err);
}

static bool has_gguf_magic(const char *path)
{
    unsigned char b[4];
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    bool yes = fread(b, 1, 4, f) == 4 && memcmp(b, "GGUF", 4) == 0;
    fclose(f);
    return yes;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

dp_status dp_model_open(const char *path, dp_model **out, dp_err *err)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
    dp_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    }
    dp_genconfig_init(&m->gen);
    dp_status st;
    if (S_ISDIR(sb.st_mode)) {
        st = open_hf(m, path, true, err);
    } else if (has_gguf_magic(path) || ends_with(path, ".gguf")) {
        st = open_gguf(m, err);   /* a .gguf without the magic gets the reader's "not a GGUF file" */
    } else {
        const char *slash = strrchr(path, '/');
        char *dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
        if (!dir) st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
        else st = open_hf(m, dir, false, err);
        free(dir);
    }
    if (st != DP_OK) {
        dp_model_close(m);
        return st;
    }
    *out = m;
    return DP_OK;
}

void dp_model_close(dp_model *m)
{
    if (!m) return;
    dp_safetensors_close(m->st);
    dp_gguf_close(m->gguf);
    dp_hfconfig_free(&m->cfg);
    dp_genconfig_free(&m->gen);
    dp_tokconfig_free(&m->tok);
    free(m->tokenizer_json);
    free(m->chat_template);
    free(m->tensors);
    free(m->path);
    free(m);
}

dp_model_kind dp_model_kind_of(const dp_model *m) { return m->kind; }

const char *dp_model_kind_name(dp_model_kind k)
{
    return k == DP_MODEL_GGUF ? "gguf" : k == DP_MODEL_SAFETENSORS ? "safetensors" : "?";
}

const char *dp_model_path(const dp_model *m) { return m->path; }
const dp_hfconfig *dp_model_config(const dp_model *m) { return m->has_cfg ? &m->cfg : NULL; }
const dp_genconfig *dp_model_genconfig(const dp_model *m) { return &m->gen; }
const dp_tokconfig *dp_model_tokconfig(const dp_model *m) { return &m->tok; }
const char *dp_model_tokenizer_json(const dp_model *m) { return m->tokenizer_json; }
const char *dp_model_chat_template(const dp_model *m) { return m->chat_template; }
size_t dp_model_tensor_count(const dp_model *m) { return m->n_tensors; }
const dp_safetensors *dp_model_safetensors(const dp_model *m) { return m->st; }
const dp_gguf *dp_model_gguf(const dp_model *m) { return m->gguf; }

const dp_model_tensor *dp_model_tensor_at(const dp_model *m, size_t i)
{
    return i < m->n_tensors ? &m->tensors[i] : NULL;
}

static const dp_model_tensor *find_stored(const dp_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* A GGUF also answers to the HF names of its tensors (tensor_names.h), so that recipes, which
** name weights the HF way, load either kind unchanged. */
const dp_model_tensor *dp_model_find(const dp_model *m, const char *name)
{
    const dp_model_tensor *t = find_stored(m, name);
    char gname[256];
    if (!t && m->kind == DP_MODEL_GGUF && dp_tensor_name_hf_to_gguf(m->gguf_arch, name, gname, sizeof gname))
        t = find_stored(m, gname);
    return t;
}

uint64_t dp_model_total_bytes(const dp_model *m)
{
    uint64_t s = 0;
    for (size_t i = 0; i < m->n_tensors; i++) s += m->tensors[i].bytes;
    return s;
}
