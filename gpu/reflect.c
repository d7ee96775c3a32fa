/*
** gpu/reflect.c: a small SPIR-V scan for what doppler needs to know about a kernel (see reflect.h).
** One pass records names, decorations and type/constant instructions per result id; a second
** resolves the push-constant block, spec constants and the workgroup size. Anything unexpected
** (truncated instruction, id out of bounds) is DP_EFORMAT, never a crash: the input may be a
** corrupt cache file.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/reflect.h"

enum {
    OP_NAME = 5, OP_MEMBER_NAME = 6, OP_EXECUTION_MODE = 16, OP_TYPE_BOOL = 20, OP_TYPE_INT = 21,
    OP_TYPE_FLOAT = 22, OP_TYPE_VECTOR = 23, OP_TYPE_ARRAY = 28, OP_TYPE_RUNTIME_ARRAY = 29, OP_TYPE_STRUCT = 30,
    OP_TYPE_POINTER = 32, OP_CONSTANT = 43, OP_SPEC_CONSTANT_TRUE = 48, OP_SPEC_CONSTANT_FALSE = 49,
    OP_SPEC_CONSTANT = 50, OP_SPEC_CONSTANT_COMPOSITE = 51, OP_VARIABLE = 59, OP_DECORATE = 71,
    OP_MEMBER_DECORATE = 72, OP_EXECUTION_MODE_ID = 331,
};
enum { DEC_SPEC_ID = 1, DEC_ARRAY_STRIDE = 6, DEC_BUILTIN = 11, DEC_NON_WRITABLE = 24, DEC_NON_READABLE = 25,
       DEC_OFFSET = 35 };
enum { MODE_LOCAL_SIZE = 17, MODE_LOCAL_SIZE_ID = 38, BUILTIN_WORKGROUP_SIZE = 25 };
enum { SC_PUSH_CONSTANT = 9, SC_PHYSICAL_STORAGE_BUFFER = 5349 };

typedef struct id_info {
    uint32_t    def;          /* word index of the defining instruction, 0 if none */
    const char *name;         /* OpName string inside the module, or NULL */
    int64_t     spec_id;      /* -1 if none */
    uint32_t    array_stride;
    bool        workgroup_size;
} id_info;

typedef struct scan {
    const uint32_t *w;
    size_t          n;
    uint32_t        bound;
    id_info        *ids;
    const char     *what;
} scan;

static uint16_t op_of(uint32_t word) { return (uint16_t)(word & 0xffffu); }
static uint16_t len_of(uint32_t word) { return (uint16_t)(word >> 16); }

/* A literal string in [at, end) words: NULL if not terminated inside the instruction. */
static const char *lit_string(const scan *s, size_t at, size_t end)
{
    const char *str = (const char *)(s->w + at);
    size_t max = (end - at) * 4;
    if (at >= end || memchr(str, 0, max) == NULL) return NULL;
    return str;
}

static void copy_name(char *dst, const char *src)
{
    snprintf(dst, DP_REFL_NAME, "%s", src ? src : "");
}

static const uint32_t *def(const scan *s, uint32_t id)
{
    if (id >= s->bound || !s->ids[id].def) return NULL;
    return s->w + s->ids[id].def;
}

/* Kind + size of a type id. */
static dp_refl_kind type_kind(const scan *s, uint32_t type, uint32_t *size)
{
    const uint32_t *d = def(s, type);
    *size = 0;
    if (!d) return DP_REFL_OTHER;
    uint16_t op = op_of(d[0]), len = len_of(d[0]);
    if (op == OP_TYPE_BOOL) { *size = 4; return DP_REFL_BOOL; }
    if (op == OP_TYPE_INT && len >= 4) {
        *size = d[2] / 8;
        if (d[2] == 32) return d[3] ? DP_REFL_I32 : DP_REFL_U32;
        if (d[2] == 64) return d[3] ? DP_REFL_I64 : DP_REFL_U64;
        return DP_REFL_OTHER;
    }
    if (op == OP_TYPE_FLOAT && len >= 3) {
        *size = d[2] / 8;
        return d[2] == 32 ? DP_REFL_F32 : d[2] == 16 ? DP_REFL_F16 : d[2] == 64 ? DP_REFL_F64 : DP_REFL_OTHER;
    }
    if (op == OP_TYPE_POINTER && len >= 4 && d[2] == SC_PHYSICAL_STORAGE_BUFFER) { *size = 8; return DP_REFL_PTR; }
    if (op == OP_TYPE_VECTOR && len >= 4) {
        uint32_t comp = 0;
        type_kind(s, d[2], &comp);
        *size = comp * d[3];
    }
    return DP_REFL_OTHER;
}

