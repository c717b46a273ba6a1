"""The packages' public names, imported on first use (lazy.py, PEP 562), are the objects an eager import gave."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

PACKAGES = {  # package -> {public name: the module it comes from}
    "synthesizer": {"AttentionCache": "synthesizer.attention.cache", "build_mixer": "synthesizer.attention.factory",
                    "parse_kind": "synthesizer.attention.kinds", "register_component": "synthesizer.attention.registry",
                    "SynthesizerAttention": "synthesizer.attention.synthesizer"},
    "synthesizer.attention": {"COMPONENTS": "synthesizer.attention.kinds", "Kind": "synthesizer.attention.kinds",
                              "build_mixer": "synthesizer.attention.factory"},
    "synthesizer.data": {"Corpus": "synthesizer.data.records", "Tokenizer": "synthesizer.data.tokenizer",
                         "lm_blocks": "synthesizer.data.batching", "load_corpus": "synthesizer.data.sources"},
    "synthesizer.comparison": {"Options": "synthesizer.comparison.study", "Study": "synthesizer.comparison.study",
                               "resolve": "synthesizer.comparison.study", "run_study": "synthesizer.comparison.run",
                               "run_comparison": "synthesizer.comparison.run"},
    "synthesizer.report": {"build_groups": "synthesizer.report.groups", "render": "synthesizer.report.summary"},
}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_each_public_name_is_its_modules_object(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        assert name in dir(module) and getattr(module, name) is not None
    for name, source in PACKAGES[package].items():
        assert name in module.__all__ and getattr(module, name) is getattr(importlib.import_module(source), name)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        module.nope


def test_the_version_and_the_names_of_the_top_package():
    import synthesizer

    assert synthesizer.__version__ == "0.3.0.dev0"
    assert synthesizer.__all__ == ["AttentionCache", "SynthesizerAttention", "build_mixer", "parse_kind",
                                   "register_component", "__version__"]


def test_an_export_named_like_a_submodule_is_the_export():
    """report.render is the summary's function, as the eager import made it, even once the report's render
    module (imported by the document) is loaded."""
    code = ("import synthesizer.report.document, synthesizer.report as r, synthesizer.report.summary as s\n"
            "from synthesizer.report.render import to_html\n"
            "print(r.render is s.render, callable(to_html))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["True", "True"], proc.stderr


def test_a_name_is_imported_when_first_read(tmp_path, monkeypatch):
    package = tmp_path / "lazypkg"
    package.mkdir()
    (package / "__init__.py").write_text("from synthesizer.lazy import lazy_exports\n"
                                         "__getattr__, __dir__ = lazy_exports(__name__, {'VALUE': 'heavy'})\n")
    (package / "heavy.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazypkg", raising=False)
    monkeypatch.delitem(sys.modules, "lazypkg.heavy", raising=False)
    lazypkg = importlib.import_module("lazypkg")
    assert "lazypkg.heavy" not in sys.modules and "VALUE" in dir(lazypkg)
    assert lazypkg.VALUE == 42 and "lazypkg.heavy" in sys.modules and vars(lazypkg)["VALUE"] == 42
