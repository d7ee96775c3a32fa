/*
** core/text/tok_vocab.c: builds a dp_tokenizer from plain arrays (dp_tok_vocab) and answers the
** lookups (piece <-> id, types, special ids). tokenizer.json and GGUF metadata both end here, so the
** checks live here: every merge names existing tokens, byte-level vocabularies hold all 256 byte
** characters, the split regex compiles.
*/
#include "core/text/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The split patterns of the GGUF pre-tokenizers we know, written as HF writes them (PCRE2 takes them
** as they are: (?i:...), \p{L}, \p{N} and the lookahead). */
#define RE_LLAMA3 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT2   "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

const char *dp_tokenizer_pre_regex(const char *pre)
{
    if (!pre) return NULL;
    if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") || !strcmp(pre, "smaug-bpe")) return RE_LLAMA3;
    if (!strcmp(pre, "qwen2") || !strcmp(pre, "qwen3")) return RE_QWEN2;
    if (!strcmp(pre, "gpt2") || !strcmp(pre, "default")) return RE_GPT2;
    return NULL;
}

uint32_t dp_tok_byte_to_cp(uint8_t b)
{
    /* Printable Latin-1 maps to itself; the other 68 bytes, in order, to 256.. */
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++) {
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174)) n++;
    }
    return 256 + n;
}

size_t dp_utf8_seq_len(const unsigned char *s, size_t n)
{
    if (!n) return 0;
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if (c == 0xED) { need = 2; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) need = 2;
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else return 0;
    if (n < need + 1) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k <= need; k++) {
        if (s[k] < 0x80 || s[k] > 0xBF) return 0;
    }
    return need + 1;
}

bool dp_utf8_whole(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t cl = dp_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!cl) return false;
        i += cl;
    }
    return true;
}

static int byte_token_value(const char *p, size_t len)
{
    /* HF's ByteFallback decoder: exactly "<0x" + two hex digits + ">". */
    if (len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static dp_status trie_add(dp_tokenizer *t, const char *p, size_t len, int32_t id, dp_err *err)
{
    if (!len) return DP_OK;
    if (t->n_trie + len > t->cap_trie) {   /* room for the whole path first: links then stay valid */
        size_t cap = t->cap_trie ? t->cap_trie : 1024;
        while (cap < t->n_trie + len) cap *= 2;
        dp_tok_trie *nt = realloc(t->trie, cap * sizeof *nt);
        if (!nt) return DP_FAIL(err, DP_ENOMEM, "%s: added-token table: out of host memory", t->name);
        t->trie = nt;
        t->cap_trie = cap;
    }
    int32_t *link = &t->trie_root[(uint8_t)p[0]];
    int32_t node = -1;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)p[i];
        if (i > 0) {
            link = &t->trie[node].child;
            while (*link >= 0 && t->trie[*link].byte != b) link = &t->trie[*link].sibling;
        }
        if (*link < 0) {
            int32_t n = (int32_t)t->n_trie++;
            t->trie[n] = (dp_tok_trie){ .child = -1, .sibling = -1, .id = -1, .byte = b };
            *link = n;
        }
        node = *link;
    }
    if (t->trie[node].id < 0 || id < t->trie[node].id) t->trie[node].id = id;
    return DP_OK;
}

static dp_status add_merge(dp_tokenizer *t, const char *l, size_t ll, const char *r, size_t rl,
                           uint32_t rank, char **buf, size_t *cap, dp_err *err)
{
    int32_t li, ri, mi;
    if (!dp_strmap_get(&t->vocab, l, ll, &li) || !dp_strmap_get(&t->vocab, r, rl, &ri))
        return DP_FAIL(err, DP_EFORMAT, "%s: merge %u (\"%.*s\" \"%.*s\") names a token not in the vocab",
                       t->name, rank, (int)(ll > 64 ? 64 : ll), l, (int)(rl > 64 ? 64 : rl), r);
    if (ll + rl > *cap) {
        size_t nc = (ll + rl) * 2 + 64;
        char *nb = realloc(*buf, nc);
        if (!nb) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", t->name);
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf, l, ll);
    memcpy(*buf + ll, r, rl);
    if (!dp_strmap_get(&t->vocab, *buf, ll + rl, &mi))
        return DP_FAIL(err, DP_EFORMAT, "%s: merge %u (\"%.*s\" \"%.*s\") makes a token not in the vocab",
                       t->name, rank, (int)(ll > 64 ? 64 : ll), l, (int)(rl > 64 ? 64 : rl), r);
    uint64_t key = (uint64_t)(uint32_t)li << 32 | (uint32_t)ri;
    bool existed;
    uint64_t old;
    if (dp_u64map_get(&t->merges, key, &old)) return DP_OK;   /* a repeated pair keeps its first rank */
    return dp_u64map_put(&t->merges, key, (uint64_t)rank << 32 | (uint32_t)mi, &existed, err);
}

