"""app_client.testing's FakeLink speaks protocol v2: an app author unit-tests resources and
prompts without a daemon (reads, prompt gets, cancels, updates, runtime sets, negotiation).

Each test joins an App and the FakeBroker with in-memory streams (``autojump_clock``, so the
deadline test runs in no real time); the module docstring's example is run as written.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

import app_client.testing
from app_client import App, ToolError
from app_client.testing import FakeBroker, FakeLink
from app_client.protocol import PromptResponse, ResourceUpdated, SetResources

TOKEN = "t"


def make_app(broker: FakeBroker) -> App:
    app = App("Notes", host="fake", port=1, token=TOKEN, connector=broker.connector)

    @app.resource("notes://today", mime_type="text/markdown")
    async def today() -> str:
        return "# Today"

    @app.resource("notes://logo.png", mime_type="image/png")
    async def logo() -> bytes:
        return b"\x89PNG"

    @app.resource_template("notes://pages/{name}")
    async def page(name: str) -> str:
        if name == "secret":
            raise ToolError("that page is private")
        if name == "slow":
            await trio.sleep(60)
        return f"page {name}"

    @app.prompt(description="Review a page")
    async def review(page: str, focus: str = "bugs") -> str:
        return f"Review {page} for {focus}."

    @app.tool
    async def touch(uri: str) -> str:
        app.resource_updated(uri)
        return "touched"

    return app


@asynccontextmanager
async def linked(app: App, broker: FakeBroker, **registration: int) -> AsyncIterator[FakeLink]:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app.run)
        link = await broker.accept()
        await link.accept_registration(**registration)
        with trio.fail_after(60):  # a test waiting for a message that never comes fails, not hangs
            yield link
        nursery.cancel_scope.cancel()


async def test_reads_prompts_and_errors_without_a_daemon(autojump_clock: trio.testing.MockClock) -> None:
    broker = FakeBroker()
    app = make_app(broker)
    async with linked(app, broker) as link:
        assert link.register is not None and link.register.protocol_version == 2
        assert [r.uri for r in link.register.resources] == ["notes://today", "notes://logo.png"]
        assert link.protocol.version == 2  # what the fake answered: the app asked for 2
        text = await link.read("notes://today")
        assert text.contents == [{"uri": "notes://today", "text": "# Today", "mimeType": "text/markdown"}]
        blob = await link.read("notes://logo.png")
        assert blob.contents == [{"uri": "notes://logo.png", "blob": "iVBORw==", "mimeType": "image/png"}]
        assert (await link.read("notes://pages/plan%20b")).contents[0]["text"] == "page plan b"
        assert (await link.read("notes://pages/secret")).error == "that page is private"
        assert (await link.read("notes://nope")).error == "this app has no resource 'notes://nope'"
        got = await link.get_prompt("review", {"page": "a.md"})
        assert got == PromptResponse(correlation_id=got.correlation_id, description="Review a page",
                                     messages=[{"role": "user", "content": {"type": "text", "text": "Review a.md for bugs."}}])
        assert (await link.get_prompt("nope")).error == "this app has no prompt 'nope'"


async def test_a_cancelled_read_sends_nothing_and_a_deadline_answers_an_error(autojump_clock: trio.testing.MockClock) -> None:
    broker = FakeBroker()
    app = make_app(broker)
    async with linked(app, broker) as link:
        cid = await link.request_read("notes://pages/slow")
        await trio.sleep(1)
        await link.cancel(cid)
        # Nothing for the cancelled read: the next answer is the next read's.
        assert (await link.read("notes://today")).contents[0]["text"] == "# Today"
        late = await link.read("notes://pages/slow", timeout_ms=500)
        assert late.error == "reading 'notes://pages/slow' timed out"


async def test_updates_and_runtime_sets_are_kept_while_waiting(autojump_clock: trio.testing.MockClock) -> None:
    broker = FakeBroker()
    app = make_app(broker)
    async with linked(app, broker) as link:
        result = await link.call("touch", {"uri": "notes://today"})
        assert result.data == "touched"
        assert link.resource_updates == [ResourceUpdated("notes://today")]
        async def fresh() -> str:  # async: a sync handler's worker thread and autojump_clock do not mix
            return "fresh"

        app.add_resource(fresh, "notes://fresh", name="fresh")
        sent = await link.wait_for(SetResources)
        assert [r.uri for r in sent.resources] == ["notes://today", "notes://logo.png", "notes://fresh"]
        assert [t.uri_template for t in sent.resource_templates] == ["notes://pages/{name}"]
        assert (await link.read("notes://fresh")).contents[0]["text"] == "fresh"

        async def hello() -> str:
            return "Say hello."

        app.add_prompt(hello)
        app.remove_resource("notes://fresh")
        app.remove_prompt("hello")
        assert (await link.call("touch", {"uri": "notes://pages/x"})).data == "touched"
        assert [[p.name for p in s.prompts] for s in link.prompt_sets] == [["review", "hello"], ["review"]]
        assert [len(s.resources) for s in link.resource_sets] == [2]
        assert link.resource_updates[-1] == ResourceUpdated("notes://pages/x")


async def test_a_version_1_answer_keeps_v2_messages_off_the_wire(autojump_clock: trio.testing.MockClock) -> None:
    broker = FakeBroker()
    app = make_app(broker)
    async with linked(app, broker, protocol_version=1) as link:
        assert (await link.call("touch", {"uri": "notes://today"})).data == "touched"
        async def x() -> str:
            return "x"

        app.add_resource(x, "notes://x", name="x")  # not sent: the link speaks 1
        assert (await link.call("touch", {"uri": "notes://x"})).data == "touched"
        assert link.resource_updates == [] and link.resource_sets == []
        with pytest.raises(AssertionError, match="expected resourceResponse"):
            # the broker side's machine refuses a v2 message on a v1 link: the fake sends it
            # anyway (a broken broker), and the app answers unexpected_message
            await link.read("notes://today")


async def test_the_module_docstring_example_runs(autojump_clock: trio.testing.MockClock) -> None:
    doc = app_client.testing.__doc__
    assert doc is not None
    example = doc.split("Resources and prompts without a daemon::\n\n", 1)[1]
    code = "\n".join(line[4:] for line in example.splitlines() if line.startswith("    ") or not line.strip())
    namespace = {"App": App, "FakeBroker": FakeBroker, "ResourceUpdated": ResourceUpdated, "trio": trio}
    setup = "broker = FakeBroker()\n"
    source = "async def example():\n" + "\n".join("    " + line for line in (setup + code).splitlines())
    exec(compile(source, "<testing docstring>", "exec"), namespace)
    with trio.fail_after(10):
        await namespace["example"]()
    assert re.search(r"link\.read\(", code)


async def test_a_resource_added_to_an_app_that_started_with_none_is_read(autojump_clock: trio.testing.MockClock) -> None:
    """An app with prompts only speaks v2 with an empty resource table; a resource added later is
    announced (setResources) and read (the session used to keep a copy of the empty table)."""
    broker = FakeBroker()
    app = App("Prompter", host="fake", port=1, token=TOKEN, connector=broker.connector)

    @app.prompt
    async def hello() -> str:
        return "Say hello."

    async with linked(app, broker) as link:
        with trio.fail_after(10):
            await app.wait_connected()
            async def late() -> str:
                return "late"

            app.add_resource(late, "late://one", name="one")
            assert [r.uri for r in (await link.wait_for(SetResources)).resources] == ["late://one"]
            assert (await link.read("late://one")).contents[0]["text"] == "late"
