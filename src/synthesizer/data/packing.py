"""Packing: several examples in one row of a fixed number of tokens instead of one padded row each.

A packed batch is tensors (rows, width) with, per token, its id, its position in its own example
(restarting at 0 at each example) and its example's id within the row (0, 1, ... in row order; -1 on
padding), beside the usual padding mask. The models take the positions and ids (``documents``) and
never let a token attend to another example's (``attention/masks.py``, ``document_mask``), so each
example gets the outputs, and the loss, it gets alone.

Rules (tested in tests/data/test_packing.py):
* an example is never split across rows: ``pack_rows`` raises for one longer than a row. Callers cut
  their examples to the row first (the tasks' length policy does); a language-model document longer than
  a row is cut by ``document_pieces`` into pieces of at most a row, each packed as a document of its own
  (positions from 0), the next-token targets of a piece staying inside it;
* rows fill first-fit, in the given order, among the open rows of the batch being built; a batch holds
  at most ``rows_per_batch`` rows. An example that fits none of them when no row may be opened waits, and the
  next ones are tried, until more than ``lookahead`` examples wait (or none is left): then the batch closes and
  the waiting examples start the next one, in their order. With ``lookahead=0`` a batch closes at its first
  misfit, which leaves gaps that smaller examples further on fill (the figures: docs/training.md);
* an example with several parts (a source and a target) needs room in each part's row: source document
  k of a row pairs with target document k of that row.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from ..errors import InputError, positive_int


# Examples that may wait for a later row while the batch being built takes smaller ones (see the rules).
LOOKAHEAD = 64


def pack_rows(sizes: Sequence[Sequence[int]], capacities: Sequence[int], rows_per_batch: int,
              order: Sequence[int] | None = None, lookahead: int = LOOKAHEAD) -> list[list[list[int]]]:
    """Batches of rows of example indices: ``sizes[i]`` the tokens example i takes in each part's row
    (one size per part, e.g. (source, target)), ``capacities`` the tokens of one row of each part.
    ``order``: the order examples are placed in (default: 0, 1, ...); ``lookahead``: how many examples may
    wait for the next batch while later ones fill this one's rows. ValueError for an example that does not
    fit one row (see the module's rules)."""
    positive_int("rows_per_batch", rows_per_batch)
    if lookahead < 0:
        raise InputError(f"lookahead must be at least 0, got {lookahead}")
    for part, cap in enumerate(capacities):
        positive_int(f"capacities[{part}]", cap)
    stream = deque(range(len(sizes)) if order is None else order)
    for i in stream:  # checked once, before any is placed: a waiting example is tried again
        if len(sizes[i]) != len(capacities) or any(s > c for s, c in zip(sizes[i], capacities)):
            raise InputError(f"example {i} of sizes {tuple(sizes[i])} does not fit one row of {tuple(capacities)} "
                             "tokens; cut it to the row first")
    batches: list[list[list[int]]] = []
    rows: list[list[int]] = []
    room: list[list[int]] = []
    waiting: list[int] = []
    while stream:
        i = stream.popleft()
        size = sizes[i]
        row = next((r for r, left in enumerate(room) if all(s <= x for s, x in zip(size, left))), None)
        if row is None and len(rows) < rows_per_batch:
            rows.append([])
            room.append(list(capacities))
            row = len(rows) - 1
        if row is None:  # the batch is full for this example: it waits for the next one
            waiting.append(i)
            if len(waiting) > lookahead or not stream:
                batches.append(rows)
                rows, room = [], []
                stream.extendleft(reversed(waiting))
                waiting = []
            continue
        rows[row].append(i)
        room[row] = [x - s for s, x in zip(size, room[row])]
    if rows:
        batches.append(rows)
    return batches


@dataclass
class PackedRows:
    """One part of a packed batch: ``ids`` (R, n) long, ``padding`` (R, n) bool (True = padding),
    ``positions`` (R, n) long (each token's in its own example, 0 on padding) and ``documents`` (R, n)
    long (its example's id within the row, -1 on padding)."""

    ids: Tensor
    padding: Tensor
    positions: Tensor
    documents: Tensor


def packed_tensors(rows: Sequence[Sequence[Sequence[int]]], pad_id: int, width: int | None = None) -> PackedRows:
    """The tensors of rows of sequences (``rows[r]``: the sequences of row r, in order), right-padded with
    ``pad_id`` to the longest row (or ``width``, at least that long)."""
    if len(rows) == 0:
        raise ValueError("packed_tensors needs at least one row")
    longest = max(sum(len(s) for s in row) for row in rows)
    n = longest if width is None else width
    if n < longest:
        raise ValueError(f"width={width} is shorter than the longest packed row ({longest} tokens)")
    ids = torch.full((len(rows), n), pad_id, dtype=torch.long)
    positions = torch.zeros((len(rows), n), dtype=torch.long)
    documents = torch.full((len(rows), n), -1, dtype=torch.long)
    for r, row in enumerate(rows):
        at = 0
        for doc, seq in enumerate(row):
            ids[r, at : at + len(seq)] = torch.as_tensor(list(seq), dtype=torch.long)
            positions[r, at : at + len(seq)] = torch.arange(len(seq))
            documents[r, at : at + len(seq)] = doc
            at += len(seq)
    return PackedRows(ids, documents < 0, positions, documents)


def document_pieces(doc: Sequence[int], row_len: int) -> list[list[int]]:
    """A language-model document (its EOS included) as pieces of at most ``row_len + 1`` tokens that
    overlap by one, each giving at most ``row_len`` (input, next-token target) pairs inside itself: every
    token but the document's first is a target exactly once, and none is predicted from another
    document. A document of one token gives none (nothing to predict)."""
    positive_int("row_len", row_len)
    return [list(doc[s : s + row_len + 1]) for s in range(0, max(len(doc) - 1, 0), row_len)]
