"""The missing-module -> extra map, against pyproject.toml."""

import sys
from pathlib import Path

import pytest

from synthesizer.errors import report_errors
from synthesizer.extras import DISTRIBUTION, EXTRAS, extra_for, install_command, missing_extra_message, require


def test_extras_and_distribution_match_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == DISTRIBUTION
    assert set(EXTRAS) == set(pyproject["project"]["optional-dependencies"])
    assert install_command("hub") == "pip install 'synthesizer-pytorch[hub]'"
    with pytest.raises(ValueError, match="unknown extra 'nope'; allowed: train, hub, bench, dev, hf, eval, log, gpu, docs"):
        install_command("nope")


def test_extra_for_a_module():
    assert extra_for("safetensors.torch") == "train" and extra_for("datasets") == "hub"
    assert extra_for("matplotlib.pyplot") == "train" and extra_for("matplotlib", prefer="bench") == "bench"
    assert extra_for("yaml", prefer="bench") == "train"  # prefer only picks among the extras providing it
    assert extra_for("torch") is None and extra_for("synthesizer.nope") is None


def _reraised(error: Exception) -> Exception:
    """``error`` re-raised with a friendlier message, ``from None``, as the tokenizer and hub loaders do."""
    try:
        try:
            raise error
        except ImportError:
            raise ImportError("the tokenizer needs Hugging Face `tokenizers`") from None
    except ImportError as e:
        return e


def test_a_re_raised_import_error_is_traced_to_its_module():
    e = _reraised(ModuleNotFoundError("No module named 'tokenizers'", name="tokenizers"))
    assert missing_extra_message(e, "synthesizer train") == (
        "synthesizer train needs the 'train' extra (missing module 'tokenizers'): pip install 'synthesizer-pytorch[train]'")
    assert missing_extra_message(ImportError("cannot import name 'x'"), "synthesizer train") is None


def test_report_errors_turns_only_known_extras_into_one_line(capsys, monkeypatch):
    monkeypatch.delenv("SYNTHESIZER_DEBUG", raising=False)

    def needs(module: str):
        def run() -> int:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)
        return run

    assert report_errors(needs("datasets"), "synthesizer train") == 2
    assert capsys.readouterr().err == ("error: synthesizer train needs the 'hub' extra (missing module 'datasets'): "
                                       "pip install 'synthesizer-pytorch[hub]'\n")
    with pytest.raises(ModuleNotFoundError):  # not an optional dependency: a bug, shown as one
        report_errors(needs("synthesizer.gone"), "synthesizer train")
    monkeypatch.setenv("SYNTHESIZER_DEBUG", "1")
    with pytest.raises(ModuleNotFoundError):
        report_errors(needs("datasets"), "synthesizer train")


def test_require_names_the_first_missing_module(monkeypatch):
    require("json", "torch")
    monkeypatch.setitem(sys.modules, "safetensors", None)  # what an uninstalled module looks like to find_spec
    with pytest.raises(ModuleNotFoundError) as info:
        require("json", "safetensors", "nosuchmodule_x")
    assert info.value.name == "safetensors"
