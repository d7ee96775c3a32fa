/*
** tests/unit/test_tok_gguf.c: tokenizers from GGUF tokenizer.ggml.* metadata (core/text/tok_gguf.c).
** - the fixture GGUFs' placeholder 512-token vocabulary (ids, specials, BOS, decode);
** - GGUFs written here (GGUF writer) from the real Gemma 3 and Llama 3 tokenizer.json, in the form
**   llama.cpp's converter gives them (Gemma 3: "llama" model, scores and types, no merges, no space
**   prefix; Llama 3: "gpt2" model, pre "llama-bpe", merges), must encode every fixture case to the
**   ids HF tokenizers gives and decode them back to HF's text;
** - malformed metadata is refused with a message naming the file and the key.
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
#include <zlib.h>

#include "core/formats/gguf.h"
#include "core/text/tokenizer.h"

static const char *fixtures(void)
{
    const char *f = getenv("DOPPLER_FIXTURES");
    return f ? f : DOPPLER_SOURCE_DIR "/tests/fixtures";
}

static void expect_ids(const dp_tokenizer *tok, const char *text, bool bos, const int32_t *want, size_t nwant)
{
    dp_err err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    if (dp_tokenizer_encode(tok, text, strlen(text), bos, &ids, &n, &err) != DP_OK) fail_msg("encode: %s", err.msg);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], want[i]);
    free(ids);
}

static void expect_decode(const dp_tokenizer *tok, const int32_t *ids, size_t n, bool skip, const char *want)
{
    dp_err err = {0};
    char *text = NULL;
    size_t len = 0;
    if (dp_tokenizer_decode(tok, ids, n, skip, &text, &len, &err) != DP_OK) fail_msg("decode: %s", err.msg);
    assert_string_equal(text, want);
    free(text);
}

/* The fixture GGUFs carry a placeholder vocabulary: <pad> <eos> <bos> <unk> t4 .. t511, SentencePiece kind. */
static void test_placeholder(void **state)
{
    (void)state;
    static const char *const files[] = { "gguf/gemma3-q/model-Q8_0.gguf", "gguf/llama-q/model-Q4_K_M.gguf" };
    for (size_t f = 0; f < 2; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", fixtures(), files[f]);
        dp_err err = {0};
        dp_gguf *g = NULL;
        dp_tokenizer *tok = NULL, *tok2 = NULL;
        if (dp_gguf_open(path, &g, &err) != DP_OK) fail_msg("%s", err.msg);
        if (dp_tokenizer_from_gguf(g, &tok, &err) != DP_OK) fail_msg("%s", err.msg);
        dp_gguf_close(g);   /* the tokenizer keeps nothing of the reader */
        assert_int_equal(dp_tokenizer_model(tok), DP_TOK_SPM_BPE);
        assert_int_equal(dp_tokenizer_vocab_size(tok), 512);
        assert_int_equal(dp_tokenizer_bos(tok), 2);
        assert_int_equal(dp_tokenizer_eos(tok), 1);
        assert_true(dp_tokenizer_add_bos(tok));   /* llama.cpp's default for a "llama" vocabulary */
        assert_int_equal(dp_tokenizer_type(tok, 0), DP_TOKTYPE_CONTROL);
        assert_int_equal(dp_tokenizer_type(tok, 3), DP_TOKTYPE_UNKNOWN);
        assert_int_equal(dp_tokenizer_type(tok, 4), DP_TOKTYPE_NORMAL);
        size_t len;
        assert_string_equal(dp_tokenizer_token(tok, 511, &len), "t511");
        assert_int_equal(dp_tokenizer_id(tok, "t77", 3), 77);
        int32_t special[8];
        assert_int_equal(dp_tokenizer_special_ids(tok, special, 8), 3);
        assert_int_equal(special[0], 0);
        assert_int_equal(special[2], 2);
        expect_ids(tok, "<bos><eos>", false, (const int32_t[]){ 2, 1 }, 2);
        expect_ids(tok, "<eos>", true, (const int32_t[]){ 2, 1 }, 2);
        expect_decode(tok, (const int32_t[]){ 2, 4, 5, 511, 1 }, 5, false, "<bos>t4t5t511<eos>");
        expect_decode(tok, (const int32_t[]){ 2, 4, 5, 511, 1 }, 5, true, "t4t5t511");

        /* dp_tokenizer_load takes the GGUF file itself */
        if (dp_tokenizer_load(path, &tok2, &err) != DP_OK) fail_msg("load %s: %s", path, err.msg);
        assert_int_equal(dp_tokenizer_vocab_size(tok2), 512);
        assert_null(dp_tokenizer_chat_template(tok2));
        expect_decode(tok2, (const int32_t[]){ 4, 5 }, 2, false, "t4t5");
        dp_tokenizer_destroy(tok2);
        dp_tokenizer_destroy(tok);
    }
}

