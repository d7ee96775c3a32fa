/*
** core/text/tok_json.c: HF tokenizer.json (plain, gzip, or in a model directory) -> dp_tok_vocab ->
** dp_tokenizer. Only what our two BPE flavours can honour is accepted; anything else (a Unigram model,
** an unknown normaliser or pre-tokenizer) is refused by name instead of tokenising wrongly.
** tokenizer.json does not say which token is BOS/EOS: the post-processor's TemplateProcessing gives
** BOS when present, tokenizer_config.json next to the file (directory loads) gives bos/eos and the chat
** template, and the well-known names of each family fill the rest.
*/
#include "core/text/tok_internal.h"

#include <errno.h>
#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* Ids beyond this many times the entry count are refused: a hostile file could otherwise make us
** allocate a table for id 2^31. */
#define MAX_HOLE_FACTOR 2

static dp_status read_file(const char *path, char **buf, size_t *len, bool must_exist, dp_err *err)
{
    *buf = NULL;
    *len = 0;
    gzFile gz = gzopen(path, "rb");   /* reads plain files as they are */
    if (!gz) {
        if (!must_exist && errno == ENOENT) return DP_OK;
        return DP_FAIL(err, DP_EIO, "%s: cannot open: %s", path, strerror(errno ? errno : ENOMEM));
    }
    gzbuffer(gz, 1 << 17);
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap + 1);
    dp_status st = DP_OK;
    if (!b) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path); goto done; }
    for (;;) {
        if (n == cap) {
            if (cap >= ((size_t)1 << 31)) { st = DP_FAIL(err, DP_EFORMAT, "%s: larger than 2 GiB", path); goto done; }
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path); goto done; }
            b = nb;
            cap *= 2;
        }
        int r = gzread(gz, b + n, (unsigned)(cap - n > (1u << 30) ? (1u << 30) : cap - n));
        if (r < 0) break;
        if (r == 0) break;
        n += (size_t)r;
    }
    int zerr;
    const char *zmsg = gzerror(gz, &zerr);
    if (zerr != Z_OK && zerr != Z_STREAM_END) {
        st = DP_FAIL(err, DP_EFORMAT, "%s: %s (truncated or corrupt gzip?)", path,
                     zerr == Z_ERRNO ? strerror(errno) : zmsg);
        goto done;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    b = NULL;
done:
    gzclose_r(gz);
    free(b);
    return st;
}

