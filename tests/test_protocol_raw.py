"""A raw-socket app written from protocol.md alone, against the real daemon over TCP.

Nothing from app_client is used here: if these pass, protocol.md is enough to write an app.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
import structlog.testing
import trio
import trio.testing

from broker.daemon.run import DaemonInfo
from broker.core.router import CallOutcome
from rawapp import CLICK_TOOL, ECHO_TOOL, RawApp


async def call(info: DaemonInfo, name: str, args: dict[str, Any], **kw: Any) -> CallOutcome:
    return await info.core.router.call_tool(name, args, **kw)


async def test_exact_json_from_the_issue(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.send(
        {
            "type": "register",
            "appName": "WatchTower",
            "token": daemon.token,
            "tools": [{"name": "ClickElement", "description": "...", "inputSchema": {"type": "object"}}],
        }
    )
    registered = await app.recv()
    assert registered["type"] == "registered"
    assert registered["toolNames"] == {"ClickElement": "WatchTower__ClickElement"}
    assert registered["appLabel"] == "WatchTower"
    assert registered["heartbeatIntervalMs"] > 0

    async with trio.open_nursery() as nursery:
        outcomes: list[CallOutcome] = []

        async def agent() -> None:
            outcomes.append(await call(daemon, "WatchTower__ClickElement", {"x": 100, "y": 50}))

        nursery.start_soon(agent)
        invocation = await app.recv_type("toolInvocation")
        assert invocation["tool"] == "ClickElement"
        assert invocation["parameters"] == {"x": 100, "y": 50}
        assert isinstance(invocation["correlationId"], int)
        assert 29_000 <= invocation["timeoutMs"] <= 30_000
        await app.send(
            {
                "type": "toolResponse",
                "correlationId": invocation["correlationId"],
                "result": {"success": True, "data": {"clicked": True}, "error": None},
            }
        )
    [outcome] = outcomes
    assert outcome.kind == "ok"
    assert outcome.result is not None and outcome.result.data == {"clicked": True}


async def test_the_example_session_of_protocol_md(daemon: DaemonInfo) -> None:
    """Section 3, line by line (the broker's lines are checked for their fields)."""
    app = await RawApp.connect(daemon.port)
    export = {"name": "Export", "description": "Export the document",
              "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    registered = await app.register(daemon.token, tools=[CLICK_TOOL, export], instanceId="main-window", maxConcurrency=2)
    assert registered["instanceId"] == "main-window"
    assert registered["toolNames"] == {"ClickElement": "WatchTower__ClickElement", "Export": "WatchTower__Export"}

    progress: list[tuple[float, float | None, str | None]] = []
    results: dict[str, CallOutcome] = {}
    async with trio.open_nursery() as nursery:
        async def run(key: str, name: str, args: dict[str, Any], **kw: Any) -> None:
            results[key] = await call(daemon, name, args, **kw)

        nursery.start_soon(run, "click", "WatchTower__ClickElement", {"x": 100, "y": 50})
        inv = await app.recv_type("toolInvocation")
        await app.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                        "result": {"success": True, "data": {"clicked": True}, "error": None}})

        nursery.start_soon(lambda: run("export", "WatchTower__Export", {"path": "out.pdf"},
                                       on_progress=lambda p, t, m: progress.append((p, t, m))))
        inv = await app.recv_type("toolInvocation")
        assert inv["progress"] is True
        cid = inv["correlationId"]
        for step in (1, 2):
            await app.send({"type": "toolProgress", "correlationId": cid, "progress": step, "total": 3,
                            "message": f"page {step}"})
        await app.send({"type": "toolResponse", "correlationId": cid,
                        "result": {"success": True, "data": "exported 3 pages"}})

    assert results["click"].kind == "ok"
    assert results["export"].result is not None and results["export"].result.data == "exported 3 pages"
    assert progress == [(1, 3, "page 1"), (2, 3, "page 2")]

    # A cancelled call: toolCancel reaches the app; its late answer is refused, nothing breaks.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "big", "WatchTower__Export", {"path": "big.pdf"})
        inv = await app.recv_type("toolInvocation")
        nursery.cancel_scope.cancel()
    cancel = await app.recv_type("toolCancel")
    assert cancel["correlationId"] == inv["correlationId"]

    await app.send({"type": "addTools", "tools": [{"name": "Undo", "description": "Undo the last edit"}]})
    updated = await app.recv_type("toolsUpdated")
    assert updated["toolNames"]["Undo"] == "WatchTower__Undo"
    await app.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                    "result": {"success": False, "error": "cancelled"}})
    error = await app.recv_type("error")
    assert error["code"] == "unknown_correlation_id" and error["correlationId"] == inv["correlationId"]
    assert len(daemon.core.calls) == 0


