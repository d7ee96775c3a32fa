/*
** core/quantize.c: see quantize.h. Written from the block semantics in core/quant.c / MODEL_REFERENCE §4:
** the search ideas are the ones the K-quant formats were designed around (try a spread of candidate scales,
** fit the scale (and min) to the codes each candidate produces by least squares, keep the least error),
** with our own details: the error of every candidate is measured after rounding its scales to what the
** block stores (f16, 6-bit or int8), so the kept block is the best one among those actually representable.
** The objective is plain squared error (the RMSE the tests report), not an importance-weighted one.
*/
#include "core/quantize.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/quant.h"

#define MAX_THREADS 64

static float f16r(float v) { return dp_f16_to_f32(dp_f32_to_f16(v)); }
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Codes of x for scale d (and offset m: x ~ d q + m), clamped to [lo, hi]; returns the squared error. */
static double codes(const float *x, int n, float d, float m, int lo, int hi, int8_t *q)
{
    double err = 0.0;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < n; i++) {
        int v = d != 0.0f ? clampi((int)lrintf((x[i] - m) * id), lo, hi) : clampi(0, lo, hi);
        q[i] = (int8_t)v;
        double e = (double)d * v + m - x[i];
        err += e * e;
    }
    return err;
}

/* ---- symmetric: x ~ d q, q in [lo, hi] (lo = -hi - 1) -------------------------------------------------
** Candidates map the element of largest magnitude to about lo or hi (±1 level in tenths); for each, d is
** refitted to the candidate's codes by least squares (sum x q / sum q^2), rounded as stored (f16 when
** round16), and the codes are redone for that d. Returns the squared error; d and q hold the best. */
static double sym_fit(const float *x, int n, int lo, int hi, bool round16, float *d_out, int8_t *q)
{
    float amax = 0.0f, vmax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), vmax = x[i];
    *d_out = 0.0f;
    if (amax == 0.0f) return codes(x, n, 0.0f, 0.0f, lo, hi, q);
    double best = INFINITY;
    int8_t tq[256];
    for (int side = 0; side < 2; side++) {
        for (int is = -10; is <= 10; is++) {
            const float lev = (side == 0 ? (float)-lo : (float)hi) + 0.1f * (float)is;
            if (lev <= 0.5f) continue;
            const float dc = side == 0 ? -vmax / lev : vmax / lev;
            codes(x, n, dc, 0.0f, lo, hi, tq);
            double sxq = 0.0, sqq = 0.0;
            for (int i = 0; i < n; i++) sxq += (double)x[i] * tq[i], sqq += (double)tq[i] * tq[i];
            if (sqq == 0.0) continue;
            float d = (float)(sxq / sqq);
            if (round16) d = f16r(d);
            double err = codes(x, n, d, 0.0f, lo, hi, tq);
            if (err < best) {
                best = err;
                *d_out = d;
                memcpy(q, tq, (size_t)n);
            }
        }
    }
    return best;
}

/* ---- affine: x ~ d q + m, q in [0, nmax] --------------------------------------------------------------
** Candidates spread the range [min, max] over nmax -1 .. +1 levels (tenths); each candidate's codes get a
** least-squares (d, m). With nonpos_min (K-quants store -m as an unsigned 6-bit number) m is kept <= 0.
** With round16 (Q4_1 / Q5_1) d and m are rounded to f16 before the codes are redone. */
static double affine_fit(const float *x, int n, int nmax, bool nonpos_min, bool round16, float *d_out,
                         float *m_out, int8_t *q)
{
    float mn = x[0], mx = x[0];
    for (int i = 1; i < n; i++) mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
    if (nonpos_min && mn > 0.0f) mn = 0.0f;
    if (mx == mn) {
        *d_out = 0.0f;
        *m_out = round16 ? f16r(mn) : mn;
        return codes(x, n, 0.0f, *m_out, 0, nmax, q);
    }
    double best = INFINITY;
    int8_t tq[256];
    *d_out = (mx - mn) / (float)nmax, *m_out = mn;
    for (int is = -10; is <= 10; is++) {
        const float dc = (mx - mn) / ((float)nmax + 0.1f * (float)is);
        codes(x, n, dc, mn, 0, nmax, tq);
        double s1 = n, sq = 0, sqq = 0, sx = 0, sqx = 0;
        for (int i = 0; i < n; i++) {
            sq += tq[i], sqq += (double)tq[i] * tq[i], sx += x[i], sqx += (double)tq[i] * x[i];
        }
        const double det = s1 * sqq - sq * sq;
        if (det <= 0.0) continue;
        double d = (s1 * sqx - sq * sx) / det, m = (sqq * sx - sq * sqx) / det;
        if (nonpos_min && m > 0.0) m = 0.0, d = sqx / sqq;
        if (d <= 0.0) continue;
        float df = (float)d, mf = (float)m;
        if (round16) df = f16r(df), mf = f16r(mf);
        double err = codes(x, n, df, mf, 0, nmax, tq);
        if (err < best) {
            best = err;
            *d_out = df, *m_out = mf;
            memcpy(q, tq, (size_t)n);
        }
    }
    if (best == INFINITY) best = codes(x, n, *d_out, *m_out, 0, nmax, q);
    return best;
}