typedef struct spm_cand { float score; int32_t merged, left, right; } spm_cand;

static int cmp_cand(const void *a, const void *b)
{
    const spm_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->merged != y->merged) return x->merged < y->merged ? -1 : 1;
    return x->left < y->left ? -1 : x->left > y->left;
}

/* GGUF SentencePiece vocabularies carry scores, not merges: a pair merges when its concatenation
** is a normal or user-defined token, and a higher score of the result merges first (llama.cpp's SPM rule). */
static dp_status synth_spm_merges(dp_tokenizer *t, const float *scores, dp_err *err)
{
    spm_cand *c = NULL;
    size_t n = 0, cap = 0;
    dp_status st = DP_OK;
    for (size_t id = 0; id < t->n_vocab; id++) {
        const char *p = t->piece[id];
        size_t len = t->piece_len[id];
        /* user-defined pieces merge too (llama.cpp looks any piece up): Gemma 3's "▁▁" runs are such */
        if (!p || (t->type[id] != DP_TOKTYPE_NORMAL && t->type[id] != DP_TOKTYPE_USER_DEFINED)) continue;
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)p[k] & 0xC0) == 0x80) continue;   /* split on character boundaries */
            int32_t l, r;
            if (!dp_strmap_get(&t->vocab, p, k, &l) || !dp_strmap_get(&t->vocab, p + k, len - k, &r)) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 4096;
                spm_cand *nc = realloc(c, cap * sizeof *nc);
                if (!nc) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", t->name); goto done; }
                c = nc;
            }
            c[n++] = (spm_cand){ scores[id], (int32_t)id, l, r };
        }
    }
    if (n) qsort(c, n, sizeof *c, cmp_cand);
    for (size_t i = 0; i < n && st == DP_OK; i++) {
        uint64_t key = (uint64_t)(uint32_t)c[i].left << 32 | (uint32_t)c[i].right;
        if (dp_u64map_get(&t->merges, key, NULL)) continue;
        st = dp_u64map_put(&t->merges, key, (uint64_t)i << 32 | (uint32_t)c[i].merged, NULL, err);
    }
done:
    free(c);
    return st;
}

static dp_status compile_regex(dp_tokenizer *t, const char *pattern, dp_err *err)
{
    int errcode;
    PCRE2_SIZE erroff;
    /* The pattern comes from a file: let PCRE2 check its UTF-8 (NO_UTF_CHECK on invalid bytes is
    ** undefined behaviour; the fuzzer found a crash with \xff in a pattern). */
    t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &errcode, &erroff, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        return DP_FAIL(err, DP_EFORMAT, "%s: split regex does not compile at offset %zu: %s",
                       t->name, (size_t)erroff, (const char *)msg);
    }
    (void)pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE);   /* the interpreter still works where JIT cannot */
    return DP_OK;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

