#!/usr/bin/env bash
# scripts/device/h100-bench.sh: the GPU measurements of docs/BENCHMARKS.md (on the H100 until session 37, the
# H200 since; the name is kept for the run scripts that call it), run on the lent GPU machine
# from a checkout carrying build-h100/ (cmake -DDOPPLER_STATIC_DEPS=ON -DCMAKE_BUILD_TYPE=Release) and .gl/
# (the Vulkan loader debs). Results go to $OUT (JSON lines). Stages: STAGES="f16 llama quant" by default;
# also attn (f16 with the basic attention kernels, for comparison), q4km (Q4_K_M, fused path only) and late (the
# side prefetcher's late stages and hint prefetch_skip on Gemma 3 1B F16 with glu_down=on; session 39).
# The loader, doppler's environment and the synthetic models (`model`): scripts/device/env.sh.
set -u
. scripts/device/env.sh
STAGES=${STAGES:-"f16 llama quant"}
bench() {  # name model [extra...]
  local name=$1 model=$2; shift 2
  for m in decode prefill ttft; do
    timeout 200 $B recipes/bench/$m.lua --model "$model" --label "$name" "$@" >>"$OUT/$name.jsonl" 2>>"$OUT/err.txt"
  done
  python3 - "$OUT/$name.jsonl" <<'PY' || tail -3 "$OUT/$name.jsonl"
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["label"], d["mode"], "decode %.1f prefill %.0f ttft %.1f p50 %.2f submits %s gpu_ms/tok %s" % (
            d["decode_tok_s"] or 0, d["prefill_tok_s"], d["ttft_ms"], d["p50_ms"] or 0, d["submits_per_token"],
            d.get("gpu_ms_per_token")))
PY
}
# A rule of the fused quantised path against the old one (one hint), on Gemma 3 1B and Llama 3.2 1B Q4_K_M, in
# both layouts: labels LAYOUT-OLDLABEL and LAYOUT-auto (the defaults); with a 4th argument also the default path.
fused_rule_ab() {  # name old_label old_hint [default]
  local name=$1 old=$2 hint=$3 with_default=${4:-}
  model gemma-q4_k_m >/dev/null; model llama-q4_k_m >/dev/null
  local D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2 --no-profile"
  timeout 100 $B $D --model /tmp/g1b-q4_k_m.gguf --hint q_matmul=fused --label warm >/dev/null 2>>"$OUT/err.txt"
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    for l in flat row_wise; do
      timeout 100 $B $D --model $m --hint q_matmul=fused --hint q_layout=$l --hint $hint \
        --label $l-$old >>"$OUT/$name.jsonl" 2>>"$OUT/err.txt"
      timeout 100 $B $D --model $m --hint q_matmul=fused --hint q_layout=$l --label $l-auto >>"$OUT/$name.jsonl" 2>>"$OUT/err.txt"
    done
    [ -n "$with_default" ] && timeout 100 $B $D --model $m --label default >>"$OUT/$name.jsonl" 2>>"$OUT/err.txt"
  done
  python3 - "$OUT/$name.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1], d["label"], "decode %.1f" % (d["decode_tok_s"] or 0))
PY
}
model gemma >/dev/null
for s in $STAGES; do
  case $s in
    f16) bench gemma1b-f16 $G ;;
    llama) bench llama1b-f16 $(model llama) ;;
    quant)
      for q in q8_0 q4_k_m; do
        for path in fused dequant_f16; do bench gemma1b-$q-$path $(model gemma-$q) --hint q_matmul=$path; done
      done ;;
    issue7)  # the issue-7 shape: 128 new tokens after a 32-token prompt, Gemma 3 1B Q4_K_M and F16, Llama Q4_K_M
      model gemma-q4_k_m >/dev/null; model llama-q4_k_m >/dev/null
      # decode: three processes of one timed run each, not three runs in one process: with the side prefetcher a
      # process's decode varies by 2-3 % with what it draws (docs/BENCHMARKS.md 40g); the profile once
      for m in /tmp/g1b-q4_k_m.gguf $G /tmp/l1b-q4_k_m.gguf $L; do
        for p in 1 2 3; do
          np=--no-profile; [ $p = 1 ] && np=
          timeout 200 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 --runs 1 $np --label issue7 >>"$OUT/issue7.jsonl" 2>>"$OUT/err.txt"
        done
      done
      for m in /tmp/g1b-q4_k_m.gguf $G; do   # defaults (gemm_cm where the device has cooperative matrices)
        timeout 200 $B recipes/bench/prefill.lua --model $m --label issue7 >>"$OUT/issue7.jsonl" 2>>"$OUT/err.txt"
        timeout 200 $B recipes/bench/ttft.lua --model $m --label issue7 >>"$OUT/issue7.jsonl" 2>>"$OUT/err.txt"
      done
      timeout 200 $B recipes/bench/prefill.lua --model /tmp/g1b-q4_k_m.gguf --hint q_matmul=fused --label issue7-fused >>"$OUT/issue7.jsonl" 2>>"$OUT/err.txt"
      python3 - "$OUT/issue7.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["label"], d["model"].split("/")[-1], d["mode"], d["quant"], "decode %.1f prefill %.0f ttft %.1f submits %.3f readback %.2f" % (
            d["decode_tok_s"] or 0, d["prefill_tok_s"], d["ttft_ms"], d["submits_per_token"], d["readback_bytes_per_token"]))
