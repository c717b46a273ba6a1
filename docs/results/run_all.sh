#!/bin/sh
# The committed comparisons, one after the other (each trains two runs at a time, one thread each,
# on a 2-core machine), then their reports re-rendered into docs/results/<preset>/ (results.json,
# report.md, report.html, plots; the run folders with their checkpoints stay in runs/results/).
# Interrupted? Run it again: finished runs are read back, half-trained ones resume.
set -e
out=runs/results
synthesizer compare --preset lm --size quick --seeds 3 --jobs 2 --out $out/lm
synthesizer compare --preset mt --size quick --steps 400 --jobs 2 --out $out/mt
synthesizer compare --preset summarization --size quick --steps 400 --jobs 2 --out $out/summarization
synthesizer compare --preset dialogue --size quick --steps 400 --jobs 2 --out $out/dialogue
synthesizer compare --preset classification --size quick --seeds 3 --jobs 2 --out $out/classification
for preset in lm mt summarization dialogue classification; do
  synthesizer compare --render $out/$preset --out docs/results/$preset
done
