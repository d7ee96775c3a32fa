/*
** core/text/chat.c: see chat.h. Each renderer follows its official Jinja template line by line
** (transformers' convert_gemma3_weights.py _CHAT_TEMPLATE; Meta's Llama 3 / 3.1 templates; Qwen's
** ChatML; Mistral v0.3; Phi-3-mini-4k-instruct), including where it trims ("| trim" is Python's
** str.strip(): Unicode whitespace) and where it does not.
*/
#include "core/text/chat.h"

#include <stdlib.h>
#include <string.h>

static const char *const KIND_NAMES[DP_CHAT_KIND_COUNT] = { "gemma3", "llama3", "llama31", "chatml", "mistral", "phi3" };

#define QWEN25_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
#define QWEN2_SYSTEM  "You are a helpful assistant."

const char *dp_chat_kind_name(dp_chat_kind kind)
{
    return kind < DP_CHAT_KIND_COUNT ? KIND_NAMES[kind] : "?";
}

dp_status dp_chat_kind_parse(const char *name, dp_chat_kind *out, dp_err *err)
{
    for (int k = 0; k < DP_CHAT_KIND_COUNT; k++) {
        if (!strcmp(name, KIND_NAMES[k])) { *out = (dp_chat_kind)k; return DP_OK; }
    }
    if (!strcmp(name, "qwen") || !strcmp(name, "qwen2") || !strcmp(name, "qwen3")) { *out = DP_CHAT_CHATML; return DP_OK; }
    if (!strcmp(name, "gemma")) { *out = DP_CHAT_GEMMA3; return DP_OK; }
    return DP_FAIL(err, DP_EINVAL, "unknown chat template '%s' (gemma3, llama3, llama31, chatml, mistral, phi3)", name);
}

bool dp_chat_has_bos(dp_chat_kind kind)
{
    return kind == DP_CHAT_GEMMA3 || kind == DP_CHAT_LLAMA3 || kind == DP_CHAT_LLAMA31 || kind == DP_CHAT_MISTRAL;
}

static bool has_token(const dp_tokenizer *tok, const char *s)
{
    return tok && dp_tokenizer_id(tok, s, strlen(s)) >= 0;
}

dp_status dp_chat_detect(const char *tpl, const char *arch, const dp_tokenizer *tok, dp_chat_template *out, dp_err *err)
{
    out->default_system = NULL;
    if (tpl) {
        if (strstr(tpl, "<start_of_turn>")) { out->kind = DP_CHAT_GEMMA3; return DP_OK; }
        if (strstr(tpl, "<|start_header_id|>")) {
            out->kind = strstr(tpl, "Cutting Knowledge Date") ? DP_CHAT_LLAMA31 : DP_CHAT_LLAMA3;
            return DP_OK;
        }
        if (strstr(tpl, "<|im_start|>")) {
            out->kind = DP_CHAT_CHATML;
            out->default_system = strstr(tpl, QWEN25_SYSTEM) ? QWEN25_SYSTEM : strstr(tpl, QWEN2_SYSTEM) ? QWEN2_SYSTEM : NULL;
            return DP_OK;
        }
        if (strstr(tpl, "[INST]")) { out->kind = DP_CHAT_MISTRAL; return DP_OK; }
        if (strstr(tpl, "<|user|>")) { out->kind = DP_CHAT_PHI3; return DP_OK; }
    }
    if (arch) {
        if (!strncmp(arch, "gemma", 5)) { out->kind = DP_CHAT_GEMMA3; return DP_OK; }
        if (!strncmp(arch, "qwen", 4)) { out->kind = DP_CHAT_CHATML; return DP_OK; }
        if (!strcmp(arch, "phi3")) { out->kind = DP_CHAT_PHI3; return DP_OK; }
        if (!strcmp(arch, "mistral") || !strcmp(arch, "mixtral")) { out->kind = DP_CHAT_MISTRAL; return DP_OK; }
        if (!strcmp(arch, "llama")) {   /* Mistral GGUFs say "llama" too: the vocabulary tells them apart */
            out->kind = !has_token(tok, "<|start_header_id|>") && has_token(tok, "[INST]") ? DP_CHAT_MISTRAL : DP_CHAT_LLAMA31;
            return DP_OK;
        }
    }
    if (has_token(tok, "<start_of_turn>")) { out->kind = DP_CHAT_GEMMA3; return DP_OK; }
    if (has_token(tok, "<|start_header_id|>")) { out->kind = DP_CHAT_LLAMA31; return DP_OK; }
    if (has_token(tok, "<|im_start|>")) { out->kind = DP_CHAT_CHATML; return DP_OK; }
    if (has_token(tok, "<|user|>")) { out->kind = DP_CHAT_PHI3; return DP_OK; }
    if (has_token(tok, "[INST]")) { out->kind = DP_CHAT_MISTRAL; return DP_OK; }
    return DP_FAIL(err, DP_EINVAL, "cannot choose a chat template (template %s, architecture %s): name one",
                   tpl ? "not recognised" : "absent", arch ? arch : "unknown");
}