/* ---- 32-element formats -------------------------------------------------------------------------------- */

static void q8_0_block(const float *x, uint8_t *b)
{
    float d;
    int8_t q[32];
    sym_fit(x, 32, -128, 127, true, &d, q);
    put16(b, dp_f32_to_f16(d));
    memcpy(b + 2, q, 32);
}

/* Q4_0 / Q5_0: codes q + 2^(bits-1) in nibbles (+ the fifth bits in qh). */
static void q_0_block(const float *x, uint8_t *b, int bits)
{
    const int half = 1 << (bits - 1);
    float d;
    int8_t q[32];
    sym_fit(x, 32, -half, half - 1, true, &d, q);
    put16(b, dp_f32_to_f16(d));
    uint8_t *qs = b + (bits == 5 ? 6 : 2);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const int u0 = q[j] + half, u1 = q[j + 16] + half;
        qs[j] = (uint8_t)((u0 & 15) | ((u1 & 15) << 4));
        qh |= (uint32_t)(u0 >> 4) << j | (uint32_t)(u1 >> 4) << (j + 16);
    }
    if (bits == 5) for (int k = 0; k < 4; k++) b[2 + k] = (uint8_t)(qh >> (8 * k));
}

/* Q4_1 / Q5_1: x ~ d q + m, both f16. */
static void q_1_block(const float *x, uint8_t *b, int bits)
{
    float d, m;
    int8_t q[32];
    affine_fit(x, 32, (1 << bits) - 1, false, true, &d, &m, q);
    put16(b, dp_f32_to_f16(d));
    put16(b + 2, dp_f32_to_f16(m));
    uint8_t *qs = b + (bits == 5 ? 8 : 4);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | ((q[j + 16] & 15) << 4));
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    if (bits == 5) for (int k = 0; k < 4; k++) b[4 + k] = (uint8_t)(qh >> (8 * k));
}

/* ---- Q4_K / Q5_K ----------------------------------------------------------------------------------------
** Eight sub-blocks of 32: x ~ (d * L_j) q - (dmin * M_j), L_j, M_j 6-bit, d, dmin f16. Each sub-block's
** (scale, -min) is fitted first (affine_fit); d and dmin map the largest of them to 63; the codes are redone
** with the stored scales; then (d, dmin) are refitted jointly by least squares to those codes (a 2 x 2
** system over the whole super-block) and kept if the exact error drops. */
typedef struct kblock {
    float d, dmin;
    uint8_t L[8], M[8];
    int8_t q[256];
} kblock;

static double k_codes(const float *x, kblock *k, int nmax)
{
    double err = 0.0;
    for (int j = 0; j < 8; j++) {
        const float d1 = k->d * k->L[j], m1 = k->dmin * k->M[j];
        for (int i = 0; i < 32; i++) {
            const float v = x[32 * j + i];
            const int q = d1 != 0.0f ? clampi((int)lrintf((v + m1) / d1), 0, nmax) : 0;
            k->q[32 * j + i] = (int8_t)q;
            const double e = (double)(d1 * (float)q - m1) - v;
            err += e * e;
        }
    }
    return err;
}

