"""The Writer tools LibreOffice offers agents (see :mod:`.office_tools` for how tools run).

Paragraphs are found by their text; headings are paragraphs in the styles "Heading N", whose
outline level the office derives from the style.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from app_client import App, ToolError

from .office_tools import CHANGES, OVERWRITES, READ_ONLY, DocumentName, Office, outline, paragraphs, title_of

__all__ = ["declare_writer"]


def declare_writer(app: App, office: Office) -> None:
    """Declare the Writer tools on ``app`` (before it runs)."""

    @app.tool(annotations=CHANGES, title="Insert text",
              example_requests=["add a closing paragraph to the letter", "write an introduction at the top",
                                "put 'Dear Sir or Madam,' at the beginning", "append a new Summary heading at the end"])
    def insert_text(
        text: Annotated[str, msgspec.Meta(min_length=1, max_length=100_000, description="new paragraphs, separated by newlines")],
        at: Literal["end", "start"] = "end",
        style: Annotated[str, msgspec.Meta(max_length=100, description='a paragraph style, e.g. "Heading 1"')] | None = None,
        document: DocumentName | None = None,
    ) -> dict[str, Any]:
        """Add paragraphs at the end (or start) of a text document, optionally in a paragraph
        style. Returns the document's outline."""
        from com.sun.star.text.ControlCharacter import PARAGRAPH_BREAK

        doc = office.document(document, "writer")
        body = doc.getText()
        cursor = body.createTextCursorByRange(body.getEnd() if at == "end" else body.getStart())
        empty = body.getString() == ""
        lines = text.split("\n")
        for number, line in enumerate(lines):
            if at == "end" and not (empty and number == 0):
                body.insertControlCharacter(cursor, PARAGRAPH_BREAK, False)
            start = cursor.getStart()
            body.insertString(cursor, line, False)
            if style:
                _set_style(doc, body.createTextCursorByRange(start), style)
            if at == "start" and number < len(lines) - 1 or at == "start" and not empty:
                body.insertControlCharacter(cursor, PARAGRAPH_BREAK, False)
        return {"document": title_of(doc), "outline": outline(doc)}

    @app.tool(annotations=OVERWRITES, title="Replace text",
              example_requests=["replace 'colour' with 'color' everywhere",
                                "change the client's name throughout the contract",
                                "fix the misspelled product name throughout",
                                "swap 2023 for 2024 in the whole document"])
    def replace_text(
        search: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)],
        replacement: Annotated[str, msgspec.Meta(max_length=100_000)],
        regex: Annotated[bool, msgspec.Meta(description="search is a regular expression (ICU)")] = False,
        match_case: bool = True,
        document: DocumentName | None = None,
    ) -> dict[str, Any]:
        """Replace every occurrence of ``search`` in a text document. Returns how many."""
        doc = office.document(document, "writer")
        descriptor = doc.createReplaceDescriptor()
        descriptor.SearchString, descriptor.ReplaceString = search, replacement
        descriptor.SearchRegularExpression, descriptor.SearchCaseSensitive = regex, match_case
        return {"replaced": int(doc.replaceAll(descriptor))}

    @app.tool(annotations=CHANGES, title="Apply heading style",
              example_requests=["make 'Introduction' a heading", "turn the Methods line into a subheading",
                                "the line 'Results' should be a chapter title", "make 'Appendix' normal text again"])
    def set_heading(
        paragraph: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000,
                                               description="the paragraph's text (its whole text, or how it starts)")],
        level: Annotated[int, msgspec.Meta(ge=0, le=10, description="1 = Heading 1, ...; 0 makes it body text")] = 1,
        document: DocumentName | None = None,
    ) -> dict[str, Any]:
        """Make a paragraph of a text document a heading (style "Heading N"), or body text
        again with level 0. Returns the document's outline."""
        doc = office.document(document, "writer")
        candidates = list(paragraphs(doc))
        match = next((p for p in candidates if p.getString() == paragraph), None) or \
            next((p for p in candidates if p.getString().startswith(paragraph)), None)
        if match is None:
            raise ToolError(f"no paragraph starts with {paragraph[:80]!r}; read_outline or read_text shows the text")
        _set_style(doc, match, f"Heading {level}" if level else "Default Paragraph Style")
        return {"document": title_of(doc), "outline": outline(doc)}

    @app.tool(annotations=READ_ONLY, title="Read outline",
              example_requests=["what sections does the report have?", "show me the table of contents",
                                "list the chapter titles", "how is the document structured?"])
    def read_outline(document: DocumentName | None = None) -> dict[str, Any]:
        """The headings of a text document, in order, with their level and style."""
        doc = office.document(document, "writer")
        return {"document": title_of(doc), "outline": outline(doc)}

    @app.tool(annotations=READ_ONLY, title="Read text",
              example_requests=["read me the letter", "what does the document say?", "summarise the report I have open",
                                "check my essay for typos"])
    def read_text(document: DocumentName | None = None,
                  max_paragraphs: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 200) -> dict[str, Any]:
        """The paragraphs of a text document with their styles (the first ``max_paragraphs``)."""
        doc = office.document(document, "writer")
        found = []
        for number, p in enumerate(paragraphs(doc)):
            if number >= max_paragraphs:
                break
            found.append({"text": p.getString(), "style": p.ParaStyleName})
        return {"document": title_of(doc), "paragraphs": found}


def _set_style(doc: Any, paragraph: Any, style: str) -> None:
    styles = doc.getStyleFamilies().getByName("ParagraphStyles")
    if not styles.hasByName(style):
        raise ToolError(f"no paragraph style named {style!r}")
    paragraph.ParaStyleName = style
