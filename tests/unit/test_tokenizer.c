/*
** tests/unit/test_tokenizer.c: the tokenizers against HF tokenizers' own output
** (tests/fixtures/tokenizers/NAME_cases.json: ids = encode(add_special_tokens=False),
** decoded = decode(skip_special_tokens=False)), streaming decode, and bad input.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/text/tokenizer.h"

static const char *fixtures(void)
{
    const char *f = getenv("DOPPLER_FIXTURES");
    return f ? f : DOPPLER_SOURCE_DIR "/tests/fixtures";
}

static bool valid_utf8(const char *s, size_t n)
{
    /* strict: no surrogates, no overlongs, nothing past U+10FFFF, nothing incomplete */
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t need = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 4;
        if (need == 4 || (need && i + need >= n)) return false;
        for (size_t k = 1; k <= need; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
        }
        if (need == 2 && ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F))) return false;
        if (need == 3 && ((c == 0xF0 && p[i + 1] < 0x90) || (c == 0xF4 && p[i + 1] > 0x8F))) return false;
        i += need + 1;
    }
    return true;
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "  %s (%zu):", what, n);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

static void run_cases(const char *name)
{
    char path[1024], cases_path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/%s.tokenizer.json.gz", fixtures(), name);
    snprintf(cases_path, sizeof cases_path, "%s/tokenizers/%s_cases.json", fixtures(), name);
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    if (dp_tokenizer_load(path, &tok, &err) != DP_OK) fail_msg("load %s: %s", path, err.msg);

    json_object *root = json_object_from_file(cases_path);
    assert_non_null(root);
    json_object *cases = NULL;
    assert_true(json_object_object_get_ex(root, "cases", &cases));
    size_t ncases = json_object_array_length(cases), failures = 0;
    assert_true(ncases > 100);
    for (size_t ci = 0; ci < ncases; ci++) {
        json_object *c = json_object_array_get_idx(cases, ci), *jt, *jids, *jdec;
        assert_true(json_object_object_get_ex(c, "text", &jt));
        assert_true(json_object_object_get_ex(c, "ids", &jids));
        assert_true(json_object_object_get_ex(c, "decoded", &jdec));
        const char *text = json_object_get_string(jt);
        size_t tlen = (size_t)json_object_get_string_len(jt);
        size_t nexp = json_object_array_length(jids);
        int32_t *exp = malloc((nexp + 1) * sizeof *exp);
        for (size_t i = 0; i < nexp; i++) exp[i] = json_object_get_int(json_object_array_get_idx(jids, i));

        int32_t *ids = NULL;
        size_t n = 0;
        if (dp_tokenizer_encode(tok, text, tlen, false, &ids, &n, &err) != DP_OK) fail_msg("%s: encode: %s", name, err.msg);
        if (n != nexp || memcmp(ids, exp, n * sizeof *ids) != 0) {
            if (failures++ < 3) {
                fprintf(stderr, "%s case %zu: ids differ for text \"%s\"\n", name, ci, text);
                print_ids("expected", exp, nexp);
                print_ids("got", ids, n);
            }
        }

        /* decode the reference ids, whole and streamed */
        char *dec = NULL;
        size_t dlen = 0;
        if (dp_tokenizer_decode(tok, exp, nexp, false, &dec, &dlen, &err) != DP_OK) fail_msg("%s: decode: %s", name, err.msg);
        const char *want = json_object_get_string(jdec);
        size_t wlen = (size_t)json_object_get_string_len(jdec);
        if (dlen != wlen || memcmp(dec, want, wlen) != 0) {
            if (failures++ < 3) fprintf(stderr, "%s case %zu: decoded \"%s\", expected \"%s\"\n", name, ci, dec, want);
        }
        dp_detok *d = NULL;
        assert_int_equal(dp_detok_create(tok, false, &d, &err), DP_OK);
        char *acc = malloc(dlen + 64);
        size_t an = 0;
        for (size_t i = 0; i <= nexp; i++) {
            const char *piece;
            size_t pl;
            dp_status st = i < nexp ? dp_detok_push(d, exp[i], &piece, &pl, &err) : dp_detok_finish(d, &piece, &pl, &err);
            assert_int_equal(st, DP_OK);
            if (!valid_utf8(piece, pl)) fail_msg("%s case %zu: streamed piece %zu is not whole UTF-8", name, ci, i);
            assert_true(an + pl <= dlen);
            memcpy(acc + an, piece, pl);
            an += pl;
        }
        assert_int_equal(an, dlen);
        assert_memory_equal(acc, dec, dlen);
        dp_detok_destroy(d);
        free(acc);
        free(dec);
        free(ids);
        free(exp);
    }
    json_object_put(root);
    dp_tokenizer_destroy(tok);
    if (failures) fail_msg("%s: %zu mismatches over %zu cases", name, failures, ncases);
}

