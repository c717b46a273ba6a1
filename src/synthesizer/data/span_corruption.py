"""T5-style span corruption: the denoising objective of pretraining (Raffel et al. 2020, section 3.1.4).

Given the token ids of a text, ``round(len * density)`` of them (at least 1) are chosen as noise, in
``round(noise / mean_span)`` spans (at least 1). As in T5's random segmentation, the noise tokens and
the kept tokens are each cut into that many non-empty pieces at uniformly drawn cut points, and the
text alternates kept piece, noise span, kept piece, noise span ... (so it starts with kept tokens and
ends with a noise span). Each noise span is replaced in the input by one sentinel ``<extra_id_i>``
(i = 0, 1, ... left to right); the target lists ``<extra_id_0> span0 <extra_id_1> span1 ... <extra_id_k>``,
closed by the next sentinel. Input and target together give back the original ids (:func:`reconstruct`).

Texts too short for T5's rule (fewer kept tokens than spans) get fewer spans; a one-token text is
one noise span with nothing kept. The draw depends only on the ``random.Random`` it is given, so a
seed fixes it.
"""

from __future__ import annotations

import random
from typing import Sequence

from ..errors import InputError

NOISE_DENSITY = 0.15
MEAN_SPAN_LENGTH = 3.0
N_SENTINELS = 100  # sentinel tokens of a pretraining tokenizer: enough spans for 2000-token inputs


def sentinel_tokens(n: int = N_SENTINELS) -> tuple[str, ...]:
    """``("<extra_id_0>", ..., "<extra_id_{n-1}>")``: the sentinel special tokens, in id order."""
    return tuple(f"<extra_id_{i}>" for i in range(n))


def _segment(rng: random.Random, n: int, k: int) -> list[int]:
    """``k`` positive lengths summing to ``n`` (requires 1 <= k <= n), cut points uniform among the n - 1 gaps."""
    cuts = sorted(rng.sample(range(1, n), k - 1))
    bounds = [0, *cuts, n]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def span_lengths(length: int, rng: random.Random, density: float = NOISE_DENSITY,
                 mean_span: float = MEAN_SPAN_LENGTH) -> tuple[list[int], list[int]]:
    """(kept piece lengths, noise span lengths) of a text of ``length`` tokens, in text order
    ``kept[0], noise[0], kept[1], noise[1], ...``; ``kept[0]`` is 0 only for a one-token text."""
    if length < 1:
        raise InputError(f"span corruption needs at least 1 token, got {length}")
    if not 0.0 < density < 1.0:
        raise InputError(f"noise density must be in (0, 1), got {density!r}")
    if not mean_span >= 1.0:
        raise InputError(f"mean noise span length must be >= 1, got {mean_span!r}")
    noise = min(max(round(length * density), 1), length)
    spans = max(round(noise / mean_span), 1)
    kept = length - noise
    if kept == 0:  # a one-token text: all noise, one span
        return [0], [noise]
    spans = min(spans, kept)  # every span needs a kept piece before it
    return _segment(rng, kept, spans), _segment(rng, noise, spans)


def span_corrupt(ids: Sequence[int], sentinel_ids: Sequence[int], rng: random.Random,
                 density: float = NOISE_DENSITY, mean_span: float = MEAN_SPAN_LENGTH) -> tuple[list[int], list[int]]:
    """(input ids, target ids) of ``ids`` with noise spans replaced by ``sentinel_ids[0], [1], ...``.

    The target is ``sentinel_0 span_0 sentinel_1 span_1 ... sentinel_k`` (k = number of spans); a
    text with more spans than ``len(sentinel_ids) - 1`` raises ValueError.
    """
    kept, noise = span_lengths(len(ids), rng, density, mean_span)
    if len(noise) + 1 > len(sentinel_ids):
        raise InputError(f"{len(ids)} tokens make {len(noise)} noise spans, more than the {len(sentinel_ids)} "
                         "sentinels allow; use shorter inputs")
    inputs: list[int] = []
    targets: list[int] = []
    pos = 0
    for i, (k, n) in enumerate(zip(kept, noise)):
        inputs += ids[pos : pos + k]
        pos += k
        inputs.append(sentinel_ids[i])
        targets.append(sentinel_ids[i])
        targets += ids[pos : pos + n]
        pos += n
    targets.append(sentinel_ids[len(noise)])
    return inputs, targets


def reconstruct(inputs: Sequence[int], targets: Sequence[int], sentinel_ids: Sequence[int]) -> list[int]:
    """The original ids of a :func:`span_corrupt` pair: each sentinel of ``inputs`` replaced by its span."""
    index = {s: i for i, s in enumerate(sentinel_ids)}
    spans: dict[int, list[int]] = {}
    current: list[int] | None = None
    for t in targets:
        if t in index:
            current = spans.setdefault(index[t], [])
        elif current is not None:
            current.append(t)
    out: list[int] = []
    for t in inputs:
        out += spans.get(index[t], []) if t in index else [t]
    return out
