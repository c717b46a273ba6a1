"""A package's public names imported on first use (PEP 562), so that importing one light module of a
package does not run its heavy ones: ``import synthesizer.report.tables`` imports no torch although
``synthesizer`` exports the attention layers, and ``synthesizer.attention.names`` none although the
attention package exports the layers built with it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package ``package``, which exports each name of ``exports`` from
    the submodule it maps to (``{"build_mixer": "factory"}``: ``package.factory.build_mixer``). A name is
    imported when first read and then kept in the package, like an eager import's.

    A name that also names a submodule (the report's ``render`` function and its ``render`` module) is the
    export, as an eager ``from .summary import render`` made it: the submodule is imported now, since its
    first import would set the package's attribute to the module, and that attribute is dropped.
    """
    for name in exports:
        if importlib.util.find_spec(f"{package}.{name}") is not None:
            importlib.import_module(f"{package}.{name}")
            delattr(sys.modules[package], name)

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
