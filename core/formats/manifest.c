/*
** core/formats/manifest.c: see manifest.h. libyaml loads the whole document (manifests are small); we
** then walk one mapping and check every key, because a misspelt key that is silently ignored would run
** a model with settings the user did not get.
*/
#include "core/formats/manifest.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MANIFEST_MAX_BYTES (1u << 20)   /* a manifest is a few lines; anything larger is not one */

static const char *const top_keys[] = {"name", "model", "recipe", "quantization", "source", "description",
                                       "kernel_hints"};
#define N_TOP_KEYS (sizeof top_keys / sizeof top_keys[0])

static const char *const quants[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m",
                                     "q4_k_m-padk"};

static dp_status read_text(const char *path, char **text, size_t *len, dp_err *err)
{
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return DP_FAIL(err, DP_EIO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(MANIFEST_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    }
    size_t n = fread(buf, 1, MANIFEST_MAX_BYTES + 1, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad || n > MANIFEST_MAX_BYTES) {
        free(buf);
        return DP_FAIL(err, bad ? DP_EIO : DP_EFORMAT, "%s: %s", path,
                       bad ? "read error" : "larger than 1 MiB, not a manifest");
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return DP_OK;
}

static dp_status load(const char *name, const char *text, size_t len, yaml_document_t *doc, dp_err *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    dp_status st = DP_OK;
    if (!yaml_parser_load(&p, doc)) {
        st = DP_FAIL(err, DP_EFORMAT, "%s:%zu: YAML: %s %s", name, p.problem_mark.line + 1,
                     p.problem ? p.problem : "syntax error", p.context ? p.context : "");
    } else if (!yaml_document_get_root_node(doc)) {
        yaml_document_delete(doc);
        st = DP_FAIL(err, DP_EFORMAT, "%s: empty YAML document", name);
    }
    yaml_parser_delete(&p);
    return st;
}

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static void free_pairs(dp_manifest_pair *p, size_t n)
{
    if (!p) return;
    for (size_t i = 0; i < n; i++) {
        free(p[i].key);
        free(p[i].value);
    }
    free(p);
}

/* A mapping of scalar -> scalar into pairs; what names the mapping in messages. */
static dp_status flat_pairs(const char *name, yaml_document_t *doc, const yaml_node_t *map, const char *what,
                            dp_manifest_pair **out, size_t *n, dp_err *err)
{
    *out = NULL;
    *n = 0;
    if (map->type != YAML_MAPPING_NODE)
        return DP_FAIL(err, DP_EFORMAT, "%s:%d: %s must be a mapping of hint: value", name, line_of(map), what);
    size_t cap = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    dp_manifest_pair *p = calloc(cap ? cap : 1, sizeof *p);
    if (!p) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    size_t k = 0;
    for (yaml_node_pair_t *e = map->data.mapping.pairs.start; e < map->data.mapping.pairs.top; e++) {
        yaml_node_t *kn = yaml_document_get_node(doc, e->key), *vn = yaml_document_get_node(doc, e->value);
        const char *ks = scalar(kn), *vs = scalar(vn);
        dp_status st = DP_OK;
        if (!ks || !vs) {
            st = DP_FAIL(err, DP_EFORMAT, "%s:%d: %s: every entry must be 'name: value' with a plain value", name,
                         line_of(kn), what);
        } else {
            for (size_t j = 0; j < k; j++)
                if (strcmp(p[j].key, ks) == 0)
                    st = DP_FAIL(err, DP_EFORMAT, "%s:%d: %s: '%s' given twice", name, line_of(kn), what, ks);
        }
        if (st == DP_OK && (!(p[k].key = strdup(ks)) || !(p[k].value = strdup(vs))))
            st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
        if (st != DP_OK) {
            free_pairs(p, k + 1);
            return st;
        }
        p[k].line = line_of(kn);
        k++;
    }
    *out = p;
    *n = k;
    return DP_OK;
}

static dp_status set_string(const char *name, char **field, const yaml_node_t *v, const char *key, dp_err *err)
{
    const char *s = scalar(v);
    if (!s || !*s) return DP_FAIL(err, DP_EFORMAT, "%s:%d: '%s' must be a non-empty string", name, line_of(v), key);
    if (!(*field = strdup(s))) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    return DP_OK;
}

static dp_status walk(const char *name, yaml_document_t *doc, dp_manifest *m, dp_err *err)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (root->type != YAML_MAPPING_NODE)
        return DP_FAIL(err, DP_EFORMAT, "%s: a manifest is a mapping (model: ..., recipe: ...)", name);
    bool seen[N_TOP_KEYS] = {0};
    for (yaml_node_pair_t *e = root->data.mapping.pairs.start; e < root->data.mapping.pairs.top; e++) {
        yaml_node_t *kn = yaml_document_get_node(doc, e->key), *vn = yaml_document_get_node(doc, e->value);
        const char *k = scalar(kn);
        size_t idx = N_TOP_KEYS;
        for (size_t i = 0; k && i < N_TOP_KEYS; i++)
            if (strcmp(k, top_keys[i]) == 0) idx = i;
        if (idx == N_TOP_KEYS)
            return DP_FAIL(err, DP_EINVAL, "%s:%d: unknown key '%s'; valid keys: name, model, recipe, quantization, "
                           "source, description, kernel_hints", name, line_of(kn), k ? k : "?");
        if (seen[idx]) return DP_FAIL(err, DP_EINVAL, "%s:%d: '%s' given twice", name, line_of(kn), k);
        seen[idx] = true;
        dp_status st;
        switch (idx) {
        case 0: st = set_string(name, &m->name, vn, k, err); break;
        case 1: st = set_string(name, &m->model, vn, k, err); break;
        case 2: st = set_string(name, &m->recipe, vn, k, err); break;
        case 3: st = set_string(name, &m->quantization, vn, k, err); break;
        case 4: st = set_string(name, &m->source, vn, k, err); break;
        case 5: st = set_string(name, &m->description, vn, k, err); break;
        default:
            /* an empty "kernel_hints:" is an empty scalar: no hints */
            if (scalar(vn) && !*scalar(vn)) st = DP_OK;
            else st = flat_pairs(name, doc, vn, "kernel_hints", &m->hints, &m->n_hints, err);
            break;
        }
        if (st != DP_OK) return st;
    }
    if (!m->model) return DP_FAIL(err, DP_EINVAL, "%s: 'model' is missing (the model directory or GGUF file)", name);
    if (m->quantization) {
        bool ok = false;
        for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++) ok = ok || strcmp(m->quantization, quants[i]) == 0;
        if (!ok)
            return DP_FAIL(err, DP_EINVAL, "%s: quantization '%s' is not valid; valid values: %s", name, m->quantization,
                           DP_MANIFEST_QUANTS);
    }
    return DP_OK;
}

