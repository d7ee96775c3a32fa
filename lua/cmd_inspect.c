/*
** lua/cmd_inspect.c: `doppler inspect PATH [--json]`: what a model file holds. Prints the
** normalised config (and for GGUF every metadata pair, long arrays abbreviated), then a table of
** tensors (name, dtype, shape, bytes) with totals. A tensor whose rows the file pads (doppler convert
** --pad-k) shows its logical shape and the stored row length. --json prints the same as one JSON object.
** Errors name the file and the cause and exit 1.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#include "core/formats/model_file.h"
#include "lua/commands.h"

#define ARRAY_PREVIEW 8   /* array elements shown before "..." */
#define STRING_PREVIEW 72 /* characters of a string shown */

static void usage(FILE *f)
{
    fputs("usage: doppler inspect PATH [--json]\n"
          "  PATH: a Hugging Face model directory (config.json + *.safetensors), a .safetensors file,\n"
          "        a model.safetensors.index.json, or a GGUF file.\n"
          "  Prints the model's configuration or metadata and a table of its tensors\n"
          "  (name, dtype, shape, bytes). --json prints one JSON object instead.\n", f);
}

/* ---- text output ---- */

static void print_str(const char *s, uint64_t len)
{
    putchar('"');
    uint64_t shown = len < STRING_PREVIEW ? len : STRING_PREVIEW;
    for (uint64_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (len > shown) printf("... (%llu bytes)", (unsigned long long)len);
}

static void print_value(const dp_gguf_value *v)
{
    int64_t i;
    double d;
    switch (v->type) {
    case DP_GGUF_STRING: print_str(v->v.str.ptr, v->v.str.len); return;
    case DP_GGUF_BOOL: fputs(v->v.b ? "true" : "false", stdout); return;
    case DP_GGUF_FLOAT32: printf("%.9g", v->v.f32); return;
    case DP_GGUF_FLOAT64: printf("%.17g", v->v.f64); return;
    case DP_GGUF_UINT64: printf("%llu", (unsigned long long)v->v.u64); return;
    case DP_GGUF_ARRAY: {
        putchar('[');
        uint64_t n = v->v.arr.n, shown = n < ARRAY_PREVIEW ? n : ARRAY_PREVIEW;
        for (uint64_t k = 0; k < shown; k++) {
            dp_gguf_value e;
            if (k) fputs(", ", stdout);
            if (dp_gguf_array_elem(v, k, &e)) print_value(&e);
        }
        if (n > shown) printf(", ... (%llu total)", (unsigned long long)n);
        putchar(']');
        return;
    }
    default:
        if (dp_gguf_value_int(v, &i)) printf("%lld", (long long)i);
        else if (dp_gguf_value_double(v, &d)) printf("%.9g", d);
        return;
    }
}

static const char *type_label(const dp_gguf_value *v, char *buf, size_t n)
{
    if (v->type == DP_GGUF_ARRAY) snprintf(buf, n, "arr[%s]", dp_gguf_type_name(v->v.arr.type));
    else snprintf(buf, n, "%s", dp_gguf_type_name(v->type));
    return buf;
}

static void print_ids(const int64_t *ids, size_t n)
{
    if (n == 0) { fputs("none", stdout); return; }
    for (size_t i = 0; i < n; i++) printf("%s%lld", i ? ", " : "", (long long)ids[i]);
}

static void print_scaling(const char *label, const dp_rope_scaling *s)
{
    if (strcmp(s->type, "default") == 0) return;
    printf("  %-24s %s, factor %g", label, s->type, s->factor);
    if (s->low_freq_factor || s->high_freq_factor) printf(", low %g, high %g", s->low_freq_factor, s->high_freq_factor);
    if (s->original_max_position_embeddings) printf(", original max %lld", (long long)s->original_max_position_embeddings);
    putchar('\n');
}

static void print_config(const dp_hfconfig *c)
{
    printf("config:\n");
    printf("  %-24s %s (%s)\n", "architecture", c->architecture[0] ? c->architecture : "?", c->model_type);
    printf("  %-24s hidden %lld, intermediate %lld, layers %lld, vocab %lld\n", "sizes", (long long)c->hidden_size,
           (long long)c->intermediate_size, (long long)c->num_hidden_layers, (long long)c->vocab_size);
    printf("  %-24s %lld q / %lld kv, head_dim %lld\n", "attention heads", (long long)c->num_attention_heads,
           (long long)c->num_key_value_heads, (long long)c->head_dim);
    printf("  %-24s %g\n", "rms_norm_eps", c->rms_norm_eps);
    printf("  %-24s %s\n", "activation", c->hidden_activation[0] ? c->hidden_activation : "?");
    printf("  %-24s global %g, local %g\n", "rope theta", c->rope_theta, c->rope_local_theta);
    print_scaling("rope scaling (global)", &c->rope_scaling);
    print_scaling("rope scaling (local)", &c->rope_local_scaling);
    if (c->partial_rotary_factor != 1.0) printf("  %-24s %g\n", "partial_rotary_factor", c->partial_rotary_factor);
    int64_t sliding = 0;
    for (int64_t i = 0; i < c->num_hidden_layers; i++) sliding += c->layer_types[i] == DP_LAYER_SLIDING;
    printf("  %-24s %lld sliding, %lld full", "layers", (long long)sliding, (long long)(c->num_hidden_layers - sliding));
    if (c->sliding_window) printf(", window %lld", (long long)c->sliding_window);
    if (sliding && sliding < c->num_hidden_layers) {
        fputs(" (full:", stdout);
        for (int64_t i = 0; i < c->num_hidden_layers; i++)
            if (c->layer_types[i] == DP_LAYER_FULL) printf(" %lld", (long long)i);
        putchar(')');
    }
    putchar('\n');
    if (c->max_position_embeddings) printf("  %-24s %lld\n", "max_position_embeddings", (long long)c->max_position_embeddings);
    if (c->query_pre_attn_scalar) printf("  %-24s %g\n", "query_pre_attn_scalar", c->query_pre_attn_scalar);
    if (c->final_logit_softcapping) printf("  %-24s %g\n", "final_logit_softcapping", c->final_logit_softcapping);
    if (c->attn_logit_softcapping) printf("  %-24s %g\n", "attn_logit_softcapping", c->attn_logit_softcapping);
    if (c->num_local_experts)
        printf("  %-24s %lld experts, top %lld\n", "mixture of experts", (long long)c->num_local_experts,
               (long long)c->num_experts_per_tok);
    printf("  %-24s tied %s, attention bias %s\n", "embeddings", c->tie_word_embeddings ? "yes" : "no",
           c->attention_bias ? "yes" : "no");
    printf("  %-24s bos %lld, eos ", "special ids", (long long)c->bos_token_id);
    print_ids(c->eos_token_ids, c->n_eos);
    printf(", pad %lld\n", (long long)c->pad_token_id);
}

static void format_shape(const dp_model_tensor *t, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (used < n) used += (size_t)snprintf(buf + used, n - used, "]");
    /* doppler convert --pad-k: the logical shape, and the row length the file stores */
    if (t->padded_cols && used < n) snprintf(buf + used, n - used, " rows padded to %lld", (long long)t->padded_cols);
}

static void print_text(const dp_model *m)
{
    printf("path: %s\n", dp_model_path(m));
    if (dp_model_kind_of(m) == DP_MODEL_GGUF) {
        const dp_gguf *g = dp_model_gguf(m);
        printf("kind: gguf (version %u, alignment %u, %zu metadata pairs)\n", dp_gguf_version(g), dp_gguf_alignment(g),
               dp_gguf_kv_count(g));
    } else {
        const dp_safetensors *st = dp_model_safetensors(m);
        printf("kind: safetensors (%zu shard%s)\n", dp_safetensors_shard_count(st),
               dp_safetensors_shard_count(st) == 1 ? "" : "s");
    }
    const dp_hfconfig *c = dp_model_config(m);
    if (c) print_config(c);
    const dp_genconfig *gen = dp_model_genconfig(m);
    if (gen->present) {
        printf("generation:\n  %-24s ", "eos");
        print_ids(gen->eos_token_ids, gen->n_eos);
        printf("\n  %-24s do_sample %s, temperature %g, top_k %lld, top_p %g\n", "sampling",
               gen->do_sample ? "true" : "false", gen->temperature, (long long)gen->top_k, gen->top_p);
    }
    if (dp_model_tokenizer_json(m)) printf("tokenizer: %s\n", dp_model_tokenizer_json(m));
    const char *tmpl = dp_model_chat_template(m);
    if (tmpl) printf("chat template: %zu bytes\n", strlen(tmpl));
    if (dp_model_kind_of(m) == DP_MODEL_GGUF) {
        const dp_gguf *g = dp_model_gguf(m);
        printf("metadata:\n");
        for (size_t i = 0; i < dp_gguf_kv_count(g); i++) {
            char tl[32];
            const dp_gguf_value *v = dp_gguf_kv_value(g, i);
            printf("  %-44s %-9s ", dp_gguf_kv_key(g, i), type_label(v, tl, sizeof tl));
            print_value(v);
            putchar('\n');
        }
    } else if (dp_safetensors_metadata_count(dp_model_safetensors(m)) > 0) {
        const dp_safetensors *st = dp_model_safetensors(m);
        printf("metadata:\n");
        for (size_t i = 0; i < dp_safetensors_metadata_count(st); i++) {
            const char *k, *v;
            dp_safetensors_metadata_at(st, i, &k, &v);
            printf("  %-44s ", k);
            print_str(v, strlen(v));
            putchar('\n');
        }
    }
    size_t n = dp_model_tensor_count(m), wname = 4;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(dp_model_tensor_at(m, i)->name);
        if (l > wname) wname = l;
    }
    printf("tensors:\n  %-*s  %-8s  %-22s  %12s\n", (int)wname, "name", "dtype", "shape", "bytes");
    uint64_t per_type_bytes[DP_GGML_TYPE_COUNT + DP_DTYPE_COUNT] = {0};
    const char *per_type_name[DP_GGML_TYPE_COUNT + DP_DTYPE_COUNT] = {0};
    size_t per_type_count[DP_GGML_TYPE_COUNT + DP_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        const dp_model_tensor *t = dp_model_tensor_at(m, i);
        char shape[96];
        format_shape(t, shape, sizeof shape);
        printf("  %-*s  %-8s  %-22s  %12llu\n", (int)wname, t->name, t->type_name, shape, (unsigned long long)t->bytes);
        size_t slot = 0;
        while (per_type_name[slot] && strcmp(per_type_name[slot], t->type_name) != 0) slot++;
        per_type_name[slot] = t->type_name;
        per_type_bytes[slot] += t->bytes;
        per_type_count[slot]++;
    }
    uint64_t total = dp_model_total_bytes(m);
    printf("total: %zu tensors, %llu bytes (%.2f MiB)\n", n, (unsigned long long)total, (double)total / (1024.0 * 1024.0));
    for (size_t s = 0; per_type_name[s]; s++)
        printf("  %-8s %5zu tensors %14llu bytes\n", per_type_name[s], per_type_count[s],
               (unsigned long long)per_type_bytes[s]);
}

