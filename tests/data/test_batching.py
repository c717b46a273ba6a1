import pytest
import torch
from torch.utils.data import DataLoader

from synthesizer.data.batching import LengthBucketSampler, length_batches, lm_blocks, pad_sequences


def test_pad_sequences_right_padding_and_mask():
    ids, mask = pad_sequences([[5, 6, 7], [8], []], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]
    assert mask.tolist() == [[False] * 3, [False, True, True], [True] * 3]
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    ids, mask = pad_sequences([[1, 2]], pad_id=9, max_len=4)
    assert ids.tolist() == [[1, 2, 9, 9]] and mask.sum().item() == 2
    with pytest.raises(ValueError, match="max_len=1 is shorter than the longest sequence \\(2\\)"):
        pad_sequences([[1, 2]], 0, max_len=1)


def test_lm_blocks_shift_and_eos():
    blocks = lm_blocks([[10, 11, 12], [20, 21]], block_size=3, eos_id=1)
    # stream: 10 11 12 1 20 21 1 -> (7-1)//3 = 2 blocks of 4, overlapping by one token
    assert blocks.tolist() == [[10, 11, 12, 1], [1, 20, 21, 1]]
    x, y = blocks[:, :-1], blocks[:, 1:]
    targets = y.flatten().tolist()
    assert targets == [11, 12, 1, 20, 21, 1]  # every token after the first is a target exactly once
    assert x.shape == (2, 3)
    with pytest.raises(ValueError, match="too few for one block"):
        lm_blocks([[1]], block_size=8, eos_id=1)


def test_length_batches_respect_budget():
    lengths = [5, 1, 9, 3, 3, 7, 2, 8, 4, 6, 30]
    batches = length_batches(lengths, max_tokens=12, max_sentences=3)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))  # every example exactly once
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) <= 3
        assert len(b) * longest <= 12 or len(b) == 1  # an over-long example sits alone
        assert longest - min(lengths[i] for i in b) <= 3  # sorted by length: similar lengths together
    assert [10] in batches


def test_sampler_deterministic_shuffle_per_epoch():
    lengths = list(range(1, 41))
    s = LengthBucketSampler(lengths, max_tokens=40, seed=3)
    e0 = list(s)
    assert list(s) == e0  # same epoch, same order
    s.set_epoch(1)
    e1 = list(s)
    assert e1 != e0 and sorted(map(tuple, e1)) == sorted(map(tuple, e0))
    fixed = LengthBucketSampler(lengths, max_tokens=40, shuffle=False)
    assert [b for b in fixed] == fixed.batches


@pytest.mark.parametrize("world_size", [2, 3, 5])
def test_sampler_shards_equal_counts(world_size):
    lengths = [(i * 7) % 23 + 1 for i in range(50)]
    shards = [list(LengthBucketSampler(lengths, max_tokens=30, seed=1, rank=r, world_size=world_size))
              for r in range(world_size)]
    n_batches = len(length_batches(lengths, 30))
    assert (n_batches % world_size == 0) == (world_size == 2)  # 3 and 5 exercise the padding path
    counts = {len(s) for s in shards}
    assert len(counts) == 1
    assert counts.pop() == len(LengthBucketSampler(lengths, 30, world_size=world_size)) == -(-n_batches // world_size)
    seen = {i for s in shards for b in s for i in b}
    assert seen == set(range(50))  # together the ranks cover every example


def test_sampler_with_dataloader():
    seqs = [[1] * n for n in (3, 1, 4, 1, 5, 9, 2, 6)]
    sampler = LengthBucketSampler([len(s) for s in seqs], max_tokens=10)
    loader = DataLoader(seqs, batch_sampler=sampler, collate_fn=lambda b: pad_sequences(b, pad_id=0))
    total = 0
    for ids, mask in loader:
        assert ids.numel() <= 10 or ids.shape[0] == 1
        total += int((~mask).sum())
    assert total == sum(map(len, seqs))


def test_sampler_bad_args():
    with pytest.raises(ValueError, match="rank=2, world_size=2"):
        LengthBucketSampler([1, 2], 10, rank=2, world_size=2)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        length_batches([1], 0)
