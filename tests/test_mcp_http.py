"""Streamable HTTP with raw requests: the gate (token, Origin, Host, size) and bad input."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator, MutableMapping
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from broker.daemon.run import DaemonInfo, run_daemon
from broker.config.settings import Settings
from broker.errors import StartupError
from broker.mcp.gate import host_allowed, origin_allowed
from mcp_testkit import HTTPX_STREAM_WARNINGS, MODERN_META, ScriptedApp, http_client, mcp_url, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

BODY_LIMIT = 64 * 1024
POST_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[DaemonInfo]:
    async with running_daemon(tmp_path / "home", max_http_body_bytes=BODY_LIMIT) as info:
        yield info


@pytest.fixture
async def http(daemon: DaemonInfo) -> AsyncIterator[httpx2.AsyncClient]:
    async with http_client(daemon) as client:
        yield client


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": MODERN_META}}


def modern_headers(method: str, name: str | None = None, version: str = "2026-07-28") -> dict[str, str]:
    headers = {**POST_HEADERS, "mcp-protocol-version": version, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


async def post(http: httpx2.AsyncClient, url: str, body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await http.post(url, content=content, headers=POST_HEADERS if headers is None else headers)


def error_code(response: httpx2.Response) -> int:
    assert response.headers["content-type"].startswith("application/json")
    return int(response.json()["error"]["code"])


async def start_session(http: httpx2.AsyncClient, url: str) -> str:
    response = await post(http, url, INITIALIZE)
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    return response.headers["mcp-session-id"]


# --- the gate ------------------------------------------------------------------------------


async def test_a_token_is_required(daemon: DaemonInfo) -> None:
    url = mcp_url(daemon)
    async with httpx2.AsyncClient() as anonymous:
        missing = await post(anonymous, url, INITIALIZE)
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer wrong"}) as wrong:
        bad = await post(wrong, url, INITIALIZE)
    async with httpx2.AsyncClient(headers={"Authorization": f"Basic {daemon.token}"}) as basic:
        not_bearer = await post(basic, url, INITIALIZE)
    for response in (missing, bad, not_bearer):
        # 403 without a challenge: a 401 would send OAuth-capable clients into OAuth discovery
        # (test_mcp_http_oauth_clients.py shows the SDK's client reporting this message instead).
        assert response.status_code == 403
        assert "www-authenticate" not in response.headers
        assert "toolbridge token" in response.json()["error"]["message"]
    assert "no 'Authorization' header" in missing.json()["error"]["message"]
    assert "no valid token" in bad.json()["error"]["message"]


async def test_a_foreign_origin_is_forbidden(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    url = mcp_url(daemon)
    for origin in ("https://evil.example", "null", "http://127.0.0.1.evil.example"):
        response = await post(http, url, INITIALIZE, {**POST_HEADERS, "origin": origin})
        assert response.status_code == 403, origin
    allowed = await post(http, url, INITIALIZE, {**POST_HEADERS, "origin": "http://localhost:6274"})
    assert allowed.status_code == 200


async def test_a_foreign_host_is_misdirected(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    url = mcp_url(daemon)
    for host in ("evil.example", f"evil.example:{daemon.http_port}", "192.168.1.5"):
        response = await post(http, url, INITIALIZE, {**POST_HEADERS, "host": host})
        assert response.status_code == 421, host
    assert (await post(http, url, INITIALIZE, {**POST_HEADERS, "host": f"localhost:{daemon.http_port}"})).status_code == 200


@pytest.mark.parametrize(("host", "ok"), [
    ("127.0.0.1:47701", True), ("localhost", True), ("LOCALHOST:1", True), ("[::1]:80", True), ("127.9.9.9", True),
    ("example.com", False), ("localhost.example.com", False), ("127.0.0.1:x", False), ("", False), (None, False),
])
def test_host_rule(host: str | None, ok: bool) -> None:
    assert host_allowed(host) is ok
    assert host_allowed("tools.lan:8080", ("tools.lan",)) is True


@pytest.mark.parametrize(("origin", "ok"), [
    (None, True), ("http://localhost:5173", True), ("https://127.0.0.1", True), ("http://[::1]:3000", True),
    ("https://evil.example", False), ("null", False), ("file://", False), ("http://localhost:bad", False),
])
def test_origin_rule(origin: str | None, ok: bool) -> None:
    assert origin_allowed(origin) is ok
    assert origin_allowed("https://app.example", ("https://app.example",)) is True


async def test_a_huge_body_is_refused(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    url = mcp_url(daemon)
    big = json.dumps({**INITIALIZE, "params": {**INITIALIZE["params"], "pad": "x" * BODY_LIMIT}}).encode()
    assert (await post(http, url, big)).status_code == 413

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: caught while reading
        for start in range(0, len(big), 8192):
            yield big[start : start + 8192]

    streamed = await http.post(url, content=chunks(), headers=POST_HEADERS)
    assert streamed.status_code == 413


async def test_an_over_limit_body_sent_whole_gets_its_413_not_a_reset(daemon: DaemonInfo) -> None:
    """Regression (issue 27, item 14): Python's ``http.client`` writes the whole body before it
    reads the answer; the server answered 413 at once, read at most 1 MiB of the rest and
    closed, so the unread bytes made the kernel reset the connection and the client never saw
    the 413. The server reads and drops the body (up to a bound) before it closes."""
    import http.client

    body = b"{" + b" " * (20 * 1024 * 1024) + b"}"  # well over BODY_LIMIT and over the old 1 MiB drain

    def post_whole() -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", daemon.http_port, timeout=30)
        try:
            connection.request("POST", "/mcp", body=body, headers={
                **POST_HEADERS, "authorization": f"Bearer {daemon.token}"})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    status, answer = await trio.to_thread.run_sync(post_whole)
    assert status == 413
    assert b"Payload Too Large" in answer


async def test_accept_and_content_type_are_checked(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    url = mcp_url(daemon)
    assert (await post(http, url, INITIALIZE, {**POST_HEADERS, "accept": "application/json"})).status_code == 406
    assert (await post(http, url, INITIALIZE, {**POST_HEADERS, "accept": "text/html"})).status_code == 406
    assert (await post(http, url, INITIALIZE, {**POST_HEADERS, "content-type": "text/plain"})).status_code == 415
    assert (await post(http, url, INITIALIZE, {**POST_HEADERS, "accept": "*/*"})).status_code == 200
    assert (await http.put(url, content=b"{}", headers=POST_HEADERS)).status_code == 405
    assert (await http.post(url.replace("/mcp", "/other"), content=b"{}", headers=POST_HEADERS)).status_code == 404


# --- bad JSON-RPC ----------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "code"), [
    (b"{oops", -32700),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600),
    (b'{"id":1,"method":"initialize"}', -32600),
    (b'{"jsonrpc":"2.0","id":1}', -32600),
])
async def test_malformed_messages(daemon: DaemonInfo, http: httpx2.AsyncClient, body: bytes, code: int) -> None:
    response = await post(http, mcp_url(daemon), body)
    assert response.status_code == 400
    assert error_code(response) == code
    if code == -32600 and body.startswith(b"["):
        assert "batches are not supported" in response.json()["error"]["message"]


# --- legacy sessions ------------------------------------------------------------------------


async def test_legacy_session_ids(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    url = mcp_url(daemon)
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    missing = await post(http, url, listing)
    assert missing.status_code == 400
    assert "Mcp-Session-Id" in missing.json()["error"]["message"]
    unknown = await post(http, url, listing, {**POST_HEADERS, "mcp-session-id": "nope"})
    assert unknown.status_code == 404

    session = await start_session(http, url)
    with_session = {**POST_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    assert (await post(http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, with_session)).status_code == 202
    assert (await post(http, url, listing, with_session)).json() == {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}
    bad_version = await post(http, url, listing, {**with_session, "mcp-protocol-version": "1999-01-01"})
    assert bad_version.status_code == 400
    unknown_method = await post(http, url, {"jsonrpc": "2.0", "id": 3, "method": "roots/list"}, with_session)
    assert (unknown_method.status_code, error_code(unknown_method)) == (200, -32601)
    again = await post(http, url, INITIALIZE, with_session)
    assert error_code(again) == -32600

    assert (await http.get(url, headers={"accept": "text/event-stream"})).status_code == 405
    assert (await http.delete(url)).status_code == 405
    assert (await http.delete(url, headers={"mcp-session-id": session})).status_code == 200
    assert (await http.delete(url, headers={"mcp-session-id": session})).status_code == 404
    assert (await post(http, url, listing, with_session)).status_code == 404


async def test_a_failed_initialize_starts_no_session(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    response = await post(http, mcp_url(daemon), {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert error_code(response) == -32602
    assert "mcp-session-id" not in response.headers


async def test_one_get_stream_per_session(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    url = mcp_url(daemon)
    session = await start_session(http, url)
    headers = {"accept": "text/event-stream", "mcp-session-id": session}
    async with http.stream("GET", url, headers=headers) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "text/event-stream"
        assert (await http.get(url, headers=headers)).status_code == 409
        assert (await http.get(url, headers={**headers, "accept": "application/json"})).status_code == 406
        async with trio.open_nursery() as nursery:
            app = await ScriptedApp(daemon.port, daemon.token).start(nursery)
            async with aclosing(stream.aiter_lines()) as lines:  # type: ignore[type-var]
                async for line in lines:
                    if line.startswith("data:"):
                        assert json.loads(line[5:]) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                        break
            await app.close()
        assert (await http.delete(url, headers={"mcp-session-id": session})).status_code == 200


# --- the 2026-07-28 rules ---------------------------------------------------------------------


async def test_modern_headers_must_match_the_body(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    url = mcp_url(daemon)
    call = modern(1, "tools/call", {"name": "App__x", "arguments": {}})
    cases = [
        {**POST_HEADERS, "mcp-protocol-version": "2026-07-28"},  # no Mcp-Method
        modern_headers("tools/list", "App__x"),  # wrong method
        modern_headers("tools/call"),  # no Mcp-Name
        modern_headers("tools/call", "App__y"),  # wrong name
        {**modern_headers("tools/call", "App__x"), "mcp-protocol-version": "2025-11-25"},  # version differs
        {k: v for k, v in modern_headers("tools/call", "App__x").items() if k != "mcp-protocol-version"},
    ]
    for headers in cases:
        response = await post(http, url, call, headers)
        assert (response.status_code, error_code(response)) == (400, -32020), headers
        assert response.json()["id"] == 1
    # Correct headers (the name base64-encoded, as clients do for unusual values) reach the router.
    encoded = "=?base64?" + base64.b64encode(b"App__x").decode() + "?="
    response = await post(http, url, call, modern_headers("tools/call", encoded))
    assert (response.status_code, error_code(response)) == (400, -32602)
    assert "unknown tool" in response.json()["error"]["message"]


async def test_modern_envelope_version_and_methods(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    url = mcp_url(daemon)
    no_meta = await post(http, url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, modern_headers("tools/list"))
    assert (no_meta.status_code, error_code(no_meta)) == (400, -32602)

    future = modern(2, "tools/list")
    future["params"]["_meta"] = {**MODERN_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    unsupported = await post(http, url, future, modern_headers("tools/list", version="2099-01-01"))
    assert (unsupported.status_code, error_code(unsupported)) == (400, -32022)
    assert "2026-07-28" in unsupported.json()["error"]["data"]["supported"]

    # Removed in 2026-07-28 (the log level travels in each request's _meta): 404 and -32601.
    unknown = await post(http, url, modern(3, "logging/setLevel", {"level": "info"}), modern_headers("logging/setLevel"))
    assert (unknown.status_code, error_code(unknown)) == (404, -32601)

    listed = await post(http, url, modern(4, "tools/list"), modern_headers("tools/list"))
    assert listed.status_code == 200
    assert listed.json()["result"] == {"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                                       "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "toolbridge", "version": "0.1.0"}}}
    assert "mcp-session-id" not in listed.headers

    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}
    assert (await post(http, url, note, {**POST_HEADERS, "mcp-protocol-version": "2026-07-28"})).status_code == 202


async def test_a_listen_stream_is_sse_and_acknowledged_first(daemon: DaemonInfo, http: httpx2.AsyncClient) -> None:
    body = json.dumps(modern("listen-1", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    async with http.stream("POST", mcp_url(daemon), content=body.encode(),
                           headers=modern_headers("subscriptions/listen")) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "text/event-stream"
        async with aclosing(stream.aiter_lines()) as lines:  # type: ignore[type-var]
            async for line in lines:
                if line.startswith("data:"):
                    ack = json.loads(line[5:])
                    break
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "listen-1"}


# --- start-up ---------------------------------------------------------------------------------


async def test_a_taken_http_port_is_a_clear_startup_error(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        expected = pytest.RaisesExc(StartupError, match=f"MCP HTTP port {taken} .* already in use")
        with pytest.RaisesGroup(expected, flatten_subgroups=True):  # run_daemon's nursery wraps it
            async with trio.open_nursery() as nursery:
                await nursery.start(run_daemon, Settings(home=tmp_path / "home", port=0, http_port=taken))


# --- Mcp-Param-* headers (pure) ----------------------------------------------------------------


class FakeHeaders:
    def __init__(self, **values: str) -> None:
        self._values = {k.replace("_", "-"): v for k, v in values.items()}

    def get(self, name: str) -> str | None:
        return self._values.get(name)

    def count(self, name: str) -> int:
        return 1 if name in self._values else 0


PARAM_SCHEMA = {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "limits": {"type": "object", "properties": {"max": {"type": "integer", "x-mcp-header": "Max"}}},
    "free": {"type": "string"},
}}


def tools_call(arguments: dict[str, Any]) -> Any:
    from broker.mcp.jsonrpc import Request

    return Request(1, "tools/call", {"name": "App__t", "arguments": arguments})


def routing(**extra: str) -> FakeHeaders:
    return FakeHeaders(mcp_protocol_version="2026-07-28", mcp_method="tools/call", mcp_name="App__t", **extra)


@pytest.mark.parametrize(("arguments", "headers", "ok"), [
    ({"region": "eu", "limits": {"max": 3}}, {"mcp_param_region": "eu", "mcp_param_max": "3"}, True),
    ({"region": "eu", "limits": {"max": 3}}, {"mcp_param_region": "eu", "mcp_param_max": "3.0"}, True),
    ({"region": "Zürich"}, {"mcp_param_region": "=?base64?" + base64.b64encode("Zürich".encode()).decode() + "?="}, True),
    ({"free": "x"}, {}, True),
    ({"region": None}, {}, True),
    ({"region": "eu"}, {}, False),  # the value is in the body, the header is not
    ({}, {"mcp_param_region": "eu"}, False),  # a header for an argument that is absent
    ({"region": "eu"}, {"mcp_param_region": "us"}, False),
    ({"region": "eu"}, {"mcp_param_region": "=?base64?!!!?="}, False),
])
def test_param_headers(arguments: dict[str, Any], headers: dict[str, str], ok: bool) -> None:
    from broker.mcp.headers import check_modern_headers
    from broker.mcp.jsonrpc import RpcError

    try:
        check_modern_headers(routing(**headers), tools_call(arguments), "2026-07-28", PARAM_SCHEMA)
    except RpcError as exc:
        assert not ok, exc.message
        assert exc.code == -32020
    else:
        assert ok


def test_invalid_annotations_are_not_checked() -> None:
    from broker.mcp.headers import param_annotations

    assert sorted(param_annotations(PARAM_SCHEMA) or []) == [(("limits", "max"), "Max"), (("region",), "Region")]
    for bad in (
        {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"},
                                          "b": {"type": "string", "x-mcp-header": "a"}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "bad token"}}},
    ):
        assert param_annotations(bad) is None


# --- the response stream, at the ASGI level ----------------------------------------------------


async def test_a_silent_call_switches_to_sse_and_a_closed_stream_cancels_it(tmp_path: Path) -> None:
    from broker.mcp.http import HttpApp
    from broker.mcp.server import McpServer

    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        http_app = HttpApp(McpServer.of(info.core), nursery, sse_after=0.05)
        body = json.dumps(modern(9, "tools/call", {"name": "Demo__slow", "arguments": {}})).encode()
        headers = {**modern_headers("tools/call", "Demo__slow"), "host": "127.0.0.1:1",
                   "authorization": f"Bearer {info.token}"}
        scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/mcp",
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        to_app, app_inbox = trio.open_memory_channel[MutableMapping[str, Any]](10)
        app_outbox, from_app = trio.open_memory_channel[MutableMapping[str, Any]](10)
        await to_app.send({"type": "http.request", "body": body, "more_body": False})
        nursery.start_soon(http_app, scope, app_inbox.receive, app_outbox.send)

        with trio.fail_after(5):
            start = await from_app.receive()
            assert start["status"] == 200
            assert (b"content-type", b"text/event-stream") in start["headers"]
            assert (await from_app.receive())["body"] == b": keepalive\n\n"
        assert [i.tool for i in app.invocations] == ["slow"]
        await to_app.send({"type": "http.disconnect"})  # the client closes the response stream
        await app.until(lambda: len(app.cancels) == 1)
        assert app.cancels[0].correlation_id == app.invocations[0].correlation_id
        await app.close()


async def test_a_modern_call_is_cancelled_when_its_client_closes_before_any_answer(tmp_path: Path) -> None:
    # The real server: a 2026-07-28 request waiting for its JSON answer watches for the close
    # (from WATCH_AFTER_SECONDS on: a prompt answer costs no watcher), and the close cancels it.
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        body = json.dumps(modern(4, "tools/call", {"name": "Demo__slow", "arguments": {}})).encode()
        headers = {**modern_headers("tools/call", "Demo__slow"), "host": f"127.0.0.1:{info.http_port}",
                   "authorization": f"Bearer {info.token}", "content-length": str(len(body))}
        head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        stream = await trio.open_tcp_stream("127.0.0.1", info.http_port)
        await stream.send_all(head.encode() + body)
        await app.until(lambda: len(app.invocations) == 1)
        await stream.aclose()  # no answer yet: the client gives up
        await app.until(lambda: len(app.cancels) == 1)
        assert app.cancels[0].correlation_id == app.invocations[0].correlation_id
        await app.close()


async def test_a_modern_calls_deadline_ends_it(tmp_path: Path) -> None:
    # 2026-07-28 requests' calls share the HTTP server's deadline queue (no task per request).
    async with running_daemon(tmp_path / "home") as info, trio.open_nursery() as nursery:
        app = await ScriptedApp(info.port, info.token).start(nursery)
        params = {"name": "Demo__slow", "arguments": {},
                  "_meta": {**MODERN_META, "toolbridge/timeoutMs": 50}}
        async with http_client(info) as http:
            response = await post(http, mcp_url(info), {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                                        "params": params},
                                  modern_headers("tools/call", "Demo__slow"))
        assert response.status_code == 200
        result = response.json()["result"]
        assert result["isError"] is True and result["_meta"]["toolbridge/errorKind"] == "timeout", result
        await app.until(lambda: len(app.cancels) == 1)  # the app was asked to stop
        await app.close()
