/*
** gpu/kernel_stats.h: what the driver says about a compiled kernel (VK_KHR_pipeline_executable_properties),
** printed when DOPPLER_KERNEL_STATS=1 asks for it. On NVIDIA this includes the registers each invocation
** holds, which bounds how many invocations an SM keeps resident: the occupancy question behind the decode
** GEMVs' timings (docs/BENCHMARKS.md).
*/
#ifndef DP_GPU_KERNEL_STATS_H
#define DP_GPU_KERNEL_STATS_H

#include <stdio.h>

#include "gpu/device_impl.h"
#include "gpu/kernel.h"

/* Writes one line to f: "doppler: kernel stats: NAME [DEFINES] {SPEC=V ...} local XxYxZ: STAT=VALUE, ..."
** for every executable of the pipeline (a compute pipeline has one). Does nothing unless the device has
** kernel statistics switched on (dev->kernel_stats); a failing query is reported on the line, not fatal. */
void dp_kernel_stats_print(dp_device *dev, VkPipeline pipeline, const char *name, const dp_kernel_desc *desc,
                           const uint32_t local[3], FILE *f);

#endif
