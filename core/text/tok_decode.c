/*
** core/text/tok_decode.c: ids -> UTF-8 text, whole or streamed. Whole decoding is the streaming
** decoder run to the end, so the two agree by construction.
**  - SPM (Gemma 3; HF decoders Replace("▁" -> " "), ByteFallback, Fuse): a run of <0xHH> tokens is
**    gathered; valid UTF-8 becomes text, otherwise every byte of the run becomes one U+FFFD (HF's
**    rule). A run is held until a non-byte token (or finish) ends it.
**  - Byte-level (HF ByteLevel decoder): each character maps back to its byte (a token with a
**    character outside the map contributes its own bytes), and the byte stream is read as UTF-8 the
**    way Rust's from_utf8_lossy reads it: one U+FFFD per maximal invalid subpart. An incomplete
**    sequence at the end of what has arrived is held, never emitted early.
** Skipped special tokens vanish before decoding (as in HF), so they do not end a byte run.
*/
#include "core/text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#define REPLACEMENT "\xEF\xBF\xBD"

struct dp_detok {
    const dp_tokenizer *t;
    bool           skip_special;
    unsigned char *pend;    /* SPM: the byte run; byte-level: bytes not yet emitted */
    size_t         pend_n, pend_cap;
    char          *out;     /* what the last call returns */
    size_t         out_n, out_cap;
};

static dp_status reserve(void **p, size_t *cap, size_t need, dp_err *err)
{
    if (need <= *cap) return DP_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc);
    if (!np) return DP_FAIL(err, DP_ENOMEM, "detokenizer: out of host memory");
    *p = np;
    *cap = nc;
    return DP_OK;
}

static dp_status out_put(dp_detok *d, const void *s, size_t n, dp_err *err)
{
    dp_status st = reserve((void **)&d->out, &d->out_cap, d->out_n + n + 1, err);
    if (st != DP_OK) return st;
    if (n) memcpy(d->out + d->out_n, s, n);
    d->out_n += n;
    d->out[d->out_n] = 0;
    return DP_OK;
}

static dp_status pend_put(dp_detok *d, const void *s, size_t n, dp_err *err)
{
    dp_status st = reserve((void **)&d->pend, &d->pend_cap, d->pend_n + n, err);
    if (st != DP_OK) return st;
    memcpy(d->pend + d->pend_n, s, n);
    d->pend_n += n;
    return DP_OK;
}

dp_status dp_detok_create(const dp_tokenizer *tok, bool skip_special, dp_detok **out, dp_err *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return DP_FAIL(err, DP_ENOMEM, "detokenizer: out of host memory");
    (*out)->t = tok;
    (*out)->skip_special = skip_special;
    return DP_OK;
}

void dp_detok_destroy(dp_detok *d)
{
    if (!d) return;
    free(d->pend);
    free(d->out);
    free(d);
}

/* SPM: the run is valid UTF-8 as a whole, or every byte of it is U+FFFD. */
static dp_status spm_flush(dp_detok *d, dp_err *err)
{
    dp_status st = DP_OK;
    bool valid = true;
    for (size_t i = 0; i < d->pend_n && valid;) {
        size_t cl = dp_utf8_seq_len(d->pend + i, d->pend_n - i);
        valid = cl > 0;
        i += cl;
    }
    if (valid) st = d->pend_n ? out_put(d, d->pend, d->pend_n, err) : DP_OK;
    else for (size_t i = 0; i < d->pend_n && st == DP_OK; i++) st = out_put(d, REPLACEMENT, 3, err);
    d->pend_n = 0;
    return st;
}

static dp_status spm_push(dp_detok *d, int32_t id, dp_err *err)
{
    const dp_tokenizer *t = d->t;
    if (t->byteval[id] >= 0) {
        unsigned char b = (unsigned char)t->byteval[id];
        return pend_put(d, &b, 1, err);
    }
    dp_status st = spm_flush(d, err);
    const char *p = t->piece[id];
    size_t n = t->piece_len[id], from = 0;
    for (size_t i = 0; i + 2 < n && st == DP_OK; i++) {
        if (memcmp(p + i, "\xE2\x96\x81", 3) != 0) continue;
        if ((st = out_put(d, p + from, i - from, err)) == DP_OK) st = out_put(d, " ", 1, err);
        from = i + 3;
        i += 2;
    }
    return st == DP_OK ? out_put(d, p + from, n - from, err) : st;
}

