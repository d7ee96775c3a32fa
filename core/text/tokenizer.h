/*
** core/text/tokenizer.h: text <-> token ids for the model families doppler runs.
** Two BPE flavours cover them:
**  - DP_TOK_SPM_BPE: SentencePiece converted to BPE (Gemma 3): spaces become U+2581 "▁", merges by
**    rank over each segment, characters missing from the vocab fall back to <0xHH> byte tokens.
**  - DP_TOK_BYTE_BPE: byte-level BPE (Llama 3, Qwen 2/3): a split regex (PCRE2, Unicode classes from
**    PCRE2's own tables), bytes mapped to printable code points (GPT-2 map), optional NFC first.
** Added/special tokens written in the text are matched first (leftmost-longest), as HF tokenizers does.
** Sources: a tokenizer.json (plain or .gz, or a directory holding one), or plain arrays
** (dp_tokenizer_from_vocab) such as GGUF tokenizer.ggml.* metadata. A dp_tokenizer is immutable after
** load, so one may be shared by threads.
** Not here: chat templates (core/text/chat.h).
*/
#ifndef DP_TEXT_TOKENIZER_H
#define DP_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dp_tokenizer dp_tokenizer;   /* opaque: core/text/tok_internal.h */
typedef struct dp_detok dp_detok;           /* streaming decoder */

typedef enum dp_tok_model {
    DP_TOK_SPM_BPE,     /* GGUF tokenizer.ggml.model "llama" (Gemma 3) */
    DP_TOK_BYTE_BPE,    /* GGUF tokenizer.ggml.model "gpt2" (Llama 3, Qwen) */
    DP_TOK_MODEL_COUNT
} dp_tok_model;

/* Token types, numbered as GGUF's tokenizer.ggml.token_type. */
typedef enum dp_tok_type {
    DP_TOKTYPE_UNDEFINED    = 0,
    DP_TOKTYPE_NORMAL       = 1,
    DP_TOKTYPE_UNKNOWN      = 2,
    DP_TOKTYPE_CONTROL      = 3,   /* special: matched in text, skipped by decode(skip_special) */
    DP_TOKTYPE_USER_DEFINED = 4,   /* added, not special: matched in text, always decoded */
    DP_TOKTYPE_UNUSED       = 5,
    DP_TOKTYPE_BYTE         = 6,   /* <0xHH> */
} dp_tok_type;

/* Where SentencePiece's "▁" prefix goes (DP_TOK_SPM_BPE only). Gemma 3: none. */
typedef enum dp_tok_prefix {
    DP_TOK_PREFIX_NONE,
    DP_TOK_PREFIX_FIRST,   /* Metaspace prepend_scheme "first": only before the text's first segment */
    DP_TOK_PREFIX_EACH,    /* normalizer Prepend("▁"): before every segment between added tokens */
} dp_tok_prefix;

/* Everything a tokenizer is made of, as plain arrays. Arrays are copied; none is kept.
**
** From GGUF metadata (the caller owns the GGUF reader):
**   model           tokenizer.ggml.model: "llama" -> DP_TOK_SPM_BPE, "gpt2" -> DP_TOK_BYTE_BPE
**   tokens          tokenizer.ggml.tokens (index = id)
**   scores          tokenizer.ggml.scores (SPM: merges are synthesised from them when there are no merges:
**                   pair (a, b) merges when a+b is a token, higher score of a+b first)
**   types           tokenizer.ggml.token_type (CONTROL and USER_DEFINED become matchable added tokens)
**   merges          tokenizer.ggml.merges ("left right", rank order)
**   bos/eos/eot/unk/pad   tokenizer.ggml.{bos,eos,eot,unknown,padding}_token_id (-1 when absent)
**   add_bos         tokenizer.ggml.add_bos_token
**   split_regex     from tokenizer.ggml.pre: dp_tokenizer_pre_regex("llama-bpe") etc.
**   nfc             true for Qwen (its tokenizer.json has an NFC normalizer; GGUF does not say)
**   prefix          tokenizer.ggml.add_space_prefix: true -> DP_TOK_PREFIX_FIRST (false for Gemma 3) */
typedef struct dp_tok_vocab {
    dp_tok_model        model;
    size_t              n_tokens;
    const char *const  *tokens;       /* n_tokens; NULL entries are holes (never produced) */
    const uint32_t     *token_lens;   /* optional: byte lengths (tokens may then hold NULs); else strlen */
    const float        *scores;       /* optional */
    const int32_t      *types;        /* optional, dp_tok_type; NULL: all NORMAL (bytes detected by name) */
    size_t              n_merges;
    const char *const  *merges;       /* "left right", or the left part when merges_right is set */
    const char *const  *merges_right; /* optional: right parts (tokenizer.json's ["left", "right"] form) */
    int32_t             bos, eos, eot, unk, pad;
    bool                add_bos;
    bool                byte_fallback;  /* SPM: <0xHH> for characters not in the vocab */
    bool                fuse_unk;       /* consecutive unknowns become one <unk> */
    bool                ignore_merges;  /* a word that is a whole token is emitted as is (Llama 3) */
    bool                nfc;
    dp_tok_prefix       prefix;
    const char         *split_regex;    /* byte-level; NULL: the Llama 3 pattern */
    const char         *name;           /* for messages (file path or "GGUF metadata") */
} dp_tok_vocab;

