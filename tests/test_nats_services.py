"""NATS federation (issue 22), what other NATS clients see and what they cannot do: the services
API lists every tool, tool lists bigger than a NATS message, and brokers that may not speak for
each other. Real nats-server processes (``natskit``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

pytest.importorskip("nats")

from app_client.protocol import ToolSpec  # noqa: E402
from broker.federation.nats_bridge import AsyncioThread  # noqa: E402
from broker.federation.nats_catalog import Catalog  # noqa: E402
from broker.federation.nats_link import broker_permissions, encode_announcement  # noqa: E402
from fedkit import tool_names, wait_until  # noqa: E402
from mcp_testkit import DEMO_TOOLS, ScriptedApp  # noqa: E402
from natskit import nats_client, nats_cluster, nats_of, start_broker  # noqa: E402





class PlainClient:
    """A NATS client that knows nothing of toolbridge (nats-py on its own thread), recording
    the errors the server sends it (permission violations)."""

    def __init__(self, aio: AsyncioThread, nc: Any, errors: list[str]) -> None:
        self.aio, self.nc, self.errors = aio, nc, errors

    async def gather(self, subject: str, count: int, data: bytes = b"") -> list[dict[str, Any]]:
        """Publish a request and collect ``count`` answers (a services-API verb many answer)."""
        nc = self.nc

        async def run() -> list[dict[str, Any]]:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox, max_msgs=count)
            await nc.publish(subject, data, reply=inbox)
            return [json.loads((await sub.next_msg(timeout=5)).data) for _ in range(count)]

        return await self.aio.run(run())

    async def request(self, subject: str, data: bytes = b"") -> bytes:
        return bytes((await self.aio.run(self.nc.request(subject, data, timeout=5))).data)

    async def publish(self, subject: str, data: bytes) -> None:
        await self.aio.run(self.nc.publish(subject, data))
        await self.aio.run(self.nc.flush())

    async def subscribe(self, subject: str, **kwargs: Any) -> Any:
        sub = await self.aio.run(self.nc.subscribe(subject, **kwargs))
        await self.aio.run(self.nc.flush())  # a refusal (-ERR) is handled before the flush's PONG
        return sub


@asynccontextmanager
async def plain_client(url: str) -> AsyncIterator[PlainClient]:
    async with nats_client(url) as (aio, nc, errors):
        yield PlainClient(aio, nc, errors)


# --- the services API -----------------------------------------------------------------------


async def test_the_services_api_lists_each_tool_as_an_endpoint_with_its_schemas_and_counts_its_calls(
        tmp_path: Path) -> None:
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0].url)
        b = await start_broker(nursery, tmp_path, "B", nodes[0].url)
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core))
        ok = await a.core.router.call_tool("B__Demo__echo", {"text": "hi"})
        failed = await a.core.router.call_tool("B__Demo__fail", {})
        assert ok.result is not None and ok.result.success and failed.result is not None
        async with plain_client(nodes[0].url) as client:
            pings = await client.gather("$SRV.PING.toolbridge", 2)
            assert {p["type"] for p in pings} == {"io.nats.micro.v1.ping_response"}
            ids = {p["metadata"]["broker"]: p["id"] for p in pings}
            assert sorted(ids) == ["A", "B"]

            [info] = await client.gather(f"$SRV.INFO.toolbridge.{ids['B']}", 1)
            assert info["type"] == "io.nats.micro.v1.info_response" and info["metadata"]["broker"] == "B"
            endpoints = {e["name"]: e for e in info["endpoints"]}
            assert set(endpoints) == {f"Demo__{tool.name}" for tool in DEMO_TOOLS} | {"list"}  # no wildcard
            echo = endpoints["Demo__echo"]
            assert echo["subject"] == "toolbridge.call.B.Demo__echo" and echo["queue_group"] == "q"
            assert all(isinstance(value, str) for value in echo["metadata"].values())  # the services API's rule
            assert json.loads(echo["metadata"]["input_schema"]) == DEMO_TOOLS[0].input_schema
            assert echo["metadata"]["description"] == "Echo the arguments back"
            assert endpoints["Demo__text"]["metadata"]["title"] == "Plain text"
            assert info["metadata"]["tools"] == info["metadata"]["tools_listed"] == str(len(DEMO_TOOLS))
            assert info["metadata"]["schemas"] == "yes"
            # A has no apps: it lists none of B's tools (never what it learned over NATS).
            [info_a] = await client.gather(f"$SRV.INFO.toolbridge.{ids['A']}", 1)
            assert [e["name"] for e in info_a["endpoints"]] == ["list"]

            # A client that only read INFO calls a tool on the subject it found there.
            reply = json.loads(await client.request(echo["subject"], b'{"text": "plain"}'))
            assert reply["data"] == {"echo": {"text": "plain"}}

            [stats] = await client.gather(f"$SRV.STATS.toolbridge.{ids['B']}", 1)
            counted = {e["name"]: e for e in stats["endpoints"]}
            assert counted["Demo__echo"]["num_requests"] == 2 and counted["Demo__echo"]["num_errors"] == 0
            assert counted["Demo__fail"]["num_requests"] == 1 and counted["Demo__fail"]["num_errors"] == 1
            assert counted["Demo__echo"]["processing_time"] > 0 and "call" not in counted
        await app_b.close()
        for daemon in (a, b):
            daemon.shutdown.set()


# --- tool lists bigger than a NATS message --------------------------------------------------


def big_tools(count: int, schema_bytes: int) -> list[ToolSpec]:
    """``count`` tools whose schemas are about ``schema_bytes`` each (a long enum)."""
    values = [f"value-{i:06d}" for i in range(schema_bytes // 16)]
    names = ["echo", *(f"op{i}" for i in range(1, count))]  # echo: ScriptedApp answers it
    return [ToolSpec(name, f"Operation {name}", {"type": "object", "properties": {
        "mode": {"type": "string", "enum": values}, "tag": {"type": "string", "const": name}}})
            for name in names]


async def test_tool_lists_over_a_megabyte_are_fetched_in_pages_and_fully_visible(tmp_path: Path) -> None:
    tools = big_tools(48, 30_000)  # ~1.5 MB of schemas; nats-server's max_payload is 1 MB
    assert sum(len(json.dumps(t.input_schema)) for t in tools) > 1_400_000
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0].url)
        b = await start_broker(nursery, tmp_path, "B", nodes[0].url)
        app_b = await ScriptedApp(b.port, b.token, app_name="Big", tools=tools).start(nursery)
        expected = {f"B__Big__{t.name}" for t in tools}
        # A was there when B's app came: B announced the change without the tools (too big), A fetched them.
        await wait_until(a.core, lambda: expected <= tool_names(a.core), timeout=20)
        schemas = {tool.agent_name: tool.spec.input_schema for tool in a.core.registry.tools()}
        assert all(schemas[f"B__Big__{t.name}"] == t.input_schema for t in tools)
        assert len(nats_of(b)._catalog.page_bounds(nats_of(b)._budget())) >= 2
        # C joins later: it learns B's list by request (B's answers to its hello carry only the digest).
        c = await start_broker(nursery, tmp_path, "C", nodes[0].url)
        await wait_until(c.core, lambda: expected <= tool_names(c.core), timeout=20)
        outcome = await c.core.router.call_tool("B__Big__echo", {"mode": "value-000003", "tag": "echo"})
        assert outcome.result is not None and outcome.result.data == {"echo": {"mode": "value-000003", "tag": "echo"}}
        async with plain_client(nodes[0].url) as client:
            [ping] = [p for p in await client.gather("$SRV.PING.toolbridge", 3) if p["metadata"]["broker"] == "B"]
            [info] = await client.gather(f"$SRV.INFO.toolbridge.{ping['id']}", 1)
            assert info["metadata"]["schemas"].startswith("no: too big, see toolbridge.list.B")
            assert {e["name"] for e in info["endpoints"]} == {f"Big__{t.name}" for t in tools} | {"list"}
        await app_b.close()
        for daemon in (a, b, c):
            daemon.shutdown.set()


async def test_a_server_with_a_small_max_payload_gets_pages_of_that_size(tmp_path: Path) -> None:
    config = tmp_path / "nats.conf"
    config.write_text(json.dumps({"max_payload": 65536}))
    tools = big_tools(12, 10_000)  # ~120 KB: under the inline limit, over this server's max_payload
    with structlog.testing.capture_logs() as logs:
        async with nats_cluster(1, config) as nodes, trio.open_nursery() as nursery:
            a = await start_broker(nursery, tmp_path, "A", nodes[0].url)
            b = await start_broker(nursery, tmp_path, "B", nodes[0].url)
            app_b = await ScriptedApp(b.port, b.token, app_name="Big", tools=tools).start(nursery)
            await wait_until(a.core, lambda: {f"B__Big__{t.name}" for t in tools} <= tool_names(a.core))
            assert nats_of(b)._budget() == 65536
            assert len(nats_of(b)._catalog.page_bounds(65536)) >= 2
            await app_b.close()
            for daemon in (a, b):
                daemon.shutdown.set()
    # B never tried to send more than the server takes (the list was not put inline).
    assert not [entry for entry in logs if entry["event"] == "nats_publish_failed"]


def test_a_catalog_pages_whole_tools_within_the_budget_and_cuts_the_services_api_to_fit() -> None:
    tools = big_tools(10, 2_000)
    catalog = Catalog.build("B", tools, 64 * 1024)
    bounds = catalog.page_bounds(16 * 1024)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(tools) and len(bounds) > 1
    assert all(end > start for start, end in bounds)
    assert all(len(catalog.page(n, 16 * 1024)) <= 16 * 1024 for n in range(len(bounds)))
    endpoints, meta = catalog.endpoints(64 * 1024)
    assert meta["schemas"] == "yes" and len(endpoints) == 10
    endpoints, meta = catalog.endpoints(16 * 1024)
    assert meta["schemas"].startswith("no") and len(endpoints) == 10
    assert "input_schema" not in endpoints[0]["metadata"]
    endpoints, meta = catalog.endpoints(4096 + 500)
    assert 0 < len(endpoints) < 10 and meta["tools_listed"] == str(len(endpoints)) and meta["tools"] == "10"
    # A tool bigger than any page is left out (it could not travel), the rest stay.
    huge = Catalog.build("B", [*tools, *big_tools(1, 80_000)], 64 * 1024)
    assert huge.oversized == ("echo",) and len(huge.tools) == 10


# --- brokers may not speak for each other ----------------------------------------------------


def users_config(users: dict[str, str]) -> str:
    """A nats-server configuration (JSON is valid there) with one user per broker, each with
    only its own broker's permissions."""
    return json.dumps({"authorization": {"users": [
        {"user": name, "password": password, "permissions": broker_permissions(name)}
        for name, password in users.items()]}})


