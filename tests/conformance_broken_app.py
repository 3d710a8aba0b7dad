"""A deliberately broken conformance fixture: the Python fixture app with one fault switched on.

``python tests/conformance_broken_app.py FAULT``:

* ``ignore-cancel``: ``toolCancel`` is ignored, so a cancelled call (or resource read) still answers;
* ``no-resource-updated``: ``app.resource_updated`` sends nothing (protocol v2);
* ``blob-as-text``: a resource read answers bytes as text instead of a base64 blob (protocol v2);
* ``no-goodbye``: the app closes without sending ``goodbye``;
* ``log-without-call``: ``ctx.log`` leaves out the call's ``correlationId`` (protocol v2, section 12);
* ``ignore-term PIDFILE``: SIGTERM is ignored (the runner must kill it); the pid goes to PIDFILE.

The conformance tests check that the kit names the scenario that catches each fault.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import conformance_app  # noqa: E402

from app_client import session  # noqa: E402

fault = sys.argv[1]
if fault == "ignore-cancel":
    from app_client import protocol

    judge = protocol.AppConnection.receive_message

    def ignore_cancel(self: protocol.AppConnection, message: protocol.Message) -> protocol.AppEvent:
        if isinstance(message, protocol.ToolCancel):
            return protocol.Ignored(message)  # as if it never came: the call runs on and answers
        return judge(self, message)

    protocol.AppConnection.receive_message = ignore_cancel  # type: ignore[method-assign]
elif fault == "no-resource-updated":
    conformance_app.app.resource_updated = lambda uri: None  # type: ignore[method-assign]
elif fault == "blob-as-text":
    from app_client import resources

    def as_text(item: object, uri: str, mime_type: str | None) -> dict[str, object]:
        if isinstance(item, bytes):
            return {"uri": uri, "text": item.decode("latin-1"), "mimeType": mime_type}
        return original(item, uri, mime_type)

    original = resources._content
    resources._content = as_text  # type: ignore[assignment]
elif fault == "log-without-call":
    from app_client import applog, context

    def untied(level: str, data: object, logger: str | None = None, correlation_id: int | None = None) -> object:
        return applog.log_message(level, data, logger)  # as if app-wide: the agent that asked never hears it

    context.log_message = untied  # type: ignore[assignment]
elif fault == "no-goodbye":
    session.Session.say_goodbye = lambda self: trio.lowlevel.checkpoint()  # type: ignore[method-assign, attr-defined]
elif fault == "ignore-term":
    import os
    import signal

    Path(sys.argv[2]).write_text(str(os.getpid()), encoding="utf-8")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conformance_app._wait_for_quit = trio.sleep_forever  # type: ignore[assignment]
else:
    raise SystemExit(f"unknown fault {fault!r}")

sys.exit(trio.run(conformance_app.main))