static void test_gemma3_cases(void **state) { (void)state; run_cases("gemma3"); }
static void test_llama3_cases(void **state) { (void)state; run_cases("llama3"); }
static void test_qwen3_cases(void **state)  { (void)state; run_cases("qwen3"); }

/* Properties HF's tables imply, checked by id: BOS handling, special ids, lookups, partial UTF-8. */
static void test_gemma3_api(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/gemma3.tokenizer.json.gz", fixtures());
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    assert_int_equal(dp_tokenizer_load(path, &tok, &err), DP_OK);
    assert_int_equal(dp_tokenizer_bos(tok), 2);
    assert_int_equal(dp_tokenizer_eos(tok), 1);
    assert_int_equal(dp_tokenizer_eot(tok), 106);
    assert_true(dp_tokenizer_add_bos(tok));
    assert_int_equal(dp_tokenizer_vocab_size(tok), 262145);
    assert_int_equal(dp_tokenizer_id(tok, "<start_of_turn>", 15), 105);
    assert_string_equal(dp_tokenizer_token(tok, 106, NULL), "<end_of_turn>");
    int32_t stop[4];
    assert_int_equal(dp_tokenizer_stop_ids(tok, stop, 4), 2);
    assert_int_equal(stop[0], 1);
    assert_int_equal(stop[1], 106);
    int32_t special[16];
    size_t ns = dp_tokenizer_special_ids(tok, special, 16);
    assert_int_equal(ns, 9);
    assert_int_equal(special[4], 105);

    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(dp_tokenizer_encode(tok, "Hello", 5, true, &ids, &n, &err), DP_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 2);
    free(ids);

    /* byte tokens: "日" as its three byte tokens streams nothing until complete */
    int32_t b[3] = { dp_tokenizer_id(tok, "<0xE6>", 6), dp_tokenizer_id(tok, "<0x97>", 6), dp_tokenizer_id(tok, "<0xA5>", 6) };
    dp_detok *d = NULL;
    assert_int_equal(dp_detok_create(tok, true, &d, &err), DP_OK);
    const char *piece;
    size_t pl;
    assert_int_equal(dp_detok_push(d, b[0], &piece, &pl, &err), DP_OK);
    assert_int_equal(pl, 0);
    assert_int_equal(dp_detok_push(d, b[1], &piece, &pl, &err), DP_OK);
    assert_int_equal(pl, 0);
    assert_int_equal(dp_detok_push(d, 106, &piece, &pl, &err), DP_OK);   /* skipped: does not end the run */
    assert_int_equal(pl, 0);
    assert_int_equal(dp_detok_push(d, b[2], &piece, &pl, &err), DP_OK);
    assert_int_equal(pl, 0);
    assert_int_equal(dp_detok_push(d, dp_tokenizer_id(tok, "\xE2\x96\x81world", 8), &piece, &pl, &err), DP_OK);
    assert_string_equal(piece, "\xE6\x97\xA5 world");
    /* an invalid run: HF turns every byte into U+FFFD */
    assert_int_equal(dp_detok_push(d, b[0], &piece, &pl, &err), DP_OK);
    assert_int_equal(dp_detok_push(d, b[0], &piece, &pl, &err), DP_OK);
    assert_int_equal(dp_detok_finish(d, &piece, &pl, &err), DP_OK);
    assert_string_equal(piece, "\xEF\xBF\xBD\xEF\xBF\xBD");
    assert_int_equal(dp_detok_push(d, 1 << 30, &piece, &pl, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "out of range"));
    dp_detok_destroy(d);

    /* invalid UTF-8 input is refused with its offset */
    dp_err_clear(&err);
    assert_int_equal(dp_tokenizer_encode(tok, "ab\xFF", 3, false, &ids, &n, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "byte 2"));
    assert_null(ids);
    dp_tokenizer_destroy(tok);
}

