"""The documentation: the site builds with --strict, and every example in it runs or says why not.

Convention for fenced code blocks in README.md and docs/**/*.md:
* every fence names its language (`text` for trees, synopses and output);
* a `python`, `sh`, `bash`, `shell` or `console` block is an example: this file runs it in a
  temporary folder, unless the line before its fence is `<!-- not run: REASON -->` with a REASON
  from NOT_RUN_REASONS (optionally followed by `; details`).
"""

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_LANGUAGES = {"python", "py", "sh", "bash", "shell", "console"}
NOT_RUN_REASONS = (
    "needs a GPU",
    "needs the network",
    "needs a trained run",
    "takes minutes",
    "takes hours",
    "writes outside a temp dir",
    "runs until stopped",
)
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>.+?)\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[^\s`]*)")
EXAMPLE_TIMEOUT_S = 240  # a safety net for a hung example, far above their few seconds of CPU


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the marker's reason, or None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    """README.md and the hand-written pages under docs/ (generated reports and bench tables left out:
    `synthesizer compare --render` and `synthesizer.bench report` write them, with no examples)."""
    pages = [ROOT / "README.md"]
    for path in sorted((ROOT / "docs").rglob("*.md")):
        rel = path.relative_to(ROOT / "docs").as_posix()
        if re.fullmatch(r"results/[^/]+/report\.md|bench/(.+/)?results\.md", rel):
            continue
        pages.append(path)
    return pages


def code_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(m["fence"]):
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path}:{i + 1}: code block never closed")
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(before)
        indent = len(m["indent"])
        code = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
        blocks.append(Block(path, i + 1, m["lang"].lower(), code, marker["reason"] if marker else None))
        i = end + 1
    return blocks


ALL_BLOCKS = [b for path in doc_files() for b in code_blocks(path)]
EXAMPLES = [b for b in ALL_BLOCKS if b.lang in EXAMPLE_LANGUAGES]
TO_RUN = [b for b in EXAMPLES if b.not_run is None]


def test_docs_have_examples_to_run():
    # guards the parser: the README's layer example alone is one
    assert any(b.path.name == "README.md" and b.lang == "python" for b in TO_RUN)


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.name)
def test_every_fence_names_its_language(block):
    assert block.lang, f"{block.name}: name the block's language (`text` if it is not an example)"


@pytest.mark.parametrize("block", [b for b in EXAMPLES if b.not_run], ids=lambda b: b.name)
def test_not_run_reason_is_allowed(block):
    reason = block.not_run.split(";")[0].strip()
    assert reason in NOT_RUN_REASONS, f"{block.name}: not-run reason {reason!r}; allowed: {NOT_RUN_REASONS}"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # `python` and `synthesizer` in shell examples are this interpreter's
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["HF_HUB_OFFLINE"] = env["HF_DATASETS_OFFLINE"] = "1"
    return env


@pytest.mark.parametrize("block", TO_RUN, ids=lambda b: b.name)
def test_example_runs(block, tmp_path):
    if block.lang in {"python", "py"}:
        command = [sys.executable, "-c", block.code]
    else:
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    done = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=EXAMPLE_TIMEOUT_S)
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "variants" / "index.html").is_file()


def test_home_page_links_are_relative_to_docs():
    pytest.importorskip("mkdocs")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from mkdocs_home import home_page
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    readme = '[guide](docs/variants.md) ![map](docs/demo/attention.png) <img src="docs/a.png"> [site](https://x.org/docs/y)'
    assert home_page(readme) == '[guide](variants.md) ![map](demo/attention.png) <img src="a.png"> [site](https://x.org/docs/y)'
