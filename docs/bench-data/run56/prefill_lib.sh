# docs/bench-data/run56/prefill_lib.sh: what run 56's prefill scripts (56a, 56c, 56e) share, sourced after
# scripts/device/env.sh. Needs RUN (the run's name: its files are $OUT/${RUN}_*) and the script's log().
#   run LABEL MODEL-PATH PROMPT [hints...]   one fresh process of recipes/bench/prefill.lua (context 16384 past 4000
#                                            tokens), its JSON line appended to $OUT/${RUN}_prefill.jsonl
#   cfg NAME                                 the hints of a configuration name sSrRkK (split, row tiles, keys per
#                                            tile; auto: none)
#   prefill_summary                          one line per run of $OUT/${RUN}_prefill.jsonl into $OUT/${RUN}_summary.txt:
#                                            tok/s, TTFT, and the profiled pass's attention GPU ms of its total
run() {
  local lab=$1 path=$2 pt=$3; shift 3
  local h=(); for x in "$@"; do h+=(--hint $x); done
  [ $pt -gt 4000 ] && h+=(--hint context=16384)
  timeout 60 $B recipes/bench/prefill.lua --model $path --prompt-tokens $pt --tokens 4 --profile-tokens 4 --runs 2 \
    --warmup 0 --warmup-ms 0 "${h[@]}" --label "$lab" >> $OUT/${RUN}_prefill.jsonl 2>>$OUT/${RUN}_err.txt
  log "$lab rc=$?"
}
cfg() {
  [ $1 = auto ] && return
  echo "attention_prefill_cm_split=$(echo $1 | sed 's/s\([0-9]*\)r.*/\1/') attention_prefill_cm_rows=$(echo $1 | sed 's/.*r\([0-9]*\)k.*/\1/') attention_prefill_cm_keys=${1##*k}"
}
prefill_summary() {
  python3 - $OUT/${RUN}_prefill.jsonl > $OUT/${RUN}_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    k = d.get("prefill_gpu_ms_per_kernel") or {}
    a = sum(v for n, v in k.items() if n.startswith("attention"))
    print("%-24s prefill %8.0f tok/s  ttft %8.1f ms  attention %8.2f ms of %8.2f GPU ms" % (
        d["label"], d["prefill_tok_s"], d["ttft_ms"], a, d.get("prefill_gpu_ms") or 0))
PY
}
