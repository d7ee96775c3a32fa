/*
** tests/unit/k_unroll.h: the UN values (loads in flight per thread) that the GEMV kernel tests run, shared by
** k_gpu.h and k_linear.h. Header-only (static inline).
*/
#ifndef DP_TESTS_K_UNROLL_H
#define DP_TESTS_K_UNROLL_H

#include <stdbool.h>
#include <stdint.h>

/* The UN values (loads of UN units or chunks in flight per GEMV thread) that a plan can give a GEMV with tt
** tokens per workgroup: lower.gemv_unroll keeps UN * tt <= 4 (registers), so 1, 2, 4 at one token, 1, 2 at two
** and 1 at three or four (tests/lua/test_hints.lua checks that cap). The kernel tests run exactly these: every
** variant a plan can record is checked, and none that no plan records is compiled (lavapipe compiles each
** variant with LLVM at its first dispatch, seconds for a multi-token gemv_q). Fills un, returns the count;
** k_uns_text names them (and that they agreed) for a summary line. */
static inline uint32_t k_gemv_uns(uint32_t tt, uint32_t un[3])
{
    static const uint32_t ALL[] = {1, 2, 4};
    uint32_t n = 0;
    for (uint32_t i = 0; i < 3; i++)
        if (ALL[i] == 1 || ALL[i] * tt <= 4) un[n++] = ALL[i];
    return n;
}

/* A test case's runs: k_gemv_uns(tt) with unroll, else one run with UN = 0 (no UN constant: the shader's
** default). Fills un, returns the count. */
static inline uint32_t k_case_uns(bool unroll, uint32_t tt, uint32_t un[3])
{
    if (unroll) return k_gemv_uns(tt, un);
    un[0] = 0;
    return 1;
}

static inline const char *k_uns_text(uint32_t tt)
{
    uint32_t un[3];
    const uint32_t n = k_gemv_uns(tt, un);
    return n == 3 ? "UN 1, 2, 4: same bits" : n == 2 ? "UN 1, 2: same bits" : "UN 1";
}

#endif
