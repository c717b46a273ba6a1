"""Command line: ``synthesizer train | evaluate | generate | export | lm-eval | configs | bench | compare``.

Bad input (a data row that does not parse, a missing file, an unknown attention kind, task or config
key, a too-long sequence) prints one line ``error: ...`` and exits with status 2, and so does a
missing optional dependency (the line names the extra to install; see ``synthesizer.extras``). An
operating-system error (a read-only folder, a full disk) is one line and status 1, Ctrl-C one line and
status 130. Set ``SYNTHESIZER_DEBUG=1`` to see the traceback instead. Multi-process
training: ``torchrun --nproc_per_node 2 -m synthesizer train --config ...`` (rank 0 writes the files).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import EXIT_USAGE, InputError, check_out_dir, positive_int, report_errors
from .extras import require
from .runs.files import BEST, LAST, RESULT_FILE, is_hf_folder, read_labels

EPILOG_TRAIN = """examples:
  synthesizer train --config lm-sotu-small --attention random
  synthesizer train --config my.yaml --set train.max_steps=2000 --set model.d_model=128
  synthesizer train --config mt-bible-small --out runs/mt --resume
  synthesizer train --config mt-bible-small --print-config      # every value, defaults filled in
  torchrun --nproc_per_node 2 -m synthesizer train --config cls-rotten-small
"""


EPILOG_EXPORT = """examples:
  synthesizer export --run runs/lm-random --out hf/lm-random       # then AutoModelForCausalLM.from_pretrained
  synthesizer export --from-hf hf/lm-random --out runs/lm-back     # an HF folder back into a run folder
"""

DEFAULT_NEW_TOKENS = 64

EPILOG_LM_EVAL = """examples:
  synthesizer lm-eval --run runs/lm-random --tasks lambada_openai,hellaswag --output lm-eval.json
  synthesizer lm-eval --run hf/lm-random --tasks my_task --include-path my_tasks/ --limit 100
