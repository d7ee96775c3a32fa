/*
** gpu/kernel_stats.c: prints a pipeline's driver statistics (see kernel_stats.h). The statistics' names and
** meanings are the driver's own (Vulkan defines only how to read them), so they are printed as given.
*/
#include <inttypes.h>
#include <stdlib.h>

#include "gpu/kernel_stats.h"

static void print_value(const VkPipelineExecutableStatisticKHR *s, FILE *f)
{
    switch (s->format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: fprintf(f, "%s", s->value.b32 ? "true" : "false"); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:  fprintf(f, "%" PRId64, s->value.i64); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: fprintf(f, "%" PRIu64, s->value.u64); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: fprintf(f, "%g", s->value.f64); break;
    default: fprintf(f, "?"); break;
    }
}

void dp_kernel_stats_print(dp_device *dev, VkPipeline pipeline, const char *name, const dp_kernel_desc *desc,
                           const uint32_t local[3], FILE *f)
{
    if (!dev->kernel_stats || pipeline == VK_NULL_HANDLE) return;
    fprintf(f, "doppler: kernel stats: %s [", name);
    for (uint32_t i = 0; i < desc->n_defines; i++) fprintf(f, "%s%s", i ? " " : "", desc->defines[i]);
    fprintf(f, "] {");
    for (uint32_t i = 0; i < desc->n_constants; i++)
        fprintf(f, "%s%s=%g", i ? " " : "", desc->constants[i].name, desc->constants[i].value);
    fprintf(f, "} local %ux%ux%u:", local[0], local[1], local[2]);

    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipeline};
    uint32_t n_exec = 0;
    if (dev->get_executables(dev->device, &pi, &n_exec, NULL) != VK_SUCCESS || n_exec == 0) {
        fprintf(f, " (the driver reported no executables)\n");
        return;
    }
    for (uint32_t e = 0; e < n_exec; e++) {
        VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                          .pipeline = pipeline, .executableIndex = e};
        uint32_t n = 0;
        if (dev->get_statistics(dev->device, &ei, &n, NULL) != VK_SUCCESS) {
            fprintf(f, " (statistics query failed)");
            continue;
        }
        VkPipelineExecutableStatisticKHR *s = calloc(n ? n : 1, sizeof *s);
        if (!s) { fprintf(f, " (out of host memory)"); break; }
        for (uint32_t i = 0; i < n; i++) s[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
        VkResult r = dev->get_statistics(dev->device, &ei, &n, s);
        if (r == VK_SUCCESS || r == VK_INCOMPLETE)
            for (uint32_t i = 0; i < n; i++) {
                fprintf(f, "%s %s=", i || e ? "," : "", s[i].name);
                print_value(&s[i], f);
            }
        free(s);
    }
    fputc('\n', f);
}
