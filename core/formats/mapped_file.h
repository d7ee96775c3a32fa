/*
** core/formats/mapped_file.h: a whole file mapped read-only into memory. Model files are read
** through the mapping so that a tensor that is uploaded as stored is never copied on the host.
*/
#ifndef DP_FORMATS_MAPPED_FILE_H
#define DP_FORMATS_MAPPED_FILE_H

#include <stddef.h>

#include "core/status.h"

typedef struct dp_mapped_file {
    const unsigned char *data;   /* size bytes; NULL for an empty file */
    size_t               size;
    char                *path;   /* owned copy, for messages */
} dp_mapped_file;

/* Maps path; regular files only. On failure *out is NULL and err names the path and cause. */
dp_status dp_mapped_file_open(const char *path, dp_mapped_file **out, dp_err *err);
void      dp_mapped_file_close(dp_mapped_file *f);   /* NULL-safe */

#endif