async def test_content_blocks_and_images_pass_through(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    blocks = [{"type": "text", "text": "window 2x2"},
              {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]
    box: list[CallOutcome] = []
    async with trio.open_nursery() as nursery:
        async def agent() -> None:
            box.append(await call(daemon, "WatchTower__Echo", {}))
        nursery.start_soon(agent)
        inv = await app.recv_type("toolInvocation")
        await app.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                        "result": {"success": True, "content": blocks, "structuredContent": {"w": 2}}})
    assert box[-1].result is not None
    assert box[-1].result.content == blocks and box[-1].result.structured_content == {"w": 2}


async def test_app_error_reaches_the_caller(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    async with trio.open_nursery() as nursery:
        box: list[CallOutcome] = []

        async def agent() -> None:
            box.append(await call(daemon, "WatchTower__Echo", {"text": "hi"}))

        nursery.start_soon(agent)
        inv = await app.recv_type("toolInvocation")
        await app.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                        "result": {"success": False, "error": "no window named 'hi'"}})
    assert box[0].kind == "app_error" and box[0].message == "no window named 'hi'"


async def test_an_app_error_message_is_not_logged_but_reaches_the_caller(daemon: DaemonInfo) -> None:
    """Regression (issue 14, item 8): the daemon log quoted the app's error text, which may
    quote the call's arguments. The log keeps the code and the length; the agent gets the text."""
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            box: list[CallOutcome] = []

            async def agent() -> None:
                box.append(await call(daemon, "WatchTower__Echo", {"text": "SECRET-PIN-9999"}))

            nursery.start_soon(agent)
            inv = await app.recv_type("toolInvocation")
            await app.send({"type": "error", "code": "bad_pin", "correlationId": inv["correlationId"],
                            "message": "pin SECRET-PIN-9999 refused"})
        async with trio.open_nursery() as nursery:  # the same text in a failed toolResponse
            nursery.start_soon(agent)
            inv = await app.recv_type("toolInvocation")
            await app.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                            "result": {"success": False, "error": "pin SECRET-PIN-9999 refused"}})
    assert [o.kind for o in box] == ["app_error"] * 2 and all("SECRET-PIN-9999" in o.message for o in box)
    [line] = [entry for entry in logs if entry["event"] == "app_reported_error"]
    assert line["code"] == "bad_pin" and line["detail_chars"] == len("pin SECRET-PIN-9999 refused")
    audits = [entry for entry in logs if entry["event"] == "tool_execution_error"]
    assert len(audits) == 2 and all("chars; not logged" in entry["error"] for entry in audits)
    assert "SECRET" not in repr(logs)  # in no line at all, the audit warnings included


# --- bad input: each gets a clear error, and nothing else is affected ----------------------


