#!/usr/bin/env bash
# tests/e2e/test_no_family_names.sh: a model family lives in its Lua recipe, never in the engine. No C
# source (core/, gpu/, lua/) and no shader may name a family (Gemma, Llama, Qwen, Mistral, Mixtral, Phi)
# in code or string literals, except the files below, which are tables of file-format names: what a
# config.json or GGUF file calls an architecture, a tensor, a RoPE scaling type, a pre-tokenizer, or
# the chat-template formats a tokenizer's metadata selects. Comments are
# stripped first (they may cite where a formula comes from), and "llama.cpp" (a project, not a family)
# is not a family name.
set -u
cd "${DOPPLER_HOME:-$(dirname "$0")/../..}" || exit 2

# file -> why it may name families
declare -A allowed=(
  [core/formats/tensor_names.c]="HF <-> GGUF tensor-name tables per GGUF architecture"
  [core/formats/model_file.c]="GGUF general.architecture -> HF config class table, and the GGUF defaults per architecture"
  [core/formats/hfconfig.c]="config.json model_type values (Gemma3TextConfig defaults, text_config unwrapping)"
  [core/ref/ref.h]="DP_ROPE_LLAMA3: the HF rope_type value \"llama3\""
  [core/ref/rope.c]="the HF rope_type value \"llama3\" (its formula)"
  [lua/l_math.c]="parses the HF rope_type value \"llama3\""
  [lua/main.c]="the usage text's example names a recipe file"
  [core/text/chat.c]="chat-template formats (named after the families that define them) and their detection from tokenizer_config / GGUF metadata"
  [core/text/chat.h]="the chat-template format enum"
  [core/text/tok_vocab.c]="GGUF tokenizer.ggml.pre values -> pre-tokenizer split regex"
  [core/text/tok_gguf.c]="GGUF tokenizer.ggml.model values (\"llama\" = SentencePiece, \"gpt2\" = byte-level) and what tokenizer.ggml.pre values imply"
)

pattern='gemma|llama|qwen|mistral|mixtral|phi[-_ ]?[0-9]'
found=0
checked=0
while IFS= read -r f; do
  checked=$((checked + 1))
  [[ -n "${allowed[$f]:-}" ]] && continue
  # gcc -fpreprocessed -E removes comments and nothing else (no includes, no macro expansion).
  hits=$(gcc -x c -fpreprocessed -dD -E -P "$f" 2>/dev/null | sed 's/llama\.cpp//Ig' | grep -inE "$pattern")
  if [[ -n "$hits" ]]; then
    echo "FAIL $f names a model family outside a file-format name table:"
    echo "$hits" | sed 's/^/    /'
    found=1
  fi
done < <(git ls-files 'core/*.c' 'core/*.h' 'gpu/*.c' 'gpu/*.h' 'lua/*.c' 'lua/*.h' 'shaders/*.comp' 'shaders/*.glsl' 2>/dev/null ||
         find core gpu lua shaders -name '*.[ch]' -o -name '*.comp' -o -name '*.glsl')

# The scan itself must be able to fail: a planted family branch is caught.
probe=$(mktemp --suffix=.c)
printf '/* Llama */\nint f(const char *a) { return a[0] == 0 || strcmp(a, "qwen3") == 0; }\n' >"$probe"
if ! gcc -x c -fpreprocessed -dD -E -P "$probe" 2>/dev/null | sed 's/llama\.cpp//Ig' | grep -qiE "$pattern"; then
  echo "FAIL the scan does not catch a planted family name"
  found=1
fi
rm -f "$probe"

if [[ $checked -lt 20 ]]; then echo "FAIL only $checked files scanned"; exit 1; fi
for f in "${!allowed[@]}"; do [[ -f "$f" ]] || echo "note: allow-listed $f does not exist (update the list)"; done
[[ $found -eq 0 ]] && echo "ok: $checked engine sources name no model family outside ${#allowed[@]} format tables"
exit $found
