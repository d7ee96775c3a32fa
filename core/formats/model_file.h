/*
** core/formats/model_file.h: "open a model" for what users have: a Hugging Face directory
** (config.json + safetensors, single or sharded, + tokenizer files) or a GGUF file. Either way
** the result is a normalised config, a uniform tensor list (pointers into the mapped files) and
** the paths of tokenizer files. Tensor names stay as stored (HF names for safetensors, GGUF
** names for GGUF; tensor_names.h maps between them).
** Shapes in dp_model_tensor are row-major, outermost first, for both kinds: a GGUF tensor with
** ne = [in, out] appears as shape {out, in}, as in torch (MODEL_REFERENCE notation).
** Padded rows: a GGUF written by `doppler convert --pad-k` zero-pads the rows of some K-quant tensors to
** whole 256-blocks and lists them in its metadata (doppler.pad_k = true, doppler.pad_k.tensors = names,
** doppler.pad_k.widths = true row lengths). Such a tensor is presented as the logical matrix: shape ends
** in the true width K, padded_cols = ceil(K / 256) * 256 is the stored row length (the data holds rows
** of padded_cols elements). Opening checks the metadata against the tensors: a stored width other than
** ceil(K / 256) * 256, a listed tensor that is absent, listed twice or not block-quantised, or malformed
** keys are errors naming the file and the tensor.
*/
#ifndef DP_FORMATS_MODEL_FILE_H
#define DP_FORMATS_MODEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/formats/gguf.h"
#include "core/formats/hfconfig.h"
#include "core/formats/safetensors.h"
#include "core/status.h"

#define DP_MODEL_MAX_DIMS 8

typedef enum dp_model_kind { DP_MODEL_SAFETENSORS, DP_MODEL_GGUF, DP_MODEL_KIND_COUNT } dp_model_kind;

typedef struct dp_model_tensor {
    const char *name;
    dp_dtype    dtype;       /* DP_DTYPE_COUNT for GGUF types we do not compute with */
    const char *type_name;   /* "bf16", "q4_K", "iq2_xxs", ...: always set */
    int         ndim;
    int64_t     shape[DP_MODEL_MAX_DIMS];   /* row-major, outermost first: the logical shape */
    uint64_t    numel, bytes;    /* numel of the logical shape; bytes as stored */
    int64_t     padded_cols;     /* 0, or the stored row length when the file pads rows (see below) */
    const void *data;        /* into the mapped file */
} dp_model_tensor;

typedef struct dp_model dp_model;

/* path: a directory with config.json (+ safetensors), a .safetensors / .index.json file (config.json
** from its directory, optional), or a GGUF file (recognised by its magic). */
dp_status dp_model_open(const char *path, dp_model **out, dp_err *err);
void      dp_model_close(dp_model *m);   /* NULL-safe */

dp_model_kind dp_model_kind_of(const dp_model *m);
const char   *dp_model_kind_name(dp_model_kind k);   /* "safetensors" / "gguf" */
const char   *dp_model_path(const dp_model *m);

const dp_hfconfig  *dp_model_config(const dp_model *m);     /* NULL for a bare safetensors file */
const dp_genconfig *dp_model_genconfig(const dp_model *m);  /* ->present tells whether a file was read */
const dp_tokconfig *dp_model_tokconfig(const dp_model *m);
const char *dp_model_tokenizer_json(const dp_model *m);     /* path of tokenizer.json, or NULL */
const char *dp_model_chat_template(const dp_model *m);      /* tokenizer_config / chat_template.jinja / GGUF; or NULL */

size_t                 dp_model_tensor_count(const dp_model *m);
const dp_model_tensor *dp_model_tensor_at(const dp_model *m, size_t i);
/* NULL if absent. A GGUF model also finds a tensor by its HF name (general.architecture picks the
** table in tensor_names.h); the result's ->name is the stored GGUF name. */
const dp_model_tensor *dp_model_find(const dp_model *m, const char *name);
uint64_t               dp_model_total_bytes(const dp_model *m);

const dp_safetensors *dp_model_safetensors(const dp_model *m);   /* NULL unless safetensors */
const dp_gguf        *dp_model_gguf(const dp_model *m);          /* NULL unless GGUF */

/* The HF-like config llama.cpp's keys describe (<arch>.embedding_length, ...). Gemma 3 values that
** GGUF does not store follow llama.cpp: layer pattern 6, local RoPE base 10000, attention scale
** 1/sqrt(head_dim) (query_pre_attn_scalar = head_dim). cfg->raw is NULL. */
dp_status dp_hfconfig_from_gguf(const dp_gguf *g, dp_hfconfig *cfg, dp_err *err);

#endif