PY
      ;;
    late)   # is the side kernel late in the processes that decode slower with it? (docs/BENCHMARKS.md, session 39:
            # Gemma 3 1B F16 with glu_down=on drew ~750 or ~708 tok/s per process); each prefetch_skip setting in
            # PROCS (5) fresh processes, alternating, with the side kernels' counts per step
      for i in $(seq ${PROCS:-5}); do
        for k in off finished begun; do
          timeout 60 $B recipes/bench/decode.lua --model $G --prompt-tokens 32 --tokens 128 --runs 2 --no-profile \
            --hint glu_down=on --hint prefetch_skip=$k --label "late skip=$k" >>"$OUT/late.jsonl" 2>>"$OUT/err.txt"
        done
      done
      python3 - "$OUT/late.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["label"], "run %d decode %.1f stages/tok %.2f late/tok %.2f skipped/tok %.2f" % (d["run"], d["decode_tok_s"],
              d["prefetch_stages_per_token"], d["prefetch_late_per_token"], d["prefetch_skipped_per_token"]))
PY
      ;;
    attn) bench gemma1b-f16-attn-basic $G --hint attention_decode=basic --hint attention_prefill=basic ;;
    q4km) model gemma-q4_k_m >/dev/null
          bench gemma1b-q4_k_m-fused /tmp/g1b-q4_k_m.gguf --hint q_matmul=fused ;;
    tests)   # correctness on the H100 (subgroup 32) before any timing
      for t in ${TESTS:-kernels gemm_cm attention_cm hints quant_linear gemv_q8 gemma3_fixtures families_fixtures gguf_fixtures quant_layout sampling gpu_loop side_prefetch fusion_plugin fuse_attn lm_head_fusion}; do
        timeout 300 $B tests/lua/test_$t.lua >"$OUT/t_$t.txt" 2>&1; echo "test_$t: $(tail -1 "$OUT/t_$t.txt")"
      done ;;
    sweep)   # hint sweeps, one process per combination
      H="$B recipes/bench/hints.lua --runs 2 --no-profile"
      $H --model $G --mode prefill --sweep matmul=auto,gemv >>"$OUT/sweep.jsonl" 2>>"$OUT/err.txt"
      $H --model $G --mode ttft --sweep matmul=auto,gemv >>"$OUT/sweep.jsonl" 2>>"$OUT/err.txt"
      for q in q4_k_m q8_0; do
        model gemma-$q >/dev/null
        $H --model /tmp/g1b-$q.gguf --mode decode --sweep q_layout=row_wise,column_wise,flat \
           --sweep q_matmul=fused,dequant_f16 >>"$OUT/sweep.jsonl" 2>>"$OUT/err.txt"
      done
      python3 - "$OUT/sweep.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1], d["mode"], d["hints"], "decode %.1f prefill %.0f ttft %.1f" % (
            d["decode_tok_s"] or 0, d["prefill_tok_s"], d["ttft_ms"]))
PY
      ;;
    qdecode)  # decode only (issue-7 shape), quantised Gemma: fused per layout against the f16 copy
      for q in ${QUANTS:-q4_k_m q8_0}; do
        model gemma-$q >/dev/null
        for h in "q_matmul=fused q_layout=row_wise" "q_matmul=fused q_layout=flat" "q_matmul=dequant_f16"; do
          hs=""; for kv in $h; do hs="$hs --hint $kv"; done
          timeout 200 $B recipes/bench/decode.lua --model /tmp/g1b-$q.gguf --prompt-tokens 32 --tokens 128 --runs 2 \
            $hs --label qdecode >>"$OUT/qdecode.jsonl" 2>>"$OUT/err.txt"
        done
      done
      python3 - "$OUT/qdecode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d["gpu_ms_per_kernel"]
        print(d["model"].split("/")[-1], d["hints"], "decode %.1f gpu_ms/tok %.3f gemv %.3f weights %.0f MB" % (
            d["decode_tok_s"] or 0, d["gpu_ms_per_token"], k.get("gemv", 0), d["weights_bytes"] / 1e6))
