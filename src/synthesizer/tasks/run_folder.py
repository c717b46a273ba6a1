"""The folder one run trains in, and the rules for reusing it (its files and their names: runs/files.py).

Rank 0 holds the folder's lock (``.lock``, flock) while a run trains there, so a second process is
refused at once; it writes experiment.json (the config as written) and data.json (the data's and the
tokenizer's content hashes, see data/provenance.py) before anything else, so even a run that crashed
before its first checkpoint can be told apart from another.

Resuming continues the run in the folder only if it is the same run: the same config, except the
fields in ``RESUMABLE`` (more or fewer steps, time cap, logging, evaluation and checkpoint cadence,
and the ``eval`` section, which only changes what is measured), the same data (content hashes of
every split) and the same tokenizer file. Anything else is refused with one line naming what
differs. Without resume, a folder holding a finished run (its ``result.json``: that file, never a link, says a
run finished) or a checkpoint is refused; with it, a finished run whose checkpoints are gone is refused too
(training it again from step 0 would overwrite its result).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..data.generated import GENERATED, fixed_tokenizer
from ..data.provenance import data_differences, data_provenance, file_hash, tokenizer_provenance
from ..data.records import Corpus
from ..data.span_corruption import sentinel_tokens
from ..data.tokenizer import FILENAME as TOKENIZER_FILE, Tokenizer
from ..errors import InputError
from ..runs.code import code_provenance
from ..runs.files import (DATA_FILE, EXPERIMENT_FILE, LAST, LINKS, RESULT_FILE, STEP_PREFIX, TOKENIZER_DIR, read_json,
                          write_json)
from ..runs.lock import FolderLock
from ..training import distributed as dist
from .config import PRETRAIN, ExperimentConfig, flatten_config

# config fields a resumed run may change (everything else must match the saved run): they decide how
# long to train and what is logged, evaluated and saved, not what each update does
RESUMABLE = ("train.max_steps", "train.max_minutes", "train.log_every", "train.eval_every", "train.save_every",
             "train.loggers", "train.compile", "eval.*")


def _resumable(key: str) -> bool:
    return key in RESUMABLE or f"{key.split('.')[0]}.*" in RESUMABLE


def holds_checkpoint(path: Path) -> bool:
    """Whether the run folder ``path`` holds a checkpoint, or a link to one (even one whose target is gone)."""
    return any((path / link).is_symlink() or (path / link).exists() for link in LINKS) or \
        any(path.glob(f"{STEP_PREFIX}*"))


class RunFolder:
    """``path``, locked while a run trains in it; :meth:`open` checks it may hold the run and writes the
    run's record first, :meth:`tokenizer` gives the run's tokenizer, :attr:`result` is where it ends."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.existed = self.path.exists()
        self._lock = FolderLock(self.path)

    @property
    def result(self) -> Path:
        return self.path / RESULT_FILE

    def lock(self) -> bool:
        """Take the folder's lock (a second process is refused with an error naming the holder)."""
        return bool(self._lock.acquire())

    def release(self, *, discard: bool = False) -> None:
        """Let the folder go; ``discard``: also remove it if this run made it (it holds nothing yet)."""
        self._lock.release()
        if discard and not self.existed:
            shutil.rmtree(self.path, ignore_errors=True)

    def check_resume(self, cfg: ExperimentConfig, data: dict, resume: bool) -> None:
        """Refuse to start in a folder holding a run (without resume) or to resume a different run (one line)."""
        out_dir = self.path
        finished = (out_dir / RESULT_FILE).exists()  # finished is what result.json says, whatever links are left
        if not resume and (finished or holds_checkpoint(out_dir)):
            raise InputError(f"{out_dir} already holds a {'finished' if finished else 'trained'} run; pass resume "
                             "(--resume) to continue it, or choose another output folder (--out)")
        if not resume:
            return
        if finished and not (out_dir / LAST).exists():
            raise InputError(f"{out_dir} holds a finished run ({RESULT_FILE}) whose checkpoints are gone (no {LAST}): "
                             "there is nothing to resume, and training it again would overwrite its result; choose "
                             "another output folder (--out)")
        differ = []
        saved = out_dir / EXPERIMENT_FILE
        if saved.exists():
            before, now = flatten_config(read_json(saved)), flatten_config(cfg.to_dict())
            for key in sorted(set(before) | set(now)):
                if before.get(key) != now.get(key) and not _resumable(key):
                    differ.append(f"{key} ({before.get(key, 'unset')!r} before, {now.get(key, 'unset')!r} now)")
        record = out_dir / DATA_FILE
        if record.exists():
            saved_data = read_json(record)
            differ += data_differences(saved_data.get("data", {}), data)
            token_file = out_dir / TOKENIZER_DIR / TOKENIZER_FILE
            expected = (saved_data.get("tokenizer") or {}).get("sha256")
            if expected and token_file.is_file() and file_hash(token_file) != expected:
                differ.append(f"the tokenizer file {token_file} (changed since the run started)")
        if differ:
            raise InputError(f"cannot resume {out_dir}: it holds a different run: {'; '.join(differ)}; only "
                             f"{', '.join(RESUMABLE)} may change on resume; choose another output folder (--out)")

    def open(self, cfg: ExperimentConfig, corpus: Corpus, resume: bool) -> dict:
        """Rank 0, holding the lock: check the folder may hold this run, then write experiment.json and
        data.json before anything else. Returns data.json's content."""
        data = data_provenance(corpus)
        self.check_resume(cfg, data, resume)
        record = self.path / DATA_FILE
        saved = read_json(record) if resume and record.exists() else {}
        # the code of the run's first start; a resume with other code is recorded beside it
        code, now = saved.get("code") or code_provenance(), code_provenance()
        provenance = {"data": data, "tokenizer": saved.get("tokenizer"), "code": code}
        if now != code:
            provenance["code_resumed"] = now
        write_json(self.path / EXPERIMENT_FILE, cfg.to_dict())
        write_json(record, provenance)
        return provenance

    def tokenizer(self, cfg: ExperimentConfig, corpus: Corpus, resume: bool, provenance: dict) -> Tokenizer:
        """Train the tokenizer on the train split once per run folder (rank 0), reuse it on resume.

        A pretraining tokenizer also holds the span-corruption sentinels; a run that starts from a
        pretraining run (``init_from``) copies that run's tokenizer instead of training one.

        Rank 0 records the saved file's hash in data.json (and in ``provenance``, which it updates).
        """
        folder = self.path / TOKENIZER_DIR
        if dist.is_main():
            if not (resume and (folder / TOKENIZER_FILE).exists()):
                if cfg.init_from is not None:
                    folder.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(Path(cfg.init_from) / TOKENIZER_DIR / TOKENIZER_FILE, folder / TOKENIZER_FILE)
                else:
                    if cfg.data.corpus in GENERATED:  # a fixed word-level vocabulary (see data/generated.py)
                        tok = fixed_tokenizer(GENERATED[cfg.data.corpus].vocab)
                    else:
                        extra = sentinel_tokens() if cfg.task == PRETRAIN else ()
                        tok = Tokenizer.train(corpus.texts("train"), vocab_size=cfg.tokenizer.vocab_size,
                                              min_frequency=cfg.tokenizer.min_frequency, extra_special=extra)
                    tok.save(folder)
            provenance["tokenizer"] = tokenizer_provenance(folder / TOKENIZER_FILE)
            write_json(self.path / DATA_FILE, provenance)
        dist.barrier()
        return Tokenizer.load(folder)