async def test_a_broker_on_the_same_account_cannot_impersonate_another_or_take_its_calls(tmp_path: Path) -> None:
    config = tmp_path / "nats.conf"
    config.write_text(users_config({"A": "pa", "B": "pb", "X": "px"}))
    async with nats_cluster(1, config) as nodes, trio.open_nursery() as nursery:
        port = nodes[0].port
        a = await start_broker(nursery, tmp_path, "A", f"nats://A:pa@127.0.0.1:{port}")
        b = await start_broker(nursery, tmp_path, "B", f"nats://B:pb@127.0.0.1:{port}")
        app_b = await ScriptedApp(b.port, b.token).start(nursery)
        await wait_until(a.core, lambda: "B__Demo__echo" in tool_names(a.core))
        # Each broker's own permissions suffice for everything it does (no violation logged).
        assert nats_of(a).last_error is None and nats_of(b).last_error is None
        evil = [ToolSpec("Evil__run", "Hands over the desktop", {"type": "object"})]
        async with plain_client(f"nats://X:px@127.0.0.1:{port}") as mallory:
            # X may not publish on B's subjects, nor receive B's calls or anyone's replies.
            await mallory.publish("toolbridge.tools.B", encode_announcement(
                Catalog.build("B", evil, 1 << 20), "B-id", 60_000, inline=True))
            await mallory.publish("toolbridge.bye.B", b"")
            stolen = await mallory.subscribe("toolbridge.call.B.>", queue="q")
            snooped = await mallory.subscribe("_INBOX.>")
            refused = [e for e in mallory.errors if "permissions violation" in e.lower()]
            assert len(refused) == 4, mallory.errors
            # On its own subject, X may announce, but only for itself: naming B inside is ignored.
            await mallory.publish("toolbridge.tools.X", encode_announcement(
                Catalog.build("B", evil, 1 << 20), "B-id", 60_000, inline=True))
            await mallory.publish("toolbridge.tools.X", encode_announcement(
                Catalog.build("X", [ToolSpec("Own__run", "X's own", {"type": "object"})], 1 << 20), "X-id",
                60_000, inline=True))
            await wait_until(a.core, lambda: "X__Own__run" in tool_names(a.core))  # after the forgery
            names = tool_names(a.core)
            assert "B__Evil__run" not in names and "B__Demo__echo" in names
            assert nats_of(a).remotes["B"].broker_id == nats_of(b).federation.broker_id
            for _ in range(4):  # every call reaches B's app; nothing reaches X
                outcome = await a.core.router.call_tool("B__Demo__echo", {"text": "mine"})
                assert outcome.result is not None and outcome.result.data == {"echo": {"text": "mine"}}
            assert len(app_b.invocations) == 4
            assert stolen.pending_msgs == 0 and snooped.pending_msgs == 0
        await app_b.close()
        for daemon in (a, b):
            daemon.shutdown.set()