static dp_status parse_json(const char *text, size_t len, const char *name, json_object **out, dp_err *err)
{
    *out = NULL;
    if (len > INT32_MAX) return DP_FAIL(err, DP_EFORMAT, "%s: JSON larger than 2 GiB", name);
    json_tokener *tk = json_tokener_new_ex(64);
    if (!tk) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    /* JSON text is UTF-8 (RFC 8259), and HF's loader refuses anything else: so do we, by name, rather
    ** than carry invalid bytes into token pieces and patterns. */
    json_tokener_set_flags(tk, JSON_TOKENER_VALIDATE_UTF8);
    json_object *o = json_tokener_parse_ex(tk, text, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tk);
    size_t at = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    if (je == json_tokener_continue) {
        json_object_put(o);
        return DP_FAIL(err, DP_EFORMAT, "%s: JSON ends early (truncated file?)", name);
    }
    if (je == json_tokener_error_parse_utf8_string) {
        json_object_put(o);
        return DP_FAIL(err, DP_EFORMAT, "%s: not valid UTF-8 near byte %zu (JSON text must be UTF-8)", name, at);
    }
    if (je != json_tokener_success || !o) {
        json_object_put(o);
        return DP_FAIL(err, DP_EFORMAT, "%s: invalid JSON at byte %zu: %s", name, at,
                       je != json_tokener_success ? json_tokener_error_desc(je) : "null document");
    }
    for (; at < len; at++) {
        if (!strchr(" \t\r\n", text[at])) {
            json_object_put(o);
            return DP_FAIL(err, DP_EFORMAT, "%s: unexpected data after the JSON value at byte %zu", name, at);
        }
    }
    *out = o;
    return DP_OK;
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object)) return NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *get_str(json_object *o, const char *key)
{
    json_object *v = get(o, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static bool get_bool(json_object *o, const char *key, bool dflt)
{
    json_object *v = get(o, key);
    return v && json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : dflt;
}

/* What the normaliser, pre-tokenizer and decoder chain says, collected over Sequences. */
typedef struct chain_info {
    bool space_to_meta;   /* Replace(" " -> "▁") or Metaspace */
    bool prepend_each;    /* normaliser Prepend("▁") */
    bool prepend_first;   /* Metaspace prepend_scheme first/always */
    bool nfc;
    bool byte_level;
    const char *regex;    /* Split(Regex, Isolated) */
} chain_info;

static dp_status walk(json_object *o, const char *what, chain_info *ci, const char *name, dp_err *err)
{
    if (!o || json_object_is_type(o, json_type_null)) return DP_OK;
    const char *type = get_str(o, "type");
    if (!type) return DP_FAIL(err, DP_EFORMAT, "%s: %s has no \"type\"", name, what);
    if (!strcmp(type, "Sequence")) {
        json_object *arr = get(o, "normalizers");
        if (!arr) arr = get(o, "pretokenizers");
        if (!arr) arr = get(o, "decoders");
        if (!arr || !json_object_is_type(arr, json_type_array))
            return DP_FAIL(err, DP_EFORMAT, "%s: %s Sequence has no list", name, what);
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
            dp_status st = walk(json_object_array_get_idx(arr, i), what, ci, name, err);
            if (st != DP_OK) return st;
        }
        return DP_OK;
    }
    json_object *pat = get(o, "pattern");
    const char *pat_s = get_str(pat, "String"), *pat_re = get_str(pat, "Regex");
    if (!strcmp(what, "normalizer")) {
        if (!strcmp(type, "NFC")) { ci->nfc = true; return DP_OK; }
        if (!strcmp(type, "Replace") && pat_s && !strcmp(pat_s, " ") && get_str(o, "content") &&
            !strcmp(get_str(o, "content"), "\xE2\x96\x81")) { ci->space_to_meta = true; return DP_OK; }
        if (!strcmp(type, "Prepend") && get_str(o, "prepend") && !strcmp(get_str(o, "prepend"), "\xE2\x96\x81")) {
            ci->prepend_each = true;
            return DP_OK;
        }
    } else if (!strcmp(what, "pre_tokenizer")) {
        if (!strcmp(type, "ByteLevel")) {
            if (get_bool(o, "add_prefix_space", false))
                return DP_FAIL(err, DP_EFORMAT, "%s: ByteLevel add_prefix_space is not supported", name);
            ci->byte_level = true;
            if (get_bool(o, "use_regex", true) && !ci->regex) ci->regex = dp_tokenizer_pre_regex("gpt2");
            return DP_OK;
        }
        if (!strcmp(type, "Split") && pat_re) {
            const char *beh = get_str(o, "behavior");
            if (!beh || strcmp(beh, "Isolated") != 0 || get_bool(o, "invert", false))
                return DP_FAIL(err, DP_EFORMAT, "%s: Split behaviour %s is not supported (Isolated only)",
                               name, beh ? beh : "(none)");
            ci->regex = pat_re;
            return DP_OK;
        }
        /* Split(" ") after Replace(" " -> "▁") finds nothing: accepted as a no-op for SPM */
        if (!strcmp(type, "Split") && pat_s && !strcmp(pat_s, " ")) return DP_OK;
        if (!strcmp(type, "Metaspace")) {
            const char *scheme = get_str(o, "prepend_scheme");
            ci->space_to_meta = true;
            if (!scheme ? get_bool(o, "add_prefix_space", true) : strcmp(scheme, "never") != 0) ci->prepend_first = true;
            return DP_OK;
        }
    } else {
        return DP_OK;   /* decoders follow from the model kind */
    }
    return DP_FAIL(err, DP_EFORMAT, "%s: %s type \"%s\" is not supported", name, what, type);
}

static int32_t find_id(const dp_tok_vocab *v, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < v->n_tokens; i++) {
        if (v->tokens[i] && v->token_lens[i] == n && !memcmp(v->tokens[i], s, n)) return (int32_t)i;
    }
    return -1;
}

static int32_t first_id(const dp_tok_vocab *v, const char *const *names)
{
    for (; *names; names++) {
        int32_t id = find_id(v, *names);
        if (id >= 0) return id;
    }
    return -1;
}

/* tokenizer_config.json's bos_token may be "<bos>" or {"content": "<bos>", ...}. */
static const char *config_token(json_object *cfg, const char *key)
{
    json_object *v = get(cfg, key);
    if (v && json_object_is_type(v, json_type_string)) return json_object_get_string(v);
    return get_str(v, "content");
}

