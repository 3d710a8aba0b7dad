"""The LibreOffice extension, for real: Debian's LibreOffice under Xvfb, a real daemon, the MCP SDK as the agent.

One office serves the tests (a module fixture: its start is slow): the extension is installed
with ``toolbridge integrate libreoffice`` (unopkg; as root, for all users), the office starts
with a private user profile (``UserInstallation``) on a private Xvfb display, its OnStartApp
job starts toolbridge, which finds the daemon through ``TOOLBRIDGE_HOME``. The agent is the
official MCP SDK over ``toolbridge stdio``. The tests run in file order: the kill test ends
the shared office; the last test removes the extension.

Set TOOLBRIDGE_SAVE_SCREENSHOTS=1 to refresh integrations/libreoffice/screenshot.png (README).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client, types

from programkit import XVFB, ProgramWorld, agent, call_cancelled_on_leaving, data, integrated, toolbridge, wait_for_tool

ROOT = Path(__file__).resolve().parent.parent
SOFFICE = shutil.which("soffice")
PYTHON_WITH_UNO = "/usr/bin/python3"  # Debian's python3-uno
OFFICE_BIN = str(Path(SOFFICE or "soffice").resolve().parent / "soffice.bin")
SCREENSHOT = ROOT / "integrations" / "libreoffice" / "screenshot.png"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="drives Debian's LibreOffice on a virtual X display")

#: The user's own settings in the private profile: no tip-of-the-day dialog on the first start.
SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Setup/Office"><prop oor:name="ooSetupLastVersion" oor:op="fuse"><value>7.4</value></prop></item>
</oor:items>
"""


class Setup(ProgramWorld):
    """The shared world (``programkit.ProgramWorld``) with the office's profile and the office."""

    def __init__(self, base: Path) -> None:
        profile = base / "profile"
        (profile / "user").mkdir(parents=True)
        (profile / "user" / "registrymodifications.xcu").write_text(SETTINGS)
        super().__init__(base, "libreoffice", {"UserInstallation": profile.as_uri(), "SAL_USE_VCLPLUGIN": "gen"})
        self.extra: tuple[str, ...] = ()

    @property
    def office(self) -> subprocess.Popen[bytes] | None:
        return self.process

    def start_office(self, *extra: str) -> subprocess.Popen[bytes]:
        self.extra = extra
        with self.log.open("ab") as log:
            # soffice.bin directly: the soffice shell script would stand between us and the
            # process that kill() must end.
            self.process = subprocess.Popen(
                [OFFICE_BIN, "--norestore", "--nologo", "--nolockcheck", *extra],
                env={**self.env, "DISPLAY": self.display}, stdout=log, stderr=subprocess.STDOUT)
        return self.process

    def check_office(self) -> None:
        """Fails when the office has ended. It ends with status 81, "restart me", after its
        first start with a new profile: started again then, as the soffice script does."""
        assert self.process is not None
        if self.process.poll() == 81:
            self.start_office(*self.extra)
        elif self.process.poll() is not None:
            raise AssertionError(f"LibreOffice exited with status {self.process.returncode}; see {self.log}")

    def close(self) -> None:
        super().close()
        toolbridge("integrate", "libreoffice", "--remove", env=self.env)  # as root it was installed for all users


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    if SOFFICE is None or XVFB is None:
        pytest.fail("LibreOffice and Xvfb are needed: `apt-get install -y libreoffice-calc libreoffice-writer "
                    "python3-uno xvfb` (`python3 dev.py test` installs them)")
    setup = Setup(tmp_path_factory.mktemp("libreoffice"))
    with integrated(setup, "extension org.toolbridge.libreoffice installed"):
        setup.start_office()
        yield setup


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    return data(await client.call_tool(f"LibreOffice__{tool}", arguments))


