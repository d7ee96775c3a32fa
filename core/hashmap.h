/*
** core/hashmap.h: two small open-addressing hash maps, because the tokenizer looks up a few
** million strings and id pairs per megabyte of text and the C library has nothing for it.
**  - dp_strmap: byte string -> int32. Keys are NOT copied: the caller keeps them alive (the
**    tokenizer's string arena, or the input text during one encode call).
**  - dp_u64map: uint64 -> uint64 (BPE merges: (left id, right id) -> (rank, merged id)).
** Linear probing, power-of-two capacity, load factor <= 1/2. No deletion (nothing needs it).
*/
#ifndef DP_CORE_HASHMAP_H
#define DP_CORE_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dp_strmap_slot {
    const char *key;   /* NULL: empty slot */
    uint32_t    len;
    int32_t     value;
    uint64_t    hash;
} dp_strmap_slot;

typedef struct dp_strmap {
    dp_strmap_slot *slots;
    size_t          cap;     /* power of two */
    size_t          count;
} dp_strmap;

uint64_t  dp_hash_bytes(const void *p, size_t len);

/* expected: the number of keys planned (the map grows past it anyway). */
dp_status dp_strmap_init(dp_strmap *m, size_t expected, dp_err *err);
void      dp_strmap_free(dp_strmap *m);   /* NULL-safe, also on a zeroed map */
/* Inserts or replaces. *existed (may be NULL) says whether the key was there already. */
dp_status dp_strmap_put(dp_strmap *m, const char *key, size_t len, int32_t value, bool *existed, dp_err *err);
bool      dp_strmap_get(const dp_strmap *m, const char *key, size_t len, int32_t *value);

typedef struct dp_u64map {
    uint64_t *keys;          /* DP_U64MAP_EMPTY: empty slot */
    uint64_t *values;
    size_t    cap;
    size_t    count;
} dp_u64map;

#define DP_U64MAP_EMPTY UINT64_MAX   /* the one key that cannot be stored */

dp_status dp_u64map_init(dp_u64map *m, size_t expected, dp_err *err);
void      dp_u64map_free(dp_u64map *m);
dp_status dp_u64map_put(dp_u64map *m, uint64_t key, uint64_t value, bool *existed, dp_err *err);
bool      dp_u64map_get(const dp_u64map *m, uint64_t key, uint64_t *value);

#endif
