/*
** core/text/tok_internal.h: the dp_tokenizer struct, shared by the tokenizer's files:
**   tok_vocab.c (construction, lookups), tok_json.c (tokenizer.json -> dp_tok_vocab),
**   tok_encode.c (added tokens, normalisers, split, BPE), tok_decode.c (ids -> text, streaming).
** Not a public header: callers use core/text/tokenizer.h.
*/
#ifndef DP_TEXT_TOK_INTERNAL_H
#define DP_TEXT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/hashmap.h"
#include "core/text/tokenizer.h"

/* One node of the added-token trie (bytes). Children are a sibling list, except the root's,
** which sit in a 256-entry table because every text byte probes it. */
typedef struct dp_tok_trie {
    int32_t child;     /* first child node, -1 none */
    int32_t sibling;   /* next sibling, -1 none */
    int32_t id;        /* token ending here, -1 none */
    uint8_t byte;
} dp_tok_trie;

struct dp_tokenizer {
    dp_tok_model  model;
    char         *name;
    size_t        n_vocab;        /* max id + 1 */
    char         *arena;          /* every piece, NUL-terminated */
    const char  **piece;          /* n_vocab, NULL for holes */
    uint32_t     *piece_len;
    uint8_t      *type;           /* dp_tok_type */
    int16_t      *byteval;        /* SPM decode: 0..255 if the piece is "<0xHH>", else -1 */
    dp_strmap     vocab;          /* piece -> id (holes and duplicates: the lowest id wins) */
    dp_u64map     merges;         /* (left << 32 | right) -> (rank << 32 | merged id) */

    int32_t       bos, eos, eot, unk, pad;
    bool          add_bos, byte_fallback, fuse_unk, ignore_merges, nfc;
    dp_tok_prefix prefix;

    /* SPM: id of <0xHH> per byte (-1 missing). Byte-level: id of the mapped character per byte. */
    int32_t       byte_tok[256];
    /* SPM fast path: id of each single ASCII character after normalisation (' ' -> "▁"), -1 missing. */
    int32_t       ascii_tok[128];

    /* Byte-level: GPT-2's byte -> code point map as UTF-8, and its inverse. */
    char          bl_enc[256][2];
    uint8_t       bl_enc_len[256];
    int16_t       bl_dec[324];    /* code point -> byte, -1 not in the map */
    pcre2_code   *re;             /* split regex, JIT-compiled when the platform allows */

    dp_tok_trie  *trie;           /* added tokens */
    size_t        n_trie, cap_trie;
    int32_t       trie_root[256]; /* root's child per first byte, -1 none */

    int32_t      *special;        /* CONTROL ids, ascending */
    size_t        n_special;
    char         *chat_template;  /* from tokenizer_config.json next to the file, or NULL */
};

/* GPT-2 bytes_to_unicode: the code point byte b stands for. */
uint32_t dp_tok_byte_to_cp(uint8_t b);

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 if it is invalid or incomplete. */
size_t dp_utf8_seq_len(const unsigned char *s, size_t n);
/* Whether s[0..n) is whole, valid UTF-8 characters (dp_utf8_seq_len's rules; NUL is a character). */
bool dp_utf8_whole(const char *s, size_t n);

#endif