dp_status dp_manifest_parse(const char *name, const char *text, size_t len, dp_manifest **out, dp_err *err)
{
    *out = NULL;
    dp_manifest *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(name))) {
        free(m);
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    }
    yaml_document_t doc;
    dp_status st = load(name, text, len, &doc, err);
    if (st == DP_OK) {
        st = walk(name, &doc, m, err);
        yaml_document_delete(&doc);
    }
    if (st != DP_OK) {
        dp_manifest_free(m);
        return st;
    }
    *out = m;
    return DP_OK;
}

dp_status dp_manifest_read(const char *path, dp_manifest **out, dp_err *err)
{
    char *text;
    size_t len = 0;
    *out = NULL;
    dp_status st = read_text(path, &text, &len, err);
    if (st != DP_OK) return st;
    st = dp_manifest_parse(path, text, len, out, err);
    free(text);
    return st;
}

void dp_manifest_free(dp_manifest *m)
{
    if (!m) return;
    free(m->path);
    free(m->name);
    free(m->model);
    free(m->recipe);
    free(m->quantization);
    free(m->source);
    free(m->description);
    free_pairs(m->hints, m->n_hints);
    free(m);
}

dp_status dp_manifest_parse_pairs(const char *name, const char *text, size_t len, dp_manifest_pair **out, size_t *n,
                                  dp_err *err)
{
    *out = NULL;
    *n = 0;
    yaml_document_t doc;
    dp_status st = load(name, text, len, &doc, err);
    if (st != DP_OK) return st;
    st = flat_pairs(name, &doc, yaml_document_get_root_node(&doc), "the hints file", out, n, err);
    yaml_document_delete(&doc);
    return st;
}

dp_status dp_manifest_read_pairs(const char *path, dp_manifest_pair **out, size_t *n, dp_err *err)
{
    char *text;
    size_t len = 0;
    *out = NULL;
    *n = 0;
    dp_status st = read_text(path, &text, &len, err);
    if (st != DP_OK) return st;
    st = dp_manifest_parse_pairs(path, text, len, out, n, err);
    free(text);
    return st;
}

void dp_manifest_pairs_free(dp_manifest_pair *p, size_t n) { free_pairs(p, n); }
