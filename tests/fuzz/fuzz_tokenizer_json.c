/*
** tests/fuzz/fuzz_tokenizer_json.c: libFuzzer target for the tokenizer.json reader
** (dp_tokenizer_load_json): any bytes must give a tokenizer or a clean error, never a crash or a leak.
** A tokenizer that loads is also used once, so the tables it built get read.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/tokenizer.h"
#include "fuzz_use_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    if (dp_tokenizer_load_json((const char *)data, size, "fuzz", &tok, &err) != DP_OK) {
        if (tok || !err.msg[0]) abort();   /* a failure must explain itself and leave nothing */
        return 0;
    }
    fuzz_use_tokenizer(tok);
    dp_tokenizer_destroy(tok);
    return 0;
}