"""

RUN_HELP = "run folder written by `synthesizer train`, or a Hugging Face folder written by `synthesizer export`"


def _add_train(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("train", help="train a model from a config, then evaluate it on the test split",
                       description="Train from a YAML/JSON config (or a shipped config name, see "
                                   "`synthesizer configs`); writes checkpoints, log.jsonl and result.json to --out.",
                       epilog=EPILOG_TRAIN, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--config", required=True, metavar="FILE|NAME", help="config file or shipped config name")
    t.add_argument("--attention", metavar="KIND", help="self-attention kind, e.g. vanilla, random, dense, random+vanilla")
    t.add_argument("--out", metavar="DIR", help="run folder (default: runs/<config>-<attention>)")
    t.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a config value, e.g. train.max_steps=500 (repeatable)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--print-config", action="store_true",
                   help="print the config with every default filled in (YAML) and exit without training")
    t.add_argument("--threads", type=int, metavar="N", help="CPU threads for torch (default: torch's choice; "
                   "1 is often faster on a busy machine)")


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("evaluate", help="metrics of a trained run on the test or valid split",
                       description="Recompute the metrics of a run's best checkpoint and print them as JSON.")
    e.add_argument("--run", required=True, metavar="DIR", help=RUN_HELP)
    e.add_argument("--split", default="test", choices=("test", "valid"))
    e.add_argument("--checkpoint", default=BEST, choices=(BEST, LAST))


def _add_generate(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("generate", help="continue text (LM), translate/summarize/reply (seq2seq) or classify",
                       description="Use a trained run on new input: one output line per input line, printed "
                                   "as soon as it is ready. A blank input (an empty --prompt, a blank line "
                                   "of --input) gives an empty output line for a seq2seq run or a "
                                   "classifier, and text from the start of a new document for an LM.")
    g.add_argument("--run", required=True, metavar="DIR", help=RUN_HELP)
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", metavar="TEXT", help="one input text")
    src.add_argument("--input", metavar="FILE", help="a file with one input per line")
    g.add_argument("--beam", type=int, metavar="N", help="beam search with N beams")
    g.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    g.add_argument("--top-k", type=int, metavar="K")
    g.add_argument("--top-p", type=float, metavar="P")
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--max-new-tokens", type=int, metavar="N",
                   help=f"at most N new tokens (default: {DEFAULT_NEW_TOKENS}, or as many as fit the model's max_len)")
    g.add_argument("--seed", type=int, default=0, help="seed for --sample")
    g.add_argument("--checkpoint", default=BEST, choices=(BEST, LAST))


def _add_export(sub: argparse._SubParsersAction) -> None:
    x = sub.add_parser("export", help="convert a run folder to a Hugging Face folder, or back",
                       description="Write a run's checkpoint as a Hugging Face transformers folder (config.json, "
                                   "model.safetensors, tokenizer.json, the experiment config), or, with --from-hf, "
                                   "an HF folder written this way back into a run folder. Needs the 'hf' extra.",
                       epilog=EPILOG_EXPORT, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = x.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", metavar="RUN", help="run folder written by `synthesizer train`")
    source.add_argument("--from-hf", metavar="DIR", dest="from_hf", help="HF folder to turn into a run folder")
    x.add_argument("--out", required=True, metavar="DIR", help="the folder to write (HF folder, or run folder with --from-hf)")
    x.add_argument("--checkpoint", default=BEST, choices=(BEST, LAST), help="with --run: which checkpoint")


def _add_lm_eval(sub: argparse._SubParsersAction) -> None:
    h = sub.add_parser("lm-eval", help="a causal LM on EleutherAI's lm-evaluation-harness tasks",
                       description="Run lm-evaluation-harness tasks on a trained causal LM (a run folder of task "
                                   "'lm' or its HF folder); prints the harness's table. Needs the 'eval' extra; the "
                                   "harness's own tasks download their data (network).",
                       epilog=EPILOG_LM_EVAL, formatter_class=argparse.RawDescriptionHelpFormatter)
    h.add_argument("--run", required=True, metavar="RUN_OR_HF_DIR", help=RUN_HELP)
    h.add_argument("--tasks", required=True, metavar="T1,T2", help="comma-separated harness task names")
    h.add_argument("--include-path", metavar="DIR", help="a folder of extra task YAML files")
    h.add_argument("--limit", type=float, metavar="N", help="at most N documents per task (a fraction if < 1)")
    h.add_argument("--batch-size", type=int, default=1, metavar="N")
    h.add_argument("--device", default="cpu", metavar="cpu|cuda", help="cpu (default), cuda or cuda:N")
    h.add_argument("--output", metavar="FILE", help="write the harness's results as JSON")
    h.add_argument("--log-samples", action="store_true", help="keep every document's scores in --output")
    h.add_argument("--checkpoint", default=BEST, choices=(BEST, LAST), help="with a run folder: which checkpoint")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="synthesizer", description="Train, evaluate and use Synthesizer models.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_train, _add_evaluate, _add_generate, _add_export, _add_lm_eval):
        add(sub)
    sub.add_parser("configs", help="list the shipped configs", description="List the configs shipped with the package.")
    d = sub.add_parser("data", help="where a built-in corpus is read from and its content hashes",
                       description="Print where each named corpus is read from and the sha256 of every whole split as "
                                   "loaded: the hashes that run records and report headers hold for a corpus used "
                                   "whole (docs/reproduce.md), to check a copy of the data against them.")
    d.add_argument("names", nargs="+", metavar="NAME", help="built-in corpus names, e.g. sotu chitchat")
    sub.add_parser("bench", help="attention/model benchmarks (see `synthesizer bench --help`)", add_help=False)
    sub.add_parser("compare", help="train attention kinds side by side and report on them: run, plan, render, time, "
                                   "index (see `synthesizer compare --help`)", add_help=False)
    return p


# ----------------------------------------------------------------------------- commands

def cmd_train(args: argparse.Namespace) -> int:
    require("safetensors")  # the first checkpoint is saved after training steps: fail now, not then
    from .tasks.config import ExperimentConfig, resolve_config
    from .tasks.experiment import check_kind_options, run_experiment
    from .runs.results import STOPPED, outcome
    from .training import distributed

    if args.threads is not None:
        positive_int("--threads", args.threads)
        import torch
        torch.set_num_threads(args.threads)
    cfg = ExperimentConfig.from_file(args.config, args.overrides)
    if args.attention:
        cfg = cfg.with_attention(args.attention)
    check_kind_options(cfg)  # with the kind it trains: before printing it, and before its folder is made
    if args.print_config:
        import yaml

        print(yaml.safe_dump(json.loads(json.dumps(cfg.resolved())), sort_keys=False), end="")
        return 0
    out = Path(args.out) if args.out else Path("runs") / f"{resolve_config(args.config).stem}-{cfg.attention}"
    check_out_dir("--out", out)
    try:
        result = run_experiment(cfg, out, resume=args.resume, progress=not args.quiet)
        rank = distributed.get_rank()
    finally:
        distributed.cleanup()
    if rank != 0:
        return 0
    if outcome(result) == STOPPED:
        print(f"stopped ({result['stopped']}) at step {result['steps']}; continue with: "
              f"synthesizer train --config {args.config} --out {out} --resume", file=sys.stderr)
        return 130
    summary = {k: result[k] for k in ("task", "data", "attention", "steps", "train_time_s", "diverged")}
    summary.update(test=result["test_metrics"], baselines=result["baselines"], result=str(out / RESULT_FILE))
    print(json.dumps(summary, indent=2))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    if is_hf_folder(args.run):
        from .hf.convert import evaluate_folder

        print(json.dumps(evaluate_folder(args.run, args.split), indent=2))
        return 0
    from .tasks.trained import evaluate_run

    print(json.dumps(evaluate_run(args.run, args.split, args.checkpoint), indent=2))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .hf.convert import export_run, import_hf

    check_out_dir("--out", args.out)
    if args.from_hf is not None:
        print(import_hf(args.from_hf, args.out))
    else:
        print(export_run(args.run, args.out, args.checkpoint))
    return 0


def _load_for_use(run: str, checkpoint: str) -> tuple:
    """(model in eval mode, tokenizer, family, regression?, label names or None) of a run or HF folder."""
    if is_hf_folder(run):
        from .hf.convert import load_folder

        model, tok, _, family, names = load_folder(run)
        return model, tok, family, family == "classifier" and model.config.n_classes == 1, names
    from .tasks.data import TASK_CLASSES
    from .tasks.trained import load_trained

    model, tok, cfg = load_trained(run, checkpoint)
    return model, tok, TASK_CLASSES[cfg.task].family, cfg.task == "regression", read_labels(run)


def _inputs(args: argparse.Namespace) -> list[str]:
    if args.prompt is not None:
        return [args.prompt]
    from .data.sources import read_lines

    path = Path(args.input)
    if not path.is_file():
        raise InputError(f"--input {path}: no such file")
    lines = read_lines(path)  # the data readers' rule: UTF-8, a byte-order mark dropped, bad bytes named by line
    if not any(line.strip() for line in lines):
        raise InputError(f"--input {path}: the file has no text")
    return lines


def cmd_generate(args: argparse.Namespace) -> int:
    import torch

    from .data.batching import pad_sequences
    from .models.generation import beam_search, generate

    if args.beam is not None:
        positive_int("--beam", args.beam)
    if args.beam and args.sample:
        raise InputError("choose either --beam or --sample, not both")
    model, tok, family, regression, names = _load_for_use(args.run, args.checkpoint)
    texts = _inputs(args)
    gen = torch.Generator().manual_seed(args.seed)

    def one(text: str) -> str:
        if family == "classifier":
            return _classify(model, tok, regression, text, names)
        if family == "lm":
            ids = tok.encode(text) or [tok.eos_id]  # the LM saw EOS before every document: start a new one
            inputs, mask = [ids], None
        else:
            ids = tok.encode(text)
            if not ids:  # nothing to translate: an empty line keeps the output aligned with the input
                return ""
            inputs, mask = pad_sequences([ids], tok.pad_id)
        budget = _new_tokens(model.config.max_len, len(ids) if family == "lm" else 1, args.max_new_tokens)
        if args.beam and args.beam > 1:
            seq = beam_search(model, inputs, budget, src_padding_mask=mask, num_beams=args.beam).best()[0]
        else:
            seq = generate(model, inputs, budget, src_padding_mask=mask, do_sample=args.sample,
                           temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                           generator=gen).sequences()[0]
        out = tok.decode(seq[len(ids):] if family == "lm" else seq)
        if family == "lm" and text.strip():
            return text + out  # the prompt, then its continuation
        return out.strip()

    for lineno, text in enumerate(texts, 1):
        try:
            result = one(text)
        except InputError as e:
            raise InputError(f"--input {args.input}:{lineno}: {e}" if args.input else f"--prompt: {e}") from e
        # flush: the outputs so far stay on a pipe when a later line fails
        print(result, flush=True)
    return 0


def _new_tokens(max_len: int, start: int, asked: int | None) -> int:
    """How many tokens to generate after ``start`` positions (the LM's prompt, a decoder's start token):
    ``asked``, or by default DEFAULT_NEW_TOKENS cut to what fits ``max_len``. A prompt longer than
    ``max_len`` is left to generation's own error, which names its length."""
    room = max_len - start
    if asked is None:
        if room == 0:
            raise InputError(f"prompt length {start} leaves no room for new tokens within max_len={max_len}")
        return max(1, min(DEFAULT_NEW_TOKENS, room))
    if 0 <= room < asked:
        raise InputError(f"prompt length {start} + --max-new-tokens {asked} exceeds max_len={max_len}; give at most "
                         f"{room} (or leave --max-new-tokens out: the default fits max_len)")
    return asked


