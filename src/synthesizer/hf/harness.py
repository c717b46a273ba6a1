"""``synthesizer lm-eval``: a trained causal LM on EleutherAI's lm-evaluation-harness (the ``eval`` extra).

The harness loads models by name through ``transformers``' Auto classes; importing
``synthesizer.hf`` (this package) registers the synthesizer classes there first, so the harness's
own ``hf`` model type loads a synthesizer folder like any other. A run folder is exported to an HF
folder in a temporary directory first (:func:`~synthesizer.hf.convert.export_run`).

How the harness scores a synthesizer LM, and why these settings:

* the tokenizer is the run's own (``tokenizer.json``), which adds no special tokens to a text;
* where the harness needs a token before the text (the perplexity tasks' first window, an empty
  context), it uses the EOS token: the project's LMs are trained on documents each preceded by EOS
  (``lm_blocks``), so that is the "start of a document" they know (the harness's default, BOS, is
  a token they never saw);
* float32 weights, and the model's ``max_len`` as the harness's context length (longer texts are
  scored in windows, as the harness does for any model).

Only causal LMs (task ``lm``) are supported: the harness's log-likelihood and perplexity tasks
score text with a causal model; seq2seq and classifier runs are refused with an error saying so.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

from ..errors import InputError, check_out_dir, positive_int
from ..runs.files import BEST, CONFIG_NAME, is_hf_folder
from ..data.records import DataError

SUPPORTED_FAMILY = "lm"
UNKNOWN_WARN_SHARE = 0.5  # a task whose scored tokens are at least this share <unk> is warned about


def family_of(run: str | os.PathLike) -> str:
    """The model family ("lm", "seq2seq", "classifier") of a run folder or HF folder, read from its files."""
    run = Path(run)
    if is_hf_folder(run):
        from .convert import FAMILY_OF

        architectures = json.loads((run / CONFIG_NAME).read_text()).get("architectures") or []
        known = [FAMILY_OF[a] for a in architectures if a in FAMILY_OF]
        if not known:
            raise DataError(f"{run}/config.json: architectures {architectures} name none of {', '.join(FAMILY_OF)}")
        return known[0]
    from ..tasks.data import TASK_CLASSES
    from ..tasks.trained import load_config

    return TASK_CLASSES[load_config(run).task].family


def check_supported(run: str | os.PathLike) -> None:
    """ValueError unless ``run`` holds a causal LM, naming what lm-eval supports."""
    family = family_of(run)
    if family != SUPPORTED_FAMILY:
        raise InputError(f"{run}: a {family} model; synthesizer lm-eval evaluates causal language models only "
                         "(runs of task 'lm', or their HF folders): the harness's tasks score text with a causal "
                         "LM, and its seq2seq and classifier paths do not fit these models")


def evaluate_harness(run: str | os.PathLike, tasks: list[str], *, include_path: str | os.PathLike | None = None,
                     limit: int | float | None = None, batch_size: int = 1, device: str = "cpu",
                     checkpoint: str = BEST, log_samples: bool = False) -> dict:
    """Run the harness's ``tasks`` on the causal LM of ``run`` (a run folder or an HF folder).

    ``include_path``: a folder of task YAML files (the harness's own tasks stay available);
    ``limit``: at most this many documents per task (a fraction when < 1). Returns the harness's
    results dict (``results``, ``configs``, ``versions``, ...; ``samples`` with ``log_samples``).
    """
    if not tasks:
        raise InputError("--tasks: give at least one task name")
    check_device(device)
    positive_int("--batch-size", batch_size)
    if include_path is not None and not Path(include_path).is_dir():
        raise InputError(f"--include-path {include_path}: no such folder")
    check_supported(run)
    import lm_eval
    from lm_eval.tasks import TaskManager

    from . import SynthesizerConfig  # noqa: F401  (registers the model type with the Auto classes)
    from ..data.tokenizer import Tokenizer

    manager = TaskManager(include_path=str(include_path) if include_path is not None else None)
    unknown = [t for t in tasks if t not in manager.all_tasks]
    if unknown:
        where = f" (nor in --include-path {include_path})" if include_path is not None else ""
        raise InputError(f"--tasks: unknown task(s) {', '.join(unknown)}{where}; "
                         "see the harness's task list: lm-eval ls tasks")
    with tempfile.TemporaryDirectory(prefix="synthesizer-lm-eval-") as tmp:
        folder = Path(run)
        if not is_hf_folder(folder):
            from .convert import export_run

            folder = export_run(folder, Path(tmp) / "hf", checkpoint)
        tokenizer = Tokenizer.load(folder)
        model_args = {"pretrained": str(folder), "tokenizer": str(folder), "backend": "causal", "dtype": "float32",
                      "prefix_token_id": tokenizer.eos_id}
        # the samples are always kept: they hold the texts scored, whose unknown tokens are counted below
        results = lm_eval.simple_evaluate(model="hf", model_args=model_args, tasks=list(tasks), task_manager=manager,
                                          limit=limit, batch_size=batch_size, device=device, log_samples=True)
    for task, (share, total) in unknown_shares(results.get("samples") or {}, tokenizer).items():
        if share >= UNKNOWN_WARN_SHARE:
            warnings.warn(f"{task}: {share:.0%} of the {total} tokens it scored are unknown to the model's tokenizer "
                          f"(<unk>, a vocabulary of {tokenizer.vocab_size} tokens): its scores say little about the "
                          "model on this text", stacklevel=2)
    if not log_samples:
        results.pop("samples", None)
    return results


def check_device(device: str) -> None:
    """ValueError unless ``device`` is cpu, or a CUDA device that this torch has."""
    kind, colon, index = device.partition(":")
    if device != "cpu" and (kind != "cuda" or (colon and not index.isdigit())):
        raise InputError(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    if kind == "cuda":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count <= int(index or 0):
            have = f"{count} CUDA device(s)" if count else "no CUDA device (torch.cuda.is_available() is false)"
            raise InputError(f"--device {device}: this torch sees {have}; use --device cpu")


def unknown_shares(samples: dict, tokenizer) -> dict[str, tuple[float, int]]:
    """Per task of the harness's ``samples``: (the share of the tokens of the texts it scored that ``tokenizer``
    maps to <unk>, how many tokens). A text the run's vocabulary does not cover is scored all the same (as
    <unk> after <unk>), so its perplexity measures nothing about the model."""
    shares = {}
    for task, docs in samples.items():
        unknown = total = 0
        for doc in docs:
            for args in doc.get("arguments") or []:
                for text in (a for a in args if isinstance(a, str)):
                    ids = tokenizer.encode(text)
                    total += len(ids)
                    unknown += sum(i == tokenizer.unk_id for i in ids)
        if total:
            shares[task] = (unknown / total, total)
    return shares


def main(args) -> int:
    """``synthesizer lm-eval``: print the harness's table; ``--output FILE``: write its JSON there."""
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    limit = args.limit
    if limit is not None:
        if not limit > 0:
            raise InputError(f"--limit must be > 0 (documents per task, or a fraction below 1), got {limit:g}")
        limit = int(limit) if limit >= 1 and limit == int(limit) else limit
    if args.output:  # checked before the evaluation, not after it
        output = Path(args.output)
        if output.is_dir():
            raise InputError(f"--output {output}: a folder; give a file name (the results are one JSON file)")
        check_out_dir("--output", output.parent)
    results = evaluate_harness(args.run, tasks, include_path=args.include_path, limit=limit,
                               batch_size=args.batch_size, device=args.device, checkpoint=args.checkpoint,
                               log_samples=args.log_samples)
    print(table(results))
    if args.output:
        output = Path(args.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(to_json(results) + "\n", encoding="utf-8")
        print(f"results: {output}")
    return 0


def table(results: dict) -> str:
    """The harness's results table (and its groups table, when a task is a group), as markdown."""
    from lm_eval.utils import make_table

    out = make_table(results)
    if results.get("groups"):
        out += "\n" + make_table(results, "groups")
    return out


def to_json(results: dict) -> str:
    """``results`` as JSON text (numpy values and other objects as the harness writes them)."""
    from lm_eval.utils import handle_non_serializable

    return json.dumps(results, indent=2, default=handle_non_serializable, ensure_ascii=False)


__all__ = ["SUPPORTED_FAMILY", "check_supported", "evaluate_harness", "family_of", "main", "table", "to_json"]