static void test_llama3_stream(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/llama3.tokenizer.json.gz", fixtures());
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    assert_int_equal(dp_tokenizer_load(path, &tok, &err), DP_OK);
    assert_int_equal(dp_tokenizer_bos(tok), 128000);
    assert_true(dp_tokenizer_add_bos(tok));
    assert_int_equal(dp_tokenizer_eot(tok), 128009);
    /* "😀" is F0 9F 98 80: tokens that split it must not emit a partial sequence */
    int32_t *ids = NULL;
    size_t n = 0;
    const char *text = "a\xF0\x9F\x98\x80\xF0\x9F\x8E\x89 b";
    assert_int_equal(dp_tokenizer_encode(tok, text, strlen(text), false, &ids, &n, &err), DP_OK);
    dp_detok *d = NULL;
    assert_int_equal(dp_detok_create(tok, false, &d, &err), DP_OK);
    char acc[64] = {0};
    for (size_t i = 0; i < n; i++) {
        const char *piece;
        size_t pl;
        assert_int_equal(dp_detok_push(d, ids[i], &piece, &pl, &err), DP_OK);
        assert_true(valid_utf8(piece, pl));
        strncat(acc, piece, sizeof acc - strlen(acc) - 1);
    }
    assert_string_equal(acc, text);
    free(ids);
    /* Ġ alone (byte 0xF0 via token "ð") then finish: one U+FFFD, as from_utf8_lossy */
    const char *piece;
    size_t pl;
    assert_int_equal(dp_detok_push(d, dp_tokenizer_id(tok, "\xC3\xB0", 2), &piece, &pl, &err), DP_OK);
    assert_int_equal(pl, 0);
    assert_int_equal(dp_detok_finish(d, &piece, &pl, &err), DP_OK);
    assert_string_equal(piece, "\xEF\xBF\xBD");
    dp_detok_destroy(d);
    dp_tokenizer_destroy(tok);
}

/* ---- from_vocab: the GGUF route ------------------------------------------------------------- */

static void test_from_vocab_spm_scores(void **state)
{
    (void)state;
    /* SPM with scores and no merges (GGUF "llama"): "▁ab" beats "ab" + prefix */
    const char *tokens[] = { "<unk>", "<s>", "</s>", "a", "b", "\xE2\x96\x81", "ab", "\xE2\x96\x81" "ab", "<0xC3>", "<0xA9>" };
    float scores[] = { 0, 0, 0, -1, -2, -3, -4, -5, 0, 0 };
    int32_t types[] = { 2, 3, 3, 1, 1, 1, 1, 1, 6, 6 };
    dp_tok_vocab v = { .model = DP_TOK_SPM_BPE, .n_tokens = 10, .tokens = tokens, .scores = scores, .types = types,
                       .bos = 1, .eos = 2, .eot = -1, .unk = 0, .pad = -1, .add_bos = true, .byte_fallback = true,
                       .name = "test vocab" };
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    assert_int_equal(dp_tokenizer_from_vocab(&v, &tok, &err), DP_OK);
    int32_t *ids = NULL;
    size_t n = 0;
    const char *text = "ab ab\xC3\xA9</s>";
    assert_int_equal(dp_tokenizer_encode(tok, text, strlen(text), true, &ids, &n, &err), DP_OK);
    int32_t want[] = { 1, 6, 7, 8, 9, 2 };
    assert_int_equal(n, 6);
    assert_memory_equal(ids, want, sizeof want);
    char *dec = NULL;
    assert_int_equal(dp_tokenizer_decode(tok, ids, n, true, &dec, NULL, &err), DP_OK);
    assert_string_equal(dec, "ab ab\xC3\xA9");
    free(dec);
    free(ids);
    /* "x" has no token and no byte token: <unk> */
    assert_int_equal(dp_tokenizer_encode(tok, "x", 1, false, &ids, &n, &err), DP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 0);
    free(ids);
    dp_tokenizer_destroy(tok);

    /* Added tokens that are not valid UTF-8 (a GGUF may hold any bytes): "\xA9" and "\xC3" would match
    ** inside "\xC3\xA9" and leave invalid UTF-8 on both sides (fuzz_tokenizer_json found the abort this
    ** caused). They are never matched in text, so the ids are those above; they still decode. */
    const char *tokens2[] = { "<unk>", "<s>", "</s>", "a", "b", "\xE2\x96\x81", "ab", "\xE2\x96\x81" "ab", "<0xC3>", "<0xA9>",
                              "\xA9", "\xC3" };
    float scores2[] = { 0, 0, 0, -1, -2, -3, -4, -5, 0, 0, 0, 0 };
    int32_t types2[] = { 2, 3, 3, 1, 1, 1, 1, 1, 6, 6, 4, 3 };
    v.n_tokens = 12;
    v.tokens = tokens2;
    v.scores = scores2;
    v.types = types2;
    assert_int_equal(dp_tokenizer_from_vocab(&v, &tok, &err), DP_OK);
    assert_int_equal(dp_tokenizer_encode(tok, text, strlen(text), true, &ids, &n, &err), DP_OK);
    assert_int_equal(n, 6);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    int32_t odd[] = { 3, 10 };
    assert_int_equal(dp_tokenizer_decode(tok, odd, 2, false, &dec, NULL, &err), DP_OK);
    assert_string_equal(dec, "a\xA9");   /* a piece that is not a <0xHH> byte token decodes to its own bytes */
    free(dec);
    dp_tokenizer_destroy(tok);
}