async def test_bad_lines_get_errors_and_the_link_goes_on(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    cases: list[tuple[bytes, str]] = [
        (b"{not json\n", "invalid_json"),
        (b"[1, 2]\n", "not_an_object"),
        (b'"register"\n', "not_an_object"),
        (b'{"type": "teleport"}\n', "unknown_type"),
        (b'{"noType": 1}\n', "invalid_message"),
        (b'{"type": "toolResponse", "correlationId": "seven", "result": {}}\n', "invalid_message"),
        (b'{"type": "toolProgress"}\n', "invalid_message"),
        (b'{"type": "addTools", "tools": [{"name": "\xff\xfe"}]}\n', "invalid_utf8"),
        (b"\xff\n", "invalid_utf8"),  # issue 16 item 3: was invalid_json
        (b'{"type": "registered", "appId": "x", "instanceId": "x", "appLabel": "x", "toolNames": {}, "heartbeatIntervalMs": 1}\n',
         "unexpected_message"),
    ]
    for line, code in cases:
        await app.send(line)
        error = await app.recv_type("error")
        assert error["code"] == code, (line, error)
        assert error.get("fatal", False) is False
        assert error["message"]
    # Still registered and working:
    await app.send({"type": "ping", "id": 42})
    assert await app.recv_type("pong") == {"type": "pong", "id": 42}
    await app.send({"type": "register", "appName": "WatchTower", "token": daemon.token})
    assert (await app.recv_type("error"))["code"] == "already_registered"


async def test_missing_field_names_the_field(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    await app.send({"type": "toolResponse", "result": {"success": True}})
    error = await app.recv_type("error")
    assert error["code"] == "invalid_message" and "correlationId" in error["message"]


async def test_line_over_the_limit_fails_its_call_at_once(tmp_path: Any) -> None:
    from broker.config.settings import Settings
    from broker.daemon.run import run_daemon

    async with trio.open_nursery() as nursery:
        info = await nursery.start(lambda task_status: run_daemon(
            Settings(home=tmp_path, port=0, http_port=None, max_line_bytes=4096), task_status=task_status))
        app = await RawApp.connect(info.port)
        registered = await app.register(info.token)
        assert registered["maxLineBytes"] == 4096
        box: list[CallOutcome] = []
        answered = trio.Event()

        async def agent() -> None:
            box.append(await info.core.router.call_tool("WatchTower__Echo", {}))
            answered.set()

        nursery.start_soon(agent)
        inv = await app.recv_type("toolInvocation")
        huge = json.dumps({"type": "toolResponse", "correlationId": inv["correlationId"],
                           "result": {"success": True, "data": "x" * 10_000}})
        await app.send(huge.encode() + b"\n")
        error = await app.recv_type("error")
        assert error["code"] == "line_too_long" and error["correlationId"] == inv["correlationId"]
        await app.send({"type": "ping", "id": 1})
        await app.recv_type("pong")
        await answered.wait()
        assert box[0].kind == "app_error" and "line_too_long" in box[0].message
        await RawApp.close_all()
        nursery.cancel_scope.cancel()


async def test_register_rejections_are_fatal_and_clear(daemon: DaemonInfo) -> None:
    bad_registrations: list[tuple[dict[str, Any], str]] = [
        ({"type": "register", "appName": "WatchTower", "tools": []}, "unauthorized"),
        ({"type": "register", "appName": "WatchTower", "token": "wrong"}, "unauthorized"),
        ({"type": "register", "appName": "", "token": daemon.token}, "invalid_app_name"),
        ({"type": "register", "appName": "toolbridge", "token": daemon.token}, "invalid_app_name"),
        ({"type": "register", "appName": "A", "token": daemon.token,
          "tools": [ECHO_TOOL, ECHO_TOOL]}, "duplicate_tool"),
        ({"type": "register", "appName": "A", "token": daemon.token,
          "tools": [{"name": "bad\nname"}]}, "invalid_tool"),
        ({"type": "register", "appName": "A", "token": daemon.token,
          "tools": [{"name": "T", "inputSchema": {"type": "array"}}]}, "invalid_tool"),
        ({"type": "register", "appName": "A", "token": daemon.token,
          "tools": [{"name": "T", "inputSchema": {"type": "object", "properties": {"x": {"type": "nonsense"}}}}]},
         "invalid_tool"),
        ({"type": "register", "appName": "A", "token": daemon.token, "maxConcurrency": 0}, "invalid_register"),
        ({"type": "toolResponse", "correlationId": 1, "result": {}}, "not_registered"),
    ]
    for message, code in bad_registrations:
        app = await RawApp.connect(daemon.port)
        await app.send(message)
        error = await app.recv()
        assert error["type"] == "error" and error["code"] == code and error["fatal"] is True, (message, error)
        assert await app.closed()
    assert daemon.core.registry.tools() == []


async def test_invalid_schema_error_names_tool_and_place(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    error = await app.register(daemon.token, tools=[
        {"name": "Paint", "inputSchema": {"type": "object", "properties": {"color": {"enum": 5}}}}])
    assert error["code"] == "invalid_tool"
    assert "Paint" in error["message"] and "properties/color/enum" in error["message"]


async def test_response_for_another_apps_call_is_refused(daemon: DaemonInfo) -> None:
    owner = await RawApp.connect(daemon.port)
    await owner.register(daemon.token, app_name="Owner")
    thief = await RawApp.connect(daemon.port)
    await thief.register(daemon.token, app_name="Thief")
    async with trio.open_nursery() as nursery:
        box: list[CallOutcome] = []

        async def agent() -> None:
            box.append(await call(daemon, "Owner__Echo", {"text": "mine"}))

        nursery.start_soon(agent)
        inv = await owner.recv_type("toolInvocation")
        await thief.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                          "result": {"success": True, "data": "stolen"}})
        assert (await thief.recv_type("error"))["code"] == "unknown_correlation_id"
        await thief.send({"type": "toolProgress", "correlationId": inv["correlationId"], "progress": 1})
        assert (await thief.recv_type("error"))["code"] == "unknown_correlation_id"
        assert not box
        await owner.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                          "result": {"success": True, "data": "real"}})
    assert box[0].result is not None and box[0].result.data == "real"


