/*
** core/formats/mapped_file.c: see mapped_file.h (POSIX mmap).
*/
#include "core/formats/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

dp_status dp_mapped_file_open(const char *path, dp_mapped_file **out, dp_err *err)
{
    dp_status st;
    *out = NULL;
    dp_mapped_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return DP_FAIL(err, DP_ENOMEM, "%s: out of host memory", path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        st = DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = DP_FAIL(err, DP_EIO, "%s: %s", path, strerror(errno));
        close(fd);
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = DP_FAIL(err, DP_EIO, "%s: not a regular file", path);
        close(fd);
        goto fail;
    }
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            st = DP_FAIL(err, DP_EIO, "%s: mmap: %s", path, strerror(errno));
            close(fd);
            goto fail;
        }
        f->data = p;
    }
    close(fd);   /* the mapping keeps the file alive */
    *out = f;
    return DP_OK;
fail:
    f->size = 0;
    dp_mapped_file_close(f);
    return st;
}

void dp_mapped_file_close(dp_mapped_file *f)
{
    if (!f) return;
    if (f->data) munmap((void *)f->data, f->size);
    free(f->path);
    free(f);
}
