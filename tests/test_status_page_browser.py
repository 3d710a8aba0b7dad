"""The status page in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

Logs in through the link ``toolbridge open --print`` prints, watches an app connect, an agent's
call appear in flight, cancels it with the page's button and sees the agent told; a screenshot
is saved to ``.test-artifacts/status-page.png`` (gitignored; CI keeps it). The browser runs in
one worker thread (Playwright's sync API is bound to its thread); the daemon, the app and the
agent run in the test's trio loop, and the thread calls back into it with
``trio.from_thread.run``. Skipped when Chromium is missing, except in CI (``CI=true``), where
that is a failure: ``python3 dev.py test`` installs it.
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp, http_client, mcp_url, running_daemon

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / ".test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Chromium's flags for a test: headless, no sandbox (containers run as root), nothing that
#: phones home or updates itself.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: How long the page gets to show each change (it polls once a second).
WAIT_MS = 15_000

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]


@pytest.fixture
def chromium() -> str:
    """Chromium's path, with Playwright importable; else a skip (a failure in CI) saying what to install."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "the Python package playwright (pip install -e '.[test]', or `python3 dev.py test`)"
    else:
        if CHROMIUM is not None:
            return CHROMIUM
        missing = "Chromium (Debian: `apt-get install chromium`; `python3 dev.py test` installs it as root)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the status page's browser test needs {missing}, and CI must run it")
    pytest.skip(f"the status page's browser test needs {missing}")


async def test_the_status_page_in_headless_chromium(tmp_path: Path, chromium: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    home = tmp_path / "home"
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "status-page.png"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        opened = await trio.run_process([sys.executable, "-m", "broker", "open", "--print", "--home", str(home)],
                                        capture_stdout=True)
        link = opened.stdout.decode().strip()
        apps: list[ScriptedApp] = []
        results: list[Any] = []
        answered = trio.Event()

        async def connect_app() -> None:
            apps.append(await ScriptedApp(info.port, info.token).start(nursery))

        async def agent_calls_slow_tool() -> None:
            async with http_client(info) as http, Client(
                streamable_http_client(mcp_url(info), http_client=http), mode="legacy"
            ) as client:
                results.append(await client.call_tool("Demo__slow", {}))
            answered.set()

        async def start_call() -> None:
            nursery.start_soon(agent_calls_slow_tool)
            await apps[0].until(lambda: len(apps[0].invocations) == 1)

        async def agent_told() -> None:
            with trio.fail_after(10):
                await apps[0].until(lambda: len(apps[0].cancels) == 1)
                await answered.wait()

        def in_the_browser() -> None:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport={"width": 1200, "height": 900})
                    page.goto(link)
                    page.wait_for_url("**/", timeout=WAIT_MS)  # the login page moved on to the page
                    expect(page.locator("#live")).to_contain_text("live", timeout=WAIT_MS)
                    expect(page.locator("#apps tbody")).to_contain_text("No app is connected", timeout=WAIT_MS)
                    assert "#" not in page.url and "v1." not in page.url  # the ticket left the address bar

                    trio.from_thread.run(connect_app)
                    expect(page.locator("#apps tbody")).to_contain_text("Demo", timeout=WAIT_MS)
                    expect(page.locator("#apps tbody")).to_contain_text("connected", timeout=WAIT_MS)

                    trio.from_thread.run(start_call)
                    row = page.locator("#calls tbody tr[data-call-id]")
                    expect(row).to_contain_text("Demo__slow", timeout=WAIT_MS)
                    expect(page.locator("#sessions tbody")).to_contain_text("http", timeout=WAIT_MS)
                    page.screenshot(path=str(screenshot), full_page=True)

                    row.get_by_role("button", name="Cancel").click()
                    trio.from_thread.run(agent_told)
                    expect(page.locator("#calls tbody")).to_contain_text("No call in flight", timeout=WAIT_MS)
                    expect(page.locator("#recent tbody")).to_contain_text("cancelled", timeout=WAIT_MS)
                    expect(page.locator("#tools tbody")).to_contain_text("Demo__slow", timeout=WAIT_MS)
                finally:
                    browser.close()

        await trio.to_thread.run_sync(in_the_browser)
        assert screenshot.stat().st_size > 10_000
        [result] = results
        assert result.is_error and "cancelled from the status page" in str(result.content)
        await apps[0].close()


