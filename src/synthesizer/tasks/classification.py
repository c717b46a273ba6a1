"""Classification and regression of single texts or text pairs with an encoder classifier.

Inputs are ``<cls> a <sep>`` or ``<cls> a <sep> b <sep>`` with segment ids 0 for the first part and
1 for the second. Classification: cross-entropy, metrics ``accuracy``, ``f1``, ``mcc``; the best
checkpoint has the highest validation accuracy; baseline: the majority class of the training labels.
Regression (``n_classes = 1``): squared error, metrics ``pearson``, ``spearman``, ``mse``; the best
checkpoint has the lowest validation loss; baseline: the training mean (its ``mse``).
With ``batch.pack`` the training inputs are packed several to a row of ``max_len`` tokens
(``data/packing.py``), each attending to itself only and pooled on its own; evaluation keeps one per row.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.batching import LengthBucketSampler, length_batches, pad_sequences
from ..data.packing import packed_tensors
from ..training.losses import sequence_cross_entropy
from .base import Task, bucket_sampler, packed_batches, skip_batches, split_of
from .metrics import classification_metrics, regression_metrics


def encode_input(tok, text: str, text_pair: str | None, limit: int,
                 fit: Callable[[int], object]) -> tuple[list[int], list[int]]:
    """(ids, segment ids) of one classifier input: ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` (segments
    0, then 1 for b). An input longer than ``limit`` first goes to ``fit(length)``, which raises unless
    truncation was chosen; then the longer part is cut first. The task and ``synthesizer generate`` share it."""
    a = tok.encode(text)
    b = tok.encode(text_pair) if text_pair is not None else None
    special = 2 if b is None else 3
    n = len(a) + (len(b) if b is not None else 0) + special
    if n > limit:
        fit(n)
        budget = limit - special
        if b is None:
            a = a[:budget]
        else:  # cut the longer part first
            while len(a) + len(b) > budget:
                if len(a) >= len(b):
                    a = a[:-1]
                else:
                    b = b[:-1]
    ids = [tok.cls_id] + a + [tok.sep_id]
    segments = [0] * len(ids)
    if b is not None:
        ids += b + [tok.sep_id]
        segments += [1] * (len(b) + 1)
    return ids, segments


class ClassificationTask(Task):
    family = "classifier"
    packs = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.regression = self.cfg.task == "regression"
        if self.regression:
            self.primary_metric, self.higher_is_better = "pearson", True
        else:
            self.primary_metric, self.higher_is_better = "accuracy", True
            self.select_metric, self.select_mode = "accuracy", "max"
        self.limit = self.cfg.batch.max_len or self.max_len
        self._data: dict[str, tuple[list[list[int]], list[list[int]], list]] = {}
        self._sampler: LengthBucketSampler | None = None

    @property
    def label_names(self) -> list[str] | None:
        return self.corpus.label_names

    def model_fields(self) -> dict:
        return {"n_classes": 1 if self.regression else self.corpus.num_labels}

    def encode_row(self, text: str, text_pair: str | None, where: str) -> tuple[list[int], list[int]]:
        """(ids, segment ids) of one input, with its length policy applied."""
        return encode_input(self.tok, text, text_pair, self.limit,
                            fit=lambda n: self.fit([0] * n, self.limit, where, "max_len"))

    def encoded(self, split: str):
        if split not in self._data:
            rows = split_of(self.corpus, split)
            ids, segs = [], []
            for i, row in enumerate(rows):
                x, s = self.encode_row(row["text"], row.get("text_pair"), self.where(split, i))
                ids.append(x)
                segs.append(s)
            self.warn_truncated(split)
            self._data[split] = (ids, segs, [row["label"] for row in rows])
        return self._data[split]

    def collate(self, ids: list[list[int]], segs: list[list[int]], labels: list) -> dict[str, Tensor]:
        x, mask = pad_sequences(ids, self.tok.pad_id)
        y = torch.tensor(labels, dtype=torch.float32 if self.regression else torch.long)
        batch = {"ids": x, "mask": mask, "labels": y}
        if any(any(row) for row in segs):  # segment ids only for text pairs; single texts add no segment vector
            batch["segments"] = pad_sequences(segs, 0)[0]
        return batch

    def packed(self, rows: list[list[int]]) -> dict[str, Tensor]:
        """A packed training batch (``rows``: the example indices of each row): ids, padding, segments,
        each token's position and input id, and the labels in the inputs' order (row by row)."""
        ids, segs, labels = self.encoded("train")
        x = packed_tensors([[ids[i] for i in row] for row in rows], self.tok.pad_id)
        order = [i for row in rows for i in row]
        y = torch.tensor([labels[i] for i in order], dtype=torch.float32 if self.regression else torch.long)
        batch = {"ids": x.ids, "mask": x.padding, "labels": y, "positions": x.positions, "documents": x.documents}
        if any(any(segs[i]) for i in order):
            batch["segments"] = packed_tensors([[segs[i] for i in row] for row in rows], 0).ids
        return batch

    def _batch(self, split: str, idx: list[int]) -> dict[str, Tensor]:
        ids, segs, labels = self.encoded(split)
        return self.collate([ids[i] for i in idx], [segs[i] for i in idx], [labels[i] for i in idx])

    # ------------------------------------------------------------------ training
    def _loss(self, out: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
        if self.regression:
            return F.mse_loss(out.float(), labels, reduction="sum"), torch.tensor(labels.shape[0])
        return sequence_cross_entropy(out, labels)

    def step_fn(self, model: nn.Module, batch: dict) -> tuple[Tensor, Tensor]:
        packed = {k: batch[k] for k in ("positions", "documents") if k in batch}  # batch.pack
        return self._loss(model(batch["ids"], batch["mask"], batch.get("segments"), **packed), batch["labels"])

    def train_batches(self, epoch: int, skip: int):
        ids, _, _ = self.encoded("train")
        if self.cfg.batch.pack:
            gen = packed_batches([(len(x),) for x in ids], (self.limit,), self.max_tokens, self.cfg.seed, epoch,
                                 self.rank, self.world_size, self.packed)
            return skip_batches(gen, skip)
        if self._sampler is None:
            self._sampler, self._perm = bucket_sampler([len(x) for x in ids], self.max_tokens,
                                                       self.cfg.batch.max_sentences, self.cfg.seed,
                                                       self.rank, self.world_size)
        self._sampler.set_epoch(epoch)
        perm = self._perm
        return skip_batches((self._batch("train", [perm[j] for j in idx]) for idx in self._sampler), skip)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def predict(self, model: nn.Module, split: str) -> tuple[list, float]:
        """Predictions (class ids or scores) in split order, and the mean loss."""
        ids, _, labels = self.encoded(split)
        device = next(model.parameters()).device
        preds: list = [None] * len(ids)
        total = 0.0
        for idx in length_batches([len(x) for x in ids], self.max_tokens, self.cfg.batch.max_sentences):
            batch = {k: v.to(device) for k, v in self._batch(split, idx).items()}
            out = model(batch["ids"], batch["mask"], batch.get("segments"))
            total += float(self._loss(out, batch["labels"])[0])
            values = out.float().tolist() if self.regression else out.argmax(-1).tolist()
            for i, v in zip(idx, values):
                preds[i] = v
        return preds, total / len(ids)

    def _scores(self, preds: list, labels: list) -> dict[str, float]:
        if self.regression:
            mse = sum((p - y) ** 2 for p, y in zip(preds, labels)) / len(labels)
            return {**regression_metrics(preds, labels), "mse": mse}
        return classification_metrics(preds, labels, self.corpus.num_labels)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        preds, loss = self.predict(model, "valid")
        labels = self.encoded("valid")[2]
        if self.regression:
            return {"loss": loss, **self._scores(preds, labels)}
        return {"loss": loss, "accuracy": sum(int(p == y) for p, y in zip(preds, labels)) / len(labels)}

    def metrics(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        preds, loss = self.predict(model, split)
        labels = self.encoded(split)[2]
        if not self.regression:  # correlations do not split into per-example scores
            self.keep_per_example(split, "accuracy", [int(p == y) for p, y in zip(preds, labels)])
        return {"loss": loss, **self._scores(preds, labels)}

    def baselines(self, split: str = "test") -> dict[str, float]:
        train = [row["label"] for row in split_of(self.corpus, "train")]
        labels = [row["label"] for row in split_of(self.corpus, split)]
        if self.regression:
            mean = sum(train) / len(train)
            return {"train_mean_mse": sum((mean - y) ** 2 for y in labels) / len(labels)}
        majority = max(range(self.corpus.num_labels), key=train.count)
        return {"majority_accuracy": self._scores([majority] * len(labels), labels)["accuracy"]}