/* The split regex for a GGUF tokenizer.ggml.pre value ("llama-bpe", "qwen2", "gpt2", ...); NULL if unknown. */
const char *dp_tokenizer_pre_regex(const char *pre);

/* path: tokenizer.json, tokenizer.json.gz, a directory holding either, or a GGUF file. */
dp_status dp_tokenizer_load(const char *path, dp_tokenizer **out, dp_err *err);
/* Parses tokenizer.json text already in memory; name is used in messages. */
dp_status dp_tokenizer_load_json(const char *json, size_t len, const char *name, dp_tokenizer **out, dp_err *err);
dp_status dp_tokenizer_from_vocab(const dp_tok_vocab *v, dp_tokenizer **out, dp_err *err);
/* From a GGUF's tokenizer.ggml.* metadata (core/text/tok_gguf.c says which keys and defaults; the
** reader is only read). dp_tokenizer_load also accepts a GGUF file (recognised by its magic), whose
** tokenizer.chat_template becomes dp_tokenizer_chat_template's. */
typedef struct dp_gguf dp_gguf;
dp_status dp_tokenizer_from_gguf(const dp_gguf *g, dp_tokenizer **out, dp_err *err);
dp_status dp_tokenizer_load_gguf(const char *path, dp_tokenizer **out, dp_err *err);
bool      dp_tokenizer_is_gguf(const char *path);   /* the file starts with GGUF's magic */
void      dp_tokenizer_destroy(dp_tokenizer *tok);   /* NULL-safe */

/* text: UTF-8 (invalid UTF-8 is DP_EINVAL naming the byte offset). Special tokens written in the text
** are matched. add_bos prepends the BOS id (if the tokenizer has one). *ids is malloc'ed (free()). */
dp_status dp_tokenizer_encode(const dp_tokenizer *tok, const char *text, size_t len, bool add_bos,
                              int32_t **ids, size_t *n, dp_err *err);
/* Whole-sequence decode, as HF decode(ids, skip_special_tokens). *text is malloc'ed, NUL-terminated. */
dp_status dp_tokenizer_decode(const dp_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special,
                              char **text, size_t *len, dp_err *err);

/* Streaming decoder: the concatenation of everything push and finish return equals
** dp_tokenizer_decode of all ids pushed; no returned piece ends inside a UTF-8 sequence. */
dp_status dp_detok_create(const dp_tokenizer *tok, bool skip_special, dp_detok **out, dp_err *err);
void      dp_detok_destroy(dp_detok *d);
/* *piece points into d (valid until the next call), NUL-terminated, possibly "" (held bytes). */
dp_status dp_detok_push(dp_detok *d, int32_t id, const char **piece, size_t *len, dp_err *err);
dp_status dp_detok_finish(dp_detok *d, const char **piece, size_t *len, dp_err *err);   /* flush held bytes */

size_t       dp_tokenizer_vocab_size(const dp_tokenizer *tok);   /* max id + 1, added tokens included */
dp_tok_model dp_tokenizer_model(const dp_tokenizer *tok);
/* The stored piece (vocab form: "▁the", "Ġthe"); NULL for an id out of range or a hole. */
const char  *dp_tokenizer_token(const dp_tokenizer *tok, int32_t id, size_t *len);
int32_t      dp_tokenizer_id(const dp_tokenizer *tok, const char *piece, size_t len);   /* -1: none */
dp_tok_type  dp_tokenizer_type(const dp_tokenizer *tok, int32_t id);
int32_t      dp_tokenizer_bos(const dp_tokenizer *tok);   /* -1: none */
bool         dp_tokenizer_add_bos(const dp_tokenizer *tok);   /* the model expects BOS first */
/* Ids that end a generation: eos, eot (<end_of_turn>, <|eot_id|>, <|im_end|>, ...), deduplicated.
** Returns the count; writes at most cap. */
size_t       dp_tokenizer_stop_ids(const dp_tokenizer *tok, int32_t *ids, size_t cap);
int32_t      dp_tokenizer_eos(const dp_tokenizer *tok);
int32_t      dp_tokenizer_eot(const dp_tokenizer *tok);
/* The chat_template string of a tokenizer_config.json found next to the tokenizer.json; NULL if none. */
const char  *dp_tokenizer_chat_template(const dp_tokenizer *tok);
/* Special (CONTROL) token ids in id order. Returns the count; writes at most cap. */
size_t       dp_tokenizer_special_ids(const dp_tokenizer *tok, int32_t *ids, size_t cap);

#endif