/* ---- JSON output ---- */

static struct json_object *value_json(const dp_gguf_value *v)
{
    int64_t i;
    switch (v->type) {
    case DP_GGUF_STRING: return json_object_new_string_len(v->v.str.ptr, (int)(v->v.str.len > 0x7fffffff ? 0x7fffffff : v->v.str.len));
    case DP_GGUF_BOOL: return json_object_new_boolean(v->v.b);
    case DP_GGUF_FLOAT32: return json_object_new_double(v->v.f32);
    case DP_GGUF_FLOAT64: return json_object_new_double(v->v.f64);
    case DP_GGUF_UINT64: return json_object_new_uint64(v->v.u64);
    case DP_GGUF_ARRAY: {
        struct json_object *a = json_object_new_array();
        uint64_t n = v->v.arr.n, shown = n < ARRAY_PREVIEW ? n : ARRAY_PREVIEW;
        for (uint64_t k = 0; k < shown; k++) {
            dp_gguf_value e;
            if (dp_gguf_array_elem(v, k, &e)) json_object_array_add(a, value_json(&e));
        }
        if (n == shown) return a;
        struct json_object *o = json_object_new_object();   /* abbreviated: say so */
        json_object_object_add(o, "type", json_object_new_string(dp_gguf_type_name(v->v.arr.type)));
        json_object_object_add(o, "count", json_object_new_uint64(n));
        json_object_object_add(o, "head", a);
        return o;
    }
    default: return dp_gguf_value_int(v, &i) ? json_object_new_int64(i) : json_object_new_null();
    }
}

