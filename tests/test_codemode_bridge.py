"""The code-mode bridge without I/O, the sandbox's command line, and the TypeScript bindings."""

from __future__ import annotations

import json

import pytest

from app_client.wire import ToolSpec
from broker.codegen import CodegenTool, generate_typescript, typescript_bindings
from broker.codemode import BridgeReader, BridgeViolation, deno_argv
from broker.codemode.bridge import CallMessage, DoneMessage, LogMessage, encode_reply, encode_start


def feed(reader: BridgeReader, data: bytes) -> list[object]:
    reader.receive_data(data)
    out = []
    while (message := reader.next_message()) is not None:
        out.append(message)
    return out


def test_reader_decodes_calls_logs_and_done_across_chunks() -> None:
    reader = BridgeReader(1000)
    assert feed(reader, b'{"t":"call","id":1,"tool":"A__b","args":{"x":1}}\n{"t":"lo') == [
        CallMessage(1, "A__b", {"x": 1})
    ]
    assert feed(reader, b'g","text":"hi"}\n{"t":"done","ok":true,"value":[1]}\n') == [
        LogMessage("hi"), DoneMessage(True, [1])
    ]
    assert reader.finished


@pytest.mark.parametrize(
    "line",
    [
        b'{"t":"reply","id":1,"ok":true,"value":1}',  # only the daemon sends replies
        b'{"t":"call","id":0,"tool":"A__b"}',
        b'{"t":"call","id":9007199254740992,"tool":"A__b"}',
        b'{"t":"call","id":"1","tool":"A__b"}',
        b'{"t":"log","text":"x","more":1}',
        b"[1,2,3]",
        b"\xff\xfe",
        b"",
    ],
)
def test_reader_refuses_anything_else(line: bytes) -> None:
    with pytest.raises(BridgeViolation):
        feed(BridgeReader(1000), line + b"\n")


def test_reader_refuses_a_reused_call_id_and_anything_after_done() -> None:
    reader = BridgeReader(1000)
    feed(reader, b'{"t":"call","id":5,"tool":"A__b"}\n')
    with pytest.raises(BridgeViolation, match="used before"):
        feed(reader, b'{"t":"call","id":5,"tool":"A__b"}\n')
    reader = BridgeReader(1000)
    feed(reader, b'{"t":"done","ok":false,"error":{"name":"E"}}\n')
    with pytest.raises(BridgeViolation, match="after its result"):
        feed(reader, b'{"t":"log","text":"late"}\n')


def test_reader_bounds_a_line_before_it_ends() -> None:
    reader = BridgeReader(100)
    feed(reader, b"x" * 100)  # at the limit: still waiting for the end
    with pytest.raises(BridgeViolation, match="longer than 100 bytes"):
        reader.receive_data(b"x")
    reader = BridgeReader(100)
    with pytest.raises(BridgeViolation, match="longer than 100 bytes"):
        feed(reader, b'{"t":"log","text":"' + b"y" * 200 + b'"}\n')


def test_replies_and_start() -> None:
    assert json.loads(encode_reply(3, value={"a": 1})) == {"t": "reply", "id": 3, "ok": True, "value": {"a": 1}}
    assert json.loads(encode_reply(4, kind="timeout", message="slow", tool="A__b")) == {
        "t": "reply", "id": 4, "ok": False, "kind": "timeout", "message": "slow", "tool": "A__b"}
    start = json.loads(encode_start("return 1", {"A": {"b": "A__b"}}, 10))
    assert start == {"t": "start", "code": "return 1", "apps": {"A": {"b": "A__b"}}, "maxOutput": 10}


def test_deno_runs_with_no_permission_flags() -> None:
    argv = deno_argv("deno", "/tmp/x", 128)
    flags = [a for a in argv[2:-1]]
    assert not any(flag.startswith(("--allow", "-A", "--unstable")) for flag in argv)
    for required in ("--no-prompt", "--no-remote", "--no-npm", "--no-config", "--no-lock",
                     "--v8-flags=--max-old-space-size=128"):
        assert required in flags
    assert argv[-1].startswith("data:application/javascript")  # no file of ours is a module


def test_bindings_use_the_codegen_names() -> None:
    tools = [
        CodegenTool("Notes__type_text", "Notes", "type_text", ToolSpec(
            "type_text", "Type text into a field",
            {"type": "object", "properties": {"field": {"type": "string"}, "text": {"type": "string"}},
             "required": ["field", "text"]})),
        CodegenTool("Notes__class", "Notes", "class", ToolSpec("class", "", {"type": "object"})),
    ]
    bindings = typescript_bindings(tools)
    typed = bindings["Notes__type_text"]
    assert (typed.app_attr, typed.method) == ("Notes", "typeText")
    assert "export interface NotesTypeTextArgs {\n  field: string;\n  text: string;\n}" in typed.signature
    assert typed.signature.endswith("apps.Notes.typeText(args: NotesTypeTextArgs): Promise<unknown>;")
    assert "/** Type text into a field */" in typed.signature
    reserved = bindings["Notes__class"]
    # The same method names as `toolbridge codegen --lang typescript`.
    assert f"  {reserved.method}(" in generate_typescript(tools)
    assert f"  {typed.method}(" in generate_typescript(tools)


def test_reader_bounds_the_line_after_a_newline_too() -> None:
    reader = BridgeReader(100)
    feed(reader, b'{"t":"log","text":"ok"}\n' + b"x" * 100)
    with pytest.raises(BridgeViolation, match="longer than 100 bytes"):
        reader.receive_data(b'{"t":"log","text":"ok"}\n' + b"x" * 101)


def test_reader_handles_many_lines_in_one_chunk() -> None:
    reader = BridgeReader(1000)
    lines = b"".join(b'{"t":"log","text":"%d"}\n' % i for i in range(5000))
    assert [m.text for m in feed(reader, lines)] == [str(i) for i in range(5000)]  # type: ignore[attr-defined]
