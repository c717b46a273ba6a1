"""Checkpoints written atomically: model weights, config, tokenizer, optimizer/scheduler/RNG state.

Layout of a run folder::

    run/
      step-00000400/        one complete checkpoint per folder
        model.safetensors   weights (tied tensors stored once)
        config.json         the model config given by the caller
        trainer_state.pt    optimizer, scheduler, step, RNG states per rank, caller's extras
        tokenizer/          whatever the tokenizer saver wrote (optional)
      last -> step-00000400 symlink, switched atomically after the folder is complete
      previous -> step-00000200  what ``last`` pointed to before (kept as a fallback)
      best -> step-00000300 symlink to the checkpoint with the best validation metric

A checkpoint is first written under a hidden temporary name, flushed to disk, renamed into place
and only then pointed to, so a crash at any moment leaves ``last`` on a complete checkpoint.
Folders no longer pointed to by ``last``, ``previous`` or ``best`` are deleted afterwards, so at most
three are kept. A file damaged later (truncated by a copy, a bad disk) raises :class:`CheckpointError`
naming it; :func:`intact_checkpoints` lists what a resume can fall back to, newest first. A full disk
while saving raises :class:`CheckpointError` too, and leaves ``last`` on the previous checkpoint.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import uuid
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from ..errors import InputError
from ..runs.files import (BEST, CONFIG_NAME, EXPERIMENT_FILE, LAST, LINKS, PREVIOUS, STATE_NAME, STEP_PREFIX,
                          TOKENIZER_DIR, WEIGHTS_NAME)
from .distributed import unwrap_model

# What the saved weights mean, in the file's metadata. 2: token embeddings multiplied by sqrt(d_model)
# (models/blocks.Embeddings); files without it (1: synthesizer-pytorch 0.1.0) would load without an
# error and give other outputs, so they are refused.
WEIGHTS_REVISION = 2

TokenizerSaver = Callable[[Path], None]


class CheckpointError(InputError):
    """A checkpoint file that cannot be read (truncated, corrupt) or written (disk full); one line naming it."""


def capture_rng_state() -> dict:
    """This process's RNG states: python, numpy, torch CPU and every CUDA device."""
    import numpy as np  # the training extra's; imported here so that listing configs needs no extra

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        # numpy's key array goes in as a tensor so the file loads with weights_only=True
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    """Inverse of :func:`capture_rng_state`."""
    import numpy as np
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = state["cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # platforms without directory handles
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    for root, _, files in os.walk(path):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(Path(root))


def _point(directory: Path, link: str, target: str) -> None:
    """Make ``directory/link`` a relative symlink to ``target``, replacing any old one atomically."""
    tmp = directory / f".{link}.{uuid.uuid4().hex[:8]}"
    os.symlink(target, tmp)
    os.replace(tmp, directory / link)


def _referenced(directory: Path) -> set[str]:
    names = set()
    for link in LINKS:
        path = directory / link
        if path.is_symlink():
            names.add(os.readlink(path))
    return names


def _cleanup(directory: Path) -> None:
    keep = _referenced(directory)
    for child in directory.iterdir():
        if child.is_dir() and not child.is_symlink() and child.name.startswith(STEP_PREFIX) and child.name not in keep:
            shutil.rmtree(child, ignore_errors=True)


def _save_tokenizer(tokenizer: str | os.PathLike | TokenizerSaver, folder: Path) -> None:
    target = folder / TOKENIZER_DIR
    if callable(tokenizer):
        target.mkdir()
        tokenizer(target)
        return
    source = Path(tokenizer)
    if source.is_dir():
        shutil.copytree(source, target)
    elif source.is_file():
        target.mkdir()
        shutil.copy2(source, target / source.name)
    else:
        raise InputError(f"tokenizer path {str(source)!r} does not exist; give a file, a folder or a callable")


def _free_name(directory: Path, step: int) -> str:
    """``step-%08d``, or with a ``.i`` suffix when that step was saved before: a folder in use is never overwritten."""
    name = f"{STEP_PREFIX}{step:08d}"
    if (directory / name).exists():
        i = 1
        while (directory / f"{name}.{i}").exists():
            i += 1
        name = f"{name}.{i}"
    return name


def _write_folder(folder: Path, model: nn.Module, step: int, *, optimizer, scheduler, extra: dict | None,
                  config: dict | None, tokenizer, rng_states: list[dict] | None) -> None:
    """The checkpoint's files in the new ``folder``, flushed to disk (see ``save_checkpoint``)."""
    folder.mkdir()
    from safetensors.torch import save_model  # the training extra's (see capture_rng_state)

    save_model(unwrap_model(model), str(folder / WEIGHTS_NAME), metadata={"step": str(step), "weights_revision": str(WEIGHTS_REVISION)})
    with open(folder / CONFIG_NAME, "w") as f:
        json.dump(config or {}, f, indent=2, sort_keys=True)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": rng_states if rng_states is not None else [capture_rng_state()],
        "extra": dict(extra or {}),
    }
    torch.save(state, folder / STATE_NAME)
    if tokenizer is not None:
        _save_tokenizer(tokenizer, folder)
    _fsync_tree(folder)