/* Read/write access of a buffer-reference pointee from its members' NonWritable/NonReadable. */
static dp_access pointee_access(const scan *s, uint32_t strct, uint32_t *stride)
{
    const uint32_t *d = def(s, strct);
    *stride = 0;
    if (!d || op_of(d[0]) != OP_TYPE_STRUCT) return DP_ACCESS_RW;
    uint32_t members = len_of(d[0]) - 2;
    if (members == 0) return DP_ACCESS_NONE;
    uint32_t nw = 0, nr = 0;
    for (size_t i = 5; i < s->n;) {
        uint16_t op = op_of(s->w[i]), len = len_of(s->w[i]);
        if (op == OP_MEMBER_DECORATE && len >= 4 && s->w[i + 1] == strct) {
            if (s->w[i + 3] == DEC_NON_WRITABLE) nw++;
            if (s->w[i + 3] == DEC_NON_READABLE) nr++;
        }
        i += len;
    }
    /* The array member's stride: the element size a binding can check against. */
    for (uint32_t m = 0; m < members; m++) {
        const uint32_t *t = def(s, d[2 + m]);
        if (t && (op_of(t[0]) == OP_TYPE_RUNTIME_ARRAY || op_of(t[0]) == OP_TYPE_ARRAY)) *stride = s->ids[d[2 + m]].array_stride;
    }
    if (nw >= members && nr == 0) return DP_ACCESS_READ;
    if (nr >= members && nw == 0) return DP_ACCESS_WRITE;
    return DP_ACCESS_RW;
}

static dp_status first_pass(scan *s, dp_err *err)
{
    for (size_t i = 5; i < s->n;) {
        uint16_t op = op_of(s->w[i]), len = len_of(s->w[i]);
        if (len == 0 || i + len > s->n)
            return DP_FAIL(err, DP_EFORMAT, "%s: SPIR-V instruction at word %zu runs past the end", s->what, i);
        const uint32_t *in = s->w + i;
        uint32_t result = 0;
        switch (op) {
        case OP_NAME:
            if (len >= 3 && in[1] < s->bound) s->ids[in[1]].name = lit_string(s, i + 2, i + len);
            break;
        case OP_DECORATE:
            if (len >= 3 && in[1] < s->bound) {
                if (in[2] == DEC_SPEC_ID && len >= 4) s->ids[in[1]].spec_id = in[3];
                if (in[2] == DEC_ARRAY_STRIDE && len >= 4) s->ids[in[1]].array_stride = in[3];
                if (in[2] == DEC_BUILTIN && len >= 4 && in[3] == BUILTIN_WORKGROUP_SIZE) s->ids[in[1]].workgroup_size = true;
            }
            break;
        case OP_TYPE_BOOL: case OP_TYPE_INT: case OP_TYPE_FLOAT: case OP_TYPE_VECTOR: case OP_TYPE_ARRAY:
        case OP_TYPE_RUNTIME_ARRAY: case OP_TYPE_STRUCT: case OP_TYPE_POINTER:
            if (len >= 2) result = in[1];
            break;
        case OP_CONSTANT: case OP_SPEC_CONSTANT_TRUE: case OP_SPEC_CONSTANT_FALSE: case OP_SPEC_CONSTANT:
        case OP_SPEC_CONSTANT_COMPOSITE: case OP_VARIABLE:
            if (len >= 3) result = in[2];
            break;
        default:
            break;
        }
        if (result) {
            if (result >= s->bound) return DP_FAIL(err, DP_EFORMAT, "%s: SPIR-V id %u out of bounds", s->what, result);
            s->ids[result].def = (uint32_t)i;
        }
        i += len;
    }
    return DP_OK;
}

