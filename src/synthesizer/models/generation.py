"""Generation for the language model and the encoder-decoder: greedy, sampling, beam search.

All strategies run batched with the incremental caches (``use_cache=True``); ``use_cache=False``
re-runs the full forward pass at every step and must give the same tokens (tests compare them).

Language-model prompts of different lengths: positions are absolute and padding goes on the right,
so every row starts at the shortest prompt's length and advances one position per step; a row whose
prompt is not used up yet has its next prompt token forced instead of the model's choice. Each row
gets up to ``max_new_tokens`` tokens after its own prompt. The encoder-decoder starts every row from
``bos_id``. A row stops at ``eos_id`` (kept in the output); later positions hold ``pad_id``.

Beam search ranks finished hypotheses by ``sum log p / lp`` with the GNMT length penalty
``lp = ((5 + n) / 6) ** length_penalty``, ``n`` the number of generated tokens (EOS included);
live beams compete on the raw sum. A row stops once it holds ``num_beams`` finished hypotheses
(or reaches its length limit, when its live beams join the finished ones).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import InputError, positive_int
from .seq2seq import EncoderDecoder


@dataclass
class GenerationOutput:
    """``tokens`` (B, T): prompt (or BOS) + generated tokens, right-padded with ``pad_id``;
    ``lengths`` (B,): real length of each row; ``logits`` (B, steps, V) or None: the logits of every
    decoded position from the shortest prompt's length on (forced positions included)."""

    tokens: Tensor
    lengths: Tensor
    logits: Tensor | None = None

    def sequences(self) -> list[list[int]]:
        return [row[:n].tolist() for row, n in zip(self.tokens, self.lengths.tolist())]


@dataclass
class BeamOutput:
    """Per input row, up to ``num_beams`` hypotheses (prompt or BOS included) and their
    length-normalised scores, best first."""

    sequences: list[list[list[int]]]
    scores: list[list[float]]

    def best(self) -> list[list[int]]:
        return [hyps[0] for hyps in self.sequences]


# ---------------------------------------------------------------------- model steppers
class _LMStep:
    """Logits (B, V) of the last position given the first ``length`` tokens of ``seqs``."""

    def __init__(self, model: nn.Module, use_cache: bool):
        self.model, self.caches = model, model.new_caches() if use_cache else None

    def __call__(self, seqs: Tensor, length: int, n_new: int) -> Tensor:
        if self.caches is None:
            return self.model(seqs[:, :length])[:, -1]
        return self.model(seqs[:, length - n_new : length], caches=self.caches)[:, -1]

    def reorder(self, index: Tensor) -> None:
        for cache in self.caches or []:
            cache.reorder(index)


class _Seq2SeqStep(_LMStep):
    def __init__(self, model: EncoderDecoder, memory: Tensor, memory_padding_mask: Tensor | None, use_cache: bool):
        super().__init__(model, use_cache)
        self.memory, self.memory_padding_mask = memory, memory_padding_mask

    def __call__(self, seqs: Tensor, length: int, n_new: int) -> Tensor:
        if self.caches is None:
            return self.model.decode(seqs[:, :length], self.memory, self.memory_padding_mask)[:, -1]
        return self.model.decode(seqs[:, length - n_new : length], self.memory, self.memory_padding_mask,
                                 caches=self.caches)[:, -1]

    def reorder(self, index: Tensor) -> None:
        super().reorder(index)
        # Beam reordering stays within one source, but keep the memory aligned with the rows anyway.
        self.memory = self.memory.index_select(0, index)
        if self.memory_padding_mask is not None:
            self.memory_padding_mask = self.memory_padding_mask.index_select(0, index)


