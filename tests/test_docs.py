"""Issue 30 item 1: the documentation site (mkdocs.yml, docs/) and the README front page.

The site is built as CI builds it, ``mkdocs build --strict`` into a temporary folder: a broken
link or anchor between pages, a page missing from the nav, a snippet (protocol.md,
SECURITY.md, BENCHMARKS.md, README's quick start) that is not there, or a link to a
repository file that does not exist fails the build, and so this test. Then: the generated CLI
reference names every command and option of ``broker.cli.build_parser()``, the site loads
nothing from other hosts (it works offline), and the README stays a front page whose links
lead somewhere.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from broker.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


def _hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built in strict mode (as `python3 dev.py docs` and CI build it)."""
    site_dir = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if "No module named mkdocs" in built.stderr:
        pytest.fail("MkDocs is not installed: `python3 dev.py test` installs the docs extra")
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-5000:]}"
    return site_dir


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
              ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command and nested command of ``parser`` with its path (``("conformance", "app")``)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(((*path, name), sub))
                found += _commands(sub, (*path, name))
    return found


def _section(page: str, anchor: str) -> tuple[str, list[str]]:
    """The section whose heading has id ``anchor``, up to the next command's heading: its text
    (tags stripped, entities decoded), and the first cell of each row of its table of
    arguments (the option's spelling, e.g. ``-o FILE, --output FILE``)."""
    start = page.index(f'id="{anchor}"')
    end = page.find('id="cmd-', start + len(anchor))
    part = page[start:end if end != -1 else len(page)]
    cells = re.findall(r"<tr>\s*<td><code>(.*?)</code></td>", part, re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", "", part)), [html.unescape(cell) for cell in cells]


def test_the_cli_reference_lists_every_command_and_option(site: Path) -> None:
    page = (site / "cli-reference" / "index.html").read_text()
    commands = _commands(build_parser())
    assert {path[0] for path, _ in commands} >= {"serve", "stdio", "call", "status", "conformance"}
    for path, parser in commands:
        anchor = "cmd-" + "-".join(path)
        assert f'id="{anchor}"' in page, f"the CLI reference has no section for `toolbridge {' '.join(path)}`"
        section, rows = _section(page, anchor)
        assert f"toolbridge {' '.join(path)}" in section
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            if action.option_strings:
                names = list(action.option_strings)
            elif action.metavar is None and action.choices is not None:
                names = [str(choice) for choice in action.choices]  # shown as {a,b,c}
            else:
                names = [action.metavar if isinstance(action.metavar, str) else action.dest]
            for name in names:
                if name in ("-h", "--help"):
                    continue
                assert any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", row) for row in rows), \
                    f"`toolbridge {' '.join(path)}`: {name} is missing from the CLI reference's table"


def test_the_included_files_are_on_the_site(site: Path) -> None:
    """protocol.md, SECURITY.md and BENCHMARKS.md are included whole; README's quick start too."""
    for page, source in (("protocol", "protocol.md"), ("security", "SECURITY.md"), ("benchmarks", "BENCHMARKS.md")):
        text = html.unescape(re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text()))
        headings = [line.lstrip("#").strip() for line in (ROOT / source).read_text().splitlines()
                    if line.startswith("## ")]
        assert headings, source
        for heading in (headings[0], headings[-1]):  # the start and the end made it
            words = re.sub(r"[`*]", "", heading)
            assert words in text, f"{source}'s section {heading!r} is not on the {page} page"
    started = html.unescape(re.sub(r"<[^>]+>", "", (site / "getting-started" / "index.html").read_text()))
    assert "xvfb-run -a .venv/bin/python examples/notes_app.py" in started
    assert "--8<--" not in started


def test_the_site_loads_nothing_from_other_hosts(site: Path) -> None:
    """Offline: no web fonts, scripts or styles from a CDN (Material's fonts are off)."""
    for page in site.rglob("*.html"):
        text = page.read_text()
        remote = re.findall(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]+\"", text)
        assert not remote, f"{page.relative_to(site)} loads {remote[:3]}"


def test_a_link_to_a_missing_repository_file_fails_the_build() -> None:
    """Links from docs to repository files (../examples/...) are checked like links between pages."""
    from mkdocs.exceptions import PluginError

    repo_links = _hook("repo_links")
    page = SimpleNamespace(file=SimpleNamespace(src_uri="embedding-python.md"))
    config = {"config_file_path": str(ROOT / "mkdocs.yml"), "repo_url": None, "edit_uri": None}
    shown = repo_links.on_page_markdown("See [the app](../examples/notes_app.py).", page=page, config=config)
    assert shown == "See the app (`examples/notes_app.py`)."
    assert repo_links.on_page_markdown("[notes_app.py](../examples/notes_app.py)", page=page,
                                       config=config) == "`examples/notes_app.py`"
    linked = repo_links.on_page_markdown("[`notes_app.py`](../examples/notes_app.py#L1)", page=page,
                                         config={**config, "repo_url": "https://example.org/tb/"})
    assert linked == "[`notes_app.py`](https://example.org/tb/blob/main/examples/notes_app.py#L1)"
    assert repo_links.on_page_markdown("[x](agents.md#y)", page=page, config=config) == "[x](agents.md#y)"
    fenced = "```\n[z](../no_such_file)\n```"
    assert repo_links.on_page_markdown(fenced, page=page, config=config) == fenced
    with pytest.raises(PluginError, match="examples/no_such_app.py"):
        repo_links.on_page_markdown("[gone](../examples/no_such_app.py)", page=page, config=config)


# --- the README front page ----------------------------------------------------------------

README = (ROOT / "README.md").read_text()


def test_the_readme_is_a_front_page() -> None:
    lines = README.count("\n")
    assert lines <= 250, (f"README.md has {lines} lines: it is the front page (what toolbridge is, set-up, "
                          "quick start, links); put manual text in a docs/ page and link to it")
    for command in ("python3 dev.py serve", "python3 dev.py test", "python3 dev.py docs"):
        assert command in README


def test_every_link_in_the_readme_leads_somewhere() -> None:
    """The front page's links to docs pages and repository files name files that exist, and an
    anchor names a heading of that page."""
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), f"README.md links to {link}, which does not exist"
        if anchor:
            slugs = {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
                     for heading in re.findall(r"^#+ (.+)$", target.read_text(), re.MULTILINE)}
            assert anchor in slugs, f"README.md links to {link}, but {path} has no heading {anchor!r}"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    """The front page leads to every page of the manual (the nav's pages)."""
    pages = {page.name for page in (ROOT / "docs").glob("*.md")} - {"index.md", "protocol.md",
                                                                     "security.md", "benchmarks.md"}
    missing = sorted(page for page in pages if f"(docs/{page}" not in README)
    assert not missing, f"README.md does not link to {missing}"


def test_the_configuration_reference_has_every_setting() -> None:
    """Every field of Settings has a row in docs/configuration.md's table."""
    import attrs

    from broker.config.settings import Settings

    page = (ROOT / "docs" / "configuration.md").read_text()
    rows = [line.split("|")[1] for line in page.splitlines() if line.startswith("| `")]
    documented = {name for row in rows for name in re.findall(r"`(\w+)`", row)}
    missing = [field.name for field in attrs.fields(Settings) if field.name not in documented]
    assert not missing, f"docs/configuration.md has no row for the settings {missing}"
