/*
** core/formats/tensor_names.h: GGUF tensor names <-> Hugging Face tensor names for the families
** whose tensors map one to one (gemma3, llama, mistral, qwen2, qwen3; MODEL_REFERENCE 2.5).
** Model files keep the names they store; recipes that want one spelling use this table.
** Stacked MoE experts (ffn_*_exps) have no one-to-one HF name and are not mapped.
*/
#ifndef DP_FORMATS_TENSOR_NAMES_H
#define DP_FORMATS_TENSOR_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* arch is the GGUF general.architecture ("gemma3", "llama", ...). Write the other spelling into
** buf; false (buf = "") when the name or the architecture is not in the table, or buf is short. */
bool dp_tensor_name_gguf_to_hf(const char *arch, const char *gguf_name, char *buf, size_t bufsize);
bool dp_tensor_name_hf_to_gguf(const char *arch, const char *hf_name, char *buf, size_t bufsize);

#endif
