#!/bin/sh
# The issue-3 demonstration runs, one after the other (they need the CPU): vanilla and random
# attention for a small LM (SOTU), a small translation model (bible-en-es) and a classifier
# (rotten-tomatoes). Outputs go to runs/issue3/<config>-<attention>/result.json.
set -e
for config in lm-sotu-small cls-rotten-small mt-bible-small; do
  for attention in vanilla random; do
    if [ -f "runs/issue3/$config-$attention/result.json" ]; then continue; fi
    start=$(date +%s)
    synthesizer train --config "$config" --attention "$attention" --out "runs/issue3/$config-$attention" --quiet --threads 1
    echo "$config $attention wall_s=$(( $(date +%s) - start ))"
  done
done
