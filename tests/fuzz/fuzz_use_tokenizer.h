/*
** tests/fuzz/fuzz_use_tokenizer.h: what the fuzz targets that build a tokenizer (fuzz_tokenizer_json,
** fuzz_gguf) do with one that loads: encode a short text with specials, BOS and non-ASCII, decode the
** ids back (the text must be as long as it says), so that the tables it built get read.
*/
#ifndef DP_FUZZ_USE_TOKENIZER_H
#define DP_FUZZ_USE_TOKENIZER_H

#include <stdlib.h>
#include <string.h>

#include "core/text/tokenizer.h"

static void fuzz_use_tokenizer(const dp_tokenizer *tok)
{
    static const char text[] = "Hello <s> w\xC3\xB6rld  \xE6\x97\xA5\xE6\x9C\xAC\n\tend</s> <eos>";
    dp_err err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    if (dp_tokenizer_encode(tok, text, sizeof text - 1, true, &ids, &n, &err) == DP_OK) {
        char *out = NULL;
        size_t len = 0;
        if (dp_tokenizer_decode(tok, ids, n, false, &out, &len, &err) == DP_OK && strlen(out) > len) abort();
        free(out);
    }
    free(ids);
}

#endif
