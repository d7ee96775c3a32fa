/*
** tests/fuzz/fuzz_safetensors.c: libFuzzer target for the safetensors header parser
** (dp_safetensors_parse on a file image). Every tensor it accepts must lie inside the input.
*/
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/formats/safetensors.h"
#include "core/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dp_err err = {0};
    dp_safetensors *st;
    if (dp_safetensors_parse("fuzz.safetensors", data, size, &st, &err) != DP_OK) {
        if (err.msg[0] == 0) abort();   /* every failure must explain itself */
        return 0;
    }
    for (size_t i = 0; i < dp_safetensors_count(st); i++) {
        const dp_st_tensor *t = dp_safetensors_at(st, i);
        const uint8_t *p = t->data;
        if (p < data || t->bytes > size || p - data > (ptrdiff_t)(size - t->bytes)) abort();
        /* Touch the data: ASan catches any read outside the input. */
        if (t->bytes && (dp_dtype_get(t->dtype)->is_float)) {
            float y[16];
            uint64_t n = t->numel < 16 ? t->numel : 16;
            dp_quant_dequantize_row(t->dtype, p, y, (int64_t)n);
        }
    }
    const char *k, *v;
    for (size_t i = 0; i < dp_safetensors_metadata_count(st); i++) dp_safetensors_metadata_at(st, i, &k, &v);
    dp_safetensors_close(st);
    return 0;
}
