#!/usr/bin/env bash
# The doppler command line as a user meets it: --help everywhere, the REPL, script errors, and
# bad input (each must give a clear message naming the cause and a non-zero exit, never a crash).
set -u
BIN=${DOPPLER_BIN:-build/doppler}
FIX=${DOPPLER_FIXTURES:-tests/fixtures}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0

ok()   { pass=$((pass + 1)); echo "ok     $1"; }
bad()  { fail=$((fail + 1)); echo "FAILED $1"; [ -f "$TMP/err" ] && sed 's/^/  | /' "$TMP/err" | head -20; }

# expect NAME STATUS PATTERN -- CMD...: exit status STATUS ("nz" = any non-zero) and PATTERN in stdout+stderr
expect() {
  local name=$1 want=$2 pat=$3; shift 4
  "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local got=$?
  cat "$TMP/out" >>"$TMP/err"
  if grep -q "AddressSanitizer\|runtime error:\|Segmentation\|core dumped" "$TMP/err"; then bad "$name (crash/sanitizer)"; return; fi
  if [ "$want" = nz ] && [ $got -eq 0 ]; then bad "$name (exit 0, expected failure)"; return; fi
  if [ "$want" != nz ] && [ $got -ne "$want" ]; then bad "$name (exit $got, expected $want)"; return; fi
  if ! grep -qE -- "$pat" "$TMP/err"; then bad "$name (no '$pat' in output)"; return; fi
  ok "$name"
}

expect "--help" 0 "usage: doppler" -- "$BIN" --help
expect "--version" 0 "doppler [0-9]" -- "$BIN" --version
for sub in devices shaders inspect tokenize synth run convert; do
  if [ "$sub" = convert ] && [ ! -f lua/lib/doppler/cmd/convert.lua ]; then continue; fi
  expect "$sub --help" 0 "usage" -- "$BIN" $sub --help
done
expect "recipe --help" 0 "--max-tokens" -- "$BIN" recipes/gemma3.lua --help
expect "unknown subcommand" nz "unknown subcommand 'frobnicate'" -- "$BIN" frobnicate
expect "unknown global option" nz "unknown option" -- "$BIN" --frob
expect "missing script" nz "cannot open 'nope/x.lua'" -- "$BIN" nope/x.lua

# ---- the REPL: values printed, multi-line input, errors shown without leaving --------------
printf 'x = 6 * 7\nx\nfor i = 1, 2 do\n  print("line", i)\nend\nerror("boom")\n"still here"\n' |
  "$BIN" >"$TMP/out" 2>"$TMP/err"
st=$?
if [ $st -eq 0 ] && grep -qx 42 "$TMP/out" && grep -q "line	2" "$TMP/out" && grep -q "boom" "$TMP/err" &&
   grep -qx "still here" "$TMP/out"; then ok "REPL"; else cat "$TMP/out" >>"$TMP/err"; bad "REPL (status $st)"; fi

# ---- a Lua error in a script: traceback, status 1 ---------------------------------------------
printf 'local function f() error("recipe broke") end\nf()\n' >"$TMP/broken.lua"
expect "Lua error -> traceback, status 1" 1 "broken.lua:1: recipe broke" -- "$BIN" "$TMP/broken.lua"
grep -q "stack traceback" "$TMP/err" || bad "Lua error has a traceback"

# ---- no Vulkan driver -------------------------------------------------------------------------
expect "no Vulkan device" nz "mesa-vulkan-drivers" -- env VK_ICD_FILENAMES="$TMP/none.json" VK_DRIVER_FILES="$TMP/none.json" "$BIN" devices

# ---- out of device memory: a clear error, nothing leaked (ASan build checks leaks) ------------
printf 'local d = require("doppler").device()\nlocal t = d:tensor{dtype="f32", shape={1024, 1024, 1024, 64}}\n' >"$TMP/oom.lua"
expect "out of device memory" 1 "out of device memory|exceeds|too large|heap" -- "$BIN" "$TMP/oom.lua"

# ---- generation: bad input --------------------------------------------------------------------
M="$FIX/models/gemma3-tiny"
expect "unknown hint lists the valid ones" nz "unknown hint 'bogus'; valid hints: .*precision" -- \
  "$BIN" recipes/gemma3.lua --model "$M" --ids 1,2 --hint bogus=1
expect "bad hint value lists the valid ones" nz "precision=f64 is not valid; valid values: default, f32" -- \
  "$BIN" recipes/gemma3.lua --model "$M" --ids 1,2 --hint precision=f64
expect "unknown option" nz "unknown option '--bogus'" -- "$BIN" recipes/gemma3.lua --model "$M" --bogus
# a recipe run reports its command line's errors as `doppler run` does: the message, no Lua traceback
grep -q "stack traceback" "$TMP/err" && bad "unknown option: no traceback on a recipe's command line"
# DOPPLER_KERNEL_STATS=1: each new pipeline's driver statistics, or (lavapipe has no
# VK_KHR_pipeline_executable_properties) one line saying there are none; generation runs either way
expect "DOPPLER_KERNEL_STATS=1" 0 "doppler: kernel stats: attention_decode .*local [0-9]+x1x1:|has no VK_KHR_pipeline_executable_properties; no kernel statistics" -- \
  env DOPPLER_KERNEL_STATS=1 "$BIN" recipes/gemma3.lua --model "$M" --ids 1,2 --max-tokens 2 --quiet