static void test_from_vocab_byte_level(void **state)
{
    (void)state;
    /* all 256 byte characters, plus "ĠĠ" via the merge "Ġ Ġ", and a bad merge to check the error */
    const char *tokens[259];
    char store[256][3];
    for (int b = 0; b < 256; b++) {
        uint32_t cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? (uint32_t)b : 0;
        if (!cp) { cp = 256; for (int c = 0; c < b; c++) cp += !((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174); }
        if (cp < 0x80) { store[b][0] = (char)cp; store[b][1] = 0; }
        else { store[b][0] = (char)(0xC0 | cp >> 6); store[b][1] = (char)(0x80 | (cp & 0x3F)); store[b][2] = 0; }
        tokens[b] = store[b];
    }
    tokens[256] = "\xC4\xA0\xC4\xA0";
    tokens[257] = "<|end|>";
    tokens[258] = "hi";
    int32_t types[259];
    for (int i = 0; i < 259; i++) types[i] = 1;
    types[257] = 3;
    const char *merges[] = { "\xC4\xA0 \xC4\xA0", "h i" };
    dp_tok_vocab v = { .model = DP_TOK_BYTE_BPE, .n_tokens = 259, .tokens = tokens, .types = types,
                       .n_merges = 2, .merges = merges, .bos = -1, .eos = 257, .eot = -1, .unk = -1, .pad = -1,
                       .split_regex = dp_tokenizer_pre_regex("llama-bpe"), .name = "test vocab" };
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    assert_int_equal(dp_tokenizer_from_vocab(&v, &tok, &err), DP_OK);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(dp_tokenizer_encode(tok, "hi   hi<|end|>", 14, true, &ids, &n, &err), DP_OK);
    /* the regex splits "hi", "  ", " hi" (the last space stays with the word); "Ġh" has no merge */
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 258);
    assert_int_equal(ids[1], 256);
    assert_int_equal(ids[2], ' ');   /* byte 0x20's token is id 32 here */
    assert_int_equal(ids[3], 258);
    assert_int_equal(ids[4], 257);
    free(ids);
    dp_tokenizer_destroy(tok);

    const char *bad[] = { "h x" };
    tokens[258] = "hi";
    v.merges = bad;
    v.n_merges = 1;
    assert_int_equal(dp_tokenizer_from_vocab(&v, &tok, &err), DP_EFORMAT);
    assert_null(tok);
    assert_non_null(strstr(err.msg, "test vocab"));
}

