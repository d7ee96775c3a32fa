/*
** tests/fuzz/fuzz_tokenizer_json.c: libFuzzer target for the tokenizer.json reader
** (dp_tokenizer_load_json): any bytes must give a tokenizer or a clean error, never a crash or a leak.
** A tokenizer that loads is also used once, so the tables it built get read.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    if (dp_tokenizer_load_json((const char *)data, size, "fuzz", &tok, &err) != DP_OK) {
        if (tok || !err.msg[0]) abort();   /* a failure must explain itself and leave nothing */
        return 0;
    }
    static const char text[] = "Hello <s> w\xC3\xB6rld  \xE6\x97\xA5\xE6\x9C\xAC\n\tend</s>";
    int32_t *ids = NULL;
    size_t n = 0;
    if (dp_tokenizer_encode(tok, text, sizeof text - 1, true, &ids, &n, &err) == DP_OK) {
        char *out = NULL;
        size_t len = 0;
        if (dp_tokenizer_decode(tok, ids, n, false, &out, &len, &err) == DP_OK && strlen(out) > len) abort();
        free(out);
    }
    free(ids);
    dp_tokenizer_destroy(tok);
    return 0;
}
