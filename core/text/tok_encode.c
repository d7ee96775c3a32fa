/*
** core/text/tok_encode.c: text -> ids, in HF tokenizers' order:
**   1. added/special tokens are found in the raw text (leftmost-longest, a byte trie);
**   2. each segment between them is normalised (SPM: " " -> "▁" and the optional prefix; byte-level: NFC
**      when asked) and pre-tokenised (byte-level: the split regex, matches and gaps both kept, then the
**      GPT-2 byte map; SPM: the whole segment is one word, because its Split(" ") runs after every space
**      became "▁");
**   3. BPE merges each word: lowest rank first, leftmost on ties, with a heap and a linked list
**      (HF word.rs merge_all, stale entries skipped), so a long segment costs O(n log n).
** Byte-level words repeat, so one encode call caches word -> ids (the cache dies with the call: the
** tokenizer stays immutable and shareable).
*/
#include "core/text/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef struct bpe_sym { int32_t id, prev, next; } bpe_sym;
typedef struct bpe_ent { uint32_t rank, pos; int32_t new_id; } bpe_ent;

typedef struct enc_ctx {
    const dp_tokenizer *t;
    dp_err     *err;
    int32_t    *out;
    size_t      n, cap;
    bpe_sym    *sym;
    size_t      sym_cap;
    bpe_ent    *heap;
    size_t      heap_n, heap_cap;
    char       *word;          /* byte-level: the mapped word */
    size_t      word_cap;
    dp_strmap   cache;         /* raw word bytes -> index into cache_ent */
    uint32_t   *cache_ent;     /* (start, count) pairs into cache_ids */
    size_t      cache_n, cache_cap;
    int32_t    *cache_ids;
    size_t      cache_ids_n, cache_ids_cap;
    char      **keep;          /* NFC buffers that cache keys point into */
    size_t      keep_n, keep_cap;
    pcre2_match_data *md;
} enc_ctx;

static dp_status grow(void **p, size_t *cap, size_t need, size_t elem, dp_err *err)
{
    if (need <= *cap) return DP_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return DP_FAIL(err, DP_ENOMEM, "tokenizer: out of host memory (%zu items)", need);
    *p = np;
    *cap = nc;
    return DP_OK;
}

static dp_status emit(enc_ctx *c, int32_t id)
{
    if (c->n == c->cap) {
        dp_status st = grow((void **)&c->out, &c->cap, c->n + 1, sizeof *c->out, c->err);
        if (st != DP_OK) return st;
    }
    c->out[c->n++] = id;
    return DP_OK;
}

/* ---- BPE ------------------------------------------------------------------------------------ */

