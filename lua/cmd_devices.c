/*
** lua/cmd_devices.c: `doppler devices [--json]`: every Vulkan device with the capabilities that
** kernels branch on (gpu/device.h's dp_device_caps). Index N is what --device N / DOPPLER_DEVICE
** select. No device or no driver: the reason and how to install lavapipe, exit 1.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/device.h"
#include "lua/commands.h"

static void usage(FILE *f)
{
    fputs("usage: doppler devices [--json]\n"
          "  Lists every Vulkan device: name, driver, subgroup size and operations, fp16/bf16/int8\n"
          "  support, cooperative matrices, limits, timestamps and memory heaps. The index is what\n"
          "  `--device N` and DOPPLER_DEVICE select. --json prints a JSON array instead.\n", f);
}

int dp_cmd_devices(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
            continue;
        }
        fprintf(stderr, "doppler devices: unknown argument '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    dp_device_caps *caps = NULL;
    uint32_t n = 0;
    dp_err err = {0};
    if (dp_device_list(&caps, &n, &err) != DP_OK) {
        fprintf(stderr, "doppler devices: %s\n", err.msg);
        return 1;
    }
    if (json) fputs("[", stdout);
    for (uint32_t i = 0; i < n; i++) {
        if (json) {
            fputs(i ? ",\n " : "", stdout);
            dp_device_print_caps_json(stdout, &caps[i]);
        } else {
            dp_device_print_caps(stdout, &caps[i]);
        }
    }
    if (json) fputs("]\n", stdout);
    free(caps);
    return 0;
}
