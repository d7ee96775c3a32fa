/*
** gpu/reflect.h: what a kernel's SPIR-V says about its interface, read by a small scan of the
** module (no external library): specialisation constants by name (OpName + SpecId), the
** push-constant block's members (name, offset, kind) and, for each buffer-reference member,
** whether the kernel reads it (NonWritable pointee), writes it (NonReadable) or both. The
** recorder derives barriers from that; kernels and bindings set values by name from it.
*/
#ifndef DP_GPU_REFLECT_H
#define DP_GPU_REFLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define DP_REFL_NAME 64
#define DP_REFL_MAX_SPEC 32
#define DP_REFL_MAX_PUSH 32

typedef enum dp_refl_kind {
    DP_REFL_OTHER = 0,   /* vectors, structs, arrays: only settable as raw bytes */
    DP_REFL_BOOL,
    DP_REFL_U32,
    DP_REFL_I32,
    DP_REFL_F32,
    DP_REFL_F16,
    DP_REFL_U64,
    DP_REFL_I64,
    DP_REFL_F64,
    DP_REFL_PTR,         /* buffer reference (PhysicalStorageBuffer pointer), 8 bytes */
    DP_REFL_KIND_COUNT
} dp_refl_kind;

typedef enum dp_access {
    DP_ACCESS_NONE  = 0,
    DP_ACCESS_READ  = 1,
    DP_ACCESS_WRITE = 2,
    DP_ACCESS_RW    = 3
} dp_access;

typedef struct dp_refl_spec {
    char         name[DP_REFL_NAME];  /* OpName; "" if the compiler left none */
    uint32_t     id;                  /* SpecId (constant_id) */
    dp_refl_kind kind;                /* BOOL, U32, I32 or F32 */
    uint32_t     default_bits;        /* default value's bits (bool: 0/1) */
} dp_refl_spec;

typedef struct dp_refl_push {
    char         name[DP_REFL_NAME];  /* OpMemberName */
    uint32_t     offset;              /* bytes */
    uint32_t     size;                /* bytes (0 for OTHER when unknown) */
    dp_refl_kind kind;
    dp_access    access;              /* pointers: from the pointee block; else NONE */
    char         pointee[DP_REFL_NAME]; /* pointers: block type name ("F32In") */
    uint32_t     elem_bytes;          /* pointers: ArrayStride of the pointee's array member, or 0 */
} dp_refl_push;

typedef struct dp_reflection {
    dp_refl_spec spec[DP_REFL_MAX_SPEC];
    uint32_t     n_spec;
    dp_refl_push push[DP_REFL_MAX_PUSH];
    uint32_t     n_push;
    uint32_t     push_size;           /* bytes: end of the last member, 0 without a block */
    uint32_t     local_size[3];       /* from the LocalSize execution mode (spec defaults applied) */
    int32_t      local_size_id[3];    /* spec constant id per dimension (local_size_x_id), or -1 */
} dp_reflection;

/* words: a SPIR-V module (n_words 32-bit words). Malformed => DP_EFORMAT naming `what`. */
dp_status dp_reflect(const uint32_t *words, size_t n_words, const char *what,
                     dp_reflection *out, dp_err *err);

/* Gives every OpSpecConstant with a SpecId that `named` lists the default `named` has for it (the
** optimiser may have dropped the named constant and kept an unnamed one with the same id, e.g.
** local_size_x_id's, whose own default is 1). */
void dp_spirv_set_spec_defaults(uint32_t *words, size_t n_words, const dp_reflection *named);

const dp_refl_spec *dp_reflect_find_spec(const dp_reflection *r, const char *name);
const dp_refl_push *dp_reflect_find_push(const dp_reflection *r, const char *name);
const char         *dp_refl_kind_name(dp_refl_kind k);   /* "u32", "ptr", ... */

#endif
