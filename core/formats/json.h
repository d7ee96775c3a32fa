/*
** core/formats/json.h: a thin layer over json-c for the JSON files a model directory holds
** (config.json, generation_config.json, tokenizer_config.json, safetensors headers, shard indexes).
** It adds what json-c leaves to the caller: errors that name the file and the byte position,
** rejection of trailing garbage and invalid UTF-8, and typed getters with defaults so that a
** missing or null key never needs a special case at the call site.
** Not here: the meaning of any key (core/formats/hfconfig.h).
*/
#ifndef DP_FORMATS_JSON_H
#define DP_FORMATS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct json_object;   /* json-c's node; include <json.h> to walk it */

/* Parses len bytes (no NUL needed). name labels error messages (a path or "<path> header").
** Trailing whitespace is accepted, anything else after the value is an error. *out gets a new
** reference (release with dp_json_free); NULL on failure. */
dp_status dp_json_parse(const char *name, const char *buf, size_t len, struct json_object **out, dp_err *err);
/* Same, requiring the top-level value to be an object. */
dp_status dp_json_parse_object(const char *name, const char *buf, size_t len, struct json_object **out,
                               dp_err *err);
/* Reads and parses a whole file; the top-level value must be an object. */
dp_status dp_json_read_object_file(const char *path, struct json_object **out, dp_err *err);
void      dp_json_free(struct json_object *obj);   /* NULL-safe */

/* Typed getters. A missing key, a JSON null or a value of another type gives def. Integers
** accept whole-valued doubles (1e6 written as 1000000.0); doubles accept integers. */
struct json_object *dp_json_get(const struct json_object *obj, const char *key);   /* NULL if absent/null */
int64_t     dp_json_get_int(const struct json_object *obj, const char *key, int64_t def);
double      dp_json_get_double(const struct json_object *obj, const char *key, double def);
bool        dp_json_get_bool(const struct json_object *obj, const char *key, bool def);
const char *dp_json_get_string(const struct json_object *obj, const char *key, const char *def);

/* Value conversions used by the getters, for array elements. Return false on a type mismatch. */
bool dp_json_as_int(const struct json_object *v, int64_t *out);
bool dp_json_as_double(const struct json_object *v, double *out);

/* True when s[0..len) is well-formed UTF-8 without NUL bytes (overlongs and surrogates rejected). */
bool dp_utf8_valid(const char *s, size_t len);

#endif
