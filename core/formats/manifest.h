/*
** core/formats/manifest.h: model manifests (models/NAME.yaml): which model file, which recipe, how it
** is quantised and the kernel hints that suit it, so that `--model models/NAME.yaml` stands for a tuned
** set-up. YAML (libyaml), one mapping:
**   name: gemma-3-1b                 # optional; defaults to the file name
**   model: synthetic/gemma-3-1b      # required: HF directory or GGUF file, relative to this file's directory
**   recipe: gemma3                   # optional: the recipe (checked against the one being run)
**   quantization: q4_k_m             # optional: what the model file holds (DP_MANIFEST_QUANTS)
**   source: google/gemma-3-1b-it     # optional: where the weights come from (informational)
**   description: ...                 # optional
**   kernel_hints: { q_matmul: fused, kv_dtype: f16 }   # optional: hint -> value (checked by the hint table)
** Also the --hints FILE: a YAML file holding one flat mapping of hint -> value.
** Any other key, a duplicate key, a non-scalar value or an unknown quantisation is an error naming the
** file, line and the valid choices. Hint names and values are checked by lua/lib/doppler/hints.lua,
** which owns the table of hints.
*/
#ifndef DP_FORMATS_MANIFEST_H
#define DP_FORMATS_MANIFEST_H

#include <stddef.h>

#include "core/status.h"

/* The quantisation names a manifest may give (also what `doppler convert --quant` writes). */
#define DP_MANIFEST_QUANTS "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q4_k_m-padk"

typedef struct dp_manifest_pair {
    char *key, *value;
    int   line;   /* 1-based, for messages */
} dp_manifest_pair;

typedef struct dp_manifest {
    char *path;           /* the manifest file as given */
    char *name, *model, *recipe, *quantization, *source, *description;   /* NULL when absent (model never) */
    dp_manifest_pair *hints;   /* kernel_hints in file order */
    size_t            n_hints;
} dp_manifest;

dp_status dp_manifest_read(const char *path, dp_manifest **out, dp_err *err);
/* As dp_manifest_read on text held in memory; name labels messages. */
dp_status dp_manifest_parse(const char *name, const char *text, size_t len, dp_manifest **out, dp_err *err);
void      dp_manifest_free(dp_manifest *m);   /* NULL-safe */

/* A YAML file that is one mapping of scalar -> scalar (the --hints FILE). *out is NULL on failure. */
dp_status dp_manifest_read_pairs(const char *path, dp_manifest_pair **out, size_t *n, dp_err *err);
/* As dp_manifest_read_pairs on text held in memory; name labels messages. */
dp_status dp_manifest_parse_pairs(const char *name, const char *text, size_t len, dp_manifest_pair **out, size_t *n,
                                  dp_err *err);
void      dp_manifest_pairs_free(dp_manifest_pair *p, size_t n);   /* NULL-safe */

#endif