async def test_tools_describe_themselves(world: Setup) -> None:
    async with agent(world.home) as client:
        tools = await wait_for_tool(client, "LibreOffice__list_documents", alive=world.check_office)
        listing = tools["LibreOffice__list_documents"]
        assert listing.annotations.read_only_hint is True and not listing.input_schema.get("required")
        for name in ("read_cells", "read_outline", "read_text"):
            assert tools[f"LibreOffice__{name}"].annotations.read_only_hint is True
        for name in ("save_document", "export_pdf", "write_cells", "replace_text"):
            assert tools[f"LibreOffice__{name}"].annotations.destructive_hint is True
        assert "formula" in (tools["LibreOffice__write_cells"].description or "")


async def test_calc_cells_are_written_and_read_back_through_the_office(world: Setup) -> None:
    async with agent(world.home) as client:
        await wait_for_tool(client, "LibreOffice__create_document", alive=world.check_office)
        sheet = await call(client, "create_document", kind="calc")
        assert sheet["kind"] == "calc" and sheet["sheets"] == ["Sheet1"]
        title = sheet["title"]
        written = await call(client, "write_cells", start="A1", document=title, values=[
            ["fruit", "count"], ["pear", 3], ["apple", 12.5], ["fig", 7], ["total", "=SUM(B2:B4)"]])
        assert written["values"][4] == ["total", 22.5] and written["formulas"] == {"B5": "=SUM(B2:B4)"}
        read = await call(client, "read_cells", range="B5", document=title)
        assert read == {"range": "Sheet1.B5", "values": [[22.5]], "formulas": {"B5": "=SUM(B2:B4)"}}
        typed = await call(client, "write_cells", start="D1", values=[["007", True, None, "=1/0"]])
        assert typed["values"] == [["007", 1, None, "#DIV/0!"]]  # text stays text; the error is shown

        sorted_rows = await call(client, "sort_range", range="A1:B4", column="B", descending=True, has_header=True)
        assert [row[0] for row in sorted_rows["values"]] == ["fruit", "apple", "fig", "pear"]
        shown = await call(client, "filter_range", range="A1:B4", column="B", operator="greater", value=5)
        assert shown["visible_rows"] == [["fruit", "count"], ["apple", 12.5], ["fig", 7]] and shown["hidden"] == 1
        assert (await call(client, "filter_range", range="A1:B4", column="B", operator="clear"))["hidden"] == 0
        chart = await call(client, "make_chart", range="A1:B4", kind="column", title="Fruit")
        assert chart["charts"] == ["Chart1"]
        added = await call(client, "add_sheet", name="Summary", document=title)
        assert added["sheets"] == ["Sheet1", "Summary"]

        resource = await client.read_resource(
            f"toolbridge://LibreOffice/office://sheets/{title.replace(' ', '%20')}/Sheet1/A2:B2")
        assert json.loads(resource.contents[0].text)["values"] == [["apple", 12.5]]
        template = types.ResourceTemplateReference(
            uri="toolbridge://LibreOffice/office://sheets/{document}/{sheet}/{range}")
        completed = await client.complete(template, {"name": "document", "value": "unt"})
        assert completed.completion.values == [title.replace(" ", "%20")]
        documents = await client.read_resource("toolbridge://LibreOffice/office://documents")
        assert title in documents.contents[0].text

        missing = await client.call_tool("LibreOffice__read_cells", {"range": "A1", "sheet": "Nope"})
        assert missing.is_error and "sheets are: Sheet1, Summary" in missing.content[0].text

        ods, pdf = world.base / "fruit.ods", world.base / "fruit.pdf"
        saved = await call(client, "save_document", path=str(ods), document=title)
        assert ods.read_bytes()[:2] == b"PK" and saved["url"] == ods.as_uri()
        assert (await call(client, "export_pdf", path=str(pdf)))["bytes"] > 1000
        assert pdf.read_bytes()[:5] == b"%PDF-"
        guarded = await client.call_tool("LibreOffice__export_pdf", {"path": f"{world.base}/../escape.pdf"})
        assert guarded.is_error and "path traversal" in guarded.content[0].text  # the daemon's path guard
        # The office itself fails (a folder it cannot write): an error that says what to check,
        # and the office goes on answering.
        unwritable = await client.call_tool("LibreOffice__save_document", {"path": "/proc/fruit.ods"})
        assert unwritable.is_error and "could not write /proc/fruit.ods" in unwritable.content[0].text, unwritable.content
        assert (await call(client, "read_cells", range="A2", document=str(ods)))["values"] == [["apple"]]