def _switch_links(directory: Path, name: str, previous: str | None, best: bool) -> None:
    """Point ``last`` (and ``best``) at the new checkpoint ``name``, ``previous`` at the one ``last`` left;
    then delete the folders no link points to."""
    if previous is not None and previous != name:
        _point(directory, PREVIOUS, previous)
    _point(directory, LAST, name)
    if best:
        _point(directory, BEST, name)
    _fsync_dir(directory)
    _cleanup(directory)


def save_checkpoint(directory: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                    scheduler=None, step: int = 0, *, extra: dict | None = None, config: dict | None = None,
                    tokenizer: str | os.PathLike | TokenizerSaver | None = None, best: bool = False,
                    rng_states: list[dict] | None = None) -> Path:
    """Write a complete checkpoint of ``step`` under ``directory`` and point ``last`` (and ``best``) at it.

    Args:
        extra: picklable-by-``torch.save`` values stored in ``trainer_state.pt`` (epoch, sampler
            position, best metric ...); plain python/tensor values only.
        config: JSON-serialisable dict written to ``config.json`` (the model config).
        tokenizer: a file or folder copied into ``tokenizer/``, or a callable that saves into the
            ``tokenizer/`` folder it is given.
        best: also point ``best`` at this checkpoint.
        rng_states: RNG states per rank; default is this process's only.
    Returns the checkpoint folder.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    name = _free_name(directory, step)
    tmp = directory / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
    previous = os.readlink(directory / LAST) if (directory / LAST).is_symlink() else None
    try:
        _write_folder(tmp, model, step, optimizer=optimizer, scheduler=scheduler, extra=extra, config=config,
                      tokenizer=tokenizer, rng_states=rng_states)
        os.replace(tmp, directory / name)
        _fsync_dir(directory)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            kept = f"'last' still points to {previous}" if previous else "no earlier checkpoint exists"
            raise CheckpointError(f"no space left on the device while writing checkpoint {directory / name} "
                                  f"({os.strerror(e.errno)}); {kept}; free some space and resume") from None
        raise
    _switch_links(directory, name, previous, best)
    return directory / name


def resolve_checkpoint(path: str | os.PathLike, which: str = LAST) -> Path:
    """The checkpoint folder for ``path``: a checkpoint folder itself, or a run folder (uses ``which``; a run
    folder, which holds experiment.json, is never read as a checkpoint, whatever weights were written into it)."""
    path = Path(path)
    if (path / WEIGHTS_NAME).is_file() and not (path / EXPERIMENT_FILE).is_file():
        return path
    if (path / which / WEIGHTS_NAME).is_file():
        return (path / which).resolve()
    raise FileNotFoundError(f"no checkpoint at {str(path)!r}: expected {WEIGHTS_NAME} in it or in its {which!r} folder")


def finished_checkpoint(run_dir: str | os.PathLike, which: str = BEST) -> Path:
    """The checkpoint a run is read from: its ``which`` folder ("best"), else ``last``.

    FileNotFoundError when it has neither (a checkpoint folder given itself is returned as it is)."""
    for name in dict.fromkeys((which, LAST)):
        try:
            return resolve_checkpoint(run_dir, name)
        except FileNotFoundError:
            continue
    raise FileNotFoundError(f"{run_dir}: no checkpoint yet (no {which!r} or 'last' folder)")


def step_of(folder: str | os.PathLike) -> int:
    """The training step a checkpoint folder (``step-00000400`` or ``step-00000400.1``) was saved at."""
    name = Path(folder).name
    step = name[len(STEP_PREFIX):].split(".")[0]
    if not name.startswith(STEP_PREFIX) or not step.isdigit():
        raise ValueError(f"{name!r} is not a checkpoint folder's name ({STEP_PREFIX}<step>[.i])")
    return int(step)


def intact_checkpoints(directory: str | os.PathLike) -> list[Path]:
    """The checkpoint folders ``last``, ``previous`` and ``best`` of a run folder point to, newest step first."""
    directory = Path(directory)
    folders = {(directory / link).resolve() for link in LINKS if (directory / link / WEIGHTS_NAME).is_file()}
    return sorted(folders, key=lambda f: f.name, reverse=True)  # step-%08d[.i] sorts by step


def point_last(directory: str | os.PathLike, folder: str | os.PathLike) -> None:
    """Point ``directory/last`` at the checkpoint ``folder`` inside it (after falling back to an older one)."""
    _point(Path(directory), LAST, Path(folder).name)
    _fsync_dir(Path(directory))


def load_model_weights(path: str | os.PathLike, model: nn.Module, strict: bool = True, which: str = LAST) -> nn.Module:
    """Load weights into ``model`` from a ``.safetensors`` file, a checkpoint folder or a run folder."""
    path = Path(path)
    file = path if path.is_file() else resolve_checkpoint(path, which) / WEIGHTS_NAME
    model = unwrap_model(model)
    device = next(model.parameters()).device
    from safetensors import SafetensorError  # the training extra's (see capture_rng_state)
    from safetensors.torch import load_model

    try:
        check_weights_revision(file)
        load_model(model, str(file), strict=strict, device=str(device))
    except (SafetensorError, OSError, EOFError) as e:
        raise CheckpointError(f"checkpoint file {file} is truncated or corrupt ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    return model


def check_weights_revision(file: Path) -> None:
    """CheckpointError unless the weights in ``file`` were saved with the current ``WEIGHTS_REVISION``."""
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as f:
        revision = int((f.metadata() or {}).get("weights_revision", 1))
    if revision != WEIGHTS_REVISION:
        raise revision_error(file, revision)


def revision_error(what: str | os.PathLike, revision: int) -> CheckpointError:
    """The error for weights of another revision, ``what`` naming where they are (a file, a folder)."""
    return CheckpointError(f"{what} holds weights of revision {revision}, this synthesizer reads revision "
                           f"{WEIGHTS_REVISION} (since 0.2.0 token embeddings are scaled by sqrt(d_model)): loaded "
                           "here it would give other outputs; retrain it, or use synthesizer-pytorch 0.1.0 for it")


def load_checkpoint(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                    scheduler=None, *, restore_rng: bool = True, rank: int = 0, which: str = LAST) -> dict:
    """Restore weights, optimizer, scheduler and (this rank's) RNG state from a checkpoint.

    Every file is read before anything is restored; one that cannot be read whole (truncated, not a
    zip, objects that ``weights_only`` loading refuses, keys missing, JSON cut short) raises
    :class:`CheckpointError` naming it, so a caller can fall back to an older checkpoint.
    Returns the trainer state: ``{"step", "extra", "path", "config"}``.
    """
    folder = resolve_checkpoint(path, which)
    state = _read_state(folder / STATE_NAME)
    try:
        with open(folder / CONFIG_NAME) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise corrupt(folder / CONFIG_NAME, e) from None
    load_model_weights(folder / WEIGHTS_NAME, model)
    if optimizer is not None:
        if state["optimizer"] is None:
            raise InputError(f"checkpoint {str(folder)!r} has no optimizer state")
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None:
        if state["scheduler"] is None:
            raise InputError(f"checkpoint {str(folder)!r} has no scheduler state")
        scheduler.load_state_dict(state["scheduler"])
    if restore_rng:
        rngs = state["rng"]
        try:
            restore_rng_state(rngs[rank] if rank < len(rngs) else rngs[0])
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as e:
            raise corrupt(folder / STATE_NAME, e) from None
    return {"step": state["step"], "extra": state["extra"], "path": folder, "config": config}


STATE_KEYS = ("step", "optimizer", "scheduler", "rng", "extra")


def _read_state(file: Path) -> dict:
    """The trainer state saved in ``file``, with every key :func:`save_checkpoint` writes; CheckpointError
    for anything else. Loaded with ``weights_only=True``: a file holding other objects is refused, and
    no code in it runs."""
    import pickle

    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError(f"checkpoint file {file} is truncated or corrupt (it holds objects other than "
                              "tensors and plain values, which are not loaded)") from None
    except Exception as e:  # noqa: BLE001  truncated, not a zip, unreadable: whatever torch says, it is unusable
        raise corrupt(file, e) from None
    missing = [k for k in STATE_KEYS if k not in state] if isinstance(state, dict) else list(STATE_KEYS)
    if missing or not isinstance(state["extra"], dict) or not isinstance(state["rng"], (list, tuple)) or not state["rng"]:
        what = f"no {', '.join(missing)}" if missing else "its extra or rng entry is malformed"
        raise CheckpointError(f"checkpoint file {file} is truncated or corrupt ({what})")
    return state


def corrupt(file: Path, error: BaseException) -> CheckpointError:
    """The one-line error for a checkpoint ``file`` that cannot be read: the first line of ``error``."""
    reason = str(error).splitlines()[0] if str(error).strip() else type(error).__name__
    return CheckpointError(f"checkpoint file {file} is truncated or corrupt ({reason})")