static dp_status build(json_object *root, json_object *cfg, const char *name, dp_tokenizer **out, dp_err *err)
{
    dp_status st = DP_OK;
    dp_tok_vocab v = { .name = name, .bos = -1, .eos = -1, .eot = -1, .unk = -1, .pad = -1 };
    const char **tokens = NULL, **mleft = NULL, **mright = NULL;
    uint32_t *lens = NULL;
    int32_t *types = NULL;
    chain_info ci = {0};

    if (!json_object_is_type(root, json_type_object))
        return DP_FAIL(err, DP_EFORMAT, "%s: JSON is not an object (a tokenizer.json holds one object)", name);
    json_object *model = get(root, "model");
    if (!model || !json_object_is_type(model, json_type_object))
        return DP_FAIL(err, DP_EFORMAT, "%s: no \"model\" object (is this a tokenizer.json?)", name);
    const char *mtype = get_str(model, "type");
    if (mtype && strcmp(mtype, "BPE") != 0)
        return DP_FAIL(err, DP_EFORMAT, "%s: model type \"%s\" is not supported (BPE only)", name, mtype);
    json_object *vocab = get(model, "vocab"), *merges = get(model, "merges"), *added = get(root, "added_tokens");
    if (!vocab || !json_object_is_type(vocab, json_type_object))
        return DP_FAIL(err, DP_EFORMAT, "%s: model has no \"vocab\" object", name);
    if (merges && !json_object_is_type(merges, json_type_array))
        return DP_FAIL(err, DP_EFORMAT, "%s: model \"merges\" is not an array", name);
    if (added && !json_object_is_type(added, json_type_array))
        return DP_FAIL(err, DP_EFORMAT, "%s: \"added_tokens\" is not an array", name);

    if ((st = walk(get(root, "normalizer"), "normalizer", &ci, name, err)) != DP_OK ||
        (st = walk(get(root, "pre_tokenizer"), "pre_tokenizer", &ci, name, err)) != DP_OK)
        return st;
    json_object *dec = get(root, "decoder");
    bool dec_byte_level = dec && get_str(dec, "type") && !strcmp(get_str(dec, "type"), "ByteLevel");
    if (ci.byte_level || dec_byte_level) {
        if (ci.space_to_meta) return DP_FAIL(err, DP_EFORMAT, "%s: mixes byte-level and \"▁\" spaces", name);
        v.model = DP_TOK_BYTE_BPE;
        v.split_regex = ci.regex;
        v.nfc = ci.nfc;
    } else if (ci.space_to_meta) {
        if (ci.nfc) return DP_FAIL(err, DP_EFORMAT, "%s: NFC with SentencePiece-style BPE is not supported", name);
        v.model = DP_TOK_SPM_BPE;
        v.prefix = ci.prepend_each ? DP_TOK_PREFIX_EACH : ci.prepend_first ? DP_TOK_PREFIX_FIRST : DP_TOK_PREFIX_NONE;
    } else {
        return DP_FAIL(err, DP_EFORMAT, "%s: cannot tell the tokenizer kind (neither ByteLevel nor \"▁\" spaces)", name);
    }
    v.byte_fallback = get_bool(model, "byte_fallback", false);
    v.fuse_unk = get_bool(model, "fuse_unk", false);
    v.ignore_merges = get_bool(model, "ignore_merges", false);

    /* ids: vocab entries, then added tokens (which may lie beyond the vocab) */
    size_t n_entries = (size_t)json_object_object_length(vocab), n_added = added ? json_object_array_length(added) : 0;
    int64_t max_id = -1;
    json_object_object_foreach(vocab, key, val) {
        (void)key;
        if (!json_object_is_type(val, json_type_int))
            return DP_FAIL(err, DP_EFORMAT, "%s: vocab entry \"%.64s\" has a non-integer id", name, key);
        int64_t id = json_object_get_int64(val);
        if (id < 0 || id >= (int64_t)((n_entries + n_added) * MAX_HOLE_FACTOR + 1024))
            return DP_FAIL(err, DP_EFORMAT, "%s: vocab entry \"%.64s\" has id %lld, out of range", name, key, (long long)id);
        if (id > max_id) max_id = id;
    }
    for (size_t i = 0; i < n_added; i++) {
        json_object *a = json_object_array_get_idx(added, i), *idv = get(a, "id");
        if (!idv || !json_object_is_type(idv, json_type_int) || !get_str(a, "content"))
            return DP_FAIL(err, DP_EFORMAT, "%s: added_tokens[%zu] lacks an integer \"id\" or a \"content\" string", name, i);
        int64_t id = json_object_get_int64(idv);
        if (id < 0 || id >= (int64_t)((n_entries + n_added) * MAX_HOLE_FACTOR + 1024))
            return DP_FAIL(err, DP_EFORMAT, "%s: added_tokens[%zu] has id %lld, out of range", name, i, (long long)id);
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return DP_FAIL(err, DP_EFORMAT, "%s: the vocabulary is empty", name);
    v.n_tokens = (size_t)max_id + 1;
    tokens = calloc(v.n_tokens, sizeof *tokens);
    lens = calloc(v.n_tokens, sizeof *lens);
    types = malloc(v.n_tokens * sizeof *types);
    if (!tokens || !lens || !types) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name); goto done; }
    for (size_t i = 0; i < v.n_tokens; i++) types[i] = DP_TOKTYPE_NORMAL;
    {
        json_object_object_foreach(vocab, key, val) {
            int64_t id = json_object_get_int64(val);
            if (tokens[id]) continue;   /* two pieces for one id: the first one wins */
            tokens[id] = key;
            lens[id] = (uint32_t)strlen(key);
        }
    }
    for (size_t i = 0; i < n_added; i++) {
        json_object *a = json_object_array_get_idx(added, i);
        int64_t id = json_object_get_int64(get(a, "id"));
        json_object *cs = get(a, "content");
        tokens[id] = json_object_get_string(cs);
        lens[id] = (uint32_t)json_object_get_string_len(cs);
        types[id] = get_bool(a, "special", false) ? DP_TOKTYPE_CONTROL : DP_TOKTYPE_USER_DEFINED;
    }
    for (size_t i = 0; i < v.n_tokens; i++) {
        if (tokens[i] && types[i] == DP_TOKTYPE_NORMAL && lens[i] == 6 && !memcmp(tokens[i], "<0x", 3) &&
            tokens[i][5] == '>')
            types[i] = DP_TOKTYPE_BYTE;
    }
    v.tokens = tokens;
    v.token_lens = lens;
    v.types = types;

    if (merges) {
        v.n_merges = json_object_array_length(merges);
        mleft = calloc(v.n_merges ? v.n_merges : 1, sizeof *mleft);
        mright = calloc(v.n_merges ? v.n_merges : 1, sizeof *mright);
        if (!mleft || !mright) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name); goto done; }
        for (size_t i = 0; i < v.n_merges; i++) {
            json_object *m = json_object_array_get_idx(merges, i);
            if (m && json_object_is_type(m, json_type_string)) {
                /* "left right": split here so that both forms reach from_vocab alike */
                const char *s = json_object_get_string(m), *sp = strchr(s, ' ');
                if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' ')) {
                    st = DP_FAIL(err, DP_EFORMAT, "%s: merges[%zu] \"%.64s\" is not \"left right\"", name, i, s);
                    goto done;
                }
                char *l = strndup(s, (size_t)(sp - s));
                if (!l) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name); goto done; }
                mleft[i] = l;
                mright[i] = sp + 1;
            } else if (m && json_object_is_type(m, json_type_array) && json_object_array_length(m) == 2 &&
                       json_object_is_type(json_object_array_get_idx(m, 0), json_type_string) &&
                       json_object_is_type(json_object_array_get_idx(m, 1), json_type_string)) {
                char *l = strdup(json_object_get_string(json_object_array_get_idx(m, 0)));
                if (!l) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name); goto done; }
                mleft[i] = l;
                mright[i] = json_object_get_string(json_object_array_get_idx(m, 1));
            } else {
                st = DP_FAIL(err, DP_EFORMAT, "%s: merges[%zu] is neither \"left right\" nor [\"left\", \"right\"]", name, i);
                goto done;
            }
        }
        v.merges = mleft;
        v.merges_right = mright;
    }

    /* special ids: unk from the model; BOS from TemplateProcessing; the rest by config or by name */
    const char *unk = get_str(model, "unk_token");
    if (unk) v.unk = find_id(&v, unk);
    json_object *pp = get(root, "post_processor");
    if (get_str(pp, "type") && !strcmp(get_str(pp, "type"), "TemplateProcessing")) {
        json_object *single = get(pp, "single");
        json_object *first = single && json_object_is_type(single, json_type_array) && json_object_array_length(single)
                           ? json_object_array_get_idx(single, 0) : NULL;
        const char *bos = get_str(get(first, "SpecialToken"), "id");
        if (bos) {
            v.bos = find_id(&v, bos);
            v.add_bos = v.bos >= 0;
        }
    }
    static const char *const bos_names[] = { "<bos>", "<|begin_of_text|>", "<s>", NULL };
    static const char *const eos_names[] = { "<eos>", "<|end_of_text|>", "</s>", "<|endoftext|>", NULL };
    static const char *const eot_names[] = { "<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|end|>", NULL };
    const char *cb = config_token(cfg, "bos_token"), *ce = config_token(cfg, "eos_token");
    if (cb) v.bos = find_id(&v, cb);
    if (v.bos < 0 && !cfg) v.bos = first_id(&v, bos_names);
    if (ce) v.eos = find_id(&v, ce);
    if (v.eos < 0) v.eos = first_id(&v, eos_names);
    v.eot = first_id(&v, eot_names);
    if (cfg && get(cfg, "add_bos_token")) v.add_bos = get_bool(cfg, "add_bos_token", false) && v.bos >= 0;
    else if (!v.add_bos && v.bos >= 0 && find_id(&v, "<|begin_of_text|>") == v.bos) v.add_bos = true;   /* Llama 3 */
    v.pad = find_id(&v, "<pad>");

    st = dp_tokenizer_from_vocab(&v, out, err);
    if (st == DP_OK && cfg && get_str(cfg, "chat_template")) {
        (*out)->chat_template = strdup(get_str(cfg, "chat_template"));
        if (!(*out)->chat_template) {
            dp_tokenizer_destroy(*out);
            *out = NULL;
            st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
        }
    }