/* ---- rendering ------------------------------------------------------------------------------ */

typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Python's str.isspace() for the code point starting at s (len bytes), 0 if not whitespace. */
static size_t space_len(const unsigned char *s, size_t len)
{
    if (!len) return 0;
    if (s[0] == ' ' || (s[0] >= 0x09 && s[0] <= 0x0D) || (s[0] >= 0x1C && s[0] <= 0x1F)) return 1;
    if (len >= 2 && s[0] == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (len >= 3 && s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3;                 /* U+1680 */
    if (len >= 3 && s[0] == 0xE2 && s[1] == 0x80 && (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
        return 3;                                                                           /* U+2000..200A, 2028, 2029, 202F */
    if (len >= 3 && s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3;                 /* U+205F */
    if (len >= 3 && s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3;                 /* U+3000 */
    return 0;
}

/* Appends s with leading and trailing whitespace removed (Jinja's trim). */
static void put_trim(sbuf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), k;
    while (n && (k = space_len(p, n)) > 0) { p += k; n -= k; }
    /* trailing: scan forward, remembering where the last non-space ended */
    size_t end = 0;
    for (size_t i = 0; i < n;) {
        if ((k = space_len(p + i, n - i)) > 0) { i += k; continue; }
        i++;
        while (i < n && (p[i] & 0xC0) == 0x80) i++;
        end = i;
    }
    put(b, (const char *)p, end);
}

static bool is_role(const dp_chat_msg *m, const char *role) { return m->role && !strcmp(m->role, role); }

static dp_status render_gemma3(sbuf *b, const dp_chat_msg *m, size_t n, const dp_chat_opts *o, dp_err *err)
{
    const char *prefix = NULL;
    puts_(b, "<bos>");
    if (n && is_role(&m[0], "system")) { prefix = m[0].content; m++; n--; }
    for (size_t i = 0; i < n; i++) {
        if (is_role(&m[i], "user") != (i % 2 == 0))
            return DP_FAIL(err, DP_EINVAL, "gemma3 chat: conversation roles must alternate user/assistant/user/assistant/... "
                           "(message %zu is '%s')", i + (prefix != NULL), m[i].role);
        puts_(b, "<start_of_turn>");
        puts_(b, is_role(&m[i], "assistant") ? "model" : m[i].role);
        puts_(b, "\n");
        if (i == 0 && prefix) { puts_(b, prefix); puts_(b, "\n\n"); }
        put_trim(b, m[i].content);
        puts_(b, "<end_of_turn>\n");
    }
    if (o->add_generation_prompt) puts_(b, "<start_of_turn>model\n");
    return DP_OK;
}

static void llama_turn(sbuf *b, const dp_chat_msg *m)
{
    puts_(b, "<|start_header_id|>");
    puts_(b, m->role);
    puts_(b, "<|end_header_id|>\n\n");
    put_trim(b, m->content);
    puts_(b, "<|eot_id|>");
}

static dp_status render_llama3(sbuf *b, const dp_chat_msg *m, size_t n, const dp_chat_opts *o, dp_err *err)
{
    (void)err;
    for (size_t i = 0; i < n; i++) {
        if (i == 0) puts_(b, "<|begin_of_text|>");
        llama_turn(b, &m[i]);
    }
    if (o->add_generation_prompt) puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return DP_OK;
}

static dp_status render_llama31(sbuf *b, const dp_chat_msg *m, size_t n, const dp_chat_opts *o, dp_err *err)
{
    (void)err;
    puts_(b, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
             "Cutting Knowledge Date: December 2023\nToday Date: ");
    puts_(b, o->date ? o->date : "26 Jul 2024");
    puts_(b, "\n\n");
    if (n && is_role(&m[0], "system")) { put_trim(b, m[0].content); m++; n--; }
    puts_(b, "<|eot_id|>");
    for (size_t i = 0; i < n; i++) llama_turn(b, &m[i]);
    if (o->add_generation_prompt) puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return DP_OK;
}

static dp_status render_chatml(sbuf *b, const dp_chat_template *t, const dp_chat_msg *m, size_t n,
                               const dp_chat_opts *o, dp_err *err)
{
    (void)err;
    if (t->default_system && (!n || !is_role(&m[0], "system"))) {
        puts_(b, "<|im_start|>system\n");
        puts_(b, t->default_system);
        puts_(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        puts_(b, "<|im_start|>");
        puts_(b, m[i].role);
        puts_(b, "\n");
        puts_(b, m[i].content);
        puts_(b, "<|im_end|>\n");
    }
    if (o->add_generation_prompt) puts_(b, "<|im_start|>assistant\n");
    return DP_OK;
}

static dp_status render_mistral(sbuf *b, const dp_chat_msg *m, size_t n, dp_err *err)
{
    const char *system = NULL;
    if (n && is_role(&m[0], "system")) { system = m[0].content; m++; n--; }
    puts_(b, "<s>");
    for (size_t i = 0; i < n; i++) {
        if (is_role(&m[i], "user") != (i % 2 == 0))
            return DP_FAIL(err, DP_EINVAL, "mistral chat: after the optional system message, roles must alternate "
                           "user/assistant/... (message %zu is '%s')", i + (system != NULL), m[i].role);
        if (is_role(&m[i], "user")) {
            puts_(b, "[INST] ");
            if (system && i + 1 == n) { puts_(b, system); puts_(b, "\n\n"); }
            puts_(b, m[i].content);
            puts_(b, "[/INST]");
        } else if (is_role(&m[i], "assistant")) {
            puts_(b, " ");
            put_trim(b, m[i].content);
            puts_(b, "</s>");
        } else {
            return DP_FAIL(err, DP_EINVAL, "mistral chat: only user and assistant roles, after an optional first "
                           "system message (message %zu is '%s')", i + (system != NULL), m[i].role);
        }
    }
    return DP_OK;
}

static dp_status render_phi3(sbuf *b, const dp_chat_msg *m, size_t n, const dp_chat_opts *o)
{
    for (size_t i = 0; i < n; i++) {
        const char *tag = is_role(&m[i], "system") ? "<|system|>\n" : is_role(&m[i], "user") ? "<|user|>\n"
                        : is_role(&m[i], "assistant") ? "<|assistant|>\n" : NULL;
        if (!tag) continue;   /* the template drops other roles */
        puts_(b, tag);
        puts_(b, m[i].content);
        puts_(b, "<|end|>\n");
    }
    puts_(b, o->add_generation_prompt ? "<|assistant|>\n" : "<|endoftext|>");
    return DP_OK;
}

dp_status dp_chat_render(const dp_chat_template *t, const dp_chat_msg *msgs, size_t n,
                         const dp_chat_opts *opts, char **out, dp_err *err)
{
    sbuf b = {0};
    dp_chat_opts dflt = { .add_generation_prompt = true };
    const dp_chat_opts *o = opts ? opts : &dflt;
    dp_status st;
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return DP_FAIL(err, DP_EINVAL, "chat: message %zu lacks a role or content", i);
    }
    put(&b, "", 0);
    switch (t->kind) {
    case DP_CHAT_GEMMA3:  st = render_gemma3(&b, msgs, n, o, err); break;
    case DP_CHAT_LLAMA3:  st = render_llama3(&b, msgs, n, o, err); break;
    case DP_CHAT_LLAMA31: st = render_llama31(&b, msgs, n, o, err); break;
    case DP_CHAT_CHATML:  st = render_chatml(&b, t, msgs, n, o, err); break;
    case DP_CHAT_MISTRAL: st = render_mistral(&b, msgs, n, err); break;
    case DP_CHAT_PHI3:    st = render_phi3(&b, msgs, n, o); break;
    default:              st = DP_FAIL(err, DP_EINVAL, "chat: unknown template kind %d", (int)t->kind); break;
    }
    if (st == DP_OK && b.oom) st = DP_FAIL(err, DP_ENOMEM, "chat: out of host memory");
    if (st != DP_OK) {
        free(b.p);
        return st;
    }
    *out = b.p;
    return DP_OK;
}
