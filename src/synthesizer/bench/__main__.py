"""``python -m synthesizer.bench <layer|model|decode|all|attention> [--quick] [--out results/bench]``
(the same as ``synthesizer bench ...``).

``layer``: attention layers over sequence lengths (``attention`` is the same command);
``model``: training tokens/s of a small LM and an encoder classifier; ``decode``: generation
tokens/s and cache memory; ``all``: the three, into one report. Each writes results.jsonl,
results.csv, results.md, run.json and (layer) PNG plots to ``--out`` and prints the markdown.
``dispatch``: every kernel of every kind, timed to rank them per length and mode; also writes the
dispatch table ``impl="auto"`` can read (OUT/dispatch_table.json).
``packing``: training tokens/s (real tokens) of presets' tasks with and without ``batch.pack``.
``dispatch`` and ``packing`` are not part of ``all``.
``report DIR``: redo a results folder's CSV, markdown and plots from its results.jsonl.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

from ..errors import check_out_dir
from . import decode, dispatch, layer, model, packing
from .results import markdown, rewrite_results, write_jsonl, write_results

BENCHES = {"layer": layer, "model": model, "decode": decode}  # what `all` runs
# commands of their own, not part of `all`: dispatch ranks kernels, packing trains presets' tasks
ON_ITS_OWN = {"dispatch": dispatch, "packing": packing}
COMMANDS = ("layer", "attention", "model", "decode", "all", "dispatch", "packing", "report")


def bench_module(command: str):
    """The module that runs ``command`` (``attention`` is ``layer``)."""
    return {**BENCHES, **ON_ITS_OWN}["layer" if command == "attention" else command]


PROG = "python -m synthesizer.bench"  # `synthesizer bench` passes its own name


def command_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The first word of the command line: which benchmark (each one parses the rest)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n", 1)[1].replace("``", ""),
                                epilog=f"options of one command: {prog} COMMAND --help",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=COMMANDS, help="the benchmark to run, or report")
    return p


def report_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"{prog} report", description="Redo a results folder's CSV, markdown and "
                                "plots from its results.jsonl.")
    p.add_argument("results_dir", metavar="RESULTS_DIR", help="a folder a benchmark wrote")
    return p


def parser(command: str, prog: str = PROG) -> argparse.ArgumentParser:
    module = layer if command == "all" else bench_module(command)
    p = argparse.ArgumentParser(prog=f"{prog} {command}", description=module.__doc__.split("\n\n")[0])
    if command == "all":
        p.add_argument("--quick", action="store_true", help="every benchmark's smoke sizes (about a minute)")
        p.add_argument("--kinds", nargs="+", default=None, help="Synthesizer kinds (default: each benchmark's own)")
        p.add_argument("--no-memory", action="store_true", help="skip the layers' peak-memory measurements")
    else:
        module.add_arguments(p)
    layer.add_common_arguments(p)
    return p


def run_all(args: argparse.Namespace, command: str) -> list[dict]:
    """layer, model, decode in turn; the results so far are written after each (a long run keeps them)."""
    rows, start = [], time.perf_counter()
    for name, bench in BENCHES.items():
        sub = parser(name).parse_args((["--kinds", *args.kinds] if args.kinds else []) + (["--quick"] if args.quick else []))
        sub.threads, sub.device = args.threads, args.device
        if name in ("layer", "model"):
            sub.no_memory = args.no_memory
        rows += bench.run(sub)
        write_results(rows, args.out, command, time.perf_counter() - start)
        print(f"# {name} done after {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None, prog: str = PROG) -> list[dict]:
    """Run one command; returns its rows (also written to ``--out``). ``prog``: the name usage lines
    and the recorded command line start with."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # Only the first word here, so that `layer --help` reaches the layer parser.
    command = command_parser(prog).parse_args(argv[:1]).command
    if command == "report":
        for path in rewrite_results(report_parser(prog).parse_args(argv[1:]).results_dir):
            print(path)
        return []
    args = parser(command, prog).parse_args(argv[1:])
    check_out_dir("--out", args.out)
    text = f"{prog} {shlex.join(argv)}"
    start = time.perf_counter()
    args.command_line = text
    rows = run_all(args, text) if command == "all" else bench_module(command).run(args)
    wall = time.perf_counter() - start
    written = write_results(rows, args.out, text, wall)
    if args.jsonl:
        write_jsonl(rows, args.jsonl)
    print(markdown(rows, text, wall), flush=True)
    print(f"# wrote {', '.join(str(p) for p in written)} ({wall:.0f} s)", file=sys.stderr)
    return rows


def _run() -> int:
    main()
    return 0


if __name__ == "__main__":
    from ..errors import report_errors

    sys.exit(report_errors(_run, PROG, prefer="bench"))
