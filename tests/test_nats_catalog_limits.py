"""What a broker accepts of other brokers' tool lists, and one name used twice (issue 27 items 6, 7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

pytest.importorskip("nats")

from app_client.protocol import ToolSpec  # noqa: E402
from broker.federation.nats_catalog import Catalog  # noqa: E402
from broker.federation.nats_link import encode_announcement  # noqa: E402
from fedkit import tool_names, wait_until  # noqa: E402
from natskit import nats_client, nats_cluster, nats_of, start_broker  # noqa: E402

SCHEMA = {"type": "object"}


async def test_a_remote_tool_list_over_the_byte_budget_is_refused_before_it_is_all_fetched(tmp_path: Path) -> None:
    # 10 tools of ~20 KB of description each (schemas tiny: descriptions used not to count).
    tools = [ToolSpec(f"Big__t{i}", "x" * 20_000, SCHEMA) for i in range(10)]
    catalog = Catalog.build("big", tools, 1 << 20)
    page_budget = 30_000  # one tool a page
    pages_served: list[int] = []
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0], max_line_bytes=64 * 1024)
        async with nats_client(nodes[0].url) as (aio, nc, _):
            async def serve_page(msg: Any) -> None:
                number = json.loads(msg.data or b"{}").get("page", 0)
                pages_served.append(number)
                await msg.respond(catalog.page(number, page_budget))

            await aio.run(nc.subscribe("toolbridge.list.big", cb=serve_page))
            await wait_until(a.core, lambda: nats_of(a).connected)
            with structlog.testing.capture_logs() as logs:
                await aio.run(nc.publish("toolbridge.tools.big",
                                         encode_announcement(catalog, "big-id", 60_000, inline=False)))
                await aio.run(nc.flush())
                await wait_until(a.core, lambda: "big" in nats_of(a).refused)
                # Announced again: not fetched again (refused until its list changes).
                await aio.run(nc.publish("toolbridge.tools.big",
                                         encode_announcement(catalog, "big-id", 60_000, inline=False)))
                await aio.run(nc.flush())
        assert not any(name.startswith("big__") for name in tool_names(a.core))
        assert pages_served == [0, 1, 2, 3]  # 4 x 20 KB > 64 KiB: the other 6 pages never asked for
        status = a.core.status()["nats"]
        assert "over 65536 bytes" in status["refused"]["big"] and "max_line_bytes" in status["refused"]["big"]
        assert [entry["broker"] for entry in logs if entry["event"] == "nats_broker_refused"] == ["big"]
        a.shutdown.set()


async def test_remote_tools_whose_names_are_no_call_subject_are_left_out(tmp_path: Path) -> None:
    names = ["Odd__ok", "Odd__a..b", "Odd__x.", "Odd__has space"]
    catalog = Catalog.build("odd", [ToolSpec(name, "d", SCHEMA) for name in names], 1 << 20)
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        a = await start_broker(nursery, tmp_path, "A", nodes[0])
        async with nats_client(nodes[0].url) as (aio, nc, _):
            await wait_until(a.core, lambda: nats_of(a).connected)
            with structlog.testing.capture_logs() as logs:
                await aio.run(nc.publish("toolbridge.tools.odd",
                                         encode_announcement(catalog, "odd-id", 60_000, inline=True)))
                await aio.run(nc.flush())
                await wait_until(a.core, lambda: "odd__Odd__ok" in tool_names(a.core))
        assert {name for name in tool_names(a.core) if name.startswith("odd__")} == {"odd__Odd__ok"}
        bad = [entry for entry in logs if entry["event"] == "nats_bad_tool_name"]
        assert len(bad) == 1 and bad[0]["tools"] == 3
        a.shutdown.set()


async def test_two_brokers_with_one_name_each_report_it(tmp_path: Path) -> None:
    async with nats_cluster(1) as nodes, trio.open_nursery() as nursery:
        with structlog.testing.capture_logs() as logs:
            one = await start_broker(nursery, tmp_path / "1", "twin", nodes[0])
            two = await start_broker(nursery, tmp_path / "2", "twin", nodes[0])
            for daemon in (one, two):
                await wait_until(daemon.core, lambda d=daemon: "nameTaken" in d.core.status()["nats"])  # type: ignore[misc]
                assert "--broker-name" in daemon.core.status()["nats"]["nameTaken"]
        assert len([entry for entry in logs if entry["event"] == "nats_name_taken"]) == 2
        for daemon in (one, two):
            daemon.shutdown.set()