static void read_push(scan *s, dp_reflection *r)
{
    for (uint32_t id = 1; id < s->bound; id++) {
        const uint32_t *v = def(s, id);
        if (!v || op_of(v[0]) != OP_VARIABLE || len_of(v[0]) < 4 || v[3] != SC_PUSH_CONSTANT) continue;
        const uint32_t *ptr = def(s, v[1]);
        if (!ptr || op_of(ptr[0]) != OP_TYPE_POINTER || len_of(ptr[0]) < 4) continue;
        uint32_t strct = ptr[3];
        const uint32_t *st = def(s, strct);
        if (!st || op_of(st[0]) != OP_TYPE_STRUCT) continue;
        uint32_t members = len_of(st[0]) - 2;
        for (uint32_t m = 0; m < members && r->n_push < DP_REFL_MAX_PUSH; m++) {
            dp_refl_push *p = &r->push[r->n_push++];
            memset(p, 0, sizeof *p);
            p->kind = type_kind(s, st[2 + m], &p->size);
            if (p->kind == DP_REFL_PTR) {
                const uint32_t *pt = def(s, st[2 + m]);
                copy_name(p->pointee, pt[3] < s->bound ? s->ids[pt[3]].name : NULL);
                p->access = pointee_access(s, pt[3], &p->elem_bytes);
            }
        }
        /* Names and offsets live in separate instructions. */
        for (size_t i = 5; i < s->n;) {
            uint16_t op = op_of(s->w[i]), len = len_of(s->w[i]);
            const uint32_t *in = s->w + i;
            if (len >= 4 && in[1] == strct && in[2] < r->n_push) {
                if (op == OP_MEMBER_NAME) copy_name(r->push[in[2]].name, lit_string(s, i + 3, i + len));
                if (op == OP_MEMBER_DECORATE && in[3] == DEC_OFFSET && len >= 5) r->push[in[2]].offset = in[4];
            }
            i += len;
        }
        for (uint32_t m = 0; m < r->n_push; m++)
            if (r->push[m].offset + r->push[m].size > r->push_size) r->push_size = r->push[m].offset + r->push[m].size;
        return;   /* one push block per entry point */
    }
}

static void read_spec(scan *s, dp_reflection *r)
{
    for (uint32_t id = 1; id < s->bound; id++) {
        const uint32_t *c = def(s, id);
        if (!c || s->ids[id].spec_id < 0) continue;
        uint16_t op = op_of(c[0]);
        if (op != OP_SPEC_CONSTANT && op != OP_SPEC_CONSTANT_TRUE && op != OP_SPEC_CONSTANT_FALSE) continue;
        uint32_t sid = (uint32_t)s->ids[id].spec_id, size;
        const char *name = s->ids[id].name;
        /* glslang emits local_size_x_id's constant unnamed next to the named WG: keep one per id,
        ** the named one. */
        dp_refl_spec *e = NULL;
        for (uint32_t k = 0; k < r->n_spec; k++)
            if (r->spec[k].id == sid) e = &r->spec[k];
        if (e && (e->name[0] || !name)) continue;
        if (!e) {
            if (r->n_spec == DP_REFL_MAX_SPEC) continue;
            e = &r->spec[r->n_spec++];
        }
        memset(e, 0, sizeof *e);
        copy_name(e->name, name);
        e->id = sid;
        e->kind = type_kind(s, c[1], &size);
        e->default_bits = op == OP_SPEC_CONSTANT_TRUE ? 1 : op == OP_SPEC_CONSTANT_FALSE ? 0 :
                          (len_of(c[0]) >= 4 ? c[3] : 0);
    }
}

/* One workgroup-size component: spec constant or plain constant. */
static void size_component(const scan *s, uint32_t id, uint32_t *value, int32_t *spec)
{
    const uint32_t *c = def(s, id);
    *spec = -1;
    if (!c) return;
    if (op_of(c[0]) == OP_SPEC_CONSTANT || op_of(c[0]) == OP_CONSTANT) {
        if (len_of(c[0]) >= 4) *value = c[3];
        if (op_of(c[0]) == OP_SPEC_CONSTANT && s->ids[id].spec_id >= 0) *spec = (int32_t)s->ids[id].spec_id;
    }
}

static void read_local_size(scan *s, dp_reflection *r)
{
    for (int i = 0; i < 3; i++) { r->local_size[i] = 1; r->local_size_id[i] = -1; }
    for (size_t i = 5; i < s->n;) {
        uint16_t op = op_of(s->w[i]), len = len_of(s->w[i]);
        const uint32_t *in = s->w + i;
        if (op == OP_EXECUTION_MODE && len >= 6 && in[2] == MODE_LOCAL_SIZE)
            for (int k = 0; k < 3; k++) r->local_size[k] = in[3 + k];
        if (op == OP_EXECUTION_MODE_ID && len >= 6 && in[2] == MODE_LOCAL_SIZE_ID)
            for (int k = 0; k < 3; k++) size_component(s, in[3 + k], &r->local_size[k], &r->local_size_id[k]);
        i += len;
    }
    /* The WorkgroupSize built-in overrides the execution mode when present. */
    for (uint32_t id = 1; id < s->bound; id++) {
        const uint32_t *c = def(s, id);
        if (!s->ids[id].workgroup_size || !c || len_of(c[0]) < 6) continue;
        if (op_of(c[0]) != OP_SPEC_CONSTANT_COMPOSITE && op_of(c[0]) != 44 /* OpConstantComposite */) continue;
        for (int k = 0; k < 3; k++) size_component(s, c[3 + k], &r->local_size[k], &r->local_size_id[k]);
    }
    /* Our convention: the local_size_x_id constant is called WG even if the optimiser dropped the name. */
    for (uint32_t k = 0; k < r->n_spec; k++)
        if (r->local_size_id[0] >= 0 && r->spec[k].id == (uint32_t)r->local_size_id[0] && !r->spec[k].name[0])
            copy_name(r->spec[k].name, "WG");
}

