"""Small functions that several test modules share."""

import socket

import torch


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """max|a - b| / max|b|."""
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def free_port() -> int:
    """A TCP port on the loopback address that no process listens on now (for a torchrun master)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def three_paddings(n: int) -> torch.Tensor:
    """A (3, n) key padding mask: example 0 unpadded, example 1 padded at the end, example 2 fully padded."""
    mask = torch.zeros(3, n, dtype=torch.bool)
    mask[1, n - 7 :] = True
    mask[2] = True
    return mask
