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
