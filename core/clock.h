/*
** core/clock.h: seconds on a monotonic clock, for timings (doppler.clock, the kernel build's phases,
** `doppler tokenize --time`). Not wall time: only differences mean anything.
*/
#ifndef DP_CORE_CLOCK_H
#define DP_CORE_CLOCK_H

double dp_clock_seconds(void);

#endif
