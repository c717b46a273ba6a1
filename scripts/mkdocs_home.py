"""mkdocs hook: the site's home page is README.md itself (one source), its links made relative to docs/.

The README links to guides as `docs/x.md` (right on GitHub, where it sits at the root); the site's
home page sits inside docs/, so the hook drops that prefix. Named in mkdocs.yml under `hooks`.
"""

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

# a Markdown link or image target, or an HTML src/href, that starts with docs/
DOCS_PREFIX = re.compile(r"""(\]\(|src="|href=")docs/""")


def home_page(readme: str) -> str:
    """The README's Markdown with `docs/` link prefixes removed."""
    return DOCS_PREFIX.sub(r"\1", readme)


def on_files(files: Files, config) -> Files:
    readme = Path(config["config_file_path"]).parent / "README.md"
    files.append(File.generated(config, "index.md", content=home_page(readme.read_text(encoding="utf-8"))))
    return files
