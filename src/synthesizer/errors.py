"""The project's error for bad input, and one rule for each kind of bad name, bad folder and
operating-system fault the commands meet.

- :class:`InputError`: bad input (a user's config, option, data file, run folder, model input), raised
  with a message that names the problem. Its subclasses say more: :class:`FieldError` here,
  ``DataError`` (data), ``CheckpointError`` (a checkpoint file), ``UnknownComponent`` (a kind),
  ``FolderBusy`` (a locked folder). It is a ``ValueError``, so callers catching that still catch it.
- :func:`path_component`: a name that becomes one folder under ``--out`` (data names, kinds, keys).
- :func:`check_out_dir`: an ``--out`` folder that can be written (not a file, a writable parent).
- :class:`FieldError`: a bad value of a named field or option; a config section re-raises it with
  the section's name in front (``lr`` -> ``train.lr``).
- :func:`positive_int`: an option that must be an integer >= 1.
- :func:`os_error_line`: an ``OSError`` (permission, full disk ...) as one line, without a traceback.
- :func:`report_errors`: a command's errors as those lines and its exit status, the one rule every
  entry point (``synthesizer``, ``python -m synthesizer.bench``) applies.

Which errors are the user's: an :class:`InputError` is (one line, exit 2), and so is a missing optional
module that an extra provides (the line names the extra). Operating-system errors are one line too, since
they are about files and folders the user named or their machine: ``FileNotFoundError`` is a missing
input (exit 2), any other ``OSError`` (permission, full disk) exit 1. Any other exception is a bug,
whatever its type (a ``statistics.StatisticsError`` or a ``ValueError`` raised inside the project's own
code is one too): it keeps its traceback. So a check of the user's input raises ``InputError``, and a
check of the code's own invariants raises ``ValueError``, ``RuntimeError`` or asserts.

This module imports nothing of the project above :mod:`.extras`, so every layer can raise its errors.
"""

from __future__ import annotations

import errno
import numbers
import os
import sys
from pathlib import Path
from typing import Callable

from .extras import missing_extra_message

EXIT_USAGE = 2
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process ended by Ctrl-C

ADVICE = {errno.EACCES: "check the folder's permissions", errno.EPERM: "check the folder's permissions",
          errno.EROFS: "the file system is read-only", errno.ENOSPC: "free some space",
          errno.EDQUOT: "free some space (disk quota)"}


class InputError(ValueError):
    """Bad input, with a message that names the problem and what is allowed: the command line prints it
    as one line ``error: ...`` and exits with EXIT_USAGE, without a traceback."""


class FieldError(InputError):
    """A bad value of the field ``field``; the message starts with the field's name (``lr must be ...``,
    ``d_model=6 is not ...``), so that :meth:`within` can name the field's section in front of it."""

    def __init__(self, field: str, message: str):
        if not message.startswith(field):
            raise AssertionError(f"a FieldError's message starts with its field {field!r}: {message!r}")
        super().__init__(message)
        self.field = field

    def within(self, section: str) -> "FieldError":
        """The same error for ``section.field`` (``train.lr must be ...``)."""
        return FieldError(f"{section}.{self.field}", f"{section}.{self}")


def path_component(option: str, value: object) -> str:
    """``value`` if it can be one folder name; InputError naming ``option`` and the value if not:
    empty, ``.`` or ``..``, absolute, or holding a path separator (it would write outside its folder)."""
    name = str(value)
    seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    if name.strip() in ("", ".", "..") or any(s in name for s in seps) or "\0" in name or os.path.isabs(name):
        raise InputError(f"{option} {name!r} cannot name a folder: give a plain name without '/', '..' or an "
                         "absolute path (it becomes a folder under --out)")
    return name


def positive_int(name: str, value: object) -> int:
    """``value`` as an int if it is an integer >= 1 (a bool is not); FieldError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise FieldError(name, f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_out_dir(option: str, path: str | os.PathLike | None) -> None:
    """InputError unless ``path`` is a folder that exists, or one that can be made: not a file, under a
    parent folder this process may write in. Checked before any work, so no run ends on it."""
    if path is None:
        return
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{option} {path}: a file of that name exists; give a folder")
    parent = path
    while not parent.exists():  # the nearest existing folder, where the first new one is made
        if parent.parent == parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{option} {path}: {parent} is a file, not a folder")
    target = path if path.is_dir() else parent
    if not os.access(target, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: no permission to write in {target}")


def os_error_line(e: OSError) -> str:
    """One line for an operating-system error: the file, torch's or the system's reason, and what to do
    for the common causes, e.g. "runs/x/log.jsonl: Permission denied; check the folder's permissions"."""
    if e.errno is None or not e.strerror:
        return str(e)
    where = f"{e.filename}: " if e.filename is not None else ""
    if e.filename2 is not None:
        where = f"{e.filename} -> {e.filename2}: "
    hint = ADVICE.get(e.errno)
    return f"{where}{e.strerror}" + (f"; {hint}" if hint else "")


def report_errors(run: Callable[[], int], what: str, prefer: str = "train") -> int:
    """``run()``'s exit status; bad input (an :class:`InputError` or a missing file), or an optional module
    that is not installed, prints one line ``error: ...`` instead (naming the extra that provides the
    module) and gives EXIT_USAGE. Any other exception, a ``ValueError`` too, is a bug: re-raised. An
    operating-system error (permission denied, disk full) is one line and EXIT_FAILURE; Ctrl-C is one
    line and EXIT_INTERRUPTED.

    ``what``: the command named in that line (``synthesizer train``); ``prefer``: the extra to name
    for a module that several extras provide. A missing module no extra provides is a bug: re-raised.
    """
    try:
        return run()
    except (InputError, FileNotFoundError, ImportError) as e:  # a DataError is an InputError
        if os.environ.get("SYNTHESIZER_DEBUG"):
            raise
        message = missing_extra_message(e, what, prefer) if isinstance(e, ImportError) else str(e)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # not the input's fault: a read-only folder, a full disk ...
        if os.environ.get("SYNTHESIZER_DEBUG"):
            raise
        print(f"error: {os_error_line(e)}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:  # what was saved has been said by whoever was stopped
        if os.environ.get("SYNTHESIZER_DEBUG"):
            raise
        print(f"{what}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
