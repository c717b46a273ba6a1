"""Re-render every committed report with this checkout's code and compare it with a reference rendering.

A change to report/ or comparison/ that claims "behaviour unchanged" runs this before it is committed:

    python scripts/rerender_check.py --save REF     # with the code before the change: the reference renderings
    python scripts/rerender_check.py --against REF  # with the code after it: every file must be the same

Without --save or --against it compares with the committed files themselves (reports rendered by older code
may differ for reasons of their own). The command and rendered-by lines of a report's header (and results.json's
"commands" and "rendered_by") say how and by which code it was rendered, so they are left out of the comparison.
A scale study renders its widths, then its report across widths; a baselines study renders its own report
against the committed comparisons it re-judges.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
HEADER_MD = re.compile(r"^- (command|rendered by): .*\n", re.MULTILINE)
HEADER_HTML = re.compile(r"<li>(command|rendered by): .*?</li>")


def compare(argv: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "synthesizer", "compare", *argv], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)


def render_all(into: Path, only: list[str] | None = None) -> list[Path]:
    """Copies of the committed report folders (those named in ``only``, if given) in ``into``, each re-rendered;
    the folders rendered."""
    done = []
    for folder in sorted(RESULTS.iterdir()):
        if only and folder.name not in only:
            continue
        widths = sorted(folder.glob("width-*"))
        copy = into / folder.name
        if (folder / "results.json").exists():
            shutil.copytree(folder, copy)
            compare(["render", str(copy), "--out", str(copy)])
        elif widths:
            shutil.copytree(folder, copy)
            for width in sorted(copy.glob("width-*")):
                compare(["render", str(width), "--out", str(width)])
            compare(["render", str(copy)])
        elif (folder / "study.json").exists() or any(folder.glob("*/study.json")):
            shutil.copytree(folder, copy)
            against = [str(RESULTS / name) for name in ("lm", "dialogue", "mt") if (RESULTS / name).exists()]
            compare(["render", str(copy), "--against", *against])
        else:
            continue
        done.append(copy)
    return done


def normalised(path: Path) -> bytes:
    if path.suffix == ".md":
        return HEADER_MD.sub("", path.read_text(encoding="utf-8")).encode()
    if path.suffix == ".html":
        return HEADER_HTML.sub("", path.read_text(encoding="utf-8")).encode()
    if path.name == "results.json":
        data = json.loads(path.read_text(encoding="utf-8"))
        for key in ("commands", "rendered_by"):
            data.pop(key, None)
        return json.dumps(data, sort_keys=True).encode()
    return path.read_bytes()


def differences(new: Path, reference: Path) -> list[str]:
    """Files that differ (or exist on one side only) between two renderings of one report folder."""
    out = []
    names = {p.relative_to(new) for p in new.rglob("*") if p.is_file() and p.name != ".lock"}
    names |= {p.relative_to(reference) for p in reference.rglob("*") if p.is_file() and p.name != ".lock"}
    for name in sorted(names):
        a, b = new / name, reference / name
        if not a.exists() or not b.exists():
            out.append(f"{new.name}/{name}: only in {'the reference' if b.exists() else 'the new rendering'}")
        elif not filecmp.cmp(a, b, shallow=False) and normalised(a) != normalised(b):
            out.append(f"{new.name}/{name}: differs")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--save", metavar="DIR", help="write the renderings to DIR (the reference)")
    group.add_argument("--against", metavar="DIR", help="compare with the renderings saved in DIR")
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these folders of docs/results")
    args = p.parse_args()
    if args.save:
        target = Path(args.save)
        if target.exists():
            p.error(f"{target} exists; give a new folder")
        target.mkdir(parents=True)
        print("\n".join(str(f) for f in render_all(target, args.only)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        rendered = render_all(Path(tmp), args.only)
        reference = Path(args.against) if args.against else RESULTS
        wrong = [line for folder in rendered for line in differences(folder, reference / folder.name)]
    print("\n".join(wrong) if wrong else f"{len(rendered)} report folders render as the reference does")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