/* ---- GGUFs made from tokenizer.json ---- */

static json_object *read_json_gz(const char *path)
{
    gzFile gz = gzopen(path, "rb");
    assert_non_null(gz);
    size_t cap = 1 << 24, n = 0;
    char *buf = malloc(cap);
    int r;
    while ((r = gzread(gz, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)r;
        if (n == cap) buf = realloc(buf, cap *= 2);
        assert_non_null(buf);
    }
    gzclose(gz);
    json_tokener *t = json_tokener_new_ex(64);
    json_object *o = json_tokener_parse_ex(t, buf, (int)n);
    json_tokener_free(t);
    free(buf);
    assert_non_null(o);
    return o;
}

static json_object *field(json_object *o, const char *k)
{
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(o, k, &v));
    return v;
}

/* Writes path: a GGUF holding only tokenizer metadata, built from tokenizer.json the way llama.cpp's
** converter lays it out. spm: Gemma 3's form (scores = -id, the order SentencePiece ranks its pieces;
** no merges), else Llama 3's (merges, pre "llama-bpe"). */
static void write_gguf_from_json(const char *json_path, const char *path, bool spm, const char *template_text)
{
    json_object *root = read_json_gz(json_path);
    json_object *model = field(root, "model"), *vocab = field(model, "vocab"), *added = field(root, "added_tokens");
    size_t n = 0;
    json_object_object_foreach(vocab, k0, v0) {
        (void)k0;
        if ((size_t)json_object_get_int(v0) + 1 > n) n = (size_t)json_object_get_int(v0) + 1;
    }
    for (size_t i = 0; i < json_object_array_length(added); i++) {
        size_t id = (size_t)json_object_get_int(field(json_object_array_get_idx(added, i), "id"));
        if (id + 1 > n) n = id + 1;
    }
    const char **tokens = calloc(n, sizeof *tokens);
    int32_t *types = calloc(n, sizeof *types);
    float *scores = calloc(n, sizeof *scores);
    assert_true(tokens && types && scores);
    json_object_object_foreach(vocab, k, v) {
        int id = json_object_get_int(v);
        tokens[id] = k;
        types[id] = strlen(k) == 6 && !strncmp(k, "<0x", 3) && k[5] == '>' ? DP_TOKTYPE_BYTE : DP_TOKTYPE_NORMAL;
    }
    for (size_t i = 0; i < json_object_array_length(added); i++) {
        json_object *a = json_object_array_get_idx(added, i);
        int id = json_object_get_int(field(a, "id"));
        tokens[id] = json_object_get_string(field(a, "content"));
        types[id] = json_object_get_boolean(field(a, "special")) ? DP_TOKTYPE_CONTROL : DP_TOKTYPE_USER_DEFINED;
    }
    for (size_t i = 0; i < n; i++) {
        assert_non_null(tokens[i]);   /* these vocabularies have no holes */
        scores[i] = -(float)i;
    }
    dp_err err = {0};
    dp_gguf_writer *w = NULL;
    assert_int_equal(dp_gguf_writer_create(&w, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str(w, "general.architecture", spm ? "gemma3" : "llama", &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2", &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, n, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_array(w, "tokenizer.ggml.token_type", DP_GGUF_INT32, types, n, &err), DP_OK);
    if (spm) {
        assert_int_equal(dp_gguf_writer_set_array(w, "tokenizer.ggml.scores", DP_GGUF_FLOAT32, scores, n, &err), DP_OK);
        assert_int_equal(dp_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false, &err), DP_OK);
        assert_int_equal(dp_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2, &err), DP_OK);
        assert_int_equal(dp_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1, &err), DP_OK);
        assert_int_equal(dp_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 3, &err), DP_OK);
        assert_int_equal(dp_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0, &err), DP_OK);
    } else {
        json_object *merges = field(model, "merges");
        size_t nm = json_object_array_length(merges);
        const char **m = calloc(nm, sizeof *m);
        for (size_t i = 0; i < nm; i++) m[i] = json_object_get_string(json_object_array_get_idx(merges, i));
        assert_int_equal(dp_gguf_writer_set_str(w, "tokenizer.ggml.pre", "llama-bpe", &err), DP_OK);
        assert_int_equal(dp_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", m, nm, &err), DP_OK);
        free(m);
        assert_int_equal(dp_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 128000, &err), DP_OK);
        assert_int_equal(dp_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 128009, &err), DP_OK);
        assert_int_equal(dp_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true, &err), DP_OK);
    }
    if (template_text)
        assert_int_equal(dp_gguf_writer_set_str(w, "tokenizer.chat_template", template_text, &err), DP_OK);
    if (dp_gguf_writer_write_file(w, path, &err) != DP_OK) fail_msg("%s", err.msg);
    dp_gguf_writer_destroy(w);
    free(tokens);
    free(types);
    free(scores);
    json_object_put(root);
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "  %s (%zu):", what, n);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* Every case of <name>_cases.json: encode = HF's ids, decode(HF's ids) = HF's text. */
static void check_cases(const dp_tokenizer *tok, const char *name)
{
    char cases_path[1024];
    snprintf(cases_path, sizeof cases_path, "%s/tokenizers/%s_cases.json", fixtures(), name);
    json_object *root = json_object_from_file(cases_path);
    assert_non_null(root);
    json_object *cases = field(root, "cases");
    size_t ncases = json_object_array_length(cases), failures = 0;
    assert_true(ncases > 100);
    dp_err err = {0};
    for (size_t ci = 0; ci < ncases; ci++) {
        json_object *c = json_object_array_get_idx(cases, ci), *jt = field(c, "text"), *jids = field(c, "ids");
        json_object *jdec = field(c, "decoded");
        size_t nexp = json_object_array_length(jids);
        int32_t *exp = malloc((nexp + 1) * sizeof *exp);
        for (size_t i = 0; i < nexp; i++) exp[i] = json_object_get_int(json_object_array_get_idx(jids, i));
        int32_t *ids = NULL;
        size_t n = 0;
        if (dp_tokenizer_encode(tok, json_object_get_string(jt), (size_t)json_object_get_string_len(jt), false, &ids,
                                &n, &err) != DP_OK)
            fail_msg("%s case %zu: encode: %s", name, ci, err.msg);
        if (n != nexp || memcmp(ids, exp, n * sizeof *ids) != 0) {
            if (failures++ < 3) {
                fprintf(stderr, "%s (GGUF) case %zu: ids differ for \"%s\"\n", name, ci, json_object_get_string(jt));
                print_ids("expected", exp, nexp);
                print_ids("got", ids, n);
            }
        }
        char *dec = NULL;
        size_t dlen = 0;
        if (dp_tokenizer_decode(tok, exp, nexp, false, &dec, &dlen, &err) != DP_OK) fail_msg("%s: decode: %s", name, err.msg);
        if (dlen != (size_t)json_object_get_string_len(jdec) || memcmp(dec, json_object_get_string(jdec), dlen) != 0) {
            if (failures++ < 3) fprintf(stderr, "%s (GGUF) case %zu: decoded \"%s\"\n", name, ci, dec);
        }
        free(dec);
        free(ids);
        free(exp);
    }
    json_object_put(root);
    if (failures) fail_msg("%s from GGUF: %zu mismatches over %zu cases", name, failures, ncases);
}