async def test_cancelling_a_large_write_stops_it_between_steps(world: Setup) -> None:
    async with agent(world.home) as client:
        await wait_for_tool(client, "LibreOffice__write_cells", alive=world.check_office)
        sheet = await call(client, "create_document", kind="calc")
        async with call_cancelled_on_leaving(
                client, "LibreOffice__write_cells",
                {"start": "A1", "values": [[7] * 10] * 10_000, "document": sheet["title"]}):
            pass  # cancelled after its first step
        # Calls run one at a time: this one runs after the write stopped.
        corners = await call(client, "read_cells", range="A1:A10000", document=sheet["title"])
        written = sum(1 for row in corners["values"] if row == [7])
        assert 50 <= written < 10_000 and written % 50 == 0  # whole steps of 50 rows, not all


async def test_writer_headings_are_applied_and_the_outline_read_back(world: Setup) -> None:
    async with agent(world.home) as client:
        await wait_for_tool(client, "LibreOffice__create_document", alive=world.check_office)
        doc = await call(client, "create_document", kind="writer")
        title = doc["title"]
        await call(client, "insert_text", document=title,
                   text="Quarterly report\nSales went up.\nOutlook\nMore pears next year.")
        await call(client, "insert_text", document=title, text="Draft", at="start", style="Subtitle")
        await call(client, "set_heading", document=title, paragraph="Quarterly report", level=1)
        await call(client, "set_heading", document=title, paragraph="Outlook", level=2)
        assert (await call(client, "replace_text", document=title, search="pears", replacement="figs"))["replaced"] == 1
        outline = await call(client, "read_outline", document=title)
        assert outline["outline"] == [{"level": 1, "text": "Quarterly report", "style": "Heading 1"},
                                      {"level": 2, "text": "Outlook", "style": "Heading 2"}]
        text = await call(client, "read_text", document=title)
        assert [p["text"] for p in text["paragraphs"]] == ["Draft", "Quarterly report", "Sales went up.", "Outlook",
                                                           "More figs next year."]
        assert text["paragraphs"][0]["style"] == "Subtitle" and text["paragraphs"][2]["style"] != "Subtitle"
        listed = await call(client, "list_documents")
        assert listed[0]["title"] == title and {d["kind"] for d in listed} == {"calc", "writer"}
        from PIL import ImageGrab

        window = ImageGrab.grab(xdisplay=world.display).convert("RGB")  # the X display, as the user sees it
        assert window.size == (1280, 800)
        pixels = list(window.get_flattened_data())
        assert len(set(pixels)) > 20  # the office's window, not a blank screen
        assert sum(1 for r, g, b in pixels if r + g + b < 150) > 2000  # dark text: the headings are drawn
        if os.environ.get("TOOLBRIDGE_SAVE_SCREENSHOTS"):
            window.resize((800, 500)).quantize(colors=128).save(SCREENSHOT, optimize=True)


async def test_restarting_the_daemon_brings_the_extension_back(world: Setup) -> None:
    runtime = json.loads((world.home / "runtime.json").read_text())
    os.kill(runtime["pid"], signal.SIGKILL)  # a crash: no goodbye to anyone
    async with agent(world.home) as client:  # the relay starts a new daemon
        assert json.loads((world.home / "runtime.json").read_text())["pid"] != runtime["pid"]
        await wait_for_tool(client, "LibreOffice__list_documents", alive=world.check_office)
        assert len(await call(client, "list_documents")) == 3  # the same office, its documents still open


