/*
** tests/fuzz/fuzz_tokenizer_encode.c: libFuzzer target for encode and decode on real tokenizers
** (Llama 3 byte-level and Gemma 3 SentencePiece-style, from tests/fixtures, loaded once). The first
** input byte picks the tokenizer and options; the rest is the text, valid UTF-8 or not. Checks:
**  - encode succeeds exactly when the text is valid UTF-8;
**  - Llama 3 decodes its own ids back to the exact text (byte-level BPE is lossless);
**  - streamed decoding equals whole decoding and never emits a partial UTF-8 sequence;
**  - the input read as little-endian ids (any id in range) decodes to valid UTF-8 or fails cleanly.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/tok_internal.h"   /* dp_utf8_whole */
#include "core/text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* libFuzzer's interface has no context argument: the loaded tokenizers live here, read only. */
static dp_tokenizer *g_tok[2];

static dp_tokenizer *load(const char *name)
{
    char path[1024];
    const char *f = getenv("DOPPLER_FIXTURES");
    snprintf(path, sizeof path, "%s/tokenizers/%s.tokenizer.json.gz", f ? f : DOPPLER_SOURCE_DIR "/tests/fixtures", name);
    dp_err err = {0};
    dp_tokenizer *t = NULL;
    if (dp_tokenizer_load(path, &t, &err) != DP_OK) {
        fprintf(stderr, "fuzz_tokenizer_encode: %s\n", err.msg);
        abort();
    }
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_tok[0] = load("llama3");
    g_tok[1] = load("gemma3");
    return 0;
}

static void check_decode(const dp_tokenizer *tok, const int32_t *ids, size_t n, bool skip, const char *expect, size_t elen)
{
    dp_err err = {0};
    char *whole = NULL;
    size_t wlen = 0;
    if (dp_tokenizer_decode(tok, ids, n, skip, &whole, &wlen, &err) != DP_OK) {
        if (whole || !err.msg[0]) abort();
        return;
    }
    if (!dp_utf8_whole(whole, wlen)) abort();
    if (expect && (wlen != elen || memcmp(whole, expect, elen) != 0)) abort();
    dp_detok *d = NULL;
    if (dp_detok_create(tok, skip, &d, &err) != DP_OK) abort();
    size_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *piece;
        size_t pl;
        dp_status st = i < n ? dp_detok_push(d, ids[i], &piece, &pl, &err) : dp_detok_finish(d, &piece, &pl, &err);
        if (st != DP_OK || !dp_utf8_whole(piece, pl) || at + pl > wlen || memcmp(whole + at, piece, pl) != 0) abort();
        at += pl;
    }
    if (at != wlen) abort();
    dp_detok_destroy(d);
    free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const dp_tokenizer *tok = g_tok[data[0] & 1];
    bool bos = data[0] & 2, skip = data[0] & 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    dp_err err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    dp_status st = dp_tokenizer_encode(tok, text, len, bos, &ids, &n, &err);
    if ((st == DP_OK) != dp_utf8_whole(text, len)) abort();
    if (st == DP_OK) {
        bool lossless = tok == g_tok[0] && !bos && !skip;
        check_decode(tok, ids, n, skip, lossless ? text : NULL, len);
    } else if (ids || !err.msg[0]) {
        abort();
    }
    free(ids);

    /* arbitrary ids */
    size_t m = len / 4, vocab = dp_tokenizer_vocab_size(tok);
    int32_t *raw = malloc((m ? m : 1) * sizeof *raw);
    if (!raw) return 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t v;
        memcpy(&v, text + 4 * i, 4);
        raw[i] = (int32_t)(v % vocab);
    }
    check_decode(tok, raw, m, skip, NULL, 0);
    free(raw);
    return 0;
}