async def test_unknown_tool_and_invalid_arguments_never_reach_the_app(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token, tools=[CLICK_TOOL])
    unknown = await call(daemon, "WatchTower__Nope", {})
    assert unknown.kind == "unknown_tool" and "tools/list" in unknown.message
    invalid = await call(daemon, "WatchTower__ClickElement", {"x": "left"})
    assert invalid.kind == "invalid_arguments"
    assert "$.x" in invalid.message and "'y' is a required property" in invalid.message
    traversal = await call(daemon, "WatchTower__ClickElement", {"x": 1, "y": 2, "note": "../../etc/passwd"})
    assert traversal.kind == "guard_rejected" and "$.note" in traversal.message
    await app.send({"type": "ping", "id": 9})
    assert (await app.recv())["type"] == "pong"  # nothing else was sent to the app


async def test_disconnect_fails_calls_at_once_and_other_apps_go_on(daemon: DaemonInfo) -> None:
    doomed = await RawApp.connect(daemon.port)
    await doomed.register(daemon.token, app_name="Doomed")
    healthy = await RawApp.connect(daemon.port)
    await healthy.register(daemon.token, app_name="Healthy")
    box: dict[str, CallOutcome] = {}
    doomed_failed = trio.Event()
    async with trio.open_nursery() as nursery:
        async def agent(name: str) -> None:
            box[name] = await call(daemon, f"{name}__Echo", {}, timeout=300)
            if name == "Doomed":
                doomed_failed.set()

        nursery.start_soon(agent, "Doomed")
        nursery.start_soon(agent, "Healthy")
        await doomed.recv_type("toolInvocation")
        inv = await healthy.recv_type("toolInvocation")
        start = trio.current_time()
        await doomed.aclose()
        await doomed_failed.wait()
        assert trio.current_time() - start < 2  # fail fast: not the 300 s deadline
        await healthy.send({"type": "toolResponse", "correlationId": inv["correlationId"],
                            "result": {"success": True, "data": 1}})
    assert box["Doomed"].kind == "app_disconnected"
    assert box["Healthy"].kind == "ok"