static struct json_object *ids_json(const int64_t *ids, size_t n)
{
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) json_object_array_add(a, json_object_new_int64(ids[i]));
    return a;
}

static struct json_object *scaling_json(const dp_rope_scaling *s)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "rope_type", json_object_new_string(s->type));
    json_object_object_add(o, "factor", json_object_new_double(s->factor));
    json_object_object_add(o, "low_freq_factor", json_object_new_double(s->low_freq_factor));
    json_object_object_add(o, "high_freq_factor", json_object_new_double(s->high_freq_factor));
    json_object_object_add(o, "original_max_position_embeddings", json_object_new_int64(s->original_max_position_embeddings));
    return o;
}

static struct json_object *config_json(const dp_hfconfig *c)
{
    struct json_object *o = json_object_new_object();
#define I(k) json_object_object_add(o, #k, json_object_new_int64(c->k))
#define D(k) json_object_object_add(o, #k, json_object_new_double(c->k))
#define B(k) json_object_object_add(o, #k, json_object_new_boolean(c->k))
#define S(k) json_object_object_add(o, #k, json_object_new_string(c->k))
    S(architecture); S(model_type); I(hidden_size); I(intermediate_size); I(num_hidden_layers);
    I(num_attention_heads); I(num_key_value_heads); I(head_dim); I(vocab_size); I(max_position_embeddings);
    D(rms_norm_eps); S(hidden_activation); D(rope_theta); D(rope_local_theta); D(partial_rotary_factor);
    I(sliding_window); I(sliding_window_pattern); D(query_pre_attn_scalar); D(final_logit_softcapping);
    D(attn_logit_softcapping); B(tie_word_embeddings); B(attention_bias); B(mlp_bias); I(num_local_experts);
    I(num_experts_per_tok); I(bos_token_id); I(pad_token_id);
#undef I
#undef D
#undef B
#undef S
    json_object_object_add(o, "rope_scaling", scaling_json(&c->rope_scaling));
    json_object_object_add(o, "rope_local_scaling", scaling_json(&c->rope_local_scaling));
    json_object_object_add(o, "eos_token_id", ids_json(c->eos_token_ids, c->n_eos));
    struct json_object *lt = json_object_new_array();
    for (int64_t i = 0; i < c->num_hidden_layers; i++)
        json_object_array_add(lt, json_object_new_string(dp_layer_kind_name(c->layer_types[i])));
    json_object_object_add(o, "layer_types", lt);
    return o;
}