static void k_fit(const float *x, int nmax, kblock *out)
{
    float sc[8], mn[8], smax = 0.0f, mmax = 0.0f;
    int8_t tq[32];
    for (int j = 0; j < 8; j++) {
        float d, m;
        affine_fit(x + 32 * j, 32, nmax, true, false, &d, &m, tq);
        sc[j] = d, mn[j] = -m;
        smax = fmaxf(smax, sc[j]), mmax = fmaxf(mmax, mn[j]);
    }
    double best = INFINITY;
    kblock k;
    /* a few super-scales around max / 63: a slightly smaller d can round the small sub-scales better */
    for (int a = 0; a < 4; a++) {
        const float lev = 63.0f - 0.5f * (float)a;
        k.d = f16r(smax / lev), k.dmin = f16r(mmax / 63.0f);
        for (int j = 0; j < 8; j++) {
            k.L[j] = (uint8_t)(k.d > 0.0f ? clampi((int)lrintf(sc[j] / k.d), 0, 63) : 0);
            k.M[j] = (uint8_t)(k.dmin > 0.0f ? clampi((int)lrintf(mn[j] / k.dmin), 0, 63) : 0);
        }
        double err = k_codes(x, &k, nmax);
        for (int it = 0; it < 2; it++) {
            /* x ~ d * (L q) - dmin * M: least squares in (d, dmin) for these codes */
            double aa = 0, ab = 0, bb = 0, ax = 0, bx = 0;
            for (int j = 0; j < 8; j++)
                for (int i = 0; i < 32; i++) {
                    const double u = (double)k.L[j] * k.q[32 * j + i], w = -(double)k.M[j], v = x[32 * j + i];
                    aa += u * u, ab += u * w, bb += w * w, ax += u * v, bx += w * v;
                }
            const double det = aa * bb - ab * ab;
            kblock t = k;
            if (det > 0.0) {
                t.d = f16r((float)((ax * bb - bx * ab) / det));
                t.dmin = f16r((float)((aa * bx - ab * ax) / det));
            } else if (aa > 0.0) {
                t.d = f16r((float)(ax / aa));
            }
            if (t.d < 0.0f || t.dmin < 0.0f) break;
            const double e2 = k_codes(x, &t, nmax);
            if (!(e2 < err)) break;
            err = e2, k = t;
        }
        if (err < best) best = err, *out = k;
    }
}