static bool ent_less(const bpe_ent *a, const bpe_ent *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static dp_status heap_push(enc_ctx *c, uint32_t rank, uint32_t pos, int32_t new_id)
{
    dp_status st = grow((void **)&c->heap, &c->heap_cap, c->heap_n + 1, sizeof *c->heap, c->err);
    if (st != DP_OK) return st;
    bpe_ent e = { rank, pos, new_id };
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ent_less(&e, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = e;
    return DP_OK;
}

static bpe_ent heap_pop(enc_ctx *c)
{
    bpe_ent top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const bpe_ent *best = &last;
        if (l < n && ent_less(&c->heap[l], best)) { m = l; best = &c->heap[l]; }
        if (r < n && ent_less(&c->heap[r], best)) { m = r; best = &c->heap[r]; }
        if (m == i) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n) c->heap[i] = last;
    return top;
}

static bool merge_of(const dp_tokenizer *t, int32_t l, int32_t r, uint32_t *rank, int32_t *new_id)
{
    uint64_t v;
    if (!dp_u64map_get(&t->merges, (uint64_t)(uint32_t)l << 32 | (uint32_t)r, &v)) return false;
    *rank = (uint32_t)(v >> 32);
    *new_id = (int32_t)(uint32_t)v;
    return true;
}

/* Merges c->sym[0..n) (ids set) and appends the result to c->out. */
static dp_status bpe_merge(enc_ctx *c, size_t n)
{
    const dp_tokenizer *t = c->t;
    bpe_sym *s = c->sym;
    dp_status st;
    uint32_t rank;
    int32_t nid;
    c->heap_n = 0;
    for (size_t i = 0; i < n; i++) {
        s[i].prev = (int32_t)i - 1;
        s[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        if (merge_of(t, s[i].id, s[i + 1].id, &rank, &nid) && (st = heap_push(c, rank, (uint32_t)i, nid)) != DP_OK)
            return st;
    }
    while (c->heap_n) {
        bpe_ent e = heap_pop(c);
        bpe_sym *a = &s[e.pos];
        if (a->id < 0 || a->next < 0) continue;                 /* removed, or the last symbol */
        bpe_sym *b = &s[a->next];
        if (!merge_of(t, a->id, b->id, &rank, &nid) || nid != e.new_id) continue;   /* stale entry */
        a->id = nid;
        b->id = -1;
        a->next = b->next;
        if (a->next >= 0) s[a->next].prev = (int32_t)e.pos;
        if (a->prev >= 0 && merge_of(t, s[a->prev].id, a->id, &rank, &nid) &&
            (st = heap_push(c, rank, (uint32_t)a->prev, nid)) != DP_OK)
            return st;
        if (a->next >= 0 && merge_of(t, a->id, s[a->next].id, &rank, &nid) &&
            (st = heap_push(c, rank, e.pos, nid)) != DP_OK)
            return st;
    }
    for (int32_t i = n ? 0 : -1; i >= 0; i = s[i].next) {
        if ((st = emit(c, s[i].id)) != DP_OK) return st;
    }
    return DP_OK;
}

/* ---- SentencePiece-style BPE ---------------------------------------------------------------- */

static dp_status add_sym(enc_ctx *c, size_t *n, int32_t id)
{
    dp_status st = grow((void **)&c->sym, &c->sym_cap, *n + 1, sizeof *c->sym, c->err);
    if (st != DP_OK) return st;
    c->sym[(*n)++].id = id;
    return DP_OK;
}

/* One segment is one word: symbols are characters (' ' read as "▁"), then byte fallback or <unk>,
** exactly as HF model.rs merge_word orders them. */
static dp_status spm_segment(enc_ctx *c, const char *p, size_t len, bool at_start)
{
    const dp_tokenizer *t = c->t;
    dp_status st;
    size_t n = 0;
    int32_t unk_pending = -1;   /* the unknown run not yet added (fuse_unk) */
    if (!len) return DP_OK;
    if (t->prefix == DP_TOK_PREFIX_EACH || (t->prefix == DP_TOK_PREFIX_FIRST && at_start)) {
        int32_t sp = t->ascii_tok[' '];
        if (sp >= 0 && (st = add_sym(c, &n, sp)) != DP_OK) return st;
    }
    for (size_t i = 0; i < len;) {
        unsigned char ch = (unsigned char)p[i];
        size_t cl = ch < 0x80 ? 1 : dp_utf8_seq_len((const unsigned char *)p + i, len - i);
        DP_ASSERT(cl > 0);   /* validated by the caller */
        int32_t id = -1;
        if (ch < 0x80) id = t->ascii_tok[ch];
        else (void)dp_strmap_get(&t->vocab, p + i, cl, &id);
        if (id >= 0) {
            if (unk_pending >= 0) {
                if ((st = add_sym(c, &n, unk_pending)) != DP_OK) return st;
                unk_pending = -1;
            }
            if ((st = add_sym(c, &n, id)) != DP_OK) return st;
            i += cl;
            continue;
        }
        if (t->byte_fallback) {
            /* ch == ' ' here means "▁" is missing: the character is then E2 96 81, not 0x20 */
            const char *src = ch == ' ' ? "\xE2\x96\x81" : p + i;
            size_t sl = ch == ' ' ? 3 : cl;
            bool bytes_ok = true;
            for (size_t k = 0; k < sl; k++) bytes_ok = bytes_ok && t->byte_tok[(unsigned char)src[k]] >= 0;
            if (bytes_ok) {
                for (size_t k = 0; k < sl; k++) {
                    if ((st = add_sym(c, &n, t->byte_tok[(unsigned char)src[k]])) != DP_OK) return st;
                }
                i += cl;
                continue;
            }
        }
        if (t->unk >= 0) {
            if (unk_pending >= 0 && !t->fuse_unk && (st = add_sym(c, &n, unk_pending)) != DP_OK) return st;
            unk_pending = t->unk;
        }
        i += cl;   /* no <unk> token: HF drops the character */
    }
    if (unk_pending >= 0 && (st = add_sym(c, &n, unk_pending)) != DP_OK) return st;
    return bpe_merge(c, n);
}

/* ---- byte-level BPE ------------------------------------------------------------------------- */

static dp_status bl_word(enc_ctx *c, const char *p, size_t len)
{
    const dp_tokenizer *t = c->t;
    dp_status st;
    int32_t ci;
    if (!len) return DP_OK;
    if (dp_strmap_get(&c->cache, p, len, &ci)) {
        uint32_t start = c->cache_ent[2 * ci], cnt = c->cache_ent[2 * ci + 1];
        for (uint32_t k = 0; k < cnt; k++) {
            if ((st = emit(c, c->cache_ids[start + k])) != DP_OK) return st;
        }
        return DP_OK;
    }
    size_t first = c->n;
    int32_t whole = -1;
    if (t->ignore_merges) {
        if ((st = grow((void **)&c->word, &c->word_cap, 2 * len, 1, c->err)) != DP_OK) return st;
        size_t wl = 0;
        for (size_t k = 0; k < len; k++) {
            uint8_t b = (uint8_t)p[k];
            memcpy(c->word + wl, t->bl_enc[b], t->bl_enc_len[b]);
            wl += t->bl_enc_len[b];
        }
        (void)dp_strmap_get(&t->vocab, c->word, wl, &whole);
    }
    if (whole >= 0) {
        if ((st = emit(c, whole)) != DP_OK) return st;
    } else {
        if ((st = grow((void **)&c->sym, &c->sym_cap, len, sizeof *c->sym, c->err)) != DP_OK) return st;
        for (size_t k = 0; k < len; k++) c->sym[k].id = t->byte_tok[(uint8_t)p[k]];
        if ((st = bpe_merge(c, len)) != DP_OK) return st;
    }
    /* remember the result */
    size_t cnt = c->n - first;
    if ((st = grow((void **)&c->cache_ids, &c->cache_ids_cap, c->cache_ids_n + cnt, sizeof *c->cache_ids, c->err)) != DP_OK ||
        (st = grow((void **)&c->cache_ent, &c->cache_cap, 2 * (c->cache_n + 1), sizeof *c->cache_ent, c->err)) != DP_OK)
        return st;
    memcpy(c->cache_ids + c->cache_ids_n, c->out + first, cnt * sizeof *c->out);
    c->cache_ent[2 * c->cache_n] = (uint32_t)c->cache_ids_n;
    c->cache_ent[2 * c->cache_n + 1] = (uint32_t)cnt;
    c->cache_ids_n += cnt;
    if ((st = dp_strmap_put(&c->cache, p, len, (int32_t)c->cache_n, NULL, c->err)) != DP_OK) return st;
    c->cache_n++;
    return DP_OK;
}

static dp_status bl_segment(enc_ctx *c, const char *p, size_t len)
{
    const dp_tokenizer *t = c->t;
    dp_status st;
    if (!len) return DP_OK;
    if (t->nfc) {
        bool ascii = true;
        for (size_t k = 0; k < len && ascii; k++) ascii = (unsigned char)p[k] < 0x80;
        if (!ascii) {
            utf8proc_uint8_t *nfc = NULL;
            utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)p, (utf8proc_ssize_t)len, &nfc,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (r < 0) return DP_FAIL(c->err, DP_EINVAL, "%s: NFC normalisation failed: %s", t->name, utf8proc_errmsg(r));
            if ((st = grow((void **)&c->keep, &c->keep_cap, c->keep_n + 1, sizeof *c->keep, c->err)) != DP_OK) {
                free(nfc);
                return st;
            }
            c->keep[c->keep_n++] = (char *)nfc;
            p = (const char *)nfc;
            len = (size_t)r;
        }
    }
    size_t start = 0;
    while (start < len) {
        int rc = pcre2_match(t->re, (PCRE2_SPTR)p, len, start, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return DP_FAIL(c->err, DP_EINVAL, "%s: split regex failed: %s", t->name, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (ms > start && (st = bl_word(c, p + start, ms - start)) != DP_OK) return st;   /* the gap */
        if (me == ms) {   /* an empty match: take one character as a gap and go on */
            size_t cl = dp_utf8_seq_len((const unsigned char *)p + ms, len - ms);
            me = ms + (cl ? cl : 1);
            if ((st = bl_word(c, p + ms, me - ms)) != DP_OK) return st;
        } else if ((st = bl_word(c, p + ms, me - ms)) != DP_OK) {
            return st;
        }
        start = me;
    }
    return start < len ? bl_word(c, p + start, len - start) : DP_OK;
}

/* ---- driver --------------------------------------------------------------------------------- */

static dp_status segment(enc_ctx *c, const char *p, size_t len, bool at_start)
{
    return c->t->model == DP_TOK_SPM_BPE ? spm_segment(c, p, len, at_start) : bl_segment(c, p, len);
}

/* The longest added token starting at p, or -1. */
static int32_t match_added(const dp_tokenizer *t, const char *p, size_t len, size_t *mlen)
{
    int32_t node = t->trie_root[(uint8_t)p[0]], best = -1;
    size_t i = 0;
    while (node >= 0) {
        i++;
        if (t->trie[node].id >= 0) { best = t->trie[node].id; *mlen = i; }
        if (i == len) break;
        uint8_t b = (uint8_t)p[i];
        node = t->trie[node].child;
        while (node >= 0 && t->trie[node].byte != b) node = t->trie[node].sibling;
    }
    return best;
}

dp_status dp_tokenizer_encode(const dp_tokenizer *t, const char *text, size_t len, bool add_bos,
                              int32_t **ids, size_t *n, dp_err *err)
{
    dp_status st = DP_OK;
    enc_ctx c = { .t = t, .err = err };
    *ids = NULL;
    *n = 0;
    for (size_t i = 0; i < len;) {
        if ((unsigned char)text[i] < 0x80) { i++; continue; }
        size_t cl = dp_utf8_seq_len((const unsigned char *)text + i, len - i);
        if (!cl) return DP_FAIL(err, DP_EINVAL, "%s: input text is not valid UTF-8 at byte %zu", t->name, i);
        i += cl;
    }
    if (t->model == DP_TOK_BYTE_BPE) {
        if ((st = dp_strmap_init(&c.cache, 1024, err)) != DP_OK) goto done;
        c.md = pcre2_match_data_create_from_pattern(t->re, NULL);
        if (!c.md) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", t->name); goto done; }
    }
    if ((st = grow((void **)&c.out, &c.cap, len / 3 + 16, sizeof *c.out, err)) != DP_OK) goto done;
    if (add_bos && t->bos >= 0 && (st = emit(&c, t->bos)) != DP_OK) goto done;

    size_t seg = 0;
    for (size_t i = 0; i < len;) {
        size_t mlen = 0;
        int32_t id = t->trie_root[(uint8_t)text[i]] >= 0 ? match_added(t, text + i, len - i, &mlen) : -1;
        if (id < 0) { i++; continue; }
        if ((st = segment(&c, text + seg, i - seg, seg == 0)) != DP_OK) goto done;
        if ((st = emit(&c, id)) != DP_OK) goto done;
        i += mlen;
        seg = i;
    }
    if ((st = segment(&c, text + seg, len - seg, seg == 0)) != DP_OK) goto done;
    *ids = c.out;
    *n = c.n;
    c.out = NULL;
done:
    free(c.out);
    free(c.sym);
    free(c.heap);
    free(c.word);
    free(c.cache_ent);
    free(c.cache_ids);
    dp_strmap_free(&c.cache);
    for (size_t k = 0; k < c.keep_n; k++) free(c.keep[k]);
    free(c.keep);
    pcre2_match_data_free(c.md);
    return st;
}