dp_status dp_tokenizer_from_vocab(const dp_tok_vocab *v, dp_tokenizer **out, dp_err *err)
{
    dp_status st = DP_OK;
    char *mbuf = NULL;
    size_t mcap = 0;
    *out = NULL;
    const char *name = v->name ? v->name : "tokenizer";
    if (v->model >= DP_TOK_MODEL_COUNT)
        return DP_FAIL(err, DP_EINVAL, "%s: unknown tokenizer model %d", name, (int)v->model);
    if (!v->n_tokens || v->n_tokens > INT32_MAX / 2 || !v->tokens)
        return DP_FAIL(err, DP_EFORMAT, "%s: vocabulary has %zu tokens", name, v->n_tokens);

    dp_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    t->name = strdup(name);
    t->model = v->model;
    t->n_vocab = v->n_tokens;
    t->add_bos = v->add_bos;
    t->byte_fallback = v->byte_fallback;
    t->fuse_unk = v->fuse_unk;
    t->ignore_merges = v->ignore_merges;
    t->nfc = v->nfc;
    t->prefix = v->prefix;
    memset(t->trie_root, 0xff, sizeof t->trie_root);
    memset(t->byte_tok, 0xff, sizeof t->byte_tok);
    memset(t->ascii_tok, 0xff, sizeof t->ascii_tok);
    memset(t->bl_dec, 0xff, sizeof t->bl_dec);

    size_t total = 0;
    for (size_t i = 0; i < v->n_tokens; i++) {
        if (v->tokens[i]) total += (v->token_lens ? v->token_lens[i] : strlen(v->tokens[i])) + 1;
    }
    if (total > UINT32_MAX) {
        st = DP_FAIL(err, DP_EFORMAT, "%s: vocabulary text is %zu bytes, too large", name, total);
        goto fail;
    }
    t->arena = malloc(total ? total : 1);
    t->piece = calloc(v->n_tokens, sizeof *t->piece);
    t->piece_len = calloc(v->n_tokens, sizeof *t->piece_len);
    t->type = calloc(v->n_tokens, 1);
    t->byteval = malloc(v->n_tokens * sizeof *t->byteval);
    if (!t->name || !t->arena || !t->piece || !t->piece_len || !t->type || !t->byteval) {
        st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory for %zu tokens", name, v->n_tokens);
        goto fail;
    }
    if ((st = dp_strmap_init(&t->vocab, v->n_tokens, err)) != DP_OK) goto fail;
    if ((st = dp_u64map_init(&t->merges, v->n_merges ? v->n_merges : v->n_tokens, err)) != DP_OK) goto fail;

    size_t off = 0;
    for (size_t i = 0; i < v->n_tokens; i++) {
        t->byteval[i] = -1;
        if (!v->tokens[i]) continue;
        size_t len = v->token_lens ? v->token_lens[i] : strlen(v->tokens[i]);
        memcpy(t->arena + off, v->tokens[i], len);
        t->arena[off + len] = 0;
        t->piece[i] = t->arena + off;
        t->piece_len[i] = (uint32_t)len;
        off += len + 1;
        int32_t ty = v->types ? v->types[i] : DP_TOKTYPE_NORMAL;
        if (ty < 0 || ty > DP_TOKTYPE_BYTE) ty = DP_TOKTYPE_NORMAL;
        t->type[i] = (uint8_t)ty;
        t->byteval[i] = (int16_t)byte_token_value(t->piece[i], len);
        int32_t prev;
        if (dp_strmap_get(&t->vocab, t->piece[i], len, &prev)) continue;   /* duplicates: lowest id */
        if ((st = dp_strmap_put(&t->vocab, t->piece[i], len, (int32_t)i, NULL, err)) != DP_OK) goto fail;
        /* Added tokens are found in raw text. One that is not valid UTF-8 could match inside a
        ** character and leave both neighbouring segments invalid, which the pre-tokenisers may assume
        ** they are not (fuzz_tokenizer_json found an added token "\xB6" splitting "\xC3\xB6"): such a
        ** token is never matched in text; it still decodes. */
        if ((ty == DP_TOKTYPE_CONTROL || ty == DP_TOKTYPE_USER_DEFINED) && dp_utf8_whole(t->piece[i], len) &&
            (st = trie_add(t, t->piece[i], len, (int32_t)i, err)) != DP_OK)
            goto fail;
        if (ty == DP_TOKTYPE_CONTROL) t->n_special++;
    }
    t->special = malloc((t->n_special ? t->n_special : 1) * sizeof *t->special);
    if (!t->special) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name); goto fail; }
    t->n_special = 0;
    for (size_t i = 0; i < v->n_tokens; i++) {
        int32_t id;
        if (t->piece[i] && t->type[i] == DP_TOKTYPE_CONTROL &&
            dp_strmap_get(&t->vocab, t->piece[i], t->piece_len[i], &id) && id == (int32_t)i)
            t->special[t->n_special++] = (int32_t)i;
    }
    qsort(t->special, t->n_special, sizeof *t->special, cmp_i32);

    int32_t ids[5] = { v->bos, v->eos, v->eot, v->unk, v->pad };
    for (int k = 0; k < 5; k++) {
        if (ids[k] < -1 || ids[k] >= (int32_t)v->n_tokens || (ids[k] >= 0 && !t->piece[ids[k]])) {
            st = DP_FAIL(err, DP_EFORMAT, "%s: special token id %d is not in the vocabulary", name, ids[k]);
            goto fail;
        }
    }
    t->bos = v->bos; t->eos = v->eos; t->eot = v->eot; t->unk = v->unk; t->pad = v->pad;

    if (t->model == DP_TOK_SPM_BPE) {
        char b6[7];
        for (int b = 0; b < 256; b++) {
            snprintf(b6, sizeof b6, "<0x%02X>", b);
            int32_t id;
            if (dp_strmap_get(&t->vocab, b6, 6, &id)) t->byte_tok[b] = id;
        }
        for (int c = 0; c < 128; c++) {
            int32_t id;
            if (c == ' ') { if (dp_strmap_get(&t->vocab, "\xE2\x96\x81", 3, &id)) t->ascii_tok[c] = id; }
            else { char s = (char)c; if (dp_strmap_get(&t->vocab, &s, 1, &id)) t->ascii_tok[c] = id; }
        }
    } else {
        for (int b = 0; b < 256; b++) {
            uint32_t cp = dp_tok_byte_to_cp((uint8_t)b);
            char *e = t->bl_enc[b];
            if (cp < 0x80) { e[0] = (char)cp; t->bl_enc_len[b] = 1; }
            else { e[0] = (char)(0xC0 | cp >> 6); e[1] = (char)(0x80 | (cp & 0x3F)); t->bl_enc_len[b] = 2; }
            t->bl_dec[cp] = (int16_t)b;
            int32_t id;
            if (!dp_strmap_get(&t->vocab, e, t->bl_enc_len[b], &id)) {
                st = DP_FAIL(err, DP_EFORMAT, "%s: byte-level vocabulary lacks the token for byte 0x%02X", name, b);
                goto fail;
            }
            t->byte_tok[b] = id;
        }
        if ((st = compile_regex(t, v->split_regex ? v->split_regex : RE_LLAMA3, err)) != DP_OK) goto fail;
    }

    if (v->n_merges) {
        if (v->n_merges > UINT32_MAX) { st = DP_FAIL(err, DP_EFORMAT, "%s: too many merges", name); goto fail; }
        for (size_t i = 0; i < v->n_merges; i++) {
            const char *l = v->merges[i], *r;
            size_t ll, rl;
            if (!l) { st = DP_FAIL(err, DP_EFORMAT, "%s: merge %zu is missing", name, i); goto fail; }
            if (v->merges_right) {
                r = v->merges_right[i];
                if (!r) { st = DP_FAIL(err, DP_EFORMAT, "%s: merge %zu is missing", name, i); goto fail; }
                ll = strlen(l);
                rl = strlen(r);
            } else {
                const char *sp = strchr(l, ' ');
                if (!sp || sp == l || !sp[1]) {
                    st = DP_FAIL(err, DP_EFORMAT, "%s: merge %zu \"%.64s\" is not \"left right\"", name, i, l);
                    goto fail;
                }
                ll = (size_t)(sp - l);
                r = sp + 1;
                rl = strlen(r);
            }
            if ((st = add_merge(t, l, ll, r, rl, (uint32_t)i, &mbuf, &mcap, err)) != DP_OK) goto fail;
        }
    } else if (t->model == DP_TOK_SPM_BPE && v->scores) {
        if ((st = synth_spm_merges(t, v->scores, err)) != DP_OK) goto fail;
    }
    free(mbuf);
    *out = t;
    return DP_OK;
