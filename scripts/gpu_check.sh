#!/usr/bin/env bash
# The GPU check: the suite's CUDA tests, every CUDA path of the attention layer against the
# reference, forward+backward time and peak memory of the compared layers, and the LM training
# benchmark, every output under one folder. What it measures and how to read it: docs/gpu.md.
#
#   scripts/gpu_check.sh [OUT_DIR]      (default: gpu-check/; PYTHON=/path/to/python picks the interpreter)
#
# Needs a CUDA GPU and a CUDA build of torch; installs the project (pip install -e '.[train,dev,gpu]')
# where `import synthesizer` fails. Without CUDA it stops at once: one line, exit status 2.
# Sized for under 10 minutes on one H100; each part has its own time limit (seconds, below), and a
# part that reaches it is cut, recorded in times.txt, and the next part runs. Writes to OUT_DIR:
# env.txt; tests.txt and tests.xml (pytest: the CUDA tests and the triton kernel's tests on CUDA);
# check.jsonl and check.md (every CUDA path against the reference, float32 and bfloat16, NaN check);
# timing.jsonl and timing.md (batch 8, d_model 512, 8 heads, seq 1024-8192: ms, MiB, ratios to
# vanilla on SDPA, the targets); model/ and model.md (the LM benchmark); times.txt (seconds per part).
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
    echo "# installing the project: $py -m pip install -e '.[train,dev,gpu]'" >&2
    "$py" -m pip install -q -e '.[train,dev,gpu]'
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

# Time limits of the parts (seconds): 150 + 150 + 240 + 90 = 630 at most, plus set-up.
TESTS_S=${TESTS_S:-150} CHECK_S=${CHECK_S:-150} TIME_S=${TIME_S:-240} MODEL_S=${MODEL_S:-90}
status=0
part() {  # part NAME LIMIT CMD...: run CMD under LIMIT seconds; a failure or a cut is recorded, not fatal
    local name=$1 limit=$2
    shift 2
    local rc=0
    timeout --signal=INT --kill-after=20 "$limit" "$@" || rc=$?
    if ((rc == 124 || rc == 130)); then
        echo "gpu_check: $name cut at its limit of $limit s" | tee -a "$out/times.txt" >&2
    elif ((rc != 0)); then
        echo "gpu_check: $name failed (exit status $rc)" | tee -a "$out/times.txt" >&2
    fi
    ((rc == 0)) || status=1
    step "$name"
}

# 1. Every CUDA test of the suite (their names contain "cuda") and the triton kernel's tests, which
#    run compiled on CUDA tensors when a GPU is present.
part tests "$TESTS_S" bash -c '"$0" -m pytest -q -p no:cacheprovider -rs -k "cuda or triton" tests \
    --junitxml "$1/tests.xml" 2>&1 | tee "$1/tests.txt"; exit "${PIPESTATUS[0]}"' "$py" "$out"

# 2. Every CUDA path (sdpa_bias, triton, flex, fused, shared, blockwise) against the reference:
#    float32 and bfloat16, bidirectional and causal, padded, NaN check.
part check "$CHECK_S" "$py" scripts/gpu_paths.py check --out "$out"

# 3. Forward+backward time and peak memory at batch 8, d_model 512, 8 heads, seq 1024-8192: vanilla
#    (SDPA), random, dense, random+vanilla on each CUDA path, random+dense, dense+vanilla. The
#    script skips the rows left when its own budget runs out, so its table is always written.
part timing "$TIME_S" "$py" scripts/gpu_paths.py time --out "$out" --budget-s $((TIME_S - 40))

# 4. The LM's training throughput at batch 8 (the kinds compared above).
part model "$MODEL_S" bash -c '"$0" -m synthesizer.bench model --device cuda --tasks lm --batches 8 \
    --kinds vanilla random dense random+vanilla random+dense dense+vanilla --baselines \
    --out "$1/model" >"$1/model.md"' "$py" "$out"

echo "gpu_check: done in $((SECONDS - start)) s; outputs in $out/" | tee -a "$out/times.txt"
if ((status != 0)); then
    echo "gpu_check: some part failed or was cut: see $out/times.txt, tests.txt and check.md" >&2
    exit 1
fi
