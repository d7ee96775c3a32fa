/*
** core/text/tok_gguf.c: a tokenizer from a GGUF file's tokenizer.ggml.* metadata, so that a GGUF
** model needs no tokenizer.json beside it. The keys map onto dp_tok_vocab as tokenizer.h lists;
** defaults for absent keys follow llama.cpp's loader (so the same file tokenises the same way):
**   add_bos_token      absent: true for "llama" (SentencePiece) vocabularies, false for "gpt2"
**   add_space_prefix   absent: true for "llama" ("▁" before the first segment), unused for "gpt2"
**   pre                "gpt2" model only: the split regex; absent means "default" (GPT-2's)
** SentencePiece vocabularies fall back to <0xHH> byte tokens (llama.cpp always does) and fuse
** consecutive unknowns; byte-level ones ignore merges for whole-token words under Llama 3's
** pre-tokeniser (HF's ignore_merges, which llama.cpp applies to "llama-bpe" too) and NFC-normalise
** for Qwen's (HF tokenizer.json has an NFC normaliser there; GGUF does not say).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/gguf.h"
#include "core/text/tok_internal.h"

static const dp_gguf_value *find_array(const dp_gguf *g, const char *key, dp_gguf_type elem)
{
    const dp_gguf_value *v = dp_gguf_find(g, key);
    return v && v->type == DP_GGUF_ARRAY && v->v.arr.type == elem ? v : NULL;
}

static int32_t get_id(const dp_gguf *g, const char *key, size_t n_tokens)
{
    int64_t v;
    return dp_gguf_get_int(g, key, &v) && v >= 0 && (uint64_t)v < n_tokens ? (int32_t)v : -1;
}

static bool get_bool_or(const dp_gguf *g, const char *key, bool dflt)
{
    bool b;
    return dp_gguf_get_bool(g, key, &b) ? b : dflt;
}

dp_status dp_tokenizer_from_gguf(const dp_gguf *g, dp_tokenizer **out, dp_err *err)
{
    *out = NULL;
    const char *name = dp_gguf_path(g);
    char model[32], pre[64];
    if (!dp_gguf_get_string(g, "tokenizer.ggml.model", model, sizeof model))
        return DP_FAIL(err, DP_EFORMAT, "%s: no tokenizer.ggml.model (this GGUF carries no tokenizer)", name);
    dp_tok_vocab v = { .name = name };
    bool spm = strcmp(model, "llama") == 0;
    if (spm) v.model = DP_TOK_SPM_BPE;
    else if (strcmp(model, "gpt2") == 0) v.model = DP_TOK_BYTE_BPE;
    else return DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.model \"%s\" is not supported (llama, gpt2)", name, model);

    const dp_gguf_value *toks = find_array(g, "tokenizer.ggml.tokens", DP_GGUF_STRING);
    if (!toks || toks->v.arr.n == 0 || toks->v.arr.n > INT32_MAX)
        return DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.tokens is missing, empty or not an array of strings", name);
    size_t n = (size_t)toks->v.arr.n;
    const dp_gguf_value *scores = dp_gguf_find(g, "tokenizer.ggml.scores");
    const dp_gguf_value *types = dp_gguf_find(g, "tokenizer.ggml.token_type");
    const dp_gguf_value *merges = dp_gguf_find(g, "tokenizer.ggml.merges");
    if (scores && (scores->type != DP_GGUF_ARRAY || scores->v.arr.n != n))
        return DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.scores is not an array of %zu numbers", name, n);
    if (types && (types->type != DP_GGUF_ARRAY || types->v.arr.n != n))
        return DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.token_type is not an array of %zu integers", name, n);
    if (merges && (merges->type != DP_GGUF_ARRAY || merges->v.arr.type != DP_GGUF_STRING))
        return DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.merges is not an array of strings", name);
    size_t n_merges = merges ? (size_t)merges->v.arr.n : 0;

    dp_status st = DP_OK;
    const char **tok = calloc(n, sizeof *tok);
    uint32_t *lens = calloc(n, sizeof *lens);
    float *sc = scores ? malloc(n * sizeof *sc) : NULL;
    int32_t *ty = types ? malloc(n * sizeof *ty) : NULL;
    char **ml = n_merges ? calloc(n_merges, sizeof *ml) : NULL;
    const char **mr = n_merges ? calloc(n_merges, sizeof *mr) : NULL;
    if (!tok || !lens || (scores && !sc) || (types && !ty) || (n_merges && (!ml || !mr))) {
        st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory reading the tokenizer", name);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        dp_gguf_str s;
        double d;
        int64_t t;
        if (!dp_gguf_array_str(toks, i, &s) || s.len > UINT32_MAX) {
            st = DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.tokens[%zu] is not a string", name, i);
            goto done;
        }
        tok[i] = s.ptr;   /* not NUL-terminated: lens says where each ends */
        lens[i] = (uint32_t)s.len;
        if (sc) {
            if (!dp_gguf_array_double(scores, i, &d)) {
                st = DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.scores[%zu] is not a number", name, i);
                goto done;
            }
            sc[i] = (float)d;
        }
        if (ty) {
            if (!dp_gguf_array_int(types, i, &t) || t < DP_TOKTYPE_UNDEFINED || t > DP_TOKTYPE_BYTE) {
                st = DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.token_type[%zu] is not a token type (0..6)", name, i);
                goto done;
            }
            ty[i] = (int32_t)t;
        }
    }
    for (size_t i = 0; i < n_merges; i++) {
        dp_gguf_str s;
        const char *sp = NULL;
        if (dp_gguf_array_str(merges, i, &s)) sp = memchr(s.ptr, ' ', s.len);
        /* "left right": the first space splits (byte-level pieces never hold a plain space) */
        if (!sp || sp == s.ptr || (size_t)(sp - s.ptr) + 1 >= s.len) {
            st = DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.merges[%zu] is not \"left right\"", name, i);
            goto done;
        }
        size_t ll = (size_t)(sp - s.ptr);
        if (!(ml[i] = malloc(s.len + 1))) {
            st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory reading the tokenizer", name);
            goto done;
        }
        memcpy(ml[i], s.ptr, s.len);
        ml[i][s.len] = 0;
        ml[i][ll] = 0;           /* left part; the right part follows its NUL */
        mr[i] = ml[i] + ll + 1;
    }
    v.n_tokens = n;
    v.tokens = tok;
    v.token_lens = lens;
    v.scores = sc;
    v.types = ty;
    v.n_merges = n_merges;
    v.merges = (const char *const *)ml;
    v.merges_right = mr;
    v.bos = get_id(g, "tokenizer.ggml.bos_token_id", n);
    v.eos = get_id(g, "tokenizer.ggml.eos_token_id", n);
    v.eot = get_id(g, "tokenizer.ggml.eot_token_id", n);
    v.unk = get_id(g, "tokenizer.ggml.unknown_token_id", n);
    v.pad = get_id(g, "tokenizer.ggml.padding_token_id", n);
    v.add_bos = get_bool_or(g, "tokenizer.ggml.add_bos_token", spm) && v.bos >= 0;
    if (spm) {
        v.byte_fallback = true;
        v.fuse_unk = true;
        v.prefix = get_bool_or(g, "tokenizer.ggml.add_space_prefix", true) ? DP_TOK_PREFIX_FIRST : DP_TOK_PREFIX_NONE;
    } else {
        if (!dp_gguf_get_string(g, "tokenizer.ggml.pre", pre, sizeof pre)) snprintf(pre, sizeof pre, "default");
        v.split_regex = dp_tokenizer_pre_regex(pre);
        if (!v.split_regex) {
            st = DP_FAIL(err, DP_EFORMAT, "%s: tokenizer.ggml.pre \"%s\" (the split regex) is not supported", name, pre);
            goto done;
        }
        v.ignore_merges = v.split_regex == dp_tokenizer_pre_regex("llama-bpe");
        v.nfc = v.split_regex == dp_tokenizer_pre_regex("qwen2");
    }
    st = dp_tokenizer_from_vocab(&v, out, err);
done:
    for (size_t i = 0; ml && i < n_merges; i++) free(ml[i]);
    free(ml);
    free(mr);
    free(tok);
    free(lens);
    free(sc);
    free(ty);
    return st;
}

bool dp_tokenizer_is_gguf(const char *path)
{
    unsigned char b[4];
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    bool yes = fread(b, 1, 4, f) == 4 && memcmp(b, "GGUF", 4) == 0;
    fclose(f);
    return yes;
}

dp_status dp_tokenizer_load_gguf(const char *path, dp_tokenizer **out, dp_err *err)
{
    dp_gguf *g = NULL;
    *out = NULL;
    dp_status st = dp_gguf_open(path, &g, err);
    if (st != DP_OK) return st;
    st = dp_tokenizer_from_gguf(g, out, err);
    const dp_gguf_value *ct = dp_gguf_find(g, "tokenizer.chat_template");
    if (st == DP_OK && ct && ct->type == DP_GGUF_STRING &&
        !((*out)->chat_template = strndup(ct->v.str.ptr, (size_t)ct->v.str.len))) {
        dp_tokenizer_destroy(*out);
        *out = NULL;
        st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    }
    dp_gguf_close(g);
    return st;
}
