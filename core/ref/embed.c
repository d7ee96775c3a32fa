/*
** core/ref/embed.c: CPU reference for the embedding gather (shaders/embed/gather.comp):
** y[t, :] = table[ids[t], :] * scale. The table stays in its stored dtype and only the gathered rows are
** widened, because a real table is hundreds of MB (Gemma 3: 262144 x 1152).
*/
#include <string.h>

#include "core/ref/ref.h"

dp_status dp_ref_embed(const void *table, dp_dtype dtype, uint32_t rows, uint32_t C, const uint32_t *ids,
                       uint32_t T, float scale, float *y, dp_err *err)
{
    size_t esize;
    switch (dtype) {
    case DP_F32:  esize = 4; break;
    case DP_F16:
    case DP_BF16: esize = 2; break;
    default:
        return DP_FAIL(err, DP_EINVAL, "ref embed: table dtype %s is not f32, f16 or bf16", dp_dtype_name(dtype));
    }
    dp_status st = DP_OK;
    for (uint32_t t = 0; t < T; t++) {
        float *yr = y + (uint64_t)t * C;
        if (ids[t] >= rows) {   /* the kernel writes zeros: do the same, but tell the caller */
            memset(yr, 0, (size_t)C * sizeof *yr);
            if (st == DP_OK)
                st = DP_FAIL(err, DP_EINVAL, "ref embed: token %u has id %u, the table has %u rows",
                             t, ids[t], rows);
            continue;
        }
        const char *row = (const char *)table + (uint64_t)ids[t] * C * esize;
        dp_status rs = dp_ref_to_f32(row, dtype, yr, C, err);
        DP_ASSERT(rs == DP_OK);
        (void)rs;
        for (uint32_t c = 0; c < C; c++) yr[c] *= scale;
    }
    return st;
}