/* Byte-level: emits the longest prefix of pend that from_utf8_lossy would render the same whatever
** comes next; at the end (final) the held incomplete sequence becomes one U+FFFD. */
static dp_status bl_drain(dp_detok *d, bool final, dp_err *err)
{
    dp_status st = DP_OK;
    size_t i = 0, n = d->pend_n;
    const unsigned char *s = d->pend;
    while (i < n && st == DP_OK) {
        size_t cl = dp_utf8_seq_len(s + i, n - i);
        if (cl) {
            size_t j = i + cl;   /* copy a stretch of valid characters at once */
            while (j < n && (cl = dp_utf8_seq_len(s + j, n - j)) > 0) j += cl;
            st = out_put(d, s + i, j - i, err);
            i = j;
            continue;
        }
        /* invalid or incomplete: how many bytes form a valid prefix so far? */
        unsigned char c = s[i];
        size_t need = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
        size_t k = 1;
        while (k <= need && i + k < n) {
            unsigned char lo = 0x80, hi = 0xBF;
            if (k == 1) {
                if (c == 0xE0) lo = 0xA0; else if (c == 0xED) hi = 0x9F;
                else if (c == 0xF0) lo = 0x90; else if (c == 0xF4) hi = 0x8F;
            }
            if (s[i + k] < lo || s[i + k] > hi) break;
            k++;
        }
        if (need && k <= need && i + k == n && !final) break;   /* incomplete: hold it */
        st = out_put(d, REPLACEMENT, 3, err);
        i += k;
    }
    if (i && n > i) memmove(d->pend, d->pend + i, n - i);
    d->pend_n = n - i;
    return st;
}

static dp_status bl_push(dp_detok *d, int32_t id, dp_err *err)
{
    const dp_tokenizer *t = d->t;
    const unsigned char *p = (const unsigned char *)t->piece[id];
    size_t n = t->piece_len[id];
    dp_status st = reserve((void **)&d->pend, &d->pend_cap, d->pend_n + n, err);
    if (st != DP_OK) return st;
    size_t start = d->pend_n;
    bool mapped = true;
    for (size_t i = 0; i < n && mapped;) {
        size_t cl = dp_utf8_seq_len(p + i, n - i);
        uint32_t cp = 0;
        if (cl == 1) cp = p[i];
        else if (cl == 2) cp = (uint32_t)(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F);
        else mapped = false;
        if (mapped && (cp >= DP_ARRAY_LEN(t->bl_dec) || t->bl_dec[cp] < 0)) mapped = false;
        if (mapped) d->pend[d->pend_n++] = (unsigned char)t->bl_dec[cp];
        i += cl;
    }
    if (!mapped) {   /* HF: a token with any character outside the map keeps its own bytes */
        memcpy(d->pend + start, p, n);
        d->pend_n = start + n;
    }
    return bl_drain(d, false, err);
}

dp_status dp_detok_push(dp_detok *d, int32_t id, const char **piece, size_t *len, dp_err *err)
{
    const dp_tokenizer *t = d->t;
    dp_status st = DP_OK;
    d->out_n = 0;
    if ((st = out_put(d, "", 0, err)) != DP_OK) return st;
    *piece = d->out;
    if (len) *len = 0;
    if (id < 0 || (size_t)id >= t->n_vocab)
        return DP_FAIL(err, DP_EINVAL, "%s: token id %d is out of range (vocabulary of %zu)", t->name, id, t->n_vocab);
    if (!t->piece[id] || (d->skip_special && t->type[id] == DP_TOKTYPE_CONTROL)) return DP_OK;
    st = t->model == DP_TOK_SPM_BPE ? spm_push(d, id, err) : bl_push(d, id, err);
    *piece = d->out;
    if (len) *len = d->out_n;
    return st;
}

dp_status dp_detok_finish(dp_detok *d, const char **piece, size_t *len, dp_err *err)
{
    dp_status st;
    d->out_n = 0;
    if ((st = out_put(d, "", 0, err)) != DP_OK) return st;
    st = d->t->model == DP_TOK_SPM_BPE ? spm_flush(d, err) : bl_drain(d, true, err);
    *piece = d->out;
    if (len) *len = d->out_n;
    return st;
}

dp_status dp_tokenizer_decode(const dp_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special,
                              char **text, size_t *len, dp_err *err)
{
    dp_detok *d = NULL;
    char *buf = NULL;
    size_t bn = 0, bcap = 0;
    const char *piece;
    size_t pl;
    *text = NULL;
    if (len) *len = 0;
    dp_status st = dp_detok_create(tok, skip_special, &d, err);
    if (st == DP_OK) st = reserve((void **)&buf, &bcap, n * 4 + 1, err);
    for (size_t i = 0; i <= n && st == DP_OK; i++) {
        st = i < n ? dp_detok_push(d, ids[i], &piece, &pl, err) : dp_detok_finish(d, &piece, &pl, err);
        if (st == DP_OK) st = reserve((void **)&buf, &bcap, bn + pl + 1, err);
        if (st == DP_OK) {
            memcpy(buf + bn, piece, pl);
            bn += pl;
        }
    }
    dp_detok_destroy(d);
    if (st != DP_OK) {
        free(buf);
        return st;
    }
    buf[bn] = 0;
    *text = buf;
    if (len) *len = bn;
    return DP_OK;
}
