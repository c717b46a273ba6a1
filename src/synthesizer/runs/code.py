"""Which code a run was trained (or a report rendered) with: the package version and, in a git checkout,
the commit and whether the package's tracked files differ from it.

``{"version": "0.3.0.dev0", "commit": "7c7f068...", "modified": False}``; outside a checkout (an installed
wheel) ``commit`` and ``modified`` are None. "Modified" looks at the files that decide what a run trains,
``src/`` and ``pyproject.toml``, not at the documentation. Standard library only: the experiment runner and
the report both use it.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "synthesizer-pytorch"
# src/synthesizer/runs/code.py -> the checkout holding src/
CHECKOUT = Path(__file__).resolve().parents[3]
TRACKED = ("src", "pyproject.toml")  # what decides the code a run trains with


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def package_version() -> str | None:
    """The version of the running package (its __init__'s, which pyproject.toml repeats)."""
    init = Path(__file__).resolve().parents[1] / "__init__.py"
    for line in init.read_text(encoding="utf-8").splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def code_provenance() -> dict:
    """``{"version", "commit", "modified"}`` of the code running now (see the module's docstring)."""
    version = package_version()
    if not (CHECKOUT / ".git").exists():
        return {"version": version, "commit": None, "modified": None}
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no", "--", *TRACKED)
    return {"version": version, "commit": commit.strip() if commit else None,
            "modified": None if status is None else bool(status.strip())}
