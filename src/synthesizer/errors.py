"""One rule for each kind of bad name, bad folder and operating-system fault the commands meet.

- :func:`path_component`: a name that becomes one folder under ``--out`` (data names, kinds, keys).
- :func:`check_out_dir`: an ``--out`` folder that can be written (not a file, a writable parent).
- :func:`os_error_line`: an ``OSError`` (permission, full disk ...) as one line, without a traceback.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

ADVICE = {errno.EACCES: "check the folder's permissions", errno.EPERM: "check the folder's permissions",
          errno.EROFS: "the file system is read-only", errno.ENOSPC: "free some space",
          errno.EDQUOT: "free some space (disk quota)"}


def path_component(option: str, value: object) -> str:
    """``value`` if it can be one folder name; ValueError naming ``option`` and the value if not:
    empty, ``.`` or ``..``, absolute, or holding a path separator (it would write outside its folder)."""
    name = str(value)
    seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    if name.strip() in ("", ".", "..") or any(s in name for s in seps) or "\0" in name or os.path.isabs(name):
        raise ValueError(f"{option} {name!r} cannot name a folder: give a plain name without '/', '..' or an "
                         "absolute path (it becomes a folder under --out)")
    return name


def check_out_dir(option: str, path: str | os.PathLike | None) -> None:
    """ValueError unless ``path`` is a folder that exists, or one that can be made: not a file, under a
    parent folder this process may write in. Checked before any work, so no run ends on it."""
    if path is None:
        return
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path}: a file of that name exists; give a folder")
    parent = path
    while not parent.exists():  # the nearest existing folder, where the first new one is made
        if parent.parent == parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{option} {path}: {parent} is a file, not a folder")
    target = path if path.is_dir() else parent
    if not os.access(target, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: no permission to write in {target}")


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
