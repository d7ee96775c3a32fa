/*
** core/formats/json.c: see json.h. json-c does the parsing; this file turns its error codes into
** messages with a line and column, and keeps the strictness rules in one place.
*/
#include "core/formats/json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

bool dp_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c == 0) return false;
        if (c < 0x80) { i++; continue; }
        size_t n;
        unsigned cp;
        if (c >= 0xc2 && c <= 0xdf) { n = 1; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { n = 2; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { n = 3; cp = c & 0x07; }
        else return false;                       /* continuation byte, 0xc0/0xc1 or > 0xf4 */
        if (len - i <= n) return false;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff))) return false;  /* overlong */
        if (cp >= 0xd800 && cp <= 0xdfff) return false;                                       /* surrogate */
        i += n + 1;
    }
    return true;
}

/* 1-based line and column of byte pos, for messages an editor can jump to. */
static void line_col(const char *buf, size_t pos, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < pos; i++) {
        if (buf[i] == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
}

dp_status dp_json_parse(const char *name, const char *buf, size_t len, struct json_object **out, dp_err *err)
{
    *out = NULL;
    if (len > INT_MAX) return DP_FAIL(err, DP_EFORMAT, "%s: JSON text of %zu bytes is too large", name, len);
    /* json-c treats a NUL byte as the end of input, which would hide garbage behind it. */
    const char *nul = memchr(buf, 0, len);
    if (nul) {
        size_t l, c;
        line_col(buf, (size_t)(nul - buf), &l, &c);
        return DP_FAIL(err, DP_EFORMAT, "%s: NUL byte in JSON text at line %zu, column %zu", name, l, c);
    }
    struct json_tokener *tok = json_tokener_new_ex(64);   /* depth bound: configs nest 3 deep */
    if (!tok) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", name);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS | JSON_TOKENER_VALIDATE_UTF8);
    struct json_object *obj = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    size_t l, c;
    if (jerr == json_tokener_continue || (!obj && jerr == json_tokener_success)) {
        json_object_put(obj);
        return DP_FAIL(err, DP_EFORMAT, "%s: JSON text ends early (truncated?)", name);
    }
    if (jerr != json_tokener_success) {
        line_col(buf, end < len ? end : len, &l, &c);
        json_object_put(obj);
        return DP_FAIL(err, DP_EFORMAT, "%s: invalid JSON at line %zu, column %zu: %s", name, l, c,
                       json_tokener_error_desc(jerr));
    }
    for (size_t i = end; i < len; i++) {
        char ch = buf[i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
            line_col(buf, i, &l, &c);
            json_object_put(obj);
            return DP_FAIL(err, DP_EFORMAT, "%s: unexpected text after the JSON value at line %zu, column %zu",
                           name, l, c);
        }
    }
    *out = obj;
    return DP_OK;
}

static const char *type_word(const struct json_object *obj)
{
    switch (json_object_get_type(obj)) {
    case json_type_null: return "null";
    case json_type_boolean: return "a boolean";
    case json_type_double:
    case json_type_int: return "a number";
    case json_type_string: return "a string";
    case json_type_array: return "an array";
    case json_type_object: return "an object";
    }
    return "?";
}

dp_status dp_json_parse_object(const char *name, const char *buf, size_t len, struct json_object **out,
                               dp_err *err)
{
    dp_status st = dp_json_parse(name, buf, len, out, err);
    if (st != DP_OK) return st;
    if (!json_object_is_type(*out, json_type_object)) {
        st = DP_FAIL(err, DP_EFORMAT, "%s: expected a JSON object at the top level, found %s", name, type_word(*out));
        json_object_put(*out);
        *out = NULL;
    }
    return st;
}

dp_status dp_json_read_object_file(const char *path, struct json_object **out, dp_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    dp_status st = DP_OK;
    for (;;) {
        if (cap - len < 65536) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, ncap);
            if (!nb) { st = DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path); goto done; }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) { st = DP_FAIL(err, DP_EIO, "%s: read error", path); goto done; }
    st = dp_json_parse_object(path, buf ? buf : "", len, out, err);
done:
    free(buf);
    fclose(f);
    return st;
}

void dp_json_free(struct json_object *obj)
{
    if (obj) json_object_put(obj);
}

struct json_object *dp_json_get(const struct json_object *obj, const char *key)
{
    struct json_object *v = NULL;
    if (!obj || !json_object_is_type(obj, json_type_object)) return NULL;
    if (!json_object_object_get_ex(obj, key, &v)) return NULL;
    return json_object_is_type(v, json_type_null) ? NULL : v;
}

bool dp_json_as_int(const struct json_object *v, int64_t *out)
{
    if (json_object_is_type(v, json_type_int)) {
        errno = 0;
        int64_t x = json_object_get_int64(v);
        if (errno == ERANGE) return false;          /* beyond int64 (json-c clamps and says so) */
        *out = x;
        return true;
    }
    if (json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        if (!(d == floor(d)) || fabs(d) > 9.0e15) return false;
        *out = (int64_t)d;
        return true;
    }
    return false;
}

bool dp_json_as_double(const struct json_object *v, double *out)
{
    if (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) {
        *out = json_object_get_double(v);
        return true;
    }
    return false;
}

int64_t dp_json_get_int(const struct json_object *obj, const char *key, int64_t def)
{
    struct json_object *v = dp_json_get(obj, key);
    int64_t x;
    return v && dp_json_as_int(v, &x) ? x : def;
}

double dp_json_get_double(const struct json_object *obj, const char *key, double def)
{
    struct json_object *v = dp_json_get(obj, key);
    double x;
    return v && dp_json_as_double(v, &x) ? x : def;
}

bool dp_json_get_bool(const struct json_object *obj, const char *key, bool def)
{
    struct json_object *v = dp_json_get(obj, key);
    return v && json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : def;
}

const char *dp_json_get_string(const struct json_object *obj, const char *key, const char *def)
{
    struct json_object *v = dp_json_get(obj, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : def;
}
