/*
** core/status.h: how fallible functions report failure.
** Every function that can fail for a reason a user, a file or a driver can cause returns
** dp_status and fills a dp_err (caller-owned, last argument). Bugs are DP_ASSERT (debug only).
*/
#ifndef DP_CORE_STATUS_H
#define DP_CORE_STATUS_H

#include <stddef.h>

#if defined(__GNUC__)
#define DP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DP_PRINTF(fmt, args)
#endif

typedef enum dp_status {
    DP_OK = 0,
    DP_EINVAL,    /* a caller or recipe passed something wrong: shape, hint, argument */
    DP_EFORMAT,   /* a file is truncated, corrupt or unsupported */
    DP_EIO,       /* open/read/mmap failed; the message carries strerror */
    DP_ENOMEM,    /* host allocation failed */
    DP_EGPU_OOM,  /* device memory or pool exhausted */
    DP_EGPU,      /* any other Vulkan failure, device lost included */
    DP_ESHADER,   /* shaderc rejected a kernel; the message carries its log */
    DP_ENODEV,    /* no usable Vulkan device */
    DP_STATUS_COUNT
} dp_status;

typedef struct dp_err {
    dp_status   status;
    const char *file;     /* C file and line that detected it: for bug reports */
    int         line;
    char        msg[1024];/* for the user: names the file/tensor/op and the cause */
} dp_err;

const char *dp_status_name(dp_status st);

/* Keeps the first failure only, because later ones are usually its consequences.
** err may be NULL (the failure is then only returned). Returns st. */
dp_status dp_fail_at(dp_err *err, dp_status st, const char *file, int line,
                     const char *fmt, ...) DP_PRINTF(5, 6);
#define DP_FAIL(err, st, ...) dp_fail_at((err), (st), __FILE__, __LINE__, __VA_ARGS__)

/* Clears err so that it can record a new failure. */
void dp_err_clear(dp_err *err);

#ifdef NDEBUG
#define DP_ASSERT(c) ((void)0)
#else
#include <assert.h>
#define DP_ASSERT(c) assert(c)
#endif

#define DP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
