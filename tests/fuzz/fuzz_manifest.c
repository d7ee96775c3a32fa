/*
** tests/fuzz/fuzz_manifest.c: libFuzzer target for the YAML files a user hands us: model manifests
** (dp_manifest_parse) and --hints files (dp_manifest_parse_pairs). The first input byte picks the
** reader; the rest is the file. Checks: a failure explains itself and leaves nothing; a manifest that
** loads has its model, and every hint pair (either reader) has a key, a value and a line inside the file.
*/
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The most lines the text can have as YAML counts them (libyaml reports the pairs' lines): a line break is
** LF, CR (CR LF counts once there, twice here: an upper bound), and YAML 1.1's NEL (U+0085), LS (U+2028) and
** PS (U+2029) in UTF-8. */
static size_t yaml_lines(const char *text, size_t len)
{
    const unsigned char *t = (const unsigned char *)text;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\n' || t[i] == '\r') lines++;
        else if (t[i] == 0xC2 && i + 1 < len && t[i + 1] == 0x85) lines++;
        else if (t[i] == 0xE2 && i + 2 < len && t[i + 1] == 0x80 && (t[i + 2] == 0xA8 || t[i + 2] == 0xA9)) lines++;
    }
    return lines;
}

static void check_pairs(const dp_manifest_pair *p, size_t n, const char *text, size_t len)
{
    const size_t lines = yaml_lines(text, len);
    for (size_t i = 0; i < n; i++) {
        if (!p[i].key || !p[i].value || p[i].line < 1 || (size_t)p[i].line > lines) abort();
        for (size_t j = 0; j < i; j++)
            if (strcmp(p[i].key, p[j].key) == 0) abort();   /* duplicates are errors, never kept */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    dp_err err = {0};
    if (data[0] & 1) {
        dp_manifest_pair *p = NULL;
        size_t n = 0;
        if (dp_manifest_parse_pairs("fuzz.yaml", text, len, &p, &n, &err) != DP_OK) {
            if (p || n || !err.msg[0]) abort();
            return 0;
        }
        check_pairs(p, n, text, len);
        dp_manifest_pairs_free(p, n);
        return 0;
    }
    dp_manifest *m = NULL;
    if (dp_manifest_parse("fuzz.yaml", text, len, &m, &err) != DP_OK) {
        if (m || !err.msg[0]) abort();
        return 0;
    }
    if (!m->model || !m->path) abort();
    check_pairs(m->hints, m->n_hints, text, len);
    dp_manifest_free(m);
    return 0;
}