# The speed report: plans compiled on first use are reported apart from the decoding they precede.
expect "speed report: compile time apart" 0 \
  "3 prompt tokens, 20 generated; time to first token [0-9.]+ ms, [0-9.]+ of it compiling plans; [0-9.]+ tok/s decode, after [0-9.]+ ms compiling its plans" -- \
  "$BIN" run --model "$M" --ids 2,5,7 --max-tokens 20
# A prompt of several prefill passes shows its progress where stderr is a terminal (script(1) gives it one):
# one line, rewritten after each pass; none with --quiet, none where stderr is a file.
expect "prefill progress on a terminal" 0 "prefill: 4/10 tokens.*prefill: 8/10 tokens.*prefill: 10/10 tokens" -- \
  script -qec "$BIN run --model $M --ids 1,2,3,4,5,6,7,8,9,10 --hint prefill_chunk=4 --max-tokens 2" /dev/null
script -qec "$BIN run --model $M --ids 1,2,3,4,5,6,7,8,9,10 --hint prefill_chunk=4 --max-tokens 2 --quiet" \
  /dev/null >"$TMP/out" 2>&1 </dev/null
st=$?
if [ $st -eq 0 ] && ! grep -q "prefill:" "$TMP/out"; then ok "no prefill progress with --quiet"; else bad "prefill progress with --quiet (status $st)"; fi
"$BIN" run --model "$M" --ids 1,2,3,4,5,6,7,8,9,10 --hint prefill_chunk=4 --max-tokens 2 >"$TMP/out" 2>"$TMP/err" </dev/null
st=$?
if [ $st -eq 0 ] && grep -q "10 prompt tokens" "$TMP/err" && ! grep -q "prefill:" "$TMP/err"; then
  ok "no prefill progress where stderr is a file"; else bad "prefill progress where stderr is a file (status $st)"; fi
expect "prompt longer than the context" nz "exceed the context of 4" -- \
  "$BIN" recipes/gemma3.lua --model "$M" --ids 1,2,3,4,5,6 --hint context=4 --quiet
expect "token id outside the vocabulary" nz "token id 999999 is outside the vocabulary" -- \
  "$BIN" recipes/gemma3.lua --model "$M" --ids 1,999999 --quiet
expect "--prompt without a tokenizer" nz "no tokenizer found" -- \
  "$BIN" recipes/gemma3.lua --model "$M" --prompt "hello" --quiet
expect "missing model path" nz "$TMP/nowhere" -- "$BIN" recipes/gemma3.lua --model "$TMP/nowhere" --ids 1
grep -q "stack traceback" "$TMP/err" && bad "missing model path: no traceback on a recipe's command line"
expect "no prompt" nz "give --prompt TEXT, --ids LIST or --chat" -- "$BIN" recipes/gemma3.lua --model "$M" --quiet
grep -q "stack traceback" "$TMP/err" && bad "no prompt: no traceback on a recipe's command line"

# A config whose architecture no recipe handles.
mkdir -p "$TMP/alien" && sed 's/Gemma3ForCausalLM/AlienForCausalLM/; s/gemma3_text/alien/' "$M/config.json" >"$TMP/alien/config.json"
cp "$M/model.safetensors" "$TMP/alien/"
if [ -f lua/lib/doppler/cmd/run.lua ]; then
  expect "architecture no recipe handles" nz "AlienForCausalLM.*not handled by any recipe" -- "$BIN" run --model "$TMP/alien" --ids 1,2
  # the message names the model, not a line of the Lua library
  expect "doppler run: missing model path" nz "^doppler run: $TMP/nowhere: " -- "$BIN" run --model "$TMP/nowhere" --ids 1
fi

# Missing and mis-shaped weights: written from the fixture with one tensor dropped / reshaped.
cat >"$TMP/mangle.lua" <<LUA
local d = require "doppler"
local src = d.open_model("$M")
for _, mode in ipairs({"missing", "shape"}) do
  local ts = {}
  for _, t in ipairs(src:tensors()) do
    local name, shape = t.name, t.shape
    if not (mode == "missing" and name == "model.layers.2.mlp.up_proj.weight") then
      if mode == "shape" and name == "model.layers.1.self_attn.k_proj.weight" then shape = { shape[1] * 2, shape[2] // 2 } end
      ts[#ts + 1] = { name = name, dtype = t.dtype, shape = shape, init = { "normal", 0.02 } }
    end
  end
  os.execute("mkdir -p '$TMP/" .. mode .. "' && cp '$M/config.json' '$TMP/" .. mode .. "/'")
  d.write_safetensors("$TMP/" .. mode .. "/model.safetensors", ts, { seed = 1 })
end
LUA
"$BIN" "$TMP/mangle.lua" || bad "writing mangled models"
expect "missing weight is named" nz "missing tensor model.layers.2.mlp.up_proj.weight" -- \
  "$BIN" recipes/gemma3.lua --model "$TMP/missing" --ids 1,2 --quiet
expect "mis-shaped weight is named" nz "model.layers.1.self_attn.k_proj.weight has shape \[64, 32\]" -- \
  "$BIN" recipes/gemma3.lua --model "$TMP/shape" --ids 1,2 --quiet

# Truncated model file.
mkdir -p "$TMP/trunc" && cp "$M/config.json" "$TMP/trunc/" && head -c 3000 "$M/model.safetensors" >"$TMP/trunc/model.safetensors"
expect "truncated safetensors names the file" nz "trunc/model.safetensors" -- \
  "$BIN" recipes/gemma3.lua --model "$TMP/trunc" --ids 1,2 --quiet
expect "inspect of a truncated file" nz "trunc/model.safetensors" -- "$BIN" inspect "$TMP/trunc"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
