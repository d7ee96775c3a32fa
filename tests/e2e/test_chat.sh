#!/usr/bin/env bash
# --chat: a multi-turn conversation through the chat template, reusing the KV cache across turns,
# with /stats, /reset, unknown commands and end of input. The model is a synthetic Gemma 3 at tiny
# shapes with the real Gemma 3 tokenizer (262144 ids), so templates and tokenisation are real.
set -u
BIN=${DOPPLER_BIN:-build/doppler}
FIX=${DOPPLER_FIXTURES:-tests/fixtures}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0 pass=0
check() { if eval "$2"; then pass=$((pass + 1)); echo "ok     $1"; else fail=$((fail + 1)); echo "FAILED $1"; sed 's/^/  | /' "$TMP/out" "$TMP/err" | head -30; fi; }

sed 's/"vocab_size": 512/"vocab_size": 262144/' "$FIX/models/gemma3-tiny/config.json" >"$TMP/config.json"
"$BIN" synth --config "$TMP/config.json" --tokenizer "$FIX/tokenizers/gemma3.tokenizer.json.gz" \
  --out "$TMP/m" --dtype f16 --std 0.5 --seed 7 2>"$TMP/err" >"$TMP/out"
check "synthetic chat model" "[ -f '$TMP/m/model.safetensors' ]"

printf 'Hello there\n/stats\nAnd a second question?\n/stats\n/bogus\n/reset\n/stats\n' |
  "$BIN" recipes/gemma3.lua --model "$TMP/m" --chat --max-tokens 5 --temperature 0.8 --seed 3 >"$TMP/out" 2>"$TMP/err"
st=$?
check "chat exits 0 at end of input" "[ $st -eq 0 ]"
# First turn: <bos><start_of_turn>user\nHello there<end_of_turn>\n<start_of_turn>model\n -> 11 ids, + reply.
stats1=$(grep -m1 '^\[context' "$TMP/out")
stats2=$(grep '^\[context' "$TMP/out" | sed -n 2p)
stats3=$(grep '^\[context' "$TMP/out" | sed -n 3p)
ctx1=$(echo "$stats1" | sed -E 's/^\[context ([0-9]+).*/\1/')
ctx2=$(echo "$stats2" | sed -E 's/^\[context ([0-9]+).*/\1/')
new2=$(echo "$stats2" | sed -E 's/.*after ([0-9]+) new prompt tokens.*/\1/')
check "first turn: 11 template ids + reply in the context" "[ -n '$ctx1' ] && [ '$ctx1' -ge 11 ] && [ '$ctx1' -le 16 ]"
check "second turn feeds only the new turn (KV cache reused)" "[ -n '$new2' ] && [ '$new2' -lt '$ctx2' ] && [ \$(( ctx1 + new2 )) -le '$ctx2' ]"
check "unknown command is reported" "grep -q 'unknown command /bogus' '$TMP/out'"
check "/reset clears the context" "grep -q 'conversation cleared' '$TMP/out' && echo '$stats3' | grep -q '^\[context 0 /'"
# The GPU-resident loop (decode_chunk > 1: chunks of 4 here, several per reply) and the step-by-step loop
# (decode_chunk=1) write the same replies, turn after turn: sampling, stop ids and what the cache holds after
# each reply (the loop leaves a reply's last id unfed when the token limit ends it) agree.
conv='Hello there\nAnd a second question?\nA third, longer one, to see more ids?\n'
for c in 4 1; do
  printf "$conv" | "$BIN" recipes/gemma3.lua --model "$TMP/m" --chat --max-tokens 11 --temperature 0.8 --seed 5 \
    --hint decode_chunk=$c >"$TMP/chat$c" 2>"$TMP/err"
done
cp "$TMP/chat4" "$TMP/out"
check "the GPU loop's replies are the step-by-step loop's" "[ -s '$TMP/chat4' ] && cmp -s '$TMP/chat4' '$TMP/chat1'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