dp_status dp_reflect(const uint32_t *words, size_t n_words, const char *what, dp_reflection *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    what = what ? what : "kernel";
    if (n_words < 5 || words[0] != 0x07230203u)
        return DP_FAIL(err, DP_EFORMAT, "%s: not a SPIR-V module (%zu words)", what, n_words);
    if (words[3] == 0 || words[3] > (1u << 22))
        return DP_FAIL(err, DP_EFORMAT, "%s: SPIR-V id bound %u is implausible", what, words[3]);
    scan s = {.w = words, .n = n_words, .bound = words[3], .what = what};
    s.ids = calloc(s.bound, sizeof *s.ids);
    if (!s.ids) return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory reflecting SPIR-V", what);
    for (uint32_t i = 0; i < s.bound; i++) s.ids[i].spec_id = -1;
    dp_status st = first_pass(&s, err);
    if (st == DP_OK) {
        read_push(&s, out);
        read_spec(&s, out);
        read_local_size(&s, out);
    }
    free(s.ids);
    return st;
}

void dp_spirv_set_spec_defaults(uint32_t *w, size_t n, const dp_reflection *named)
{
    if (n < 5 || w[0] != 0x07230203u) return;
    uint32_t bound = w[3];
    /* Pass 1: SpecId per result id (decorations precede the constants). */
    for (size_t i = 5; i < n;) {
        uint16_t op = op_of(w[i]), len = len_of(w[i]);
        if (len == 0 || i + len > n) return;
        if (op == OP_DECORATE && len >= 4 && w[i + 2] == DEC_SPEC_ID && w[i + 1] < bound) {
            uint32_t target = w[i + 1], sid = w[i + 3];
            const dp_refl_spec *s = NULL;
            for (uint32_t k = 0; k < named->n_spec; k++)
                if (named->spec[k].id == sid && named->spec[k].name[0]) s = &named->spec[k];
            if (s) {
                /* Pass 2 for this target: its defining instruction. */
                for (size_t j = 5; j < n;) {
                    uint16_t op2 = op_of(w[j]), len2 = len_of(w[j]);
                    if (len2 == 0 || j + len2 > n) return;
                    if (op2 == OP_SPEC_CONSTANT && len2 == 4 && w[j + 2] == target && s->kind != DP_REFL_BOOL)
                        w[j + 3] = s->default_bits;
                    if ((op2 == OP_SPEC_CONSTANT_TRUE || op2 == OP_SPEC_CONSTANT_FALSE) && len2 == 3 &&
                        w[j + 2] == target && s->kind == DP_REFL_BOOL)
                        w[j] = (w[j] & 0xffff0000u) | (s->default_bits ? OP_SPEC_CONSTANT_TRUE : OP_SPEC_CONSTANT_FALSE);
                    j += len2;
                }
            }
        }
        i += len;
    }
}

const dp_refl_spec *dp_reflect_find_spec(const dp_reflection *r, const char *name)
{
    for (uint32_t i = 0; i < r->n_spec; i++)
        if (strcmp(r->spec[i].name, name) == 0) return &r->spec[i];
    return NULL;
}

const dp_refl_push *dp_reflect_find_push(const dp_reflection *r, const char *name)
{
    for (uint32_t i = 0; i < r->n_push; i++)
        if (strcmp(r->push[i].name, name) == 0) return &r->push[i];
    return NULL;
}

const char *dp_refl_kind_name(dp_refl_kind k)
{
    static const char *names[DP_REFL_KIND_COUNT] = {"other", "bool", "u32", "i32", "f32", "f16", "u64", "i64", "f64", "ptr"};
    return (unsigned)k < DP_REFL_KIND_COUNT ? names[k] : "?";
}