# ---------------------------------------------------------------------- token choice
def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """Set to -inf every logit outside the top ``top_k`` and outside the smallest set whose
    probability reaches ``top_p`` (the most likely token always stays). logits (B, V)."""
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        drop = probs.cumsum(dim=-1) - probs >= top_p  # mass before this token already reaches top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def _chooser(do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
             generator: torch.Generator | None) -> Callable[[Tensor], Tensor]:
    if not do_sample:
        return lambda logits: logits.argmax(dim=-1)
    if not temperature > 0:
        raise InputError(f"temperature must be > 0, got {temperature!r} (use do_sample=False for greedy)")
    if top_k is not None:
        positive_int("top_k", top_k)
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise InputError(f"top_p must be in (0, 1] or None, got {top_p!r}")

    def sample(logits: Tensor) -> Tensor:
        probs = filter_logits(logits.float() / temperature, top_k, top_p).softmax(dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    return sample


# ---------------------------------------------------------------------- inputs
def _prompts(prompts: Tensor | Sequence[Sequence[int]], pad_id: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """A 2-D tensor (equal lengths) or a list of token lists -> (B, max_len) right-padded ids, lengths (B,)."""
    if isinstance(prompts, Tensor):
        if prompts.dim() != 2 or prompts.shape[1] == 0:
            raise InputError(f"prompts must be a (batch, length>0) tensor or a list of token lists, got {tuple(prompts.shape)}")
        return prompts.to(device), torch.full((prompts.shape[0],), prompts.shape[1], device=device)
    rows = [torch.as_tensor(list(p), dtype=torch.long) for p in prompts]
    if not rows or any(len(r) == 0 for r in rows):
        raise InputError("every prompt needs at least one token (to start from nothing, give the token the LM "
                         "saw before each document: EOS for the `lm` task, which puts it between documents)")
    lengths = torch.tensor([len(r) for r in rows], device=device)
    ids = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    return ids.to(device), lengths


def _limit(model: nn.Module, lengths: Tensor, max_new_tokens: int) -> Tensor:
    """Per-row end position (exclusive), checked against the model's max_len."""
    positive_int("max_new_tokens", max_new_tokens)
    config = model.config
    if int(lengths.max()) > config.max_len:
        raise InputError(f"prompt length {int(lengths.max())} exceeds max_len={config.max_len}")
    end = lengths + max_new_tokens
    if int(end.max()) > config.max_len:
        if config.on_too_long != "truncate":
            raise InputError(f"prompt + max_new_tokens = {int(end.max())} positions exceeds max_len={config.max_len}; "
                             f"lower max_new_tokens or set on_too_long='truncate'")
        warnings.warn(f"generation stops at max_len={config.max_len} positions", stacklevel=3)
        end = end.clamp_max(config.max_len)
    return end


def _check_sources(src: Tensor, src_padding_mask: Tensor | None) -> None:
    """ValueError for a source with no token: src (B, s) of length 0, or a row that is all padding.
    The decoder would attend to nothing (NaN, or a crash in some kernels) and invent a translation."""
    if src.shape[1] == 0:
        raise InputError(f"source ids of shape {tuple(src.shape)} hold no token: every source needs at least one")
    if src_padding_mask is not None:
        if src_padding_mask.shape != src.shape:
            raise InputError(f"src_padding_mask of shape {tuple(src_padding_mask.shape)} does not match "
                             f"the source ids' {tuple(src.shape)}")
        empty = src_padding_mask.bool().all(dim=1).nonzero().flatten().tolist()
        if empty:
            raise InputError(f"source row(s) {', '.join(map(str, empty))} are all padding: every source needs "
                             f"at least one token")


def _setup(model: nn.Module, inputs, src_padding_mask: Tensor | None, max_new_tokens: int, repeat: int, use_cache: bool):
    config, device = model.config, next(model.parameters()).device
    if isinstance(model, EncoderDecoder):
        if not isinstance(inputs, Tensor) or inputs.dim() != 2:
            raise InputError("an encoder-decoder needs source ids as a (batch, src_len) tensor, with src_padding_mask for padding")
        _check_sources(inputs, src_padding_mask)
        memory = model.encode(inputs.to(device), None if src_padding_mask is None else src_padding_mask.to(device))
        mask = None if src_padding_mask is None else src_padding_mask.to(device)[:, : memory.shape[1]]
        seqs = torch.full((memory.shape[0], 1), config.bos_id, dtype=torch.long, device=device)
        lengths = torch.ones(memory.shape[0], dtype=torch.long, device=device)
        if repeat > 1:
            memory = memory.repeat_interleave(repeat, 0)
            mask = None if mask is None else mask.repeat_interleave(repeat, 0)
        step = _Seq2SeqStep(model, memory, mask, use_cache)
    else:
        if src_padding_mask is not None:
            raise InputError("src_padding_mask is for encoder-decoder models; give LM prompts as token lists")
        seqs, lengths = _prompts(inputs, config.pad_id, device)
        step = _LMStep(model, use_cache)
    end = _limit(model, lengths, max_new_tokens)
    width = int(end.max())
    seqs = torch.cat([seqs, seqs.new_full((seqs.shape[0], width - seqs.shape[1]), config.pad_id)], dim=1)
    return step, seqs, lengths, end


class _EvalMode:
    """no_grad and eval() for the duration, restoring the model's mode afterwards."""

    def __init__(self, model: nn.Module):
        self.model, self.was_training, self.no_grad = model, model.training, torch.no_grad()

    def __enter__(self):
        self.no_grad.__enter__()
        self.model.eval()

    def __exit__(self, *exc):
        self.model.train(self.was_training)
        self.no_grad.__exit__(*exc)


# ---------------------------------------------------------------------- greedy and sampling
def generate(model: nn.Module, inputs: Tensor | Sequence[Sequence[int]], max_new_tokens: int, *,
             src_padding_mask: Tensor | None = None, do_sample: bool = False, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, generator: torch.Generator | None = None,
             stop_at_eos: bool = True, use_cache: bool = True, return_logits: bool = False) -> GenerationOutput:
    """Greedy (default) or sampled continuation.

    ``inputs``: LM prompts (list of token lists, or a (B, n) tensor), or source ids (B, s) for an
    ``EncoderDecoder`` with ``src_padding_mask`` (B, s). Sampling: ``temperature``, ``top_k``,
    ``top_p``; pass a seeded ``generator`` for reproducible draws.
    """
    choose = _chooser(do_sample, temperature, top_k, top_p, generator)
    config = model.config
    eos = config.eos_id if stop_at_eos else None
    with _EvalMode(model):
        step, seqs, lengths, end = _setup(model, inputs, src_padding_mask, max_new_tokens, 1, use_cache)
        final = end.clone()
        done = torch.zeros_like(lengths, dtype=torch.bool)
        cur = n_new = int(lengths.min())
        all_logits = []
        while cur < seqs.shape[1]:
            logits = step(seqs, cur, n_new)
            if return_logits:
                all_logits.append(logits)
            forced = cur < lengths
            token = torch.where(forced, seqs[:, cur], choose(logits))
            token = token.masked_fill(done, config.pad_id)
            seqs[:, cur] = token
            if eos is not None:
                stopped = ~forced & ~done & (token == eos)
                final = torch.where(stopped, cur + 1, final)
                done |= stopped
            cur, n_new = cur + 1, 1
            done |= cur >= end
            if bool(done.all()):
                break
        logits = torch.stack(all_logits, dim=1) if return_logits else None
        return GenerationOutput(seqs[:, : int(final.max())], final, logits)


# ---------------------------------------------------------------------- beam search
class _Hypotheses:
    """The finished hypotheses of each of ``b`` examples, (GNMT length-normalised score, tokens), and
    whether an example is done; ``prompt_lengths`` (b,) are not counted as generated."""

    def __init__(self, b: int, k: int, prompt_lengths: Tensor, length_penalty: float):
        self.k, self.prompt_lengths, self.length_penalty = k, prompt_lengths, length_penalty
        self.finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
        self.done = [False] * b

    def add(self, row: int, tokens: list[int], raw: float) -> None:
        generated = len(tokens) - int(self.prompt_lengths[row])
        self.finished[row].append((raw / ((5 + generated) / 6) ** self.length_penalty, tokens))

    def add_ended(self, seqs: Tensor, is_eos: Tensor, beam: Tensor, top: Tensor, cur: int, eos: int) -> None:
        """Every candidate among the best k (beam ``beam``, score ``top``, (b, 2k)) that ends with EOS at ``cur``."""
        k = self.k
        for row in torch.nonzero(is_eos[:, :k].any(dim=1)).flatten().tolist():
            if self.done[row]:
                continue
            for r in torch.nonzero(is_eos[row, :k]).flatten().tolist():
                beam_row = row * k + int(beam[row, r])
                seqs[beam_row, cur] = eos  # restored by the caller's reorder
                self.add(row, seqs[beam_row, : cur + 1].tolist(), float(top[row, r]))

    def close(self, seqs: Tensor, scores: Tensor, cur: int, end: Tensor) -> None:
        """Mark done the examples at their end (their live beams count as finished) or with k finished."""
        for row in range(len(self.done)):
            if self.done[row]:
                continue
            if cur >= int(end[row]):
                for r in range(self.k):
                    if torch.isfinite(scores[row, r]):
                        self.add(row, seqs[row * self.k + r, :cur].tolist(), float(scores[row, r]))
                self.done[row] = True
            elif len(self.finished[row]) >= self.k:
                self.done[row] = True

    def output(self) -> BeamOutput:
        results = [sorted(hyps, key=lambda h: -h[0])[: self.k] for hyps in self.finished]
        return BeamOutput([[h[1] for h in hyps] for hyps in results], [[h[0] for h in hyps] for hyps in results])


def _force_prompt(logp: Tensor, seqs: Tensor, cur: int, forced: Tensor) -> Tensor:
    """logp (b, k, V) where rows still inside their prompt (``forced`` (b,)) score 0 for the prompt's
    token at ``cur`` and -inf for every other: a prompt token is given, not scored."""
    if not bool(forced.any()):
        return logp
    b, k = logp.shape[:2]
    only = torch.full_like(logp, float("-inf"))
    only.scatter_(-1, seqs.view(b, k, -1)[:, :, cur : cur + 1], 0.0)
    return torch.where(forced[:, None, None], only, logp)


def beam_search(model: nn.Module, inputs: Tensor | Sequence[Sequence[int]], max_new_tokens: int, *,
                src_padding_mask: Tensor | None = None, num_beams: int = 4, length_penalty: float = 0.6,
                stop_at_eos: bool = True, use_cache: bool = True) -> BeamOutput:
    """Beam search with the GNMT length penalty (see the module docstring); inputs as in ``generate``."""
    k = positive_int("num_beams", num_beams)
    eos = model.config.eos_id if stop_at_eos else None
    with _EvalMode(model):
        step, seqs, lengths, end = _setup(model, inputs, src_padding_mask, max_new_tokens, k, use_cache)
        b, device = seqs.shape[0], seqs.device
        seqs, row_lengths = seqs.repeat_interleave(k, 0), lengths
        scores = torch.full((b, k), float("-inf"), device=device)
        scores[:, 0] = 0.0  # identical beams at the start: only the first one is alive
        hyps = _Hypotheses(b, k, row_lengths, length_penalty)
        rows = torch.arange(b, device=device).unsqueeze(1) * k
        order = torch.arange(2 * k, device=device)
        cur = n_new = int(lengths.min())
        while cur < seqs.shape[1]:
            logp = F.log_softmax(step(seqs, cur, n_new).float(), dim=-1).view(b, k, -1)
            vocab = logp.shape[-1]
            forced = cur < row_lengths
            logp = _force_prompt(logp, seqs, cur, forced)
            top, index = (scores.unsqueeze(-1) + logp).view(b, -1).topk(min(2 * k, k * vocab), dim=-1)
            beam, token = index // vocab, index % vocab
            is_eos = torch.zeros_like(token, dtype=torch.bool)
            if eos is not None:
                is_eos = (token == eos) & ~forced[:, None] & torch.isfinite(top)
            # Live beams: the best k candidates that did not just end.
            keep = (is_eos.long() * 2 * k + order[: top.shape[1]]).argsort(dim=-1)[:, :k]
            source = (rows + beam.gather(1, keep)).view(-1)
            hyps.add_ended(seqs, is_eos, beam, top, cur, eos)
            seqs = seqs.index_select(0, source)
            seqs[:, cur] = token.gather(1, keep).view(-1)
            scores = top.gather(1, keep)
            step.reorder(source)
            cur, n_new = cur + 1, 1
            hyps.close(seqs, scores, cur, end)
            if all(hyps.done):
                break
        return hyps.output()