done:
    if (mleft) for (size_t i = 0; i < v.n_merges; i++) free((char *)mleft[i]);
    free(mleft);
    free(mright);
    free(tokens);
    free(lens);
    free(types);
    return st;
}

dp_status dp_tokenizer_load_json(const char *json, size_t len, const char *name, dp_tokenizer **out, dp_err *err)
{
    json_object *root = NULL;
    *out = NULL;
    dp_status st = parse_json(json, len, name, &root, err);
    if (st == DP_OK) st = build(root, NULL, name, out, err);
    json_object_put(root);
    return st;
}

dp_status dp_tokenizer_load(const char *path, dp_tokenizer **out, dp_err *err)
{
    struct stat sb;
    char *text = NULL, *cfg_text = NULL, *file = NULL, *cfg_path = NULL;
    size_t len = 0, cfg_len = 0;
    json_object *root = NULL, *cfg = NULL;
    dp_status st = DP_OK;
    *out = NULL;
    if (stat(path, &sb) != 0) return DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode) && dp_tokenizer_is_gguf(path)) return dp_tokenizer_load_gguf(path, out, err);
    if (S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path) + 32;
        file = malloc(n);
        cfg_path = malloc(n);
        if (!file || !cfg_path) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path); goto done; }
        snprintf(file, n, "%s/tokenizer.json", path);
        if (stat(file, &sb) != 0) snprintf(file, n, "%s/tokenizer.json.gz", path);
        if (stat(file, &sb) != 0) {
            st = DP_FAIL(err, DP_EIO, "%s: directory has no tokenizer.json or tokenizer.json.gz", path);
            goto done;
        }
        snprintf(cfg_path, n, "%s/tokenizer_config.json", path);
        if ((st = read_file(cfg_path, &cfg_text, &cfg_len, false, err)) != DP_OK) goto done;
        if (cfg_text && (st = parse_json(cfg_text, cfg_len, cfg_path, &cfg, err)) != DP_OK) goto done;
        if (cfg && !json_object_is_type(cfg, json_type_object)) {
            st = DP_FAIL(err, DP_EFORMAT, "%s: JSON is not an object", cfg_path);
            goto done;
        }
    } else {
        file = strdup(path);
        if (!file) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path); goto done; }
    }
    if ((st = read_file(file, &text, &len, true, err)) != DP_OK) goto done;
    if ((st = parse_json(text, len, file, &root, err)) != DP_OK) goto done;
    free(text);   /* json-c holds its own copies */
    text = NULL;
    st = build(root, cfg, file, out, err);
done:
    json_object_put(root);
    json_object_put(cfg);
    free(text);
    free(cfg_text);
    free(file);
    free(cfg_path);
    return st;
}