def _classify(model, tok, regression: bool, text: str, names: list[str] | None) -> str:
    """``label<TAB>probability`` (or the regression value) of one text or tab-separated pair; "" for a
    blank one. ``names``: the class labels, or None to print class indices."""
    import torch

    from .data.batching import pad_sequences
    from .tasks.classification import encode_input

    if not text.strip():
        return ""
    a, _, b = text.partition("\t")  # a text pair is given tab-separated
    max_len, policy = model.config.max_len, model.config.on_too_long

    def fit(n: int) -> None:  # the model's own length policy, as the task applied it in training
        if policy != "truncate":
            raise InputError(f"{n} tokens, more than the model's max_len={max_len} (its on_too_long: {policy})")

    ids, segs = encode_input(tok, a, b or None, max_len, fit)
    x, mask = pad_sequences([ids], tok.pad_id)
    with torch.no_grad():
        out = model(x, mask, torch.tensor([segs]) if b else None)
    if regression:
        return f"{float(out[0]):.4f}"
    probs = out.softmax(-1)[0]
    k = int(probs.argmax())
    return f"{names[k] if names else k}\t{float(probs[k]):.3f}"


def cmd_lm_eval(args: argparse.Namespace) -> int:
    require("transformers", "lm_eval")
    from .hf.harness import main as lm_eval_main

    return lm_eval_main(args)


