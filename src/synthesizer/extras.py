"""Optional dependencies: which extra of the ``synthesizer-pytorch`` distribution provides a module.

The layers, models and generation need torch alone; training, evaluation, the shipped configs and
``compare`` need the ``train`` extra, the paper's public datasets ``hub``, the benchmarks ``bench``, the Hugging Face
``transformers`` interop (``synthesizer.hf``, ``synthesizer export``) ``hf``, ``synthesizer lm-eval`` ``eval``,
the TensorBoard logger (``train.loggers``) ``log``, the Triton kernel (``impl="triton"``) ``gpu``.
The command line turns a missing optional module into one line naming the extra to install
(:func:`missing_extra_message`); keep ``EXTRAS`` in step with ``[project.optional-dependencies]``
of ``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util

DISTRIBUTION = "synthesizer-pytorch"

# extra -> the top-level modules its packages provide (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "train": ("tokenizers", "safetensors", "sacrebleu", "rouge_score", "tqdm", "yaml", "matplotlib", "numpy"),
    "hub": ("datasets",),
    "bench": ("linformer", "matplotlib", "tqdm"),
    "dev": ("pytest",),
    "hf": ("transformers", "accelerate"),
    "eval": ("lm_eval",),
    "log": ("tensorboard",),
    "gpu": ("triton",),
    "docs": ("mkdocs", "material"),
}


def install_command(extra: str) -> str:
    """The pip command line that installs ``extra``, e.g. ``pip install 'synthesizer-pytorch[train]'``."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; allowed: {', '.join(EXTRAS)}")
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(*modules: str) -> None:
    """ModuleNotFoundError naming the first of ``modules`` that is not installed, without importing any:
    for a command that would otherwise fail only when it first uses one (minutes into a run)."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def extra_for(module: str, prefer: str | None = None) -> str | None:
    """The extra that provides ``module`` (a dotted name is looked up by its top-level package), or None.

    A module in several extras (matplotlib: ``train`` and ``bench``) goes to ``prefer`` when that one
    provides it, else to the first extra listing it.
    """
    top = module.partition(".")[0]
    if prefer in EXTRAS and top in EXTRAS[prefer]:
        return prefer
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def missing_module(error: BaseException) -> str | None:
    """The name of the module whose import failed behind ``error``, or None.

    Follows the exception's cause and context, so that an ``ImportError`` re-raised with a friendlier
    message (``raise ImportError(...) from None`` keeps the original as ``__context__``) is still traced
    to the module it could not find.
    """
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ModuleNotFoundError) and error.name:
            return error.name
        error = error.__cause__ or error.__context__
    return None


def missing_extra_message(error: BaseException, what: str, prefer: str | None = None) -> str | None:
    """One line for a failed optional import behind ``error`` while running ``what`` (e.g.
    ``"synthesizer train"``), or None when the missing module belongs to no extra (a real bug)."""
    module = missing_module(error)
    extra = None if module is None else extra_for(module, prefer)
    if extra is None:
        return None
    return (f"{what} needs the '{extra}' extra (missing module '{module.partition('.')[0]}'): "
            f"{install_command(extra)}")
