"""The packer: rows never split an example, keep every token once, restart positions at each example
and keep the order of a row's examples in its document ids; LM documents are cut into pieces whose
targets stay inside them."""

from __future__ import annotations

import pytest
import torch

from synthesizer.data.packing import document_pieces, pack_rows, packed_tensors


def test_rows_fill_first_fit_and_batches_hold_at_most_their_rows():
    sizes = [(5,), (4,), (3,), (6,), (2,), (8,)]
    batches = pack_rows(sizes, (8,), rows_per_batch=2, lookahead=0)
    # without look-ahead, 3 (6 tokens) fits neither open row, so the first batch closes before 4 (2 tokens)
    # could join row 1
    assert batches == [[[0, 2], [1]], [[3, 4], [5]]]
    # with it, 3 waits for the next batch and 4 fills row 1; 5 waits too, and both start the next batch in order
    assert pack_rows(sizes, (8,), rows_per_batch=2, lookahead=2) == [[[0, 2], [1, 4]], [[3], [5]]]
    # more than `lookahead` waiting: the batch closes there, and the waiting ones come first in the next
    order = [0, 1, 3, 4, 5, 2]
    assert pack_rows(sizes, (8,), rows_per_batch=2, lookahead=0, order=order) == [[[0], [1]], [[3, 4], [5]], [[2]]]
    assert pack_rows(sizes, (8,), rows_per_batch=2, lookahead=1, order=order) == [[[0, 4], [1]], [[3], [5]], [[2]]]
    for lookahead in (0, 1, 2, 64):
        batches = pack_rows(sizes, (8,), rows_per_batch=2, lookahead=lookahead)
        for batch in batches:
            assert len(batch) <= 2
            assert all(sum(sizes[i][0] for i in row) <= 8 for row in batch)
        assert sorted(i for b in batches for row in b for i in row) == list(range(len(sizes)))


def test_look_ahead_fills_rows_that_a_closing_batch_leaves_empty():
    g = torch.Generator().manual_seed(0)
    sizes = [(int(n),) for n in torch.randint(1, 33, (2000,), generator=g)]
    used = {}
    for lookahead in (0, 64):
        batches = pack_rows(sizes, (64,), rows_per_batch=8, lookahead=lookahead)
        assert sorted(i for b in batches for row in b for i in row) == list(range(len(sizes)))
        used[lookahead] = sum(n for (n,) in sizes) / (64 * sum(len(b) for b in batches))
    assert used[64] > 0.97 and used[64] > used[0] + 0.05, used


def test_each_part_of_an_example_needs_room_in_its_own_row():
    # (source, target) sizes: the second pair's source fits beside the first's, its target does not
    batches = pack_rows([(2, 5), (2, 4), (3, 1)], (6, 6), rows_per_batch=4, order=[0, 1, 2])
    assert batches == [[[0, 2], [1]]]


def test_an_example_longer_than_a_row_is_refused_not_split():
    with pytest.raises(ValueError, match="example 1 of sizes \\(9,\\) does not fit one row of \\(8,\\)"):
        pack_rows([(3,), (9,)], (8,), rows_per_batch=4)


def test_packed_tensors_give_positions_from_zero_and_document_ids_in_row_order():
    rows = packed_tensors([[[7, 8, 9], [4, 5]], [[6]]], pad_id=0)
    assert rows.ids.tolist() == [[7, 8, 9, 4, 5], [6, 0, 0, 0, 0]]
    assert rows.positions.tolist() == [[0, 1, 2, 0, 1], [0, 0, 0, 0, 0]]
    assert rows.documents.tolist() == [[0, 0, 0, 1, 1], [0, -1, -1, -1, -1]]
    assert rows.padding.tolist() == [[False] * 5, [False, True, True, True, True]]
    assert int((~rows.padding).sum()) == 6  # every token once
    with pytest.raises(ValueError, match="shorter than the longest packed row"):
        packed_tensors([[[1, 2, 3]]], 0, width=2)


def test_document_pieces_keep_targets_inside_the_document():
    doc = list(range(10, 21))  # 11 tokens: 10 next-token pairs
    pieces = document_pieces(doc, 4)
    assert pieces == [[10, 11, 12, 13, 14], [14, 15, 16, 17, 18], [18, 19, 20]]
    targets = [t for p in pieces for t in p[1:]]
    assert targets == doc[1:]  # each token but the first is a target once, predicted within the document
    assert all(len(p) - 1 <= 4 for p in pieces)
    assert document_pieces([3], 4) == []  # an empty document (its EOS alone) predicts nothing


def test_a_packed_lm_row_never_predicts_a_document_from_the_previous_one():
    docs = [[1, 2, 3], [4, 5, 6, 7]]
    pieces = [p for d in docs for p in document_pieces(d, 8)]
    inputs = packed_tensors([[p[:-1] for p in pieces]], 0)
    targets = packed_tensors([[p[1:] for p in pieces]], 0)
    assert inputs.ids.tolist() == [[1, 2, 4, 5, 6]]
    assert targets.ids.tolist() == [[2, 3, 5, 6, 7]]  # 4, the second document's first token, is no target
    assert torch.equal(inputs.documents, targets.documents)
