import subprocess
import sys
import time

import pytest

from synthesizer.runs.lock import FolderBusy, FolderLock

HOLD = """
import sys, time
from synthesizer.runs.lock import FolderLock
with FolderLock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def hold_in_another_process(folder):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_at_once_and_the_lock_dies_with_its_holder(tmp_path):
    folder = tmp_path / "run"
    proc = hold_in_another_process(folder)
    try:
        t0 = time.perf_counter()
        with pytest.raises(FolderBusy, match=rf"run folder {folder} is in use by another process \(pid {proc.pid}\)"):
            FolderLock(folder).acquire()
        assert time.perf_counter() - t0 < 1.0  # refused, not waited for
    finally:
        proc.kill()  # a crash: the operating system drops the lock
        proc.wait()
    with FolderLock(folder):
        pass


def test_the_lock_is_released_on_exit_and_can_be_taken_again(tmp_path):
    with FolderLock(tmp_path / "r") as lock:
        assert (tmp_path / "r" / ".lock").read_text().strip().isdigit()
    lock.acquire()
    lock.release()
