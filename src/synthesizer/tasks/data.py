"""The data and task family a config names: :func:`load_data` reads the corpus (built-in, hub or
local files) and checks it against the task; :func:`task_class` picks the task family."""

from __future__ import annotations

from ..data.generated import GENERATED
from ..data.hub import load_hub
from ..data.pretraining import pretraining_corpus, text_corpus
from ..data.records import SEQ2SEQ_TASKS, Corpus, DataError
from ..data.sources import load_corpus, load_files
from ..errors import InputError
from .answer_lm import AnswerLMTask
from .base import Task
from .classification import ClassificationTask
from .config import PRETRAIN, ExperimentConfig
from .lm import LMTask
from .pretrain import PretrainTask
from .seq2seq import Seq2SeqTask

TASK_CLASSES: dict[str, type[Task]] = {"lm": LMTask, "classification": ClassificationTask,
                                       "regression": ClassificationTask, PRETRAIN: PretrainTask,
                                       **{t: Seq2SeqTask for t in SEQ2SEQ_TASKS}}

def task_class(cfg: ExperimentConfig) -> type[Task]:
    """The task family of ``cfg``: its task's, or answer-scored LM for a generated diagnostic corpus."""
    spec = GENERATED.get(cfg.data.corpus)
    return AnswerLMTask if spec is not None and spec.answers and cfg.task == "lm" else TASK_CLASSES[cfg.task]


def load_data(cfg: ExperimentConfig) -> Corpus:
    """The corpus named by ``cfg.data`` (built-in, hub or local files), checked against ``cfg.task``.

    Pretraining reads the texts of any data (``data.corpora``: several built-in corpora; local files
    are read as language-modelling text) as a text corpus (``data/pretraining.py``).
    """
    d = cfg.data
    max_words = d.max_words
    if max_words is not None and (cfg.task == PRETRAIN or cfg.task == "lm"):
        raise InputError(f"data.max_words keeps the short examples of an example corpus; a {cfg.task!r} run reads "
                         "documents, which it would drop whole: leave it out")
    # the length filter first, then the limit: data.limit examples of the short ones
    common = {"limit": None if max_words else d.limit}
    if "max_history" in d:
        common["max_history"] = d.max_history
    if d.corpora is not None:
        corpus = pretraining_corpus(d.corpora, limit=d.limit)
    elif d.corpus is not None:
        corpus = load_corpus(d.corpus, **common)
    elif d.hub is not None:
        corpus = load_hub(d.hub, data_files=d.data_files, path=d.path, **common)
    else:
        corpus = load_files("lm" if cfg.task == PRETRAIN else cfg.task, d.train, d.valid, d.test,
                            name=d.name, **d.columns, **common)
    if cfg.task == PRETRAIN:
        corpus = text_corpus(corpus)
    elif corpus.task != cfg.task and not {corpus.task, cfg.task} <= {"translation", "summarization", "dialogue"}:
        raise InputError(f"data {corpus.name!r} is a {corpus.task} corpus but task is {cfg.task!r}")
    if max_words:
        corpus = corpus.max_words(max_words).limit(d.limit)
    for split in ("train", "valid", "test"):
        if not corpus.splits.get(split):
            short = f" after data.max_words={max_words} (no example that short)" if max_words else ""
            raise DataError(f"corpus {corpus.name!r} ({corpus.origin}): empty or missing {split!r} split{short}")
    return corpus