# --- issue 31: why, charts, the inspector, honest state ----------------------------------------

#: Markup in every text an app controls: shown as text, it must never become an element.
XSS = '<img src="x" class="xss" onerror="document.title=\'pwned\'">'
FORM_SCHEMA = {"type": "object", "required": ["mode"], "properties": {
    "mode": {"type": "string", "enum": ["fast", "careful", XSS], "default": "fast", "title": XSS},
    "size": {"type": "object", "title": XSS, "properties": {
        "width": {"type": "integer", "default": 2}, "height": {"type": "integer"}}},
    "note": {"type": "string", "default": XSS, "description": XSS},
}}


class InspectedApp(ScriptedApp):
    """The demo app, with a form-shaped ``echo`` and an ``xss`` tool whose result is all markup."""

    def __init__(self, port: int, token: str) -> None:
        from app_client.wire import ToolSpec
        from mcp_testkit import DEMO_TOOLS, OBJECT

        super().__init__(port, token, tools=[
            ToolSpec("echo", f"Echo the arguments back {XSS}", FORM_SCHEMA),
            ToolSpec("xss", XSS, OBJECT, title=XSS),
            *[t for t in DEMO_TOOLS if t.name != "echo"],
        ])

    async def _answer(self, call: Any) -> None:
        if call.tool != "xss":
            await super()._answer(call)
            return
        from app_client.wire import ToolResponse, ToolResult

        svg = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" onload="document.title=\'pwned\'"/>').decode()
        await self.send(ToolResponse(call.correlation_id, ToolResult(content=[
            {"type": "text", "text": XSS},
            {"type": "image", "data": svg, "mimeType": "image/svg+xml"},
            {"type": "image", "data": base64.b64encode(XSS.encode()).decode(), "mimeType": "text/html"},
        ])))


def _log_in(page: Any, link: str) -> None:
    from playwright.sync_api import expect

    page.goto(link)
    page.wait_for_url("**/", timeout=WAIT_MS)
    expect(page.locator("#live")).to_contain_text("live", timeout=WAIT_MS)


def _two_more_polls(page: Any) -> None:
    """Wait until the page has drawn two more polls of /api/status (it counts them)."""
    seen = int(page.evaluate("() => document.body.dataset.polls || '0'"))
    page.wait_for_function(f"() => Number(document.body.dataset.polls) >= {seen + 2}", timeout=WAIT_MS)


def _call_from_inspector(page: Any, tool: str) -> None:
    page.select_option("#inspect-app", "Demo")
    page.select_option("#inspect-name", tool)
    page.get_by_role("button", name="Call", exact=True).click()