# --- protocol.md §14 is the contract ---------------------------------------------------------


def test_protocol_md_documents_the_subjects_headers_and_permissions_the_code_uses() -> None:
    import re

    from broker.federation import nats_link
    from broker.federation.nats_catalog import call_subject, list_subject

    text = (Path(__file__).resolve().parent.parent / "protocol.md").read_text(encoding="utf-8")
    section = text[text.index("## 14. Federation over NATS"):]
    section = section[:section.find("\n## ", 5) if "\n## " in section[5:] else None]
    documented = set(re.findall(r"`(toolbridge\.[A-Za-z.*>]+)`", section))
    perms = nats_link.broker_permissions("NAME")
    used = {call_subject("NAME", "TOOL"), list_subject("NAME"), nats_link.HELLO_SUBJECT,
            *perms["publish"]["allow"], *perms["subscribe"]["allow"]}
    used = {s for s in used if s.startswith("toolbridge.")}
    assert documented - {"toolbridge.call.*.>"} <= used | {"toolbridge.call.NAME.TOOL"}
    assert {s for s in used if "*" not in s and ">" not in s} <= documented
    headers = set(re.findall(r"`(Toolbridge-[A-Za-z-]+)`", section))
    assert headers == {nats_link.H_CALL, nats_link.H_FROM, nats_link.H_TIMEOUT, nats_link.H_PROGRESS,
                       nats_link.H_DEADLINE, nats_link.H_KIND}
    # The permission lists, verbatim.
    for verb in ("publish", "subscribe"):
        line = re.search(rf"^- {verb}: (.+?);?$", section.replace("\n  ", " "), re.MULTILINE)
        assert line is not None, verb
        listed = re.findall(r"`([^`]+)`", line.group(1))
        assert listed == perms[verb]["allow"], verb
    responses = perms["allow_responses"]
    assert f"`allow_responses: {{max: {responses['max']}, expires: {responses['expires']}}}`" in section
    from broker.federation.nats_calls import alive_prefix, reply_prefix

    assert "`_INBOX.NAME.r.TOKEN`" in section and reply_prefix("NAME") == "_INBOX.NAME.r"
    assert "`_INBOX.NAME.a.TOKEN`" in section and alive_prefix("NAME") == "_INBOX.NAME.a"
    assert f"`{nats_link.inbox_prefix('NAME')}`" in section
    assert nats_link.INLINE_BYTES == 256 * 1024 and "256 KiB" in section


def test_the_cli_prints_a_brokers_permissions(capsys: pytest.CaptureFixture[str]) -> None:
    from broker.cli import main

    assert main(["nats-permissions", "desk-anna", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == broker_permissions("desk-anna")
    assert main(["nats-permissions", "desk-anna"]) == 0
    text = capsys.readouterr().out
    assert '"toolbridge.call.desk-anna.>"' in text and "nsc add user desk-anna --allow-pub" in text
    assert main(["nats-permissions", "a.b"]) != 0
    assert "invalid broker_name" in capsys.readouterr().err
