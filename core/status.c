/*
** core/status.c: dp_err recording (see status.h).
*/
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const status_names[DP_STATUS_COUNT] = {
    [DP_OK] = "ok",           [DP_EINVAL] = "invalid argument", [DP_EFORMAT] = "bad file format",
    [DP_EIO] = "I/O error",   [DP_ENOMEM] = "out of host memory", [DP_EGPU_OOM] = "out of device memory",
    [DP_EGPU] = "GPU error",  [DP_ESHADER] = "shader compile error", [DP_ENODEV] = "no Vulkan device",
};

const char *dp_status_name(dp_status st)
{
    return (st >= 0 && st < DP_STATUS_COUNT) ? status_names[st] : "unknown status";
}

dp_status dp_fail_at(dp_err *err, dp_status st, const char *file, int line, const char *fmt, ...)
{
    if (!err || err->status != DP_OK) return st;   /* keep the first failure */
    err->status = st;
    err->file = file;
    err->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return st;
}

void dp_err_clear(dp_err *err)
{
    if (!err) return;
    memset(err, 0, sizeof *err);
}