static void test_from_tokenizer_json(const char *name, bool spm)
{
    char json_path[1024], path[] = "/tmp/doppler_tok_gguf_XXXXXX";
    snprintf(json_path, sizeof json_path, "%s/tokenizers/%s.tokenizer.json.gz", fixtures(), name);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_gguf_from_json(json_path, path, spm, "{{ messages }}");
    dp_err err = {0};
    dp_tokenizer *tok = NULL;
    dp_status st = dp_tokenizer_load(path, &tok, &err);
    unlink(path);
    if (st != DP_OK) fail_msg("load %s: %s", path, err.msg);
    assert_int_equal(dp_tokenizer_model(tok), spm ? DP_TOK_SPM_BPE : DP_TOK_BYTE_BPE);
    assert_string_equal(dp_tokenizer_chat_template(tok), "{{ messages }}");
    assert_true(dp_tokenizer_add_bos(tok));
    assert_int_equal(dp_tokenizer_bos(tok), spm ? 2 : 128000);
    check_cases(tok, name);
    dp_tokenizer_destroy(tok);
}

static void test_gemma3_from_json(void **state) { (void)state; test_from_tokenizer_json("gemma3", true); }
static void test_llama3_from_json(void **state) { (void)state; test_from_tokenizer_json("llama3", false); }

