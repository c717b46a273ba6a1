"""scripts/triton_compile.py: the triton kernels compile to GPU code for an H100 (sm_90) on a machine
without a GPU (triton's compiler and the ptxas its wheel ships), within its shared memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[2]


def test_kernels_compile_for_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the compiler, not the interpreter
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # a real compile, and nothing left in the user's cache
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "triton_compile.py"), "--dtypes", "bf16", "--widths", "64"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 6 and all(line.startswith("ok") for line in lines), done.stdout
    assert {line.split()[1] for line in lines} == {"forward", "backward_kv", "backward_q"}
