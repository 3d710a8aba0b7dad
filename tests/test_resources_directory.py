"""broker.core.resources without a daemon: the URI scheme, matching, guards, deterministic order."""

from __future__ import annotations

from typing import Any

import pytest

from app_client.protocol import PromptSpec, ResourceSpec, ResourceTemplateSpec
from broker.core.resources import ResourceDirectory, ResourceError, agent_uri, split_uri
from broker.mcp.results import list_page


class _Port:
    async def read_resource(self, uri: str, timeout: float) -> list[dict[str, Any]]:  # pragma: no cover
        return []

    async def get_prompt(self, name: str, arguments: dict[str, str], timeout: float) -> dict[str, Any]:  # pragma: no cover
        return {}


def test_scheme_round_trips_and_refuses_foreign_uris() -> None:
    assert agent_uri("Notes", "file:///a b") == "toolbridge://Notes/file:///a b"
    assert split_uri("toolbridge://Notes/file:///a") == ("Notes", "file:///a")
    for bad in ("file:///a", "toolbridge://Notes", "toolbridge:///x", "toolbridge://Notes/", "TOOLBRIDGE://N/x"):
        with pytest.raises(ResourceError):
            split_uri(bad)


async def test_resolve_matches_listed_and_templated_uris_and_guards_values() -> None:
    directory = ResourceDirectory()
    directory.offer("Notes", _Port(), [ResourceSpec("notes://a", "a")],
                    [ResourceTemplateSpec("file:///docs/{name}.md", "doc"), ResourceTemplateSpec("raw://{path}", "raw")])
    assert (await directory.resolve("toolbridge://Notes/notes://a"))[1] == "notes://a"
    assert (await directory.resolve("toolbridge://Notes/file:///docs/x%20y.md"))[1] == "file:///docs/x%20y.md"
    for uri in ("toolbridge://Notes/file:///docs/a/b.md", "toolbridge://Notes/notes://b",
                "toolbridge://Other/notes://a"):
        with pytest.raises(ResourceError) as caught:
            await directory.resolve(uri)
        assert caught.value.code == -32002
    # `...md` is no traversal (the segment is not exactly `..`); an encoded `..` value is.
    assert (await directory.resolve("toolbridge://Notes/file:///docs/%2e%2e.md"))[1] == "file:///docs/%2e%2e.md"
    for uri in ("toolbridge://Notes/raw://%2e%2e", "toolbridge://Notes/raw://%2e%2e%2fetc%2fpasswd",
                "toolbridge://Notes/raw://..%5Csecret", "toolbridge://Notes/raw://%EF%BC%8E%EF%BC%8E"):
        with pytest.raises(ResourceError) as caught:
            await directory.resolve(uri)
        assert caught.value.code == -32602, uri


def test_lists_are_sorted_by_the_agent_facing_key_so_pages_never_skip() -> None:
    directory = ResourceDirectory()
    for label in ("A", "A-b", "A_2", "B"):
        directory.offer(label, _Port(), [ResourceSpec(f"x://{n}", "n") for n in range(3)], [])
        directory.offer_prompts(label, _Port(), [PromptSpec("p"), PromptSpec("q")])
    for entries, key in ((directory.list_resources(), "uri"), (directory.list_prompts(), "name")):
        names = [e[key] for e in entries]
        assert names == sorted(names)
        seen, cursor = [], None
        while True:
            page, cursor = list_page(names, entries, cursor, 5)
            seen += [e[key] for e in page]
            if cursor is None:
                break
        assert seen == names


def test_lists_are_prepared_once_per_change_and_follow_every_change() -> None:
    directory = ResourceDirectory()
    directory.offer("B", _Port(), [ResourceSpec("x://1", "n")], [])
    directory.offer_prompts("B", _Port(), [PromptSpec("p")])
    resources, prompts = directory.resource_listing(), directory.prompt_listing()
    assert directory.resource_listing() is resources and directory.prompt_listing() is prompts  # no rebuild
    port = _Port()
    directory.offer("A", port, [ResourceSpec("x://0", "n")], [])
    directory.offer_prompts("A", port, [PromptSpec("q")])
    assert directory.resource_listing().names == ["toolbridge://A/x://0", "toolbridge://B/x://1"]
    assert directory.prompt_listing().names == ["A__q", "B__p"]
    directory.withdraw("A", port)
    assert directory.resource_listing().names == ["toolbridge://B/x://1"]
    assert directory.prompt_listing().names == ["B__p"]
    directory.offer_prompts("B", _Port(), [])
    assert directory.prompt_listing().names == [] and directory.list_prompts() == []


def test_withdraw_only_removes_the_links_own_offer() -> None:
    directory = ResourceDirectory()
    old, new = _Port(), _Port()
    directory.offer("Notes", old, [ResourceSpec("notes://a", "a")], [])
    directory.offer("Notes", new, [ResourceSpec("notes://b", "b")], [])  # a re-registration took over
    version = directory.version
    directory.withdraw("Notes", old)
    assert directory.version == version and [e["uri"] for e in directory.list_resources()] == ["toolbridge://Notes/notes://b"]
    directory.withdraw("Notes", new)
    assert directory.list_resources() == []


async def test_reads_wait_for_an_away_app_until_it_returns_or_its_grace_ends(autojump_clock: Any) -> None:
    import trio

    directory = ResourceDirectory()
    old, new = _Port(), _Port()
    directory.offer("Notes", old, [ResourceSpec("notes://a", "a")], [])
    directory.offer_prompts("Notes", old, [PromptSpec("p")])
    assert directory.withdraw("Notes", old) is True
    assert directory.withdraw("Notes", old) is False  # nothing left to withdraw
    directory.await_return("Notes", trio.current_time() + 5)
    assert await directory.wait_for_uri("toolbridge://Other/x") is False  # not away: no wait
    waited: list[float] = []

    async def read() -> None:
        assert await directory.wait_for_uri("toolbridge://Notes/notes://a") is True
        waited.append(trio.current_time())

    async def get() -> None:
        assert await directory.wait_for_prompt("Notes__p") is True
        waited.append(trio.current_time())

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        nursery.start_soon(get)
        await trio.sleep(2)
        directory.offer("Notes", new, [ResourceSpec("notes://a", "a")], [])  # back: both go on
    assert waited == [start + 2, start + 2]
    assert (await directory.resolve("toolbridge://Notes/notes://a"))[0].port is new

    directory.withdraw("Notes", new)
    directory.await_return("Notes", trio.current_time() + 5)
    before = trio.current_time()
    assert await directory.wait_for_uri("toolbridge://Notes/notes://a") is True  # the grace ends
    assert trio.current_time() == before + 5
    with pytest.raises(ResourceError, match="no connected app 'Notes'"):
        await directory.resolve("toolbridge://Notes/notes://a")
