/*
** core/text/chat.h: chat templates, rendered in C exactly as each model's official Jinja template
** renders them (no Jinja engine: the families we run use a handful of fixed formats).
**   gemma3   <bos><start_of_turn>user\n{system\n\n}{content|trim}<end_of_turn>\n ... <start_of_turn>model\n
**            (no system role: the system text opens the first user turn; roles must alternate)
**   llama3   <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|> ...
**   llama31  Llama 3.1/3.2: as llama3, but always a system turn opening with "Cutting Knowledge Date:
**            December 2023\nToday Date: {date}\n\n" (the template's default date is "26 Jul 2024")
**   chatml   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n (Qwen 2/2.5/3)
**   mistral  <s>[INST] {system\n\n}{user}[/INST] {assistant}</s> (Mistral v0.3: system joins the last user turn)
**   phi3     <|system|>\n{content}<|end|>\n<|user|>\n...<|assistant|>\n (no generation prompt: <|endoftext|>)
** BOS: gemma3, llama3, llama31 and mistral put the BOS text in the rendered string, so encode the
** result with add_bos = false (see dp_chat_has_bos), or the model sees two BOS tokens.
*/
#ifndef DP_TEXT_CHAT_H
#define DP_TEXT_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "core/text/tokenizer.h"

typedef enum dp_chat_kind {
    DP_CHAT_GEMMA3,
    DP_CHAT_LLAMA3,
    DP_CHAT_LLAMA31,
    DP_CHAT_CHATML,
    DP_CHAT_MISTRAL,
    DP_CHAT_PHI3,
    DP_CHAT_KIND_COUNT
} dp_chat_kind;

typedef struct dp_chat_template {
    dp_chat_kind kind;
    const char  *default_system;   /* used when the messages have no system turn (Qwen 2.5); NULL: none */
} dp_chat_template;

typedef struct dp_chat_msg {
    const char *role;      /* "system", "user", "assistant" (gemma3 renders it "model") */
    const char *content;
} dp_chat_msg;

typedef struct dp_chat_opts {
    bool        add_generation_prompt;
    const char *date;      /* llama31 "Today Date"; NULL: "26 Jul 2024", the template's own default */
} dp_chat_opts;

const char *dp_chat_kind_name(dp_chat_kind kind);   /* "gemma3", ... */
dp_status   dp_chat_kind_parse(const char *name, dp_chat_kind *out, dp_err *err);   /* the same names, "qwen" = chatml */
bool        dp_chat_has_bos(dp_chat_kind kind);     /* the rendered text starts with the BOS token text */

/* Chooses the template, first from the chat_template string (tokenizer_config.json or GGUF
** tokenizer.chat_template), then from the architecture (config.json model_type or GGUF
** general.architecture: gemma3, llama, qwen2, qwen3, mistral, phi3), then from the special tokens
** the tokenizer has. Any argument may be NULL. DP_EINVAL when nothing matches. */
dp_status dp_chat_detect(const char *chat_template, const char *arch, const dp_tokenizer *tok,
                         dp_chat_template *out, dp_err *err);

/* Renders messages; *out is malloc'ed and NUL-terminated. DP_EINVAL for roles the format cannot
** express (gemma3 and mistral: user/assistant must alternate after an optional first system turn). */
dp_status dp_chat_render(const dp_chat_template *tpl, const dp_chat_msg *msgs, size_t n,
                         const dp_chat_opts *opts, char **out, dp_err *err);

#endif
