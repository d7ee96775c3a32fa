/*
** core/hashmap.c: see hashmap.h. Strings hash with XXH3 (fast on short keys, which vocab
** pieces are); u64 keys with a 64-bit finaliser (splitmix64) so that neighbouring id pairs spread.
*/
#include "core/hashmap.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t dp_hash_bytes(const void *p, size_t len)
{
    return XXH3_64bits(p, len);
}

static size_t cap_for(size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2) cap <<= 1;
    return cap;
}

/* ---- dp_strmap ------------------------------------------------------------------------------ */

dp_status dp_strmap_init(dp_strmap *m, size_t expected, dp_err *err)
{
    m->cap = cap_for(expected);
    m->count = 0;
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->slots) {
        m->cap = 0;
        return DP_FAIL(err, DP_ENOMEM, "hash map of %zu entries: out of host memory", expected);
    }
    return DP_OK;
}

void dp_strmap_free(dp_strmap *m)
{
    if (!m) return;
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

static dp_strmap_slot *str_find(dp_strmap_slot *slots, size_t cap, const char *key, size_t len, uint64_t h)
{
    size_t i = (size_t)h & (cap - 1);
    for (;;) {
        dp_strmap_slot *s = &slots[i];
        if (!s->key) return s;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return s;
        i = (i + 1) & (cap - 1);
    }
}

static dp_status str_grow(dp_strmap *m, dp_err *err)
{
    size_t cap = m->cap * 2;
    dp_strmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return DP_FAIL(err, DP_ENOMEM, "hash map grow to %zu slots: out of host memory", cap);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key) *str_find(slots, cap, m->slots[i].key, m->slots[i].len, m->slots[i].hash) = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return DP_OK;
}

dp_status dp_strmap_put(dp_strmap *m, const char *key, size_t len, int32_t value, bool *existed, dp_err *err)
{
    DP_ASSERT(key && len <= UINT32_MAX);
    if ((m->count + 1) * 2 > m->cap) {
        dp_status st = str_grow(m, err);
        if (st != DP_OK) return st;
    }
    uint64_t h = dp_hash_bytes(key, len);
    dp_strmap_slot *s = str_find(m->slots, m->cap, key, len, h);
    if (existed) *existed = s->key != NULL;
    if (!s->key) {
        s->key = key;
        s->len = (uint32_t)len;
        s->hash = h;
        m->count++;
    }
    s->value = value;
    return DP_OK;
}

bool dp_strmap_get(const dp_strmap *m, const char *key, size_t len, int32_t *value)
{
    if (!m->cap) return false;
    const dp_strmap_slot *s = str_find(m->slots, m->cap, key, len, dp_hash_bytes(key, len));
    if (!s->key) return false;
    if (value) *value = s->value;
    return true;
}

/* ---- dp_u64map ------------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

dp_status dp_u64map_init(dp_u64map *m, size_t expected, dp_err *err)
{
    m->cap = cap_for(expected);
    m->count = 0;
    m->keys = malloc(m->cap * sizeof *m->keys);
    m->values = malloc(m->cap * sizeof *m->values);
    if (!m->keys || !m->values) {
        dp_u64map_free(m);
        return DP_FAIL(err, DP_ENOMEM, "hash map of %zu entries: out of host memory", expected);
    }
    memset(m->keys, 0xff, m->cap * sizeof *m->keys);
    return DP_OK;
}

void dp_u64map_free(dp_u64map *m)
{
    if (!m) return;
    free(m->keys);
    free(m->values);
    m->keys = m->values = NULL;
    m->cap = m->count = 0;
}

static size_t u64_find(const uint64_t *keys, size_t cap, uint64_t key)
{
    size_t i = (size_t)mix64(key) & (cap - 1);
    while (keys[i] != DP_U64MAP_EMPTY && keys[i] != key) i = (i + 1) & (cap - 1);
    return i;
}

dp_status dp_u64map_put(dp_u64map *m, uint64_t key, uint64_t value, bool *existed, dp_err *err)
{
    DP_ASSERT(key != DP_U64MAP_EMPTY);
    if ((m->count + 1) * 2 > m->cap) {
        dp_u64map g;
        dp_status st = dp_u64map_init(&g, m->cap, err);   /* doubles: cap_for(n) >= 2n */
        if (st != DP_OK) return st;
        for (size_t i = 0; i < m->cap; i++) {
            if (m->keys[i] == DP_U64MAP_EMPTY) continue;
            size_t j = u64_find(g.keys, g.cap, m->keys[i]);
            g.keys[j] = m->keys[i];
            g.values[j] = m->values[i];
        }
        g.count = m->count;
        dp_u64map_free(m);
        *m = g;
    }
    size_t i = u64_find(m->keys, m->cap, key);
    if (existed) *existed = m->keys[i] == key;
    if (m->keys[i] != key) {
        m->keys[i] = key;
        m->count++;
    }
    m->values[i] = value;
    return DP_OK;
}

bool dp_u64map_get(const dp_u64map *m, uint64_t key, uint64_t *value)
{
    if (!m->cap || key == DP_U64MAP_EMPTY) return false;
    size_t i = u64_find(m->keys, m->cap, key);
    if (m->keys[i] != key) return false;
    if (value) *value = m->values[i];
    return true;
}
