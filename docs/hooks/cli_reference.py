"""MkDocs hook: the CLI reference page, generated from the argparse definitions.

``docs/cli-reference.md`` holds the marker ``<!-- cli-reference -->``; at build time this hook
replaces it with one section per command of ``broker.cli.build_parser()`` (the full parser,
every command's options): its summary, description, usage, a table of its arguments and
options with their help, and its example. Nothing is copied by hand, so a new command or
option appears on the page by itself (tests/test_docs.py checks that every one does).

Each section's heading has the id ``cmd-<command>`` (``cmd-conformance-app`` for a nested
command), for links from other pages and for the test.
"""

from __future__ import annotations

import argparse
import os
import re
import textwrap
from typing import Any

MARKER = "<!-- cli-reference -->"
PAGE = "cli-reference.md"
#: the width argparse wraps usage lines at (it reads COLUMNS)
USAGE_WIDTH = 100


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, summary, parser) of each sub-command of ``parser``, in the order --help lists them."""
    found: list[tuple[str, str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, summaries.get(name, ""), sub))
    return found


def _text(text: str) -> str:
    """Help text as Markdown that shows it as written: `code spans` stay code; elsewhere
    ``<home>`` is not an HTML tag, ``*`` and ``_`` not emphasis, ``[...]`` not a link."""
    def plain(part: str) -> str:
        return re.sub(r"([\\*_\[\]])", r"\\\1", part).replace("<", "&lt;").replace(">", "&gt;")

    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans at all
        return plain(text).replace("`", "\\`")
    return "`".join(plain(part) if i % 2 == 0 else part for i, part in enumerate(parts))


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return _text(" ".join(text.split())).replace("|", "\\|")


def _code_cell(text: str) -> str:
    """An option's spelling as a code span inside a table cell."""
    return "`" + " ".join(text.split()).replace("|", "\\|") + "`"


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments and options ``--help`` shows (not -h itself, not the hidden ones, not a
    group of sub-commands, which get sections of their own)."""
    return [action for action in parser._actions
            if action.help != argparse.SUPPRESS
            and not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))]


def _command_section(path: list[str], summary: str, parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    anchor = "cmd-" + "-".join(path)
    lines = [f"## `toolbridge {' '.join(path)}` {{#{anchor}}}", ""]
    if summary:
        lines += [_text(summary[0].upper() + summary[1:]) + ".", ""]
    if parser.description and parser.description != summary:
        lines += [_text(parser.description), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    actions = documented_actions(parser)
    if actions:
        lines += ["| argument | meaning |", "|---|---|"]
        for action in actions:
            invocation = formatter._format_action_invocation(action)
            meaning = formatter._expand_help(action) if action.help else ""
            if action.choices is not None and not isinstance(action.choices, dict) \
                    and "{" not in invocation:
                meaning += f" (one of: {', '.join(f'`{choice}`' for choice in action.choices)})"
            lines.append(f"| {_code_cell(invocation)} | {_cell(meaning)} |")
        lines.append("")
    if parser.epilog:
        label, _, examples = parser.epilog.partition("\n")
        lines += [label[0].upper() + label[1:], "", "```sh", textwrap.dedent(examples).strip(), "```", ""]
    for name, sub_summary, sub in _subcommands(parser):
        lines += _command_section([*path, name], sub_summary, sub)
    return lines


def cli_reference_markdown() -> str:
    """The generated part of the CLI reference page (the same on every machine: usage lines
    are wrapped at a fixed width, not the terminal's)."""
    from broker.cli import build_parser  # the venv's toolbridge, installed in editable mode

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(USAGE_WIDTH)
    try:
        return _reference(build_parser())
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _reference(parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    lines = ["```text", parser.format_usage().strip(), "```", ""]
    lines += ["| option | meaning |", "|---|---|"]
    for action in documented_actions(parser):
        lines.append(f"| {_code_cell(formatter._format_action_invocation(action))} | "
                     f"{_cell(formatter._expand_help(action))} |")
    lines.append("")
    for name, summary, sub in _subcommands(parser):
        lines += _command_section([name], summary, sub)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its marker {MARKER}: the generated reference has nowhere to go")
    return markdown.replace(MARKER, cli_reference_markdown())
