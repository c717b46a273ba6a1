#!/usr/bin/env bash
# The GPU check: the suite's CUDA tests, then the layer and the model benchmarks on CUDA, every
# output under one folder.
#
#   scripts/gpu_check.sh [OUT_DIR]      (default: gpu-check/; PYTHON=/path/to/python picks the interpreter)
#
# Needs a CUDA GPU and a CUDA build of torch; installs the project (pip install -e '.[train,dev]')
# where `import synthesizer` fails. Without CUDA it stops at once: one line, exit status 2.
# About 5 minutes on one recent GPU. Writes to OUT_DIR: env.txt, tests.txt and tests.xml (pytest),
# layer/ and model/ (each benchmark's results.jsonl, results.csv, results.md, run.json, plots),
# layer.md and model.md (the printed tables), times.txt (seconds per step).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-gpu-check}
if [[ -n ${PYTHON:-} ]]; then
    py=$PYTHON
elif [[ -x .venv/bin/python ]]; then
    py=.venv/bin/python
else
    py=python3
fi
start=$SECONDS

fail() {
    echo "gpu_check: error: $*" >&2
    exit 2
}

cuda_or_fail() {
    "$py" - <<'EOF' || fail "no CUDA device: this torch sees none (torch.cuda.is_available() is False); run on a machine with a CUDA GPU and a CUDA build of torch"
import sys
import torch
sys.exit(0 if torch.cuda.is_available() else 1)
EOF
}

command -v "$py" >/dev/null || fail "no Python interpreter at '$py' (set PYTHON=...)"
# Before installing anything: a torch already here that sees no GPU will not see one afterwards.
if "$py" -c 'import torch' 2>/dev/null; then
    cuda_or_fail
fi
if ! "$py" -c 'import synthesizer' 2>/dev/null; then
    echo "# installing the project: $py -m pip install -e '.[train,dev]'" >&2
    "$py" -m pip install -q -e '.[train,dev]'
fi
cuda_or_fail

mkdir -p "$out"
: >"$out/times.txt"
step() {  # step NAME: seconds since the previous step, to times.txt
    local now=$SECONDS
    echo "$1 $((now - ${last:-$start})) s" | tee -a "$out/times.txt" >&2
    last=$now
}
"$py" - >"$out/env.txt" <<'EOF'
import platform
import torch
props = torch.cuda.get_device_properties(0)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
print(f"GPU {props.name}, {props.total_memory / 2**30:.0f} GiB, compute capability {props.major}.{props.minor}")
print(f"Python {platform.python_version()}, {platform.platform()}")
EOF
cat "$out/env.txt" >&2

# 1. Every CUDA test of the suite: their names contain "cuda" (tests/test_attention_ops_sdpa_bias.py).
tests_status=0
"$py" -m pytest -q -p no:cacheprovider -rs -k cuda tests --junitxml "$out/tests.xml" 2>&1 | tee "$out/tests.txt" ||
    tests_status=$?
step tests

# 2. The attention layers (candidate paths of the random mixtures included), forward and
#    forward+backward, then peak memory (one fresh process per layer).
"$py" -m synthesizer.bench attention --device cuda --batch 8 --d-model 512 --heads 8 --seqs 1024 2048 4096 \
    --repeats 5 --warmup 2 --out "$out/layer" >"$out/layer.md"
step layer-benchmark

# 3. Training throughput of the LM and the classifier at batch 8.
"$py" -m synthesizer.bench model --device cuda --batches 8 --out "$out/model" >"$out/model.md"
step model-benchmark

echo "gpu_check: done in $((SECONDS - start)) s; outputs in $out/" | tee -a "$out/times.txt"
if ((tests_status != 0)); then
    echo "gpu_check: the CUDA tests failed (pytest exit status $tests_status): see $out/tests.txt" >&2
    exit 1
fi
