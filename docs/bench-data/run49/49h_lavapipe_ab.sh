#!/bin/bash
# Session 42, this machine (lavapipe, 2 cores): the CPU-device attention rule's cost, as run (the script was
# /tmp/lim/ab.sh). Three lowerings of lua/lib/doppler/lower.lua, alternating, two rounds, each with
# attention_prefill.comp's innermost loops unrolled (db6f49d's shader):
#   old       2b912c7's lower.lua (attention_prefill at any length, one decode chunk on a CPU device)
#   new2      the bound with short chunks (min_chunk one round), a step of the session, not committed
#   minchunk  db6f49d's rule (chunks as long as the bound allows), committed
# The default model of scripts/setup.sh, a 700-token prompt of random ids (python3 random, seed 1), 16 tokens.
# Output as run: 49h_lavapipe_ab.txt. Needs lower_{new2,minchunk}.lua copies in /tmp/lim.
cd "$(dirname "$0")/../../.."
python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1000,200000)) for _ in range(700)))" > /tmp/lim/ids700.txt
M=models/synthetic/gemma-3-270m
for round in 1 2; do
  for v in minchunk new2 old; do
    case $v in
      old) git show 2b912c7:lua/lib/doppler/lower.lua > lua/lib/doppler/lower.lua ;;
      *) cp /tmp/lim/lower_$v.lua lua/lib/doppler/lower.lua ;;
    esac
    echo "== $v round $round"
    ./build/doppler recipes/gemma3.lua --model $M --ids $(cat /tmp/lim/ids700.txt) --max-tokens 16 --print-ids 2>&1 | tail -1
  done
done
git checkout -- lua/lib/doppler/lower.lua
