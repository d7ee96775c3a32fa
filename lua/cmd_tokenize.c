/*
** lua/cmd_tokenize.c: `doppler tokenize`: UTF-8 text on stdin -> token ids as one JSON array on stdout,
** or with --decode a JSON array of ids -> text. --time reports load and encode/decode speed on stderr
** (the tokenizer benchmark in docs/BENCHMARKS.md uses it).
*/
#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/text/tokenizer.h"
#include "lua/commands.h"

static const char USAGE[] =
    "usage: doppler tokenize --tokenizer PATH [--bos] [--decode] [--skip-special] [--time]\n"
    "  Reads UTF-8 text on stdin and prints its token ids as one JSON array.\n"
    "  Special tokens written in the text (e.g. <start_of_turn>) become their ids.\n"
    "  --tokenizer PATH  tokenizer.json, tokenizer.json.gz, a model directory holding one, or a GGUF file\n"
    "  --bos             prepend the BOS id (none by default)\n"
    "  --decode          read a JSON array of ids instead and print the text\n"
    "  --skip-special    with --decode: leave special tokens out\n"
    "  --time            print load time, bytes, tokens and seconds to stderr\n";

static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t r = fread(b + n, 1, cap - n, stdin);
        n += r;
        if (r == 0) break;
        if (n == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) { free(b); return NULL; }
            b = nb;
            cap *= 2;
        }
    }
    if (!b || ferror(stdin)) { free(b); return NULL; }
    b[n] = 0;
    *len = n;
    return b;
}

/* stdin must be one JSON array of integers that fit an id. */
static int parse_ids(const char *text, size_t len, int32_t **ids, size_t *n)
{
    json_tokener *tk = json_tokener_new();
    if (!tk) { fprintf(stderr, "doppler tokenize: out of memory\n"); return 1; }
    json_object *o = len <= INT32_MAX ? json_tokener_parse_ex(tk, text, (int)len) : NULL;
    enum json_tokener_error je = json_tokener_get_error(tk);
    json_tokener_free(tk);
    if (je != json_tokener_success || !o || !json_object_is_type(o, json_type_array)) {
        fprintf(stderr, "doppler tokenize: --decode: stdin is not a JSON array of ids (%s)\n",
                je != json_tokener_success ? json_tokener_error_desc(je) : "not an array");
        json_object_put(o);
        return 1;
    }
    size_t k = json_object_array_length(o);
    *ids = malloc((k ? k : 1) * sizeof **ids);
    if (!*ids) { json_object_put(o); fprintf(stderr, "doppler tokenize: out of memory\n"); return 1; }
    for (size_t i = 0; i < k; i++) {
        json_object *e = json_object_array_get_idx(o, i);
        int64_t v = json_object_get_int64(e);
        if (!json_object_is_type(e, json_type_int) || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "doppler tokenize: --decode: element %zu is not a token id\n", i);
            free(*ids);
            *ids = NULL;
            json_object_put(o);
            return 1;
        }
        (*ids)[i] = (int32_t)v;
    }
    *n = k;
    json_object_put(o);
    return 0;
}

int dp_cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL;
    bool bos = false, decode = false, skip = false, timing = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(USAGE, stdout); return 0; }
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) path = argv[++i];
        else if (!strncmp(argv[i], "--tokenizer=", 12)) path = argv[i] + 12;
        else if (!strcmp(argv[i], "--bos")) bos = true;
        else if (!strcmp(argv[i], "--decode")) decode = true;
        else if (!strcmp(argv[i], "--skip-special")) skip = true;
        else if (!strcmp(argv[i], "--time")) timing = true;
        else {
            fprintf(stderr, "doppler tokenize: unknown or incomplete argument '%s'\n%s", argv[i], USAGE);
            return 1;
        }
    }
    if (!path) {
        fprintf(stderr, "doppler tokenize: --tokenizer PATH is required\n%s", USAGE);
        return 1;
    }

    int rc = 1;
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    char *in = NULL, *text = NULL;
    int32_t *ids = NULL;
    size_t in_len = 0, n = 0, tlen = 0;
    double t0 = dp_clock_seconds();
    if (dp_tokenizer_load(path, &tok, &err) != DP_OK) goto fail;
    double t1 = dp_clock_seconds();
    if (!(in = read_stdin(&in_len))) {
        fprintf(stderr, "doppler tokenize: cannot read stdin\n");
        goto done;
    }
    double t2 = dp_clock_seconds(), t3;
    if (decode) {
        if (parse_ids(in, in_len, &ids, &n) != 0) goto done;
        t2 = dp_clock_seconds();
        if (dp_tokenizer_decode(tok, ids, n, skip, &text, &tlen, &err) != DP_OK) goto fail;
        t3 = dp_clock_seconds();
        fwrite(text, 1, tlen, stdout);
    } else {
        if (dp_tokenizer_encode(tok, in, in_len, bos, &ids, &n, &err) != DP_OK) goto fail;
        t3 = dp_clock_seconds();
        /* one line; a buffer keeps a million ids from costing a million stdio calls */
        char *buf = malloc(n * 12 + 4);
        if (!buf) { fprintf(stderr, "doppler tokenize: out of memory\n"); goto done; }
        size_t o = 0;
        buf[o++] = '[';
        for (size_t i = 0; i < n; i++) o += (size_t)sprintf(buf + o, i ? ", %d" : "%d", ids[i]);
        buf[o++] = ']';
        buf[o++] = '\n';
        fwrite(buf, 1, o, stdout);
        free(buf);
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "doppler tokenize: cannot write stdout\n");
        goto done;
    }
    if (timing) {
        fprintf(stderr, "load %.3f s (%s)\n", t1 - t0, path);
        fprintf(stderr, "%s %zu bytes, %zu tokens, %.3f s, %.2f MB/s\n", decode ? "decode" : "encode",
                decode ? tlen : in_len, n, t3 - t2, (double)(decode ? tlen : in_len) / 1e6 / (t3 - t2 > 0 ? t3 - t2 : 1e-9));
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "doppler tokenize: %s\n", err.msg);
done:
    free(in);
    free(text);
    free(ids);
    dp_tokenizer_destroy(tok);
    return rc;
}