/* Malformed metadata: a clear message naming the key, no tokenizer. */
static void expect_refused(void (*build)(dp_gguf_writer *w), const char *needle)
{
    dp_err err = {0};
    dp_gguf_writer *w = NULL;
    void *buf = NULL;
    size_t size = 0;
    dp_gguf *g = NULL;
    dp_tokenizer *tok = NULL;
    assert_int_equal(dp_gguf_writer_create(&w, &err), DP_OK);
    build(w);
    assert_int_equal(dp_gguf_writer_write_mem(w, &buf, &size, &err), DP_OK);
    dp_gguf_writer_destroy(w);
    assert_int_equal(dp_gguf_parse("bad.gguf", buf, size, &g, &err), DP_OK);
    assert_int_not_equal(dp_tokenizer_from_gguf(g, &tok, &err), DP_OK);
    assert_null(tok);
    if (!strstr(err.msg, needle) || !strstr(err.msg, "bad.gguf")) fail_msg("message \"%s\" lacks \"%s\"", err.msg, needle);
    dp_gguf_close(g);
    free(buf);
}

static const char *const three[] = { "a", "b", "ab" };
static void no_model(dp_gguf_writer *w) { dp_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", three, 3, NULL); }
static void bad_model(dp_gguf_writer *w)
{
    dp_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert", NULL);
    dp_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", three, 3, NULL);
}
static void no_tokens(dp_gguf_writer *w) { dp_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", NULL); }
static void short_scores(dp_gguf_writer *w)
{
    float s[2] = { 0, -1 };
    dp_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", NULL);
    dp_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", three, 3, NULL);
    dp_gguf_writer_set_array(w, "tokenizer.ggml.scores", DP_GGUF_FLOAT32, s, 2, NULL);
}
static void bad_type(dp_gguf_writer *w)
{
    int32_t t[3] = { 1, 9, 1 };
    dp_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", NULL);
    dp_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", three, 3, NULL);
    dp_gguf_writer_set_array(w, "tokenizer.ggml.token_type", DP_GGUF_INT32, t, 3, NULL);
}
static void bad_merge(dp_gguf_writer *w)
{
    static const char *const m[] = { "a b", "ab" };
    dp_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    dp_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", three, 3, NULL);
    dp_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", m, 2, NULL);
}
static void bad_pre(dp_gguf_writer *w)
{
    dp_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", NULL);
    dp_gguf_writer_set_str(w, "tokenizer.ggml.pre", "no-such-pre", NULL);
    dp_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", three, 3, NULL);
}

static void test_bad_metadata(void **state)
{
    (void)state;
    expect_refused(no_model, "tokenizer.ggml.model");
    expect_refused(bad_model, "bert");
    expect_refused(no_tokens, "tokenizer.ggml.tokens");
    expect_refused(short_scores, "tokenizer.ggml.scores");
    expect_refused(bad_type, "token_type[1]");
    expect_refused(bad_merge, "merges[1]");
    expect_refused(bad_pre, "no-such-pre");
}

/* A small byte-level vocabulary: GPT-2's 256 byte pieces (ids 0..255), then merges. */
static uint32_t byte_cp(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++) n += !((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174);
    return 256 + n;
}

static void test_small_byte_level(void **state)
{
    (void)state;
    static char pieces[256][4];
    const char *toks[261];
    for (unsigned b = 0; b < 256; b++) {
        uint32_t cp = byte_cp(b);
        if (cp < 0x80) pieces[b][0] = (char)cp;
        else { pieces[b][0] = (char)(0xC0 | cp >> 6); pieces[b][1] = (char)(0x80 | (cp & 0x3F)); }
        toks[b] = pieces[b];
    }
    static const char *const more[] = { "he", "ll", "hell", "hello", "<|end|>" };   /* ids 256..260 */
    for (int i = 0; i < 5; i++) toks[256 + i] = more[i];
    int32_t types[261];
    for (int i = 0; i < 261; i++) types[i] = i == 260 ? DP_TOKTYPE_CONTROL : DP_TOKTYPE_NORMAL;
    static const char *const m[] = { "h e", "l l", "he ll", "hell o" };
    dp_err err = {0};
    dp_gguf_writer *w = NULL;
    void *buf = NULL;
    size_t size = 0;
    dp_gguf *g = NULL;
    dp_tokenizer *tok = NULL;
    assert_int_equal(dp_gguf_writer_create(&w, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2", &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, 261, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_array(w, "tokenizer.ggml.token_type", DP_GGUF_INT32, types, 261, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", m, 4, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", 260, &err), DP_OK);
    assert_int_equal(dp_gguf_writer_write_mem(w, &buf, &size, &err), DP_OK);
    dp_gguf_writer_destroy(w);
    assert_int_equal(dp_gguf_parse("small.gguf", buf, size, &g, &err), DP_OK);
    if (dp_tokenizer_from_gguf(g, &tok, &err) != DP_OK) fail_msg("%s", err.msg);
    dp_gguf_close(g);
    free(buf);
    assert_int_equal(dp_tokenizer_model(tok), DP_TOK_BYTE_BPE);
    assert_false(dp_tokenizer_add_bos(tok));   /* "gpt2" without add_bos_token: llama.cpp's default */
    assert_int_equal(dp_tokenizer_bos(tok), -1);
    assert_int_equal(dp_tokenizer_eot(tok), 260);
    expect_ids(tok, "hello<|end|>hell", true, (const int32_t[]){ 259, 260, 258 }, 3);
    expect_ids(tok, "ell", false, (const int32_t[]){ 'e', 257 }, 2);
    expect_ids(tok, "he\xC3\xA9", false, (const int32_t[]){ 256, 0xC3, 0xA9 }, 3);   /* é: two byte pieces */
    expect_decode(tok, (const int32_t[]){ 259, 260, 256, 0xC3, 0xA9 }, 5, true, "hellohe\xC3\xA9");
    dp_tokenizer_destroy(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placeholder),
        cmocka_unit_test(test_gemma3_from_json),
        cmocka_unit_test(test_llama3_from_json),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_small_byte_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
