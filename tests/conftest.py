"""Shared test set-up.

Every test runs with the number of torch threads given by the environment variable
``SYNTHESIZER_TEST_THREADS`` (default 1). Tests use tiny tensors: one thread avoids thread
start-up and contention costs that dominate them on a small or busy machine. A float32 result
may depend on how many threads split a reduction, so run the suite with 2 threads as well:
``SYNTHESIZER_TEST_THREADS=2 python -m pytest``; the comparisons' tolerances (tests/tolerances.py)
must hold either way.
"""

import os

import pytest
import torch

# Without a GPU, triton can run kernels only in its interpreter, and it reads TRITON_INTERPRET once,
# when it is first imported (importing synthesizer.attention imports it, through torch.compiler):
# so it is set here, before any test module is collected. It changes nothing else: compiled triton
# kernels need a GPU. With a GPU, the triton kernel's tests run compiled on CUDA tensors.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# impl="auto" reads the shipped dispatch table (measured on the reference machine) unless told otherwise:
# the tests assert the static ranking's choices, so that what they assert of a layer's path does not change
# when the table is measured again. The table's own tests load it (and others) explicitly.
os.environ["SYNTHESIZER_DISPATCH_TABLE"] = "none"

THREADS_VARIABLE = "SYNTHESIZER_TEST_THREADS"
_threads_key = pytest.StashKey[int]()


def _test_threads() -> int:
    raw = os.environ.get(THREADS_VARIABLE, "1")
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise pytest.UsageError(f"{THREADS_VARIABLE}={raw!r}: expected a whole number of threads, at least 1")
    return threads


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_threads_key] = _test_threads()  # a bad value stops the run before any test


@pytest.fixture(autouse=True)
def _torch_threads(request: pytest.FixtureRequest):
    """Sets the chosen thread count for the test; restored afterwards for code that measures threading."""
    threads = torch.get_num_threads()
    torch.set_num_threads(request.config.stash[_threads_key])
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def any_key_mask(monkeypatch):
    """Lets a layer take a key mask with padding before real keys (which it refuses: inputs are
    left-aligned), for tests of the kernels' masking of any key set against the reference: rows with
    no real key, or a cache filling in a mask given for some chunks only."""
    monkeypatch.setattr("synthesizer.attention.synthesizer.check_right_padded", lambda mask, name="": None)