def cmd_data(args: argparse.Namespace) -> int:
    from .data import load_corpus
    from .data.provenance import data_provenance

    for name in args.names:
        found = data_provenance(load_corpus(name))
        print(f"{name}: {found['origin']}")
        for split, v in found["splits"].items():
            print(f"  {split:<5} {v['examples']:>7} examples  sha256 {v['sha256']}")
    return 0


def cmd_configs(args: argparse.Namespace) -> int:
    from .tasks.config import config_description, shipped_configs

    configs = shipped_configs()
    width = max(map(len, configs), default=0)
    for name, path in configs.items():
        print(f"{name:<{width}}  {config_description(path)}")
    return 0


def _forward(command: str, argv: list[str]) -> int:
    """``bench`` and ``compare`` parse their own options (and ``--help``) under the name ``synthesizer COMMAND``."""
    if command == "bench":
        from .bench.__main__ import main as bench_main
        bench_main(argv, prog="synthesizer bench")
        return 0
    from .comparison.main import main as compare_main
    return compare_main(argv) or 0


COMMANDS = {"train": cmd_train, "evaluate": cmd_evaluate, "generate": cmd_generate, "export": cmd_export,
            "lm-eval": cmd_lm_eval, "configs": cmd_configs, "data": cmd_data}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in (*COMMANDS, "bench", "compare") else None

    def run() -> int:
        if command in ("bench", "compare"):
            return _forward(command, argv[1:])
        args = _parser().parse_args(argv)
        if args.command is None:
            _parser().print_help()
            return EXIT_USAGE
        return COMMANDS[args.command](args)

    return _exit(report_errors(run, f"synthesizer {command}" if command else "synthesizer",
                               prefer="bench" if command == "bench" else "train"))


def _exit(code: int) -> int:
    if code:
        sys.exit(code)
    return 0
