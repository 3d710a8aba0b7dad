"""The document and Calc tools and the resources LibreOffice offers agents: a thin layer over UNO.

Theory of operation
-------------------
:func:`declare` puts every tool and resource on an :class:`app_client.App` whose
``gui_executor`` runs calls on the office's main thread (see ``__init__.py``), one at a time,
so UNO is only touched where the user's own commands touch it. A document is named by its
title as the office shows it ("Untitled 1", "report.ods"), its file path or its URL; no name
means the document the user is working in (the current one). Cells are named as in the
office ("B2", "A1:C10"); values are typed: numbers stay numbers, text starting with "=" is a
formula.

Handlers raise :class:`app_client.ToolError` with a message that says what to do; anything
else they raise (a UNO exception) becomes a safe app error (app_client logs the details).
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union

import msgspec
import uno
from com.sun.star.beans import PropertyValue
from com.sun.star.io import IOException

from app_client import App, ToolContext, ToolError

__all__ = ["CHANGES", "OVERWRITES", "READ_ONLY", "DocumentName", "Office", "declare", "outline", "paragraphs", "title_of"]

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
CHANGES = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
OVERWRITES = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}

CALC = "com.sun.star.sheet.SpreadsheetDocument"
WRITER = "com.sun.star.text.TextDocument"
MAX_CELLS = 10_000
#: write_cells takes this many cells at most, written ROWS_PER_STEP rows per main-thread step.
MAX_WRITE_CELLS = 200_000
ROWS_PER_STEP = 50

DocumentName = Annotated[str, msgspec.Meta(min_length=1, max_length=4096, description=(
    "the document's title as list_documents shows it, its file path or its URL; "
    "omit for the document the user is working in"))]
SheetName = Annotated[str, msgspec.Meta(min_length=1, max_length=255, description="a sheet's name; omit for the active sheet")]
_CELL = r"\$?[A-Za-z]{1,3}\$?[0-9]{1,7}"
RangeName = Annotated[str, msgspec.Meta(min_length=2, max_length=64, pattern=f"^{_CELL}(:{_CELL})?$",
                                        description='a cell ("B2") or a range ("A1:C10")')]
CellValue = Union[float, int, bool, str, None]
FilePath = Annotated[str, msgspec.Meta(min_length=1, max_length=4096, description="an absolute file path")]

_SAVE_FILTERS = {
    CALC: {".ods": "calc8", ".xlsx": "Calc MS Excel 2007 XML", ".csv": "Text - txt - csv (StarCalc)"},
    WRITER: {".odt": "writer8", ".docx": "MS Word 2007 XML", ".txt": "Text", ".html": "HTML (StarWriter)"},
}
_PDF_FILTERS = {CALC: "calc_pdf_Export", WRITER: "writer_pdf_Export"}
_CHARTS = {"column": "com.sun.star.chart.BarDiagram", "bar": "com.sun.star.chart.BarDiagram",
           "line": "com.sun.star.chart.LineDiagram", "pie": "com.sun.star.chart.PieDiagram",
           "scatter": "com.sun.star.chart.XYDiagram"}


def _props(**values: Any) -> tuple[Any, ...]:
    result = []
    for name, value in values.items():
        prop = PropertyValue()
        prop.Name, prop.Value = name, value
        result.append(prop)
    return tuple(result)


def _kind(doc: Any) -> str:
    if doc.supportsService(CALC):
        return "calc"
    if doc.supportsService(WRITER):
        return "writer"
    return "other"


def title_of(doc: Any) -> str:
    try:
        return str(doc.getTitle())
    except Exception:
        return str(doc.getURL() or "?")


def _url(path: str) -> str:
    if not os.path.isabs(path):
        raise ToolError(f"give an absolute path, not {path!r}")
    return str(uno.systemPathToFileUrl(os.path.normpath(path)))


class Office:
    """The office's desktop and its documents (main thread only)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)

    def documents(self) -> list[Any]:
        found = []
        components = self.desktop.getComponents().createEnumeration()
        while components.hasMoreElements():
            doc = components.nextElement()
            if hasattr(doc, "supportsService") and (doc.supportsService(CALC) or doc.supportsService(WRITER)):
                found.append(doc)
        return found

    def document(self, name: str | None, kind: str | None = None) -> Any:
        documents = self.documents()
        if name is None:
            current = self.desktop.getCurrentComponent()
            candidates = [current] if current is not None and current in documents else []
            candidates += [d for d in documents if d not in candidates]
            candidates = [d for d in candidates if kind is None or _kind(d) == kind]
            if not candidates:
                raise ToolError(f"no {kind or 'office'} document is open: create_document or open_document first")
            return candidates[0]
        url = name if "://" in name else (_url(name) if os.path.isabs(name) else None)
        for doc in documents:
            if title_of(doc) == name or (url is not None and doc.getURL() == url):
                if kind is not None and _kind(doc) != kind:
                    raise ToolError(f"{name!r} is a {_kind(doc)} document; this tool needs a {kind} document")
                return doc
        known = ", ".join(repr(title_of(d)) for d in documents) or "none"
        raise ToolError(f"no open document named {name!r}; open documents are: {known}")