PY
      ;;
    qx)  # int8 activations in gemv_q (gemv_q_x; docs/BENCHMARKS.md 14b): the GEMV shapes, then fused decode
      model gemma-q4_k_m >/dev/null
      timeout 250 $B recipes/bench/gemv.lua --dtype q4_k,q6_k --hint q_matmul=fused --hint q_layout=flat \
        --sweep gemv_q_x=act,q8,q8x2 --table >"$OUT/gemv_qx.md" 2>>"$OUT/err.txt"
      for x in act q8 q8x2; do for l in flat row_wise; do
        timeout 100 $B recipes/bench/decode.lua --model /tmp/g1b-q4_k_m.gguf --prompt-tokens 32 --tokens 128 --runs 2 \
          --hint q_matmul=fused --hint q_layout=$l --hint gemv_q_x=$x --label fused-$x-$l >>"$OUT/qx.jsonl" 2>>"$OUT/err.txt"
      done; done
      timeout 100 $B recipes/bench/decode.lua --model /tmp/g1b-q4_k_m.gguf --prompt-tokens 32 --tokens 128 --runs 2 \
        --label default >>"$OUT/qx.jsonl" 2>>"$OUT/err.txt"
      python3 - "$OUT/qx.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d["gpu_ms_per_kernel"]
        print(d["label"], "decode %.1f gpu_ms/tok %.3f gemv_q %.3f lm_head_q %.3f" % (
            d["decode_tok_s"] or 0, d["gpu_ms_per_token"], k.get("gemv_q", 0), k.get("lm_head_q", 0)))
PY
      ;;
    qrows)  # gemv_q's rows per workgroup (docs/BENCHMARKS.md 15d): the old fixed 4 against the per-matrix rule
      fused_rule_ab qrows rows4 gemv_q_rows=4 default ;;
    qxauto)  # gemv_q_x=auto per matrix against act everywhere (the rule before session 9; docs/BENCHMARKS.md 16d)
      fused_rule_ab qxauto act gemv_q_x=act ;;
    ab)  # A/B of two builds in one run: $OLD (another doppler binary) against build-h100, issue-7 decode shape
      model gemma-q4_k_m >/dev/null
      for bin in ${OLD:-} $B; do
        for m in "$G" "/tmp/g1b-q4_k_m.gguf --hint q_matmul=fused --hint q_layout=flat" "/tmp/g1b-q4_k_m.gguf"; do
          timeout 200 $bin recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 --runs 2 \
            --label "$bin" >>"$OUT/ab.jsonl" 2>>"$OUT/err.txt"
        done
      done
      python3 - "$OUT/ab.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        if d["run"] != 1: continue
        k = d["gpu_ms_per_kernel"]
        print(d["label"], d["model"].split("/")[-1], d["hints"], "decode %.1f p50 %.3f gpu_ms/tok %.3f" % (
            d["decode_tok_s"] or 0, d["p50_ms"], d["gpu_ms_per_token"]))
PY
      ;;
    tune)  # doppler tune on Gemma 3 1B Q4_K_M (the issue-7 model), then the issue-7 decode with the tuned hints
      model gemma-q4_k_m >/dev/null
      timeout 400 $B tune --model /tmp/g1b-q4_k_m.gguf ${TUNE_ARGS:---quick} --json >"$OUT/tune.json" 2>"$OUT/tune.txt"
      tail -3 "$OUT/tune.txt"
      H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" "$OUT/tune.json")
      echo "tuned: $H"
      timeout 200 $B recipes/bench/decode.lua --model /tmp/g1b-q4_k_m.gguf --prompt-tokens 32 --tokens 128 $H \
        --label issue7-tuned >>"$OUT/issue7.jsonl" 2>>"$OUT/err.txt"
      tail -1 "$OUT/issue7.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('tuned decode %.1f tok/s p50 %.3f ms' % (d['decode_tok_s'], d['p50_ms']))"
      ;;
    *) bench "$s" $G ;;
  esac
done
