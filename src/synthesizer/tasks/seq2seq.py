"""Translation, summarization and dialogue: an encoder-decoder trained with label-smoothed cross-entropy.

Source ids are the tokenized source; the decoder reads ``<s> target`` and predicts ``target </s>``.
Model selection uses the validation loss (cheap, unsmoothed); generation metrics are computed at the
end on at most ``eval.max_eval_examples`` examples, decoded with beam search (``eval.beam_size`` > 1)
or greedily, and detokenized by the tokenizer before scoring:

* translation: ``bleu`` (sacreBLEU); summarization: ``rouge1``, ``rouge2``, ``rougeL``;
  dialogue: ``bleu1``, ``rougeL`` and ``perplexity``. All also report ``loss`` and ``perplexity``.
  The run is judged by the first (``primary_metric``) unless ``eval.metric: perplexity`` says otherwise.
* baselines: the source copied as the output, scored the same way; an add-one smoothed unigram model of
  the training targets, its perplexity on the same target tokens as the model's.
* per-example statistics of the generation metric (``per_example``), where it is the primary one: BLEU's
  sufficient statistics per sentence (BLEU-1's for dialogue), or the ROUGE-L F of every pair.

With ``batch.pack`` the training pairs are packed (``data/packing.py``): several sources to a row of
``max_src_len`` tokens and their targets, in the same order, to a row of ``max_tgt_len + 1``; target k of
a row attends to source k only, each at its own positions. Validation, test loss and generation stay one
pair per row.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..attention.cross import Packed
from ..data.batching import LengthBucketSampler, length_batches, pad_sequences
from ..data.packing import packed_tensors
from ..models.generation import beam_search, generate
from ..training.losses import sequence_cross_entropy
from .base import Task, bucket_sampler, packed_batches, skip_batches, split_of
from .config import SEQ2SEQ_METRICS
from .metrics import bleu1, bleu_sentence_stats, corpus_bleu, perplexity, rouge_per_example, unigram_nll


class Seq2SeqTask(Task):
    family = "seq2seq"
    packs = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.primary_metric = self.cfg.eval.metric or SEQ2SEQ_METRICS[self.cfg.task][0]
        self.higher_is_better = self.primary_metric != "perplexity"
        self.max_src = self.cfg.batch.max_src_len or self.max_len
        self.max_tgt = self.cfg.batch.max_tgt_len or self.max_len - 1
        self.label_smoothing = self.cfg.label_smoothing
        self._data: dict[str, tuple[list[list[int]], list[list[int]]]] = {}
        self._sampler: LengthBucketSampler | None = None

    def encoded(self, split: str) -> tuple[list[list[int]], list[list[int]]]:
        """(source ids, target ids without bos/eos) of ``split``, cut or rejected by the length policy."""
        if split not in self._data:
            rows = split_of(self.corpus, split)
            srcs = self.tok.encode_batch([r["source"] for r in rows])
            tgts = self.tok.encode_batch([r["target"] for r in rows])
            srcs = [self.fit(s, self.max_src, self.where(split, i) + " source", "max_src_len") for i, s in enumerate(srcs)]
            tgts = [self.fit(t, self.max_tgt, self.where(split, i) + " target", "max_tgt_len") for i, t in enumerate(tgts)]
            self.warn_truncated(split)
            self._data[split] = (srcs, tgts)
        return self._data[split]

    def collate(self, srcs: list[list[int]], tgts: list[list[int]]) -> dict[str, Tensor]:
        tok = self.tok
        src, src_mask = pad_sequences(srcs, tok.pad_id)
        tgt_in, tgt_mask = pad_sequences([[tok.bos_id] + t for t in tgts], tok.pad_id)
        tgt_out, _ = pad_sequences([t + [tok.eos_id] for t in tgts], tok.pad_id)
        return {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_mask": tgt_mask, "tgt_out": tgt_out}

    def packed(self, rows: list[list[int]], srcs: list[list[int]], tgts: list[list[int]]) -> dict[str, Tensor]:
        """A packed batch: ``rows`` the example indices of each row; the collated tensors plus each token's
        position and document, for the source (``src_positions``, ``src_documents``) and the target."""
        tok = self.tok
        src = packed_tensors([[srcs[i] for i in row] for row in rows], tok.pad_id)
        tgt_in = packed_tensors([[[tok.bos_id] + tgts[i] for i in row] for row in rows], tok.pad_id)
        tgt_out = packed_tensors([[tgts[i] + [tok.eos_id] for i in row] for row in rows], tok.pad_id)
        return {"src": src.ids, "src_mask": src.padding, "tgt_in": tgt_in.ids, "tgt_mask": tgt_in.padding,
                "tgt_out": tgt_out.ids, "src_positions": src.positions, "src_documents": src.documents,
                "tgt_positions": tgt_in.positions, "tgt_documents": tgt_in.documents}

    # ------------------------------------------------------------------ training
    def _loss(self, model: nn.Module, batch: dict, smoothing: float) -> tuple[Tensor, Tensor]:
        packed = None
        if "src_documents" in batch:
            packed = Packed(batch["tgt_positions"], batch["tgt_documents"], batch["src_positions"], batch["src_documents"])
        logits = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"], packed=packed)
        return sequence_cross_entropy(logits, batch["tgt_out"], self.tok.pad_id, smoothing)

    def step_fn(self, model: nn.Module, batch: dict) -> tuple[Tensor, Tensor]:
        return self._loss(model, batch, self.label_smoothing)

    def train_batches(self, epoch: int, skip: int):
        srcs, tgts = self.encoded("train")
        if self.cfg.batch.pack:
            sizes = [(len(s), len(t) + 1) for s, t in zip(srcs, tgts)]
            gen = packed_batches(sizes, (self.max_src, self.max_tgt + 1), self.max_tokens, self.cfg.seed, epoch,
                                 self.rank, self.world_size, lambda rows: self.packed(rows, srcs, tgts))
            return skip_batches(gen, skip)
        if self._sampler is None:
            lengths = [max(len(s), len(t) + 1) for s, t in zip(srcs, tgts)]
            self._sampler, self._perm = bucket_sampler(lengths, self.max_tokens, self.cfg.batch.max_sentences,
                                                       self.cfg.seed, self.rank, self.world_size)
        self._sampler.set_epoch(epoch)
        perm = self._perm
        gen = (self.collate([srcs[perm[j]] for j in idx], [tgts[perm[j]] for j in idx]) for idx in self._sampler)
        return skip_batches(gen, skip)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def _nll(self, model: nn.Module, split: str) -> float:
        srcs, tgts = self.encoded(split)
        device = next(model.parameters()).device
        lengths = [max(len(s), len(t) + 1) for s, t in zip(srcs, tgts)]
        total, count = 0.0, 0
        for idx in length_batches(lengths, self.max_tokens, self.cfg.batch.max_sentences):
            batch = {k: v.to(device) for k, v in self.collate([srcs[i] for i in idx], [tgts[i] for i in idx]).items()}
            loss, n = self._loss(model, batch, 0.0)
            total, count = total + float(loss), count + int(n)
        return total / count

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        nll = self._nll(model, "valid")
        return {"loss": nll, "perplexity": perplexity(min(nll, 700.0))}

    def _capped(self, split: str) -> tuple[list[dict], list[list[int]]]:
        rows = split_of(self.corpus, split)
        srcs, _ = self.encoded(split)
        n = len(rows) if self.max_eval_examples is None else min(len(rows), self.max_eval_examples)
        return rows[:n], srcs[:n]

    @torch.no_grad()
    def decode(self, model: nn.Module, srcs: list[list[int]], beam_size: int | None = None,
               max_new_tokens: int | None = None) -> list[str]:
        """Detokenized outputs for source id lists (in their order), by beam search or greedily."""
        ev = self.cfg.eval
        beam = beam_size if beam_size is not None else ev.beam_size
        max_new = min(max_new_tokens or ev.max_new_tokens or self.max_tgt + 1, self.max_len - 1)
        batch_size = ev.batch_size
        device = next(model.parameters()).device
        order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))
        out: list[str] = [""] * len(srcs)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            src, mask = pad_sequences([srcs[i] for i in idx], self.tok.pad_id)
            src, mask = src.to(device), mask.to(device)
            if beam > 1:
                seqs = beam_search(model, src, max_new, src_padding_mask=mask, num_beams=beam,
                                   length_penalty=float(ev.length_penalty)).best()
            else:
                seqs = generate(model, src, max_new, src_padding_mask=mask).sequences()
            for i, text in zip(idx, self.tok.decode_batch(seqs)):
                out[i] = text.strip()
        return out

    def _scores(self, hyps: list[str], refs: list[str]) -> tuple[dict[str, float], tuple[str, list]]:
        """The metrics of ``hyps`` against ``refs`` and the per-example statistics of the primary one:
        (metrics, (kind, values)), BLEU as per-sentence sufficient statistics, ROUGE as per-pair F (points)."""
        if self.cfg.task == "translation":
            return {"bleu": corpus_bleu(hyps, refs)}, ("bleu", bleu_sentence_stats(hyps, refs))
        if self.cfg.task == "summarization":
            per = rouge_per_example(hyps, refs)
            return {t: sum(v) / len(v) for t, v in per.items()}, ("rouge", per["rougeL"])
        rouge_l = rouge_per_example(hyps, refs, ("rougeL",))["rougeL"]
        return ({"bleu1": bleu1(hyps, refs), "rougeL": sum(rouge_l) / len(rouge_l)},
                ("bleu", bleu_sentence_stats(hyps, refs, max_ngram_order=1)))

    def metrics(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        nll = self._nll(model, split)
        rows, srcs = self._capped(split)
        hyps = self.decode(model, srcs)
        out, (kind, values) = self._scores(hyps, [r["target"] for r in rows])
        if self.primary_metric != "perplexity":  # perplexity has no per-example statistics (as for lm)
            self.keep_per_example(split, kind, values)
        out.update({"loss": nll, "perplexity": perplexity(min(nll, 700.0)), "n_generated": len(hyps)})
        return out

    def baselines(self, split: str = "test") -> dict[str, float]:
        rows, _ = self._capped(split)
        scores, _ = self._scores([r["source"] for r in rows], [r["target"] for r in rows])
        return {**{f"copy_source_{k}": v for k, v in scores.items()},
                "unigram_perplexity": self._unigram_perplexity(split)}

    def _unigram_perplexity(self, split: str) -> float:
        """Perplexity of an add-one smoothed unigram model of the training targets on every target token
        of ``split`` (end-of-sequence included), the tokens the model's teacher-forced perplexity is taken on."""
        def tokens(name: str) -> list[int]:
            return [i for t in self.encoded(name)[1] for i in (*t, self.tok.eos_id)]

        return perplexity(unigram_nll(tokens("train"), tokens(split), self.tok.vocab_size))