def describe(doc: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"title": title_of(doc), "kind": _kind(doc), "url": doc.getURL() or None,
                            "modified": bool(doc.isModified())}
    if info["kind"] == "calc":
        info["sheets"] = list(doc.getSheets().getElementNames())
    elif info["kind"] == "writer":
        info["paragraphs"] = sum(1 for _ in paragraphs(doc))
    return info


def _sheet(doc: Any, name: str | None) -> Any:
    sheets = doc.getSheets()
    if name is None:
        return doc.getCurrentController().getActiveSheet()
    if not sheets.hasByName(name):
        raise ToolError(f"no sheet named {name!r}; sheets are: {', '.join(sheets.getElementNames())}")
    return sheets.getByName(name)


def _range(sheet: Any, name: str) -> Any:
    try:
        cells = sheet.getCellRangeByName(name.replace("$", ""))
    except Exception:
        raise ToolError(f"{name!r} is not a cell range on this sheet") from None
    address = cells.getRangeAddress()
    count = (address.EndColumn - address.StartColumn + 1) * (address.EndRow - address.StartRow + 1)
    if count > MAX_CELLS:
        raise ToolError(f"{name} has {count} cells; read or write at most {MAX_CELLS} at a time")
    return cells


def _cell_value(cell: Any) -> CellValue:
    kind = cell.getType().value  # EMPTY, VALUE, TEXT, FORMULA
    if kind == "EMPTY":
        return None
    if kind == "TEXT":
        return str(cell.getString())
    if kind == "FORMULA":
        if cell.getError():
            return str(cell.getString())  # "#DIV/0!", "Err:502"...
        return str(cell.getString()) if cell.FormulaResultType2 == 2 else _number(cell.getValue())
    return _number(cell.getValue())


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def _read(cells: Any) -> dict[str, Any]:
    address = cells.getRangeAddress()
    rows, formulas = [], {}
    for r in range(address.EndRow - address.StartRow + 1):
        row = []
        for c in range(address.EndColumn - address.StartColumn + 1):
            cell = cells.getCellByPosition(c, r)
            row.append(_cell_value(cell))
            if cell.getType().value == "FORMULA":
                formulas[cell.AbsoluteName.split(".")[-1].replace("$", "")] = str(cell.getFormula())
        rows.append(row)
    return {"range": cells.AbsoluteName.replace("$", ""), "values": rows, "formulas": formulas}


def _write(cell: Any, value: CellValue) -> None:
    if value is None:
        cell.setString("")
    elif isinstance(value, bool):
        cell.setFormula("=TRUE()" if value else "=FALSE()")
    elif isinstance(value, (int, float)):
        cell.setValue(float(value))
    elif value.startswith("="):
        cell.setFormula(value)
    else:
        cell.setString(value)


