/*
** tests/fuzz/fuzz_gguf.c: libFuzzer target for the GGUF reader (dp_gguf_parse on a file image),
** the writer (what was read is written back and must read again to the same tensors and kv
** count), CPU dequantisation of the first row of every tensor, and the file's tokenizer (built and
** used once).
*/
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/gguf.h"
#include "core/formats/model_file.h"
#include "core/quant.h"
#include "core/text/tokenizer.h"
#include "fuzz_use_tokenizer.h"

static void rewrite(const dp_gguf *g)
{
    dp_err err = {0};
    dp_gguf_writer *w;
    if (dp_gguf_writer_create(&w, &err) != DP_OK) return;
    for (size_t i = 0; i < dp_gguf_kv_count(g); i++)
        if (dp_gguf_writer_set(w, dp_gguf_kv_key(g, i), dp_gguf_kv_value(g, i), &err) != DP_OK) abort();
    for (size_t i = 0; i < dp_gguf_tensor_count(g); i++) {
        const dp_gguf_tensor *t = dp_gguf_tensor_at(g, i);
        if (dp_gguf_writer_add_tensor(w, t->name, t->ggml_type, t->n_dims, t->ne, t->data, t->bytes, &err) != DP_OK)
            abort();
    }
    void *buf;
    size_t size;
    if (dp_gguf_writer_write_mem(w, &buf, &size, &err) == DP_OK) {
        dp_gguf *g2;
        if (dp_gguf_parse("rewritten.gguf", buf, size, &g2, &err) != DP_OK) abort();
        if (dp_gguf_kv_count(g2) != dp_gguf_kv_count(g) || dp_gguf_tensor_count(g2) != dp_gguf_tensor_count(g)) abort();
        for (size_t i = 0; i < dp_gguf_tensor_count(g); i++) {
            const dp_gguf_tensor *a = dp_gguf_tensor_at(g, i), *b = dp_gguf_tensor_at(g2, i);
            if (a->bytes != b->bytes || memcmp(a->data, b->data, a->bytes) != 0) abort();
        }
        dp_gguf_close(g2);
        free(buf);
    }
    dp_gguf_writer_destroy(w);
}

/* The file's tokenizer (tokenizer.ggml.*), when it has one: built, then used once on a short text. */
static void use_tokenizer(const dp_gguf *g)
{
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    if (dp_tokenizer_from_gguf(g, &tok, &err) != DP_OK) {
        if (tok || !err.msg[0]) abort();   /* a failure must explain itself and leave nothing */
        return;
    }
    fuzz_use_tokenizer(tok);
    dp_tokenizer_destroy(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dp_err err = {0};
    dp_gguf *g;
    if (dp_gguf_parse("fuzz.gguf", data, size, &g, &err) != DP_OK) {
        if (err.msg[0] == 0) abort();
        return 0;
    }
    float row[1024];
    for (size_t i = 0; i < dp_gguf_tensor_count(g); i++) {
        const dp_gguf_tensor *t = dp_gguf_tensor_at(g, i);
        const uint8_t *p = t->data;
        if (p < data || t->bytes > size || p - data > (ptrdiff_t)(size - t->bytes)) abort();
        if (t->dtype < DP_DTYPE_COUNT && dp_quant_can_dequantize(t->dtype) && t->ne[0] <= 1024 && t->bytes > 0)
            dp_quant_dequantize_row(t->dtype, p, row, (int64_t)t->ne[0]);
    }
    dp_hfconfig cfg;
    if (dp_hfconfig_from_gguf(g, &cfg, &err) == DP_OK) dp_hfconfig_free(&cfg);
    use_tokenizer(g);
    rewrite(g);
    dp_gguf_close(g);
    return 0;
}
