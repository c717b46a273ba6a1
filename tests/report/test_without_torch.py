"""The report needs no torch at run time: a committed report renders through the command line in a Python
where importing torch fails (tests/test_layers.py reads the import statements; this runs them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "results" / "lm-quick"  # a small committed report (its results.json is what renders)

# Imported by Python at start-up from PYTHONPATH: any later import of torch fails, and says so on stderr.
NO_TORCH = '''
import sys


class NoTorch:
    """A finder that refuses torch and its submodules."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "torch":
            print(f"blocked: import {name}", file=sys.stderr)
            raise ImportError(f"torch is not importable here ({name})")
        return None


sys.meta_path.insert(0, NoTorch())
'''


def _python_without_torch(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_TORCH)
    path = os.pathsep.join([str(site), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


def test_the_no_torch_python_refuses_torch(tmp_path):
    """The check itself: in that Python, importing torch fails."""
    proc = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, timeout=60,
                          env=_python_without_torch(tmp_path))
    assert proc.returncode == 1 and "blocked: import torch" in proc.stderr and "ImportError" in proc.stderr


def test_the_report_and_the_kinds_names_import_without_torch(tmp_path):
    code = "import synthesizer, synthesizer.attention.names, synthesizer.report.tables, synthesizer.report.summary"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=_python_without_torch(tmp_path))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_committed_report_renders_through_the_command_line_without_torch(tmp_path):
    copy = tmp_path / "lm-quick"
    copy.mkdir()
    shutil.copy(REPORT / "results.json", copy / "results.json")
    proc = subprocess.run([sys.executable, "-m", "synthesizer", "compare", "--render", str(copy)],
                          capture_output=True, text=True, timeout=300, env=_python_without_torch(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "blocked: import" not in proc.stderr, proc.stderr
    report = (copy / "report.md").read_text()
    committed = (REPORT / "report.md").read_text()
    assert report.splitlines()[0] == committed.splitlines()[0] == "# Synthesizer comparison: lm (quick size)"
    assert "## The paper's claims" in report and "| vanilla |" in report
    assert (copy / "report.html").is_file() and (copy / "lm-sotu-subset-curves.png").stat().st_size > 1000
    assert len(json.loads((copy / "results.json").read_text())["runs"]) == len(
        json.loads((REPORT / "results.json").read_text())["runs"])