def _write_target(office: Office, document: str | None, sheet: str | None, start: str, width: int,
                  height: int) -> Any:
    target = _sheet(office.document(document, "calc"), sheet)
    first = _range(target, start.split(":")[0]).getRangeAddress()
    if first.StartColumn + width > 16384 or first.StartRow + height > 1048576:
        raise ToolError("the values do not fit on the sheet from that start cell")
    return target.getCellRangeByPosition(first.StartColumn, first.StartRow,
                                         first.StartColumn + width - 1, first.StartRow + height - 1)


def _write_rows(cells: Any, first: int, rows: list[list[CellValue]]) -> None:
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            _write(cells.getCellByPosition(c, first + r), value)


def paragraphs(doc: Any) -> Any:
    """The body text's paragraphs (tables are skipped)."""
    enumeration = doc.getText().createEnumeration()
    while enumeration.hasMoreElements():
        part = enumeration.nextElement()
        if part.supportsService("com.sun.star.text.Paragraph"):
            yield part


def outline(doc: Any) -> list[dict[str, Any]]:
    return [{"level": int(p.OutlineLevel), "text": p.getString(), "style": p.ParaStyleName}
            for p in paragraphs(doc) if p.OutlineLevel > 0]


def declare(app: App, office: Office) -> None:
    """Declare the document and Calc tools and the resources on ``app`` (before it runs);
    the Writer tools are in :mod:`.writer_tools`."""

    # --- documents ---------------------------------------------------------------------

    @app.tool(annotations=READ_ONLY, title="List open documents",
              example_requests=["what files do I have open in LibreOffice?",
                                "which spreadsheet am I looking at right now?", "did I forget to save anything?",
                                "what sheets are in my budget workbook?"])
    def list_documents() -> list[dict[str, Any]]:
        """List the open Calc and Writer documents: title (use it to name a document in other
        tools), kind, file URL, unsaved changes, and sheets (Calc) or paragraph count (Writer).
        The first one is the document the user is working in. Start here."""
        current = office.desktop.getCurrentComponent()
        documents = office.documents()
        documents.sort(key=lambda d: d != current)
        return [describe(d) for d in documents]

    @app.tool(annotations=CHANGES, title="Create document",
              example_requests=["start a new spreadsheet", "open a blank Writer document",
                                "I want to begin a letter from scratch", "make me a blank workbook"])
    def create_document(kind: Literal["calc", "writer"]) -> dict[str, Any]:
        """Create a new, empty spreadsheet (calc) or text document (writer) in a new window."""
        url = "private:factory/scalc" if kind == "calc" else "private:factory/swriter"
        return describe(office.desktop.loadComponentFromURL(url, "_blank", 0, ()))

    @app.tool(annotations=CHANGES, title="Open document",
              example_requests=["open budget.xlsx from my Documents folder", "load the report I saved on the desktop",
                                "bring up /home/me/notes.odt", "pull up last month's invoice spreadsheet"])
    def open_document(path: FilePath) -> dict[str, Any]:
        """Open a file (.ods, .xlsx, .csv, .odt, .docx, ...) in a new window, or bring the
        already open one forward."""
        if not os.path.isfile(path):
            raise ToolError(f"there is no file at {path!r}")
        doc = office.desktop.loadComponentFromURL(_url(path), "_default", 0, _props(Hidden=False))
        if doc is None:
            raise ToolError(f"LibreOffice could not open {path!r}")
        return describe(doc)

    @app.tool(annotations=OVERWRITES, title="Save document",
              example_requests=["save my work", "save this as a Word file in Documents",
                                "make sure my changes aren't lost",
                                "store the sheet in Excel format so my boss can open it"])
    def save_document(path: FilePath | None = None, document: DocumentName | None = None) -> dict[str, Any]:
        """Save a document: to its own file when no path is given, else to ``path`` (.ods,
        .xlsx, .csv for Calc; .odt, .docx, .txt, .html for Writer), which is overwritten and
        becomes the document's file."""
        doc = office.document(document)
        if path is None:
            if not doc.hasLocation() or doc.isReadonly():
                raise ToolError("the document has no file yet: give a path")
            with _writing(doc.getURL()):
                doc.store()
        else:
            extension = os.path.splitext(path)[1].lower()
            filters = _SAVE_FILTERS.get(CALC if _kind(doc) == "calc" else WRITER, {})
            if extension not in filters:
                raise ToolError(f"a {_kind(doc)} document is saved as {', '.join(filters)}; not {extension or 'no extension'}")
            _folder(path)
            with _writing(path):
                doc.storeAsURL(_url(path), _props(FilterName=filters[extension], Overwrite=True))
        return describe(doc)

    @app.tool(annotations=OVERWRITES, title="Export PDF",
              example_requests=["make a PDF of this", "export the report as PDF", "I need a printable version to email",
                                "turn the invoice into something I can print"])
    def export_pdf(path: FilePath, document: DocumentName | None = None) -> dict[str, Any]:
        """Export a document as PDF to ``path`` (ending in .pdf; overwritten). The document
        keeps its own file."""
        doc = office.document(document)
        if not path.lower().endswith(".pdf"):
            raise ToolError("the path must end in .pdf")
        _folder(path)
        service = CALC if _kind(doc) == "calc" else WRITER
        with _writing(path):
            doc.storeToURL(_url(path), _props(FilterName=_PDF_FILTERS[service], Overwrite=True))
        return {"path": path, "bytes": os.path.getsize(path)}

    # --- Calc ----------------------------------------------------------------------------

    @app.tool(annotations=READ_ONLY, title="Read cells",
              example_requests=["what's in cell B2?", "what does the total at the bottom come to?",
                                "show me the formula in D5", "look up how much we spent in March"])
    def read_cells(range: RangeName, sheet: SheetName | None = None,
                   document: DocumentName | None = None) -> dict[str, Any]:
        """Read a cell or a range of a spreadsheet: ``values`` row by row (numbers, text,
        booleans as 1/0, null for empty, a formula's result) and ``formulas`` (cell -> formula)."""
        doc = office.document(document, "calc")
        return _read(_range(_sheet(doc, sheet), range))

    @app.tool(annotations=OVERWRITES, title="Write cells", timeout=600,
              example_requests=["put 42 in cell A1", "fill in column B with these prices",
                                "type these names down column A", "add a total row that sums the amounts"])
    async def write_cells(
        ctx: ToolContext,
        start: RangeName,
        values: Annotated[list[list[CellValue]], msgspec.Meta(min_length=1, max_length=MAX_WRITE_CELLS, description=(
            "rows of cell values from the start cell: numbers, text, true/false, null (clears); "
            'text starting with "=" is a formula, e.g. "=SUM(A1:A3)"'))],
        sheet: SheetName | None = None,
        document: DocumentName | None = None,
    ) -> dict[str, Any]:
        """Write values and formulas into a spreadsheet from the ``start`` cell on (overwriting
        what is there). Returns the written range read back (formulas computed), or only its
        address when it has more than 10000 cells. Large writes report progress and can be
        cancelled (rows written so far stay)."""
        width = max(len(row) for row in values)
        if width == 0 or width * len(values) > MAX_WRITE_CELLS:
            raise ToolError(f"write between 1 and {MAX_WRITE_CELLS} cells at a time")
        cells = await ctx.run_on_gui_thread(_write_target, office, document, sheet, start, width, len(values))
        steps = range(0, len(values), ROWS_PER_STEP)
        for number, first in enumerate(steps):  # the office's loop runs between two steps
            await ctx.run_on_gui_thread(_write_rows, cells, first, values[first:first + ROWS_PER_STEP])
            if len(steps) > 1:
                await ctx.report_progress(number + 1, len(steps), f"wrote {min(first + ROWS_PER_STEP, len(values))} rows")
        if width * len(values) > MAX_CELLS:
            return {"range": await ctx.run_on_gui_thread(lambda: cells.AbsoluteName.replace("$", "")),
                    "cells": width * len(values)}
        return await ctx.run_on_gui_thread(_read, cells)

    @app.tool(annotations=CHANGES, title="Add sheet",
              example_requests=["add a new sheet called March", "I need another tab for the 2024 figures",
                                "insert a blank worksheet at the front",
                                "make a separate page in the workbook for expenses"])
    def add_sheet(name: Annotated[str, msgspec.Meta(min_length=1, max_length=255, pattern=r"^[^\[\]*?:/\\']+$")],
                  position: Annotated[int, msgspec.Meta(ge=0, le=10000, description="0 = first; default: last")] | None = None,
                  document: DocumentName | None = None) -> dict[str, Any]:
        """Add an empty sheet to a spreadsheet. Returns the document with its sheets."""
        doc = office.document(document, "calc")
        sheets = doc.getSheets()
        if sheets.hasByName(name):
            raise ToolError(f"there is already a sheet named {name!r}")
        sheets.insertNewByName(name, min(position if position is not None else sheets.getCount(), sheets.getCount()))
        return describe(doc)

    @app.tool(annotations=CHANGES, title="Sort range",
              example_requests=["sort the table by column B", "put the names in alphabetical order",
                                "order the sales from highest to lowest", "rank the students by their score"])
    def sort_range(
        range: RangeName,
        column: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z]{1,3}$", description='the column to sort by, e.g. "B"')],
        descending: bool = False,
        has_header: Annotated[bool, msgspec.Meta(description="the first row holds headings and stays on top")] = False,
        sheet: SheetName | None = None,
        document: DocumentName | None = None,
    ) -> dict[str, Any]:
        """Sort the rows of a range by one of its columns. Returns the range read back."""
        from com.sun.star.table import TableSortField

        doc = office.document(document, "calc")
        cells = _range(_sheet(doc, sheet), range)
        address = cells.getRangeAddress()
        index = _column_index(column) - address.StartColumn
        if not 0 <= index <= address.EndColumn - address.StartColumn:
            raise ToolError(f"column {column.upper()} is not inside {range}")
        field = TableSortField()
        field.Field, field.IsAscending, field.IsCaseSensitive = index, not descending, False
        descriptor = list(cells.createSortDescriptor())
        for prop in descriptor:
            if prop.Name == "SortFields":
                prop.Value = uno.Any("[]com.sun.star.table.TableSortField", (field,))
            elif prop.Name == "ContainsHeader":
                prop.Value = has_header
        uno.invoke(cells, "sort", (tuple(descriptor),))
        return _read(cells)

    @app.tool(annotations=CHANGES, title="Filter range",
              example_requests=["show only the rows where the status is Paid", "hide the orders under 100 euros",
                                "I just want to see the Berlin customers", "clear the filter and show all rows again"])
    def filter_range(
        range: RangeName,
        column: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z]{1,3}$", description='the column to test, e.g. "B"')],
        operator: Literal["equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "clear"],
        value: Annotated[Union[float, str], msgspec.Meta(description="a number or a text to compare with")] = "",
        has_header: Annotated[bool, msgspec.Meta(description="the first row holds headings and stays visible")] = True,
        sheet: SheetName | None = None,
        document: DocumentName | None = None,
    ) -> dict[str, Any]:
        """Show only the rows of a range whose cell in ``column`` compares with ``value``
        (the others are hidden, not deleted); operator "clear" shows all rows again. Returns
        the visible rows."""
        from com.sun.star.sheet import TableFilterField

        doc = office.document(document, "calc")
        target = _sheet(doc, sheet)
        cells = _range(target, range)
        address = cells.getRangeAddress()
        descriptor = cells.createFilterDescriptor(True)  # empty: shows every row
        if operator != "clear":
            index = _column_index(column) - address.StartColumn
            if not 0 <= index <= address.EndColumn - address.StartColumn:
                raise ToolError(f"column {column.upper()} is not inside {range}")
            field = TableFilterField()
            field.Field, field.Operator = index, uno.Enum("com.sun.star.sheet.FilterOperator", operator.upper())
            field.IsNumeric = not isinstance(value, str)
            if field.IsNumeric:
                field.NumericValue = float(value)
            else:
                field.StringValue = value
            descriptor.setFilterFields((field,))
            descriptor.ContainsHeader = has_header
        cells.filter(descriptor)
        rows = target.getRows()
        values = _read(cells)["values"]
        visible = [row for offset, row in enumerate(values) if rows.getByIndex(address.StartRow + offset).IsVisible]
        return {"range": cells.AbsoluteName.replace("$", ""), "visible_rows": visible,
                "hidden": len(values) - len(visible)}

    @app.tool(annotations=CHANGES, title="Make chart",
              example_requests=["make a chart of the sales figures", "draw a pie chart of my expenses",
                                "plot the monthly temperatures as a line graph", "visualise this table as bars"])
    def make_chart(
        range: RangeName,
        kind: Literal["column", "bar", "line", "pie", "scatter"] = "column",
        title: Annotated[str, msgspec.Meta(max_length=200)] | None = None,
        anchor: Annotated[RangeName, msgspec.Meta(
            description="the cell at the chart's top left; default: right of the data")] | None = None,
        sheet: SheetName | None = None,
        document: DocumentName | None = None,
    ) -> dict[str, Any]:
        """Make a chart of a range (first row: series names, first column: categories) on
        its sheet. Returns the chart's name and the sheet's charts."""
        from com.sun.star.awt import Rectangle

        doc = office.document(document, "calc")
        target = _sheet(doc, sheet)
        cells = _range(target, range)
        address = cells.getRangeAddress()
        corner = target.getCellByPosition(address.EndColumn + 2, address.StartRow) if anchor is None \
            else _range(target, anchor).getCellByPosition(0, 0)
        position = corner.Position
        box = Rectangle()
        box.X, box.Y, box.Width, box.Height = position.X, position.Y, 12000, 8000
        charts = target.getCharts()
        number = charts.getCount() + 1
        while charts.hasByName(f"Chart{number}"):
            number += 1
        name = f"Chart{number}"
        charts.addNewByName(name, box, (address,), True, True)
        chart = charts.getByName(name).getEmbeddedObject()
        diagram = chart.createInstance(_CHARTS[kind])
        chart.setDiagram(diagram)
        if kind == "bar":
            diagram.Vertical = True
        if title:
            chart.HasMainTitle = True
            chart.getTitle().String = title
        return {"chart": name, "sheet": target.getName(), "kind": kind, "charts": list(charts.getElementNames())}

    # --- resources -----------------------------------------------------------------------

    @app.resource("office://documents", name="open documents", mime_type="application/json",
                  description="The open Calc and Writer documents (JSON), the current one first.")
    def documents_resource() -> str:
        return msgspec.json.encode(list_documents()).decode()

    def document_titles(typed: str) -> list[str]:
        return sorted(urllib.parse.quote(title_of(d), safe="") for d in office.documents()
                      if d.supportsService(CALC) and title_of(d).lower().startswith(urllib.parse.unquote(typed).lower()))

    @app.resource_template("office://sheets/{document}/{sheet}/{range}", name="sheet range",
                           mime_type="application/json",
                           description='Cells of a spreadsheet (JSON, as read_cells): the document\'s title and '
                                       'the sheet percent-encoded ("Untitled%201"), a range such as A1:C10.',
                           complete={"document": document_titles})
    def sheet_range(document: str, sheet: str, range: str) -> str:
        doc = office.document(urllib.parse.unquote(document), "calc")
        return msgspec.json.encode(_read(_range(_sheet(doc, urllib.parse.unquote(sheet)), range))).decode()


@contextlib.contextmanager
def _writing(path: str) -> Iterator[None]:
    """The office's I/O failure as a ToolError that says what to check."""
    try:
        yield
    except IOException:
        raise ToolError(f"LibreOffice could not write {path}: check that the folder is writable "
                        "and the file is not open elsewhere") from None


def _folder(path: str) -> None:
    folder = os.path.dirname(path)
    if not os.path.isabs(path) or not os.path.isdir(folder):
        raise ToolError(f"the folder {folder!r} does not exist (give an absolute path)")


def _column_index(letters: str) -> int:
    index = 0
    for letter in letters.upper():
        index = index * 26 + ord(letter) - ord("A") + 1
    return index - 1