static void k_pack_scales(const kblock *k, uint8_t *s)
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((k->L[j] & 63) | ((k->L[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((k->M[j] & 63) | ((k->M[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((k->L[j + 4] & 15) | ((k->M[j + 4] & 15) << 4));
    }
}

static void qk45_block(const float *x, uint8_t *b, bool five)
{
    kblock k;
    k_fit(x, five ? 31 : 15, &k);
    put16(b, dp_f32_to_f16(k.d));
    put16(b + 2, dp_f32_to_f16(k.dmin));
    k_pack_scales(&k, b + 4);
    uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
    if (five) memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int lo = k.q[64 * c + l], hi = k.q[64 * c + 32 + l];
            qs[32 * c + l] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
            if (five) qh[l] |= (uint8_t)(((lo >> 4) & 1) << (2 * c) | ((hi >> 4) & 1) << (2 * c + 1));
        }
}

/* ---- Q6_K -----------------------------------------------------------------------------------------------
** Sixteen sub-blocks of 16: x ~ (d * s_j) q, s_j int8, q in [-32, 31], d f16. Sub-block scales by sym_fit,
** then d maps the largest |s| to -128 or 127 (the better of the two), the codes are redone, and d is
** refitted by least squares to those codes. */
static double q6_codes(const float *x, float d, const int8_t *s, int8_t *q)
{
    double err = 0.0;
    for (int j = 0; j < 16; j++) {
        const float d1 = d * (float)s[j];
        for (int i = 0; i < 16; i++) {
            const float v = x[16 * j + i];
            const int c = d1 != 0.0f ? clampi((int)lrintf(v / d1), -32, 31) : 0;
            q[16 * j + i] = (int8_t)c;
            const double e = (double)(d1 * (float)c) - v;
            err += e * e;
        }
    }
    return err;
}

static void q6_k_block(const float *x, uint8_t *b)
{
    float sc[16], smax = 0.0f;
    int8_t tq[16];
    for (int j = 0; j < 16; j++) {
        sym_fit(x + 16 * j, 16, -32, 31, false, &sc[j], tq);
        if (fabsf(sc[j]) > fabsf(smax)) smax = sc[j];
    }
    double best = INFINITY;
    float bd = 0.0f;
    int8_t bs[16] = {0}, bq[256] = {0};
    for (int side = 0; side < 2 && smax != 0.0f; side++) {
        float d = f16r(side == 0 ? smax / -128.0f : smax / 127.0f);
        if (d == 0.0f) continue;
        int8_t s[16], q[256];
        for (int j = 0; j < 16; j++) s[j] = (int8_t)clampi((int)lrintf(sc[j] / d), -128, 127);
        double err = q6_codes(x, d, s, q);
        double num = 0.0, den = 0.0;
        for (int i = 0; i < 256; i++) {
            const double u = (double)s[i / 16] * q[i];
            num += u * x[i], den += u * u;
        }
        if (den > 0.0) {
            const float d2 = f16r((float)(num / den));
            int8_t q2[256];
            const double e2 = q6_codes(x, d2, s, q2);
            if (e2 < err) err = e2, d = d2, memcpy(q, q2, 256);
        }
        if (err < best) best = err, bd = d, memcpy(bs, s, 16), memcpy(bq, q, 256);
    }
    uint8_t *ql = b, *qh = b + 128;
    memset(b, 0, 192);
    for (int e = 0; e < 256; e++) {
        const int u = bq[e] + 32, h = e / 128, qd = (e % 128) / 32, l = e % 32;
        ql[64 * h + l + 32 * (qd & 1)] |= (uint8_t)((u & 15) << (qd >= 2 ? 4 : 0));
        qh[32 * h + l] |= (uint8_t)((u >> 4) << (2 * qd));
    }
    memcpy(b + 192, bs, 16);
    put16(b + 208, dp_f32_to_f16(bd));
}

/* ---- dispatch --------------------------------------------------------------------------------------------- */

typedef void (*block_fn)(const float *x, uint8_t *b);
static void q4_0_block(const float *x, uint8_t *b) { q_0_block(x, b, 4); }
static void q5_0_block(const float *x, uint8_t *b) { q_0_block(x, b, 5); }
static void q4_1_block(const float *x, uint8_t *b) { q_1_block(x, b, 4); }
static void q5_1_block(const float *x, uint8_t *b) { q_1_block(x, b, 5); }
static void q4_k_block(const float *x, uint8_t *b) { qk45_block(x, b, false); }
static void q5_k_block(const float *x, uint8_t *b) { qk45_block(x, b, true); }

static block_fn block_for(dp_dtype t)
{
    switch (t) {
    case DP_Q8_0: return q8_0_block;
    case DP_Q4_0: return q4_0_block;
    case DP_Q5_0: return q5_0_block;
    case DP_Q4_1: return q4_1_block;
    case DP_Q5_1: return q5_1_block;
    case DP_Q4_K: return q4_k_block;
    case DP_Q5_K: return q5_k_block;
    case DP_Q6_K: return q6_k_block;
    default: return NULL;
    }
}

bool dp_quantize_supported(dp_dtype t) { return block_for(t) != NULL; }

static void quantize_blocks(block_fn f, const dp_dtype_info *info, const float *src, uint8_t *dst, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) f(src + i * info->block, dst + i * info->type_size);
}

dp_status dp_quantize_row(dp_dtype t, const float *src, void *dst, int64_t n, dp_err *err)
{
    block_fn f = block_for(t);
    if (!f) return DP_FAIL(err, DP_EINVAL, "quantize: no quantiser for %s", dp_dtype_name(t));
    const dp_dtype_info *info = dp_dtype_get(t);
    if (n < 0 || n % info->block)
        return DP_FAIL(err, DP_EINVAL, "quantize: %lld elements are not whole %s blocks of %u", (long long)n,
                       info->name, info->block);
    quantize_blocks(f, info, src, dst, n / info->block);
    return DP_OK;
}

typedef struct job {
    block_fn f;
    const dp_dtype_info *info;
    const float *src;
    uint8_t *dst;
    int64_t nb;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    quantize_blocks(j->f, j->info, j->src, j->dst, j->nb);
    return NULL;
}

dp_status dp_quantize_rows(dp_dtype t, const float *src, void *dst, int64_t n_rows, int64_t row_len,
                           int n_threads, dp_err *err)
{
    block_fn f = block_for(t);
    if (!f) return DP_FAIL(err, DP_EINVAL, "quantize: no quantiser for %s", dp_dtype_name(t));
    const dp_dtype_info *info = dp_dtype_get(t);
    if (n_rows < 0 || row_len <= 0 || row_len % info->block)
        return DP_FAIL(err, DP_EINVAL, "quantize: rows of %lld elements are not whole %s blocks of %u",
                       (long long)row_len, info->name, info->block);
    if (n_threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = cpus > 0 ? (int)cpus : 1;
    }
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    if (n_threads > n_rows) n_threads = n_rows > 0 ? (int)n_rows : 1;
    const int64_t bpr = row_len / info->block;   /* blocks per row: threads take whole rows */
    job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started = 0;
    int64_t r0 = 0;
    for (int i = 0; i < n_threads; i++) {
        const int64_t rows = n_rows / n_threads + (i < n_rows % n_threads ? 1 : 0);
        jobs[i] = (job){f, info, src + r0 * row_len, (uint8_t *)dst + r0 * bpr * info->type_size, rows * bpr};
        r0 += rows;
    }
    for (int i = 1; i < n_threads; i++) {
        if (pthread_create(&th[i], NULL, run_job, &jobs[i]) != 0) break;
        started = i;
    }
    run_job(&jobs[0]);
    for (int i = started + 1; i < n_threads; i++) run_job(&jobs[i]);   /* threads that failed to start */
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    return DP_OK;
}
