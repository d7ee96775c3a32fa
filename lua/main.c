/*
** lua/main.c: the `doppler` executable.
**   doppler [--device N] FILE.lua ARGS...   run a script (recipes, benchmarks) with `arg`
**   doppler [--device N]                    the REPL (stdin a terminal) or line-by-line from stdin
**   doppler SUBCOMMAND ARGS...              C subcommands (lua/commands.h), else Lua ones found
**                                           as lua/lib/doppler/cmd/SUBCOMMAND.lua
*/
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lua/commands.h"
#include "lua/host.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command c_commands[] = {
    {"devices", dp_cmd_devices, "list Vulkan devices and the capabilities kernels branch on"},
    {"shaders", dp_cmd_shaders, "compile shaders into the SPIR-V cache (--precompile)"},
    {"inspect", dp_cmd_inspect, "print a model's metadata and tensor table"},
    {"tokenize", dp_cmd_tokenize, "text to token ids (JSON) and back, with a model's tokenizer"},
    {NULL, NULL, NULL},
};

/* Subcommands written in Lua: listed for --help; each lives in lua/lib/doppler/cmd/<name>.lua. */
static const struct { const char *name, *summary; } lua_commands[] = {
    {"run", "generate with the recipe the model's architecture names (--model PATH)"},
    {"synth", "write a synthetic model (seeded random weights at a config's shapes)"},
    {"convert", "HF directory -> GGUF (q4_k_m, q8_0, q4_0, f16, bf16; our quantiser) + manifest"},
    {"tune", "time kernel variants on this device; the winners become hint defaults (--model PATH)"},
    {NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: doppler [--device N] [FILE.lua [ARGS...]]\n"
            "       doppler SUBCOMMAND [ARGS...]   (SUBCOMMAND --help for its options)\n\n"
            "Runs LLM inference on Vulkan compute; models are Lua recipes (recipes/*.lua).\n"
            "With no FILE, starts the Lua REPL (reads stdin line by line when it is not a terminal).\n\n"
            "options:\n"
            "  --device N    use Vulkan device N (see `doppler devices`; env DOPPLER_DEVICE)\n"
            "  --version     print the version\n"
            "  -h, --help    this text\n\n"
            "subcommands:\n");
    for (const command *c = c_commands; c->name; c++) fprintf(out, "  %-10s %s\n", c->name, c->summary);
    for (int i = 0; lua_commands[i].name; i++)
        fprintf(out, "  %-10s %s\n", lua_commands[i].name, lua_commands[i].summary);
    fprintf(out, "\nexamples:\n"
                 "  doppler recipes/gemma3.lua --prompt \"Hello\"     generate with the default model\n"
                 "  doppler recipes/gemma3.lua --help               the recipe's options\n");
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Closes the interpreter; Vulkan validation messages make a successful run fail (status 3). */
static int finish(dp_host *h, int status)
{
    uint64_t messages = dp_host_destroy(h);
    if (messages && status == 0) {
        fprintf(stderr, "doppler: failing because the validation layer reported %llu message(s)\n",
                (unsigned long long)messages);
        return 3;
    }
    return status;
}

static int run_script(const dp_host_opts *opts, const char *path, int argc, char **argv)
{
    dp_host *h = dp_host_create(opts);
    if (!h) return 1;
    int status = dp_host_run_file(h, path, argc, argv);
    return finish(h, status);
}

/* A Lua subcommand: lua/lib/doppler/cmd/<name>.lua, run like a script with the remaining args. */
static int run_lua_command(const dp_host_opts *opts, const char *name, int argc, char **argv, int *found)
{
    dp_host *h = dp_host_create(opts);
    if (!h) return 1;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/lua/lib/doppler/cmd/%s.lua", dp_host_home(h), name);
    *found = is_file(path);
    int status = *found ? dp_host_run_file(h, path, argc, argv) : 1;
    return finish(h, status);
}

int main(int argc, char **argv)
{
    dp_host_opts opts = {.device_index = -1};
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("doppler %s\n", DOPPLER_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            char *end;
            long d = strtol(argv[++i], &end, 10);
            if (*end || d < 0) {
                fprintf(stderr, "doppler: --device wants a device index (see `doppler devices`), got '%s'\n", argv[i]);
                return 2;
            }
            opts.device_index = (int)d;
        } else {
            fprintf(stderr, "doppler: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (i == argc || strcmp(argv[i], "-") == 0) {
        dp_host *h = dp_host_create(&opts);
        if (!h) return 1;
        int status = dp_repl_run(h);
        return finish(h, status);
    }
    const char *first = argv[i];
    for (const command *c = c_commands; c->name; c++)
        if (strcmp(first, c->name) == 0) return c->run(argc - i, argv + i);
    if (is_file(first)) return run_script(&opts, first, argc - i - 1, argv + i + 1);
    if (!strchr(first, '/') && !strstr(first, ".lua")) {
        int found = 0;
        int status = run_lua_command(&opts, first, argc - i - 1, argv + i + 1, &found);
        if (found) return status;
        fprintf(stderr, "doppler: unknown subcommand '%s' (try --help)\n", first);
        return 2;
    }
    fprintf(stderr, "doppler: cannot open '%s': no such file\n", first);
    return 1;
}
