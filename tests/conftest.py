"""Shared test set-up."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tests use tiny tensors: one thread avoids thread start-up and contention costs that dominate
    them on a small or busy machine. Restored afterwards for code that measures threading."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