async def test_why_charts_and_the_inspector_in_headless_chromium(tmp_path: Path, chromium: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    home = tmp_path / "home"
    ARTIFACTS.mkdir(exist_ok=True)
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        opened = await trio.run_process([sys.executable, "-m", "broker", "open", "--print", "--home", str(home)],
                                        capture_stdout=True)
        link = opened.stdout.decode().strip()
        app = await InspectedApp(info.port, info.token).start(nursery)

        async def agent_calls(count: int) -> None:
            async with http_client(info) as http, Client(
                streamable_http_client(mcp_url(info), http_client=http), mode="legacy"
            ) as client:
                for _ in range(count):
                    await client.call_tool("Demo__text", {})
                await client.call_tool("Demo__fail", {})

        async def cancel_reached_the_app() -> None:
            await app.until(lambda: len(app.cancels) == 1)

        def in_the_browser() -> None:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport={"width": 1280, "height": 1000})
                    _log_in(page, link)
                    charts = page.locator(".charts")
                    expect(page.locator("#chart-rate canvas")).to_have_count(1, timeout=WAIT_MS)
                    before = charts.screenshot()
                    trio.from_thread.run(agent_calls, 20)
                    # A failed call's reason and where its full record is, on the page.
                    recent = page.locator("#recent tbody")
                    expect(recent).to_contain_text("the disk is full", timeout=WAIT_MS)
                    expect(recent).to_contain_text("toolbridge logs --id", timeout=WAIT_MS)
                    expect(page.locator("#tools tbody")).to_contain_text("Demo__text", timeout=WAIT_MS)
                    # At 1280 px, times and agent names stay on one line; the favicon is there.
                    assert page.evaluate("""() => [...document.querySelectorAll('#recent td.nowrap')].every(
                        td => td.getClientRects().length === 1 && td.clientHeight < 2.2 * parseFloat(
                            getComputedStyle(td).lineHeight || '20'))""")
                    icon = page.evaluate("() => fetch(document.querySelector('link[rel=icon]').href)"
                                         ".then(r => r.headers.get('content-type'))")
                    assert icon == "image/svg+xml"
                    _two_more_polls(page)  # the charts have drawn the calls
                    after = charts.screenshot()
                    assert before != after  # the charts moved with the calls

                    # The filter: failed calls only.
                    page.locator('#filters [name="failed"]').check()
                    expect(recent.locator("tr")).to_have_count(1, timeout=WAIT_MS)
                    page.locator('#filters [name="failed"]').uncheck()

                    # The inspector: a form from the schema (enum, nested object, defaults), then Call.
                    page.select_option("#inspect-app", "Demo")
                    page.select_option("#inspect-name", "echo")
                    form = page.locator("#inspect-form")
                    expect(form.locator('[name="mode"]')).to_have_value('"fast"')  # the default
                    expect(form.locator('[name="size.width"]')).to_have_value("2")
                    expect(page.get_by_label("height")).to_be_visible()  # each field has its label
                    form.locator('[name="mode"]').select_option(label="careful")
                    form.locator('[name="size.height"]').fill("7")
                    form.locator('[name="note"]').fill("hello")
                    page.get_by_role("button", name="Call", exact=True).click()
                    result = page.locator("#inspect-result")
                    expect(result).to_contain_text('"careful"', timeout=WAIT_MS)
                    expect(result).to_contain_text('"height": 7', timeout=WAIT_MS)

                    _call_from_inspector(page, "image")
                    expect(result).to_contain_text("a screenshot", timeout=WAIT_MS)
                    image = result.locator("img")
                    expect(image).to_have_count(1, timeout=WAIT_MS)
                    page.wait_for_function("() => document.querySelector('#inspect-result img').naturalWidth > 0",
                                           timeout=WAIT_MS)  # rendered: the CSP lets data: images in
                    # The screenshot docs/status-page.md shows: failed calls only, to keep it short.
                    page.locator('#filters [name="failed"]').check()
                    _two_more_polls(page)  # the in-flight table and the charts are current
                    page.screenshot(path=str(ARTIFACTS / "status-page-inspector.png"), full_page=True)
                    page.locator('#filters [name="failed"]').uncheck()

                    # Markup from the app, in descriptions, schema titles, defaults, enums and results.
                    _call_from_inspector(page, "xss")
                    expect(result).to_contain_text(XSS, timeout=WAIT_MS)
                    page.select_option("#inspect-name", "echo")
                    expect(page.locator("#inspect-description")).to_contain_text(XSS)
                    expect(page.locator('#inspect-form [name="note"]')).to_have_value(XSS)
                    assert page.locator("img.xss").count() == 0 and page.title() != "pwned"
                    assert result.locator("img").count() == 0  # svg and text/html "images" are not shown

                    # Cancel from the inspector reaches the app.
                    _call_from_inspector(page, "slow")
                    cancel = page.locator("#inspect-cancel")
                    expect(cancel).to_be_enabled(timeout=WAIT_MS)
                    cancel.click()
                    trio.from_thread.run(cancel_reached_the_app)
                    expect(result).to_contain_text("cancelled", timeout=WAIT_MS)
                    page.screenshot(path=str(ARTIFACTS / "status-page-charts.png"), full_page=True)

                    # Narrow: still usable at 600 px (the page itself does not scroll sideways).
                    page.set_viewport_size({"width": 600, "height": 900})
                    assert page.evaluate("document.documentElement.scrollWidth") <= 600
                    page.screenshot(path=str(ARTIFACTS / "status-page-600px.png"))
                finally:
                    browser.close()

        await trio.to_thread.run_sync(in_the_browser)
        assert len(app.cancels) == 1  # from the inspector's Cancel
        await app.close()