fail:
    free(mbuf);
    dp_tokenizer_destroy(t);
    return st;
}

void dp_tokenizer_destroy(dp_tokenizer *t)
{
    if (!t) return;
    dp_strmap_free(&t->vocab);
    dp_u64map_free(&t->merges);
    pcre2_code_free(t->re);
    free(t->name);
    free(t->arena);
    free(t->piece);
    free(t->piece_len);
    free(t->type);
    free(t->byteval);
    free(t->trie);
    free(t->special);
    free(t->chat_template);
    free(t);
}

size_t dp_tokenizer_vocab_size(const dp_tokenizer *t) { return t->n_vocab; }
dp_tok_model dp_tokenizer_model(const dp_tokenizer *t) { return t->model; }
int32_t dp_tokenizer_bos(const dp_tokenizer *t) { return t->bos; }
int32_t dp_tokenizer_eos(const dp_tokenizer *t) { return t->eos; }
int32_t dp_tokenizer_eot(const dp_tokenizer *t) { return t->eot; }
bool dp_tokenizer_add_bos(const dp_tokenizer *t) { return t->add_bos && t->bos >= 0; }
const char *dp_tokenizer_chat_template(const dp_tokenizer *t) { return t->chat_template; }

const char *dp_tokenizer_token(const dp_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= t->n_vocab || !t->piece[id]) return NULL;
    if (len) *len = t->piece_len[id];
    return t->piece[id];
}

int32_t dp_tokenizer_id(const dp_tokenizer *t, const char *piece, size_t len)
{
    int32_t id;
    return dp_strmap_get(&t->vocab, piece, len, &id) ? id : -1;
}

dp_tok_type dp_tokenizer_type(const dp_tokenizer *t, int32_t id)
{
    if (id < 0 || (size_t)id >= t->n_vocab || !t->piece[id]) return DP_TOKTYPE_UNDEFINED;
    return (dp_tok_type)t->type[id];
}

size_t dp_tokenizer_stop_ids(const dp_tokenizer *t, int32_t *ids, size_t cap)
{
    size_t n = 0;
    int32_t c[2] = { t->eos, t->eot };
    for (int k = 0; k < 2; k++) {
        if (c[k] < 0 || (k == 1 && c[1] == c[0])) continue;
        if (n < cap) ids[n] = c[k];
        n++;
    }
    return n;
}

size_t dp_tokenizer_special_ids(const dp_tokenizer *t, int32_t *ids, size_t cap)
{
    for (size_t i = 0; i < t->n_special && i < cap; i++) ids[i] = t->special[i];
    return t->n_special;
}
