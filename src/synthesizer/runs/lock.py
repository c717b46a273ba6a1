"""An exclusive lock on a run folder, so two processes never train (or compare) in the same folder.

:class:`FolderLock` takes an ``fcntl.flock`` on ``folder/.lock`` without waiting: a second process
asking for it is refused at once with :class:`FolderBusy`, one line naming the folder and the pid
that holds it. The operating system drops the lock when the holder exits or crashes, so a stale
lock file never blocks a later run. Under ``torchrun`` only rank 0 takes it (only rank 0 writes files).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import InputError

LOCK_NAME = ".lock"


class FolderBusy(InputError):
    """The folder is locked by another live process."""


class FolderLock:
    """Hold ``folder/.lock`` exclusively while the ``with`` block runs (the folder is created if needed).

    ``what`` names the folder's use in the error message ("run folder", "comparison folder").
    """

    def __init__(self, folder: str | os.PathLike, what: str = "run folder"):
        self.folder, self.what = Path(folder), what
        self._fd: int | None = None

    def acquire(self) -> "FolderLock":
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise FolderBusy(f"{self.what} {self.folder} is in use by another process (pid {holder}); wait for it "
                             "to finish or stop it, or choose another output folder (--out)") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the flock

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def comparison_lock(folder: str | os.PathLike) -> FolderLock:
    """The lock every command that writes a comparison folder (its results.json and report: ``compare``,
    ``--time``, ``--render``) holds from reading the folder's results.json to writing it back, so that none
    writes back a copy that another has changed meanwhile."""
    return FolderLock(folder, "comparison folder")


def study_lock(folder: str | os.PathLike) -> FolderLock:
    """The lock of a scale study's folder: held by the study while it trains, and by ``--render`` while it
    writes the report across widths."""
    return FolderLock(folder, "scale study folder")
