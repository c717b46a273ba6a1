"""The registry of logits components: names, aliases, factories and forms.

Everything that needs to know the components reads it: the kind parser (``kinds.py``), the layer,
the dispatcher (from the forms), FLOP counts, parameter tables, presets and benchmarks. The built-in
components come first, in the canonical order of ``kinds.COMPONENTS`` (least to most
input-dependent); a component added with ``register_component`` goes after them, in registration
order. A mixture's components are always sorted by that order.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Callable

from torch import nn

from ..errors import InputError
from .dense import DenseLogits
from .factorized import FactorizedDenseLogits, FactorizedRandomLogits
from .forms import BIAS, FEATURES, FORMS, LOGITS
from .names import BUILTIN_ALIASES, BUILTIN_COMPONENTS, PAPER_PURE
from .random import FixedRandomLogits, RandomLogits
from .vanilla import VanillaLogits

_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class ComponentSpec:
    """One registered component.

    ``factory(d_model, n_heads, max_len, **options)`` builds it; ``form`` is one of ``forms.FORMS``;
    ``input_independent``: its logits depend on positions only (it offers ``bias(n)``);
    ``cached_keys``: it needs the keys of earlier positions (vanilla; see ``forms``);
    ``alias``: the short name as messages spell it (``"R"``), matched case-insensitively;
    ``flops``: forward FLOPs of its logits, ``flops(batch, seq, d_model, n_heads, max_len, **options)``,
    or None; ``paper_row``: its row among the paper's pure synthesizers (Table 2), None if not there.
    """

    name: str
    factory: Callable[..., nn.Module]
    form: str = LOGITS
    input_independent: bool = False
    cached_keys: bool = False
    alias: str | None = None
    flops: Callable[..., int] | None = None
    builtin: bool = False
    paper_row: int | None = None

    def build(self, d_model: int, n_heads: int, max_len: int, **options) -> nn.Module:
        """The component's module; ValueError naming it if the module does not offer what its form needs."""
        params = inspect.signature(self.factory).parameters.values()
        if not any(p.kind is p.VAR_KEYWORD for p in params):  # give a factory only the options it names
            named = {p.name for p in params}
            options = {k: v for k, v in options.items() if k in named}
        module = self.factory(d_model, n_heads, max_len, **options)
        if not isinstance(module, nn.Module):
            raise InputError(f"the factory of attention component {self.name!r} returned {type(module).__name__}, not an nn.Module")
        _check_methods(self, module)
        return module


def _needed_methods(spec: ComponentSpec) -> list[str]:
    needed = ["logits"]
    if spec.form == FEATURES:
        needed.append("features")
    if spec.form == BIAS or spec.input_independent:
        needed.append("bias")
    return needed


def _check_methods(spec: ComponentSpec, obj: object) -> None:
    missing = [m for m in _needed_methods(spec) if not callable(getattr(obj, m, None))]
    if missing:
        raise InputError(f"attention component {spec.name!r}: {getattr(obj, '__name__', type(obj).__name__)} has no "
                         f"{' or '.join(missing)}; a {spec.form} component needs {', '.join(_needed_methods(spec))}")


_SPECS: dict[str, ComponentSpec] = {}
_ALIASES: dict[str, str] = {}  # lower-case alias -> name
_RESERVED: set[str] = set()  # names of other mixers (the baselines) that no component may take


def reserve(*names: str) -> None:
    """Keep ``names`` (mixers that are not components, e.g. the baselines) from being registered."""
    _RESERVED.update(names)


def _add(spec: ComponentSpec) -> None:
    name = spec.name
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"attention component name must be lower-case letters, digits and '_' (starting with a "
                         f"letter), got {name!r}")
    if name in _SPECS or name in _ALIASES or name in _RESERVED:
        raise InputError(f"attention component {name!r} already exists; pick another name")
    if spec.alias is not None:
        key = spec.alias.lower() if isinstance(spec.alias, str) else None
        if key is None or not _NAME.fullmatch(key):
            raise InputError(f"alias of attention component {name!r} must be letters, digits and '_', got {spec.alias!r}")
        if key in _ALIASES or key in _SPECS or key in _RESERVED or key == name:
            taken = _ALIASES.get(key, key)
            raise InputError(f"alias {spec.alias!r} of attention component {name!r} clashes with {taken!r}; pick another alias")
    if not callable(spec.factory):
        raise InputError(f"the factory of attention component {name!r} must be callable, got {spec.factory!r}")
    if spec.form not in FORMS:
        raise InputError(f"attention component {name!r} declares form {spec.form!r}; allowed: {', '.join(FORMS)}")
    if inspect.isclass(spec.factory):  # a class can be checked now; a plain function when it builds
        _check_methods(spec, spec.factory)
    _SPECS[name] = spec
    if spec.alias is not None:
        _ALIASES[spec.alias.lower()] = name


def register_component(name: str, factory: Callable[..., nn.Module], alias: str | None = None) -> None:
    """Add a logits component, a peer of the built-in ones in kinds, mixtures, masks, decoding and counts.

    ``factory(d_model, n_heads, max_len, **options)`` returns an ``nn.Module`` whose
    ``logits(x, start, n_keys)`` gives ``(B or 1, H, t, n_keys)`` for the rows ``start..start+t-1``
    (row ``i`` may use ``x_i`` and position ``i`` only). It runs on the reference path unless the
    factory declares a fast form (``form = "features"`` or ``"bias"``, see ``attention.forms``).
    Raises ValueError for a name or alias already taken, or a factory whose module lacks ``logits``.
    """
    _add(ComponentSpec(name, factory, form=getattr(factory, "form", LOGITS),
                       input_independent=bool(getattr(factory, "input_independent", False)), alias=alias,
                       flops=getattr(factory, "flops", None)))


def unregister_component(name: str) -> None:
    """Remove a component added with ``register_component`` (built-in ones stay)."""
    spec = _SPECS.get(name)
    if spec is None or spec.builtin:
        raise InputError(f"{name!r} is not a registered user component")
    del _SPECS[name]
    if spec.alias is not None:
        del _ALIASES[spec.alias.lower()]


def spec(name: str) -> ComponentSpec:
    """The spec of a full component name (KeyError if it is not registered)."""
    return _SPECS[name]


def specs() -> tuple[ComponentSpec, ...]:
    """Every component, in the canonical order."""
    return tuple(_SPECS.values())


def names() -> tuple[str, ...]:
    """Every component's full name, in the canonical order."""
    return tuple(_SPECS)


def resolve(part: str) -> str | None:
    """The full name of a component written as its name or alias (any case), or None."""
    key = part.lower()
    return key if key in _SPECS else _ALIASES.get(key)


def _builtin(name: str, cls: type[nn.Module]) -> None:
    """A built-in component: its alias and its row among the paper's pure variants are the names'."""
    _add(ComponentSpec(name, cls, form=cls.form, input_independent=getattr(cls, "input_independent", False),
                       cached_keys=getattr(cls, "cached_keys", False), alias=BUILTIN_ALIASES[name], flops=cls.flops,
                       builtin=True, paper_row=PAPER_PURE.index(name) if name in PAPER_PURE else None))


_BUILTIN_CLASSES = {"random": RandomLogits, "fixed_random": FixedRandomLogits,
                    "factorized_random": FactorizedRandomLogits, "dense": DenseLogits,
                    "factorized_dense": FactorizedDenseLogits, "vanilla": VanillaLogits}
for _name in BUILTIN_COMPONENTS:  # registered in the canonical order (names.py)
    _builtin(_name, _BUILTIN_CLASSES[_name])
