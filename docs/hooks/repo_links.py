"""MkDocs hook: links from a docs page to a file of the repository outside docs/.

Pages write them as relative paths (``../examples/notes_app.py``), which work where the
Markdown is read in the clone or on a forge. MkDocs cannot resolve them (they are not
documentation files), so this hook checks that each such path exists in the repository (a
missing one fails the build, like a broken link between pages) and then points the link at
the forge's copy when ``repo_url`` is set (``repo_url`` + ``edit_uri``, e.g. ``blob/main/``),
or shows the path as code (no link) when it is not.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

#: [text](target), not an image; fenced code blocks are skipped below.
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")
FENCE = re.compile(r"^(```|~~~)")


def _outside_docs(target: str, page_dir: str) -> str | None:
    """The repository path ``target`` names when it leaves docs/, else None."""
    if "://" in target or target.startswith(("mailto:", "/")):
        return None
    joined = posixpath.normpath(posixpath.join("docs", page_dir, target))
    return None if joined.startswith("docs/") or joined == "docs" else joined


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    root = Path(config["config_file_path"]).resolve().parent
    page_dir = posixpath.dirname(page.file.src_uri)
    repo_url = (config.get("repo_url") or "").rstrip("/")
    edit_uri = (config.get("edit_uri") or "blob/main/").strip("/")

    def rewrite(match: re.Match[str]) -> str:
        path = _outside_docs(match["target"], page_dir)
        if path is None:
            return match[0]
        if path.startswith("..") or not (root / path).exists():
            raise PluginError(f"{page.file.src_uri} links to {match['target']}, but the repository "
                              f"has no {path}")
        if repo_url:
            return f"[{match['text']}]({repo_url}/{edit_uri}/{path}{match['anchor'] or ''})"
        text = match["text"]
        if text.startswith("`"):
            return text
        return f"`{path}`" if text in (path, posixpath.basename(path)) else f"{text} (`{path}`)"

    out: list[str] = []
    in_fence = False
    for line in markdown.split("\n"):
        if FENCE.match(line.lstrip()):
            in_fence = not in_fence
        if in_fence:
            out.append(line)
            continue
        out.append(LINK.sub(rewrite, line))
    return "\n".join(out)