async def test_killing_the_office_mid_call_gives_app_disconnected(world: Setup) -> None:
    async with agent(world.home) as client:
        await wait_for_tool(client, "LibreOffice__write_cells", alive=world.check_office)
        first_step = trio.Event()
        outcome: list[Any] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            first_step.set()

        async def write() -> None:  # 200 steps of 50 rows: the office is killed after the first
            outcome.append(await client.call_tool(
                "LibreOffice__write_cells", {"start": "A1", "values": [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]] * 10_000},
                progress_callback=on_progress))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            await first_step.wait()
            assert world.office is not None
            world.office.kill()
        result = outcome[0]
        assert result.is_error and (result.meta or {}).get("toolbridge/errorKind") == "app_disconnected"
        world.office.wait()


#: File > Exit, as a user quits, through the office's own UNO bridge (the system's Python has uno).
QUIT = """
import sys, time, uno
from com.sun.star.connection import NoConnectException
local = uno.getComponentContext()
resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
for attempt in range(240):  # polled: the office opens its pipe a little after it starts
    try:
        ctx = resolver.resolve(f"uno:pipe,name={sys.argv[1]};urp;StarOffice.ComponentContext")
        break
    except NoConnectException:
        time.sleep(0.25)
from com.sun.star.beans import PropertyValue
node = PropertyValue(Name="nodepath", Value="/org.openoffice.Office.Addons/AddonUI/AddonMenu")
provider = ctx.ServiceManager.createInstanceWithContext("com.sun.star.configuration.ConfigurationProvider", ctx)
menu = provider.createInstanceWithArguments("com.sun.star.configuration.ConfigurationAccess", (node,))
print("menu entry:", menu.getByName("org.toolbridge.libreoffice.status").Title)  # Tools > Add-Ons
ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx).terminate()
"""


async def test_quitting_the_office_says_goodbye(world: Setup) -> None:
    """A second office (the shared one was killed), quit as a user quits: the extension says
    goodbye (the daemon drops its tools at once), and prints no traceback."""
    assert world.office is not None and world.office.poll() is not None
    start = world.log.stat().st_size
    pipe = f"toolbridge-test-{os.getpid()}"
    daemon_log = world.home / "daemon.log"
    registered = daemon_log.read_text().count('"app_registered"')
    world.start_office(f"--accept=pipe,name={pipe};urp;")
    async with agent(world.home) as client:
        with trio.fail_after(120):
            while daemon_log.read_text().count('"app_registered"') == registered:
                world.check_office()
                await trio.sleep(0.2)  # polled: the office is another process
        goodbyes = daemon_log.read_text().count('"app_goodbye"')
        quit_office = await trio.to_thread.run_sync(lambda: subprocess.run(
            [PYTHON_WITH_UNO, "-c", QUIT, pipe], capture_output=True, text=True, timeout=120))
        assert quit_office.returncode == 0, quit_office.stderr
        assert "menu entry: toolbridge: connection state" in quit_office.stdout
        assert await trio.to_thread.run_sync(world.office.wait) == 0
        with trio.fail_after(60):
            while any(t.name.startswith("LibreOffice") for t in (await client.list_tools()).tools):
                await trio.sleep(0.2)  # polled: the office is another process
    assert daemon_log.read_text().count('"app_goodbye"') == goodbyes + 1
    output = world.log.read_bytes()[start:].decode(errors="replace")
    assert "Traceback" not in output, output


def test_integrate_remove_undoes_the_install(world: Setup) -> None:
    removed = toolbridge("integrate", "libreoffice", "--remove", env=world.env)
    assert removed.returncode == 0 and "removed the toolbridge extension" in removed.stdout, removed
    listed = toolbridge("integrate", "--list", env=world.env).stdout
    assert "libreoffice (" in listed and "no toolbridge extension" in listed, listed
    again = toolbridge("integrate", "libreoffice", "--remove", env=world.env)
    assert again.returncode == 0 and "was not installed" in again.stdout
