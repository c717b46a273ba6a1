"""Render a report as markdown (report.md, PNGs beside it) and as self-contained HTML (PNGs inlined).

A report is a list of blocks, written once and rendered twice:
``("h1" | "h2" | "h3" | "p", text)``, ``("list", [text, ...])``, ``("code", text)``,
``("table", header, rows)``, ``("img", file name relative to the report folder, caption)``.
Text may use ``**bold**`` and ```code``` in both outputs.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

Block = tuple

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.55em; text-align: left; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
code, pre { background: #f5f5f5; font-size: 0.9em; }
pre { padding: 0.6em; overflow-x: auto; }
figure { margin: 1em 0; }
figcaption { font-size: 0.85em; color: #555; }
img { max-width: 100%; }
"""


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    out = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"{'#' * int(kind[1])} {block[1]}")
        elif kind == "p":
            out.append(block[1])
        elif kind == "list":
            out.append("\n".join(f"- {item}" for item in block[1]))
        elif kind == "code":
            out.append(f"```\n{block[1]}\n```")
        elif kind == "table":
            header, rows = block[1], block[2]
            lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("\n".join(lines))
        elif kind == "img":
            out.append(f"![{block[2]}]({block[1]})")
        else:
            raise ValueError(f"unknown report block {kind!r}; allowed: h1, h2, h3, p, list, code, table, img")
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Escape, then turn **bold** and `code` into tags."""
    text = html.escape(str(text))
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def to_html(blocks: list[Block], folder: Path, title: str) -> str:
    """HTML with every image inlined as base64, so the one file can be mailed or archived alone."""
    body = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            body.append(f"<{kind}>{_inline(block[1])}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "list":
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "code":
            body.append(f"<pre>{html.escape(block[1])}</pre>")
        elif kind == "table":
            head = "".join(f"<th>{_inline(h)}</th>" for h in block[1])
            rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in block[2])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif kind == "img":
            src = _data_uri(folder / block[1])
            body.append(f'<figure><img src="{src}" alt="{html.escape(block[2])}">'
                        f"<figcaption>{_inline(block[2])}</figcaption></figure>")
        else:
            raise ValueError(f"unknown report block {kind!r}; allowed: h1, h2, h3, p, list, code, table, img")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_report(blocks: list[Block], folder: Path, title: str) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into ``folder`` (images must already be there)."""
    folder = Path(folder)
    md, page = folder / "report.md", folder / "report.html"
    md.write_text(to_markdown(blocks), encoding="utf-8")
    page.write_text(to_html(blocks, folder, title), encoding="utf-8")
    return md, page