/* A model directory: tokenizer.json.gz plus tokenizer_config.json (bos/eos, chat template). */
static void test_directory(void **state)
{
    (void)state;
    char dir[] = "/tmp/dp_tokdir_XXXXXX", src[1024], path[600];
    assert_non_null(mkdtemp(dir));
    snprintf(src, sizeof src, "%s/tokenizers/llama3.tokenizer.json.gz", fixtures());
    snprintf(path, sizeof path, "%s/tokenizer.json.gz", dir);
    assert_int_equal(symlink(src, path), 0);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": {\"content\": \"<|eot_id|>\"},"
          " \"add_bos_token\": false, \"chat_template\": \"<|start_header_id|>Cutting Knowledge Date\"}", f);
    fclose(f);
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    if (dp_tokenizer_load(dir, &tok, &err) != DP_OK) fail_msg("%s", err.msg);
    assert_int_equal(dp_tokenizer_bos(tok), 128000);
    assert_false(dp_tokenizer_add_bos(tok));
    assert_int_equal(dp_tokenizer_eos(tok), 128009);
    assert_string_equal(dp_tokenizer_chat_template(tok), "<|start_header_id|>Cutting Knowledge Date");
    dp_tokenizer_destroy(tok);

    f = fopen(path, "w");
    fputs("\"just a string\"", f);
    fclose(f);
    tok = NULL;
    assert_int_equal(dp_tokenizer_load(dir, &tok, &err), DP_EFORMAT);
    assert_null(tok);
    assert_non_null(strstr(err.msg, "tokenizer_config.json"));
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer.json.gz", dir);
    unlink(path);
    rmdir(dir);
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void expect_load_error(const char *path, dp_status want, const char *fragment)
{
    dp_err err = {0};
    dp_tokenizer *tok = (dp_tokenizer *)&err;
    dp_status st = dp_tokenizer_load(path, &tok, &err);
    if (st != want) fail_msg("%s: status %s, expected %s (%s)", path, dp_status_name(st), dp_status_name(want), err.msg);
    assert_null(tok);
    if (!strstr(err.msg, path)) fail_msg("message does not name the file: %s", err.msg);
    if (fragment && !strstr(err.msg, fragment)) fail_msg("message lacks \"%s\": %s", fragment, err.msg);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void test_bad_input(void **state)
{
    (void)state;
    char dir[] = "/tmp/dp_tok_XXXXXX", path[512];
    assert_non_null(mkdtemp(dir));

    snprintf(path, sizeof path, "%s/missing.json", dir);
    expect_load_error(path, DP_EIO, "No such file");

    snprintf(path, sizeof path, "%s/array.json", dir);
    write_file(path, "[1, 2, 3]", 9);
    expect_load_error(path, DP_EFORMAT, "not an object");

    snprintf(path, sizeof path, "%s/broken.json", dir);
    write_file(path, "{\"model\": {\"vocab\": ", 20);
    expect_load_error(path, DP_EFORMAT, "JSON");

    snprintf(path, sizeof path, "%s/unigram.json", dir);
    const char *uni = "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}}";
    write_file(path, uni, strlen(uni));
    expect_load_error(path, DP_EFORMAT, "Unigram");

    snprintf(path, sizeof path, "%s/nokind.json", dir);
    const char *nk = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}";
    write_file(path, nk, strlen(nk));
    expect_load_error(path, DP_EFORMAT, "kind");

    /* the first 64 KiB of the real gzip: truncated */
    char src[1024];
    snprintf(src, sizeof src, "%s/tokenizers/llama3.tokenizer.json.gz", fixtures());
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(n, sizeof buf);
    snprintf(path, sizeof path, "%s/trunc.json.gz", dir);
    write_file(path, buf, n);
    expect_load_error(path, DP_EFORMAT, NULL);

    snprintf(path, sizeof path, "%s", dir);   /* a directory without tokenizer.json */
    expect_load_error(path, DP_EIO, "tokenizer.json");

    /* A split regex with invalid UTF-8: fuzz_tokenizer_json found that PCRE2 crashed on it when told not
    ** to check UTF-8. The input is kept in the fuzz corpus; loading it must be a clean format error. */
    char crash[1024];
    snprintf(crash, sizeof crash, "%s/tests/fuzz/corpus/tokenizer_json/regress-invalid-utf8-regex.json", DOPPLER_SOURCE_DIR);
    expect_load_error(crash, DP_EFORMAT, "not valid UTF-8");
    /* An added token whose content is one raw continuation byte, "\xB6": it matched inside "\xC3\xB6" of the
    ** fuzz target's text and split the character, and the SPM pre-tokeniser aborted on the invalid half
    ** (found by fuzz_tokenizer_json in CI). JSON text must be UTF-8: the file is refused by name. */
    snprintf(crash, sizeof crash, "%s/tests/fuzz/corpus/tokenizer_json/regress-added-token-mid-char.json", DOPPLER_SOURCE_DIR);
    expect_load_error(crash, DP_EFORMAT, "not valid UTF-8");

    const char *names[] = { "missing.json", "array.json", "broken.json", "unigram.json", "nokind.json", "trunc.json.gz" };
    for (size_t i = 0; i < DP_ARRAY_LEN(names); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemma3_cases),
        cmocka_unit_test(test_llama3_cases),
        cmocka_unit_test(test_qwen3_cases),
        cmocka_unit_test(test_gemma3_api),
        cmocka_unit_test(test_llama3_stream),
        cmocka_unit_test(test_from_vocab_spm_scores),
        cmocka_unit_test(test_from_vocab_byte_level),
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