async def test_second_instance_gets_distinct_names_and_same_id_replaces(daemon: DaemonInfo) -> None:
    first = await RawApp.connect(daemon.port)
    r1 = await first.register(daemon.token, instanceId="doc-1")
    second = await RawApp.connect(daemon.port)
    r2 = await second.register(daemon.token, instanceId="doc-2")
    assert r1["toolNames"]["Echo"] == "WatchTower__Echo"
    assert r2["toolNames"]["Echo"] == "WatchTower_2__Echo"
    unknown = await call(daemon, "WatchTower_3__Echo", {})
    assert "WatchTower__Echo" in unknown.message and "WatchTower_2__Echo" in unknown.message

    replacement = await RawApp.connect(daemon.port)
    r3 = await replacement.register(daemon.token, instanceId="doc-1")
    assert r3["toolNames"]["Echo"] == "WatchTower__Echo" and r3["appId"] == r1["appId"]
    replaced = await first.recv_type("error")
    assert replaced["code"] == "replaced" and replaced["fatal"] is True
    assert await first.closed()
    names = [t.agent_name for t in daemon.core.router.list_tools()]
    assert names == ["WatchTower_2__Echo", "WatchTower__Echo"]


async def test_an_app_may_report_the_kind_of_its_failure(daemon: DaemonInfo) -> None:
    app = await RawApp.connect(daemon.port)
    await app.register(daemon.token)
    answers = [
        ({"success": False, "error": "the printer queue is full", "errorKind": "busy", "retryAfterMs": 1500},
         ("busy", 1500)),
        ({"success": False, "error": "the dialog never opened", "errorKind": "timeout"}, ("timeout", None)),
        ({"success": False, "error": "nope", "errorKind": "unknown_tool"}, ("app_error", None)),  # not reportable
        ({"success": False, "error": "odd", "errorKind": "made_up"}, ("app_error", None)),
    ]
    for result, (kind, retry_after) in answers:
        box: list[CallOutcome] = []
        async with trio.open_nursery() as nursery:
            async def agent() -> None:
                box.append(await call(daemon, "WatchTower__Echo", {}))

            nursery.start_soon(agent)
            inv = await app.recv_type("toolInvocation")
            await app.send({"type": "toolResponse", "correlationId": inv["correlationId"], "result": result})
        assert (box[0].kind, box[0].retry_after_ms) == (kind, retry_after)
        assert box[0].message == result["error"]


async def test_a_call_queued_behind_a_replaced_link_reaches_the_new_link_after_registered(daemon: DaemonInfo) -> None:
    """protocol.md: invocations come after ``registered``. When a re-registration replaces a
    link, failing the old link's calls frees their admission slots and sends the queued calls
    to the new link at once: ``registered`` must already be ahead of them on the wire."""
    first = await RawApp.connect(daemon.port)
    await first.register(daemon.token, instanceId="doc-1")  # maxConcurrency 1
    outcomes: dict[str, CallOutcome] = {}
    async with trio.open_nursery() as nursery:
        async def run(key: str) -> None:
            outcomes[key] = await call(daemon, "WatchTower__Echo", {"text": key})

        nursery.start_soon(run, "running")
        running = await first.recv_type("toolInvocation")
        assert running["parameters"] == {"text": "running"}
        nursery.start_soon(run, "queued")
        await trio.testing.wait_all_tasks_blocked()  # the second call has gone as far as it can
        assert _queued(daemon) == 1 and not outcomes

        second = await RawApp.connect(daemon.port)
        await second.send({"type": "register", "appName": "WatchTower", "token": daemon.token,
                           "tools": [ECHO_TOOL], "instanceId": "doc-1"})
        assert (await second.recv())["type"] == "registered"  # before any invocation
        queued = await second.recv_type("toolInvocation")
        assert queued["parameters"] == {"text": "queued"}
        await second.send({"type": "toolResponse", "correlationId": queued["correlationId"],
                           "result": {"success": True, "data": "done"}})
    assert outcomes["running"].kind == "app_disconnected"
    assert outcomes["queued"].kind == "ok"