static void print_json(const dp_model *m)
{
    struct json_object *root = json_object_new_object();
    json_object_object_add(root, "path", json_object_new_string(dp_model_path(m)));
    json_object_object_add(root, "kind", json_object_new_string(dp_model_kind_name(dp_model_kind_of(m))));
    if (dp_model_config(m)) json_object_object_add(root, "config", config_json(dp_model_config(m)));
    struct json_object *md = json_object_new_object();
    if (dp_model_kind_of(m) == DP_MODEL_GGUF) {
        const dp_gguf *g = dp_model_gguf(m);
        for (size_t i = 0; i < dp_gguf_kv_count(g); i++)
            json_object_object_add(md, dp_gguf_kv_key(g, i), value_json(dp_gguf_kv_value(g, i)));
    } else {
        const dp_safetensors *st = dp_model_safetensors(m);
        for (size_t i = 0; i < dp_safetensors_metadata_count(st); i++) {
            const char *k, *v;
            dp_safetensors_metadata_at(st, i, &k, &v);
            json_object_object_add(md, k, json_object_new_string(v));
        }
    }
    json_object_object_add(root, "metadata", md);
    struct json_object *ts = json_object_new_array();
    for (size_t i = 0; i < dp_model_tensor_count(m); i++) {
        const dp_model_tensor *t = dp_model_tensor_at(m, i);
        struct json_object *o = json_object_new_object(), *sh = json_object_new_array();
        for (int d = 0; d < t->ndim; d++) json_object_array_add(sh, json_object_new_int64(t->shape[d]));
        json_object_object_add(o, "name", json_object_new_string(t->name));
        json_object_object_add(o, "dtype", json_object_new_string(t->type_name));
        json_object_object_add(o, "shape", sh);
        if (t->padded_cols) json_object_object_add(o, "padded_cols", json_object_new_int64(t->padded_cols));
        json_object_object_add(o, "bytes", json_object_new_uint64(t->bytes));
        json_object_array_add(ts, o);
    }
    json_object_object_add(root, "tensors", ts);
    json_object_object_add(root, "total_bytes", json_object_new_uint64(dp_model_total_bytes(m)));
    puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
}

int dp_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool as_json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) as_json = true;
        else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "doppler inspect: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 1;
        } else path = argv[i];
    }
    if (!path) {
        usage(stderr);
        return 1;
    }
    dp_err err = {0};
    dp_model *m;
    if (dp_model_open(path, &m, &err) != DP_OK) {
        fprintf(stderr, "doppler inspect: %s\n", err.msg);
        return 1;
    }
    if (as_json) print_json(m);
    else print_text(m);
    dp_model_close(m);
    return fflush(stdout) == 0 ? 0 : 1;
}