async def test_the_banner_when_the_daemon_stops_and_recovery_in_headless_chromium(tmp_path: Path,
                                                                                  chromium: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    home = tmp_path / "home"
    async with trio.open_nursery() as nursery:
        stops = [trio.Event(), trio.Event()]
        ports: list[int] = []

        async def serve(index: int, *, task_status: trio.TaskStatus[None]) -> None:
            settings = {"http_port": ports[0]} if ports else {}
            async with running_daemon(home, **settings) as info:
                if not ports:
                    ports.append(info.http_port or 0)
                task_status.started()
                await stops[index].wait()

        async def link() -> str:
            opened = await trio.run_process([sys.executable, "-m", "broker", "open", "--print", "--home", str(home)],
                                            capture_stdout=True)
            return opened.stdout.decode().strip()

        await nursery.start(serve, 0)
        first_link = await link()

        async def stop() -> None:
            stops[0].set()

        async def restart() -> str:
            await nursery.start(serve, 1)
            return await link()

        def in_the_browser() -> None:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                try:
                    context = browser.new_context(viewport={"width": 1280, "height": 900})
                    page = context.new_page()
                    _log_in(page, first_link)
                    banner = page.locator("#banner")
                    expect(banner).to_be_hidden()
                    expect(page.get_by_role("button", name="Call", exact=True)).to_be_enabled(timeout=WAIT_MS)
                    trio.from_thread.run(stop)
                    expect(banner).to_contain_text("not answering", timeout=WAIT_MS)
                    expect(page.get_by_role("button", name="Call", exact=True)).to_be_disabled()
                    page.screenshot(path=str(ARTIFACTS / "status-page-offline.png"))
                    second_link = trio.from_thread.run(restart)
                    # Back, but the restart logged everyone out: the banner says what to do.
                    expect(banner).to_contain_text("toolbridge open", timeout=WAIT_MS)
                    other = context.new_page()  # the user runs `toolbridge open` again
                    _log_in(other, second_link)
                    expect(banner).to_be_hidden(timeout=WAIT_MS)  # the first page recovers by itself
                    expect(page.get_by_role("button", name="Call", exact=True)).to_be_enabled()
                finally:
                    browser.close()

        await trio.to_thread.run_sync(in_the_browser)
        stops[1].set()


async def test_the_inspector_reads_resources_and_gets_prompts_in_headless_chromium(tmp_path: Path,
                                                                                   chromium: str) -> None:
    from playwright.sync_api import expect, sync_playwright
    from test_mcp_resources import ReturningApp

    home = tmp_path / "home"
    async with running_daemon(home) as info, trio.open_nursery() as nursery:
        opened = await trio.run_process([sys.executable, "-m", "broker", "open", "--print", "--home", str(home)],
                                        capture_stdout=True)
        app = await ReturningApp(info.port, info.token).start(nursery)

        def in_the_browser() -> None:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                try:
                    # A system in dark mode gets the dark page.
                    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme="dark")
                    _log_in(page, opened.stdout.decode().strip())
                    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(22, 24, 28)"
                    expect(page.locator("#inspect-app option")).to_have_count(1, timeout=WAIT_MS)
                    page.select_option("#inspect-kind", "resource")
                    expect(page.locator("#inspect-name option")).to_have_count(3, timeout=WAIT_MS)
                    page.select_option("#inspect-name", "notes://readme")
                    expect(page.locator('#inspect-form [name="uri"]')).to_have_value("notes://readme")
                    page.get_by_role("button", name="Call", exact=True).click()
                    result = page.locator("#inspect-result")
                    expect(result).to_contain_text("hello from Notes", timeout=WAIT_MS)
                    page.select_option("#inspect-name", "img://logo.png")
                    page.get_by_role("button", name="Call", exact=True).click()
                    expect(result.locator("img")).to_have_count(1, timeout=WAIT_MS)
                    page.select_option("#inspect-kind", "prompt")
                    expect(page.locator("#inspect-name")).to_have_value("hello", timeout=WAIT_MS)
                    page.get_by_role("button", name="Call", exact=True).click()
                    expect(result).to_contain_text("user:", timeout=WAIT_MS)
                    expect(result).to_contain_text("hello", timeout=WAIT_MS)
                finally:
                    browser.close()

        await trio.to_thread.run_sync(in_the_browser)
        assert [read.uri for read in app.reads] == ["notes://readme", "img://logo.png"]
        await app.close()