def _queued(daemon: DaemonInfo) -> int:
    """Calls waiting for an admission slot, over every instance."""
    return sum(instance.admission.waiting for instance in daemon.core.registry.instances())


async def test_late_or_unknown_v2_answers_get_unknown_correlation_id(daemon: DaemonInfo) -> None:
    """A ``resourceResponse`` / ``promptResponse`` for no pending request changes nothing and
    is answered with ``unknown_correlation_id``, naming what was expected; the link goes on."""
    app = await RawApp.connect(daemon.port)
    registered = await app.register(daemon.token, protocolVersion=2,
                                     resources=[{"uri": "notes://a", "name": "a"}])
    assert (registered["type"], registered["protocolVersion"]) == ("registered", 2)
    await app.send({"type": "resourceResponse", "correlationId": 424242, "contents": []})
    late_read = await app.recv_type("error")
    assert (late_read["code"], late_read["correlationId"]) == ("unknown_correlation_id", 424242)
    assert late_read["message"] == "no read 424242 is pending (late, cancelled or never sent)"
    await app.send({"type": "promptResponse", "correlationId": 7, "error": "too late"})
    late_prompt = await app.recv_type("error")
    assert late_prompt["message"] == "no prompt request 7 is pending (late, cancelled or never sent)"
    await app.send({"type": "ping", "id": 1})
    assert (await app.recv_type("pong"))["id"] == 1


async def test_example_requests_outside_the_limits_are_refused_with_what_to_do(daemon: DaemonInfo) -> None:
    """protocol.md, the tool object: at most 16 exampleRequests of 1-200 characters, each not
    only whitespace; a tool that breaks that is refused (invalid_tool), and the message says how."""
    cases: list[tuple[Any, str, str]] = [
        (["r"] * 17, "invalid_tool", "keep the 16 most typical"),
        (["fine", "  "], "invalid_tool", "empty request"),
        (["x" * 201], "invalid_tool", "at most 200"),
        ("one string", "invalid_message", "exampleRequests"),
        ([1, 2], "invalid_message", "exampleRequests"),
    ]
    for requests, code, hint in cases:
        app = await RawApp.connect(daemon.port)
        error = await app.register(daemon.token, tools=[{**ECHO_TOOL, "exampleRequests": requests}])
        assert error["type"] == "error" and error["code"] == code and error["fatal"] is True, (requests, error)
        assert hint in error["message"], error
        assert "Echo" in error["message"] or code == "invalid_message", error  # the decoder names the field
        assert await app.closed()
    assert daemon.core.registry.tools() == []
    # at the limits: accepted, and kept as sent
    app = await RawApp.connect(daemon.port)
    requests = ["r" * 200] + [f"request {i}" for i in range(15)]
    registered = await app.register(daemon.token, tools=[{**ECHO_TOOL, "exampleRequests": requests}])
    assert registered["type"] == "registered", registered
    (tool,) = daemon.core.registry.tools()
    assert tool.spec.example_requests == requests
    # a tool added later is checked the same way; the refusal of an update is not fatal
    await app.send({"type": "addTools", "tools": [{"name": "Undo", "exampleRequests": ["  "]}]})
    refused = await app.recv_type("error")
    assert refused["code"] == "invalid_tool" and not refused.get("fatal") and "Undo" in refused["message"]
    await app.send({"type": "addTools", "tools": [{"name": "Undo", "exampleRequests": ["take that back"]}]})
    assert "Undo" in (await app.recv_type("toolsUpdated"))["toolNames"]
