"""The JavaScript the sandbox runs first: the bridge's sandbox end, ``apps``, typed errors.

Theory of operation
-------------------
Deno starts this module (as a ``data:`` URL, so no file of ours is ever a module the program
could reach relative to). It reads the ``start`` message from stdin, defines the globals a
program sees — ``apps.<App>.<tool>(args)`` (names from ``broker.codegen``), ``callTool(name,
args)``, ``searchTools(query, limit?)``, ``ToolError`` and its subclasses, ``ToolImage`` — routes ``console.*`` to ``log``
messages (bounded here as well as in the daemon), then imports the program as a TypeScript
``data:`` module wrapping it in an async function, so top-level ``await`` and ``return`` work,
and reports its result or error with one ``done`` message. Replies are matched by id; a reply
for an id it is not waiting for is ignored (the daemon never sends one). The prelude is
convenience, not a defence: the program can overwrite any of it, and the daemon trusts
nothing the sandbox writes (``bridge``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["PRELUDE", "WRAP_HEAD", "WRAP_TAIL"]

#: The program becomes the body of this function (one line before it: error lines are +1).
WRAP_HEAD: Final = "export default async function __toolbridge_program() {\n"
WRAP_TAIL: Final = "\n}\n"

PRELUDE: Final = r"""
const enc = new TextEncoder();
const dec = new TextDecoder();
const writeAll = (bytes) => { let o = 0; while (o < bytes.length) o += Deno.stdout.writeSync(bytes.subarray(o)); };
const send = (msg) => writeAll(enc.encode(JSON.stringify(msg) + "\n"));

class ToolError extends Error {
  constructor(message, kind, tool) { super(message); this.name = "ToolError"; this.kind = kind; this.tool = tool; }
}
class ToolTimeout extends ToolError { constructor(m, k, t) { super(m, k, t); this.name = "ToolTimeout"; } }
class ToolNotFound extends ToolError { constructor(m, k, t) { super(m, k, t); this.name = "ToolNotFound"; } }
class ToolInvalidArguments extends ToolError { constructor(m, k, t) { super(m, k, t); this.name = "ToolInvalidArguments"; } }
class ToolBusy extends ToolError { constructor(m, k, t) { super(m, k, t); this.name = "ToolBusy"; } }
const ERRORS = { timeout: ToolTimeout, unknown_tool: ToolNotFound, invalid_arguments: ToolInvalidArguments,
                 guard_rejected: ToolInvalidArguments, busy: ToolBusy };

class ToolImage {
  constructor(block) { this.type = "image"; this.mimeType = block.mimeType; this.data = block.data; }
  get size() { return Math.floor(this.data.length * 3 / 4); }
  [Symbol.for("Deno.customInspect")]() { return `ToolImage(${this.mimeType}, ~${this.size} bytes)`; }
}
const wrapValue = (v) => Array.isArray(v)
  ? v.map((b) => (b && b.type === "image" && typeof b.data === "string") ? new ToolImage(b) : b) : v;

const pending = new Map();
let nextId = 1;
function callTool(name, args) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, name });
    send({ t: "call", id, tool: String(name), args: args === undefined ? {} : args });
  });
}
function appProxy(app, methods) {
  return new Proxy({}, {
    get(_, key) {
      if (typeof key !== "string" || key === "then") return undefined;
      const tool = Object.hasOwn(methods, key) ? methods[key] : `${app}__${key}`;
      return (args) => callTool(tool, args);
    },
    ownKeys() { return Object.keys(methods); },
    getOwnPropertyDescriptor(_, key) {
      return Object.hasOwn(methods, key) ? { enumerable: true, configurable: true, value: undefined } : undefined;
    },
  });
}

let maxOutput = 65536, used = 0, cut = false;
const inspectArgs = (args) => args.map((a) => typeof a === "string" ? a : Deno.inspect(a, { depth: 6 })).join(" ");
const logger = (prefix) => (...args) => {
  if (cut) return;
  let text = prefix + inspectArgs(args) + "\n";
  if (used + text.length > maxOutput) { text = text.slice(0, Math.max(0, maxOutput - used)); cut = true; }
  used += text.length;
  if (cut) send({ t: "log", text, truncated: true });  // the daemon reports the cut (consoleTruncated)
  else if (text) send({ t: "log", text });
};
for (const level of ["log", "info", "debug"]) console[level] = logger("");
for (const level of ["warn", "error"]) console[level] = logger(level === "warn" ? "warning: " : "error: ");

const lines = (async function* () {
  let buffer = "";
  for await (const chunk of Deno.stdin.readable) {
    buffer += dec.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) { yield buffer.slice(0, end); buffer = buffer.slice(end + 1); }
  }
})();

const first = await lines.next();
const start = JSON.parse(first.value);
maxOutput = start.maxOutput;
const appsTable = {};
for (const [app, methods] of Object.entries(start.apps)) appsTable[app] = appProxy(app, methods);
const apps = new Proxy(appsTable, {
  get(target, key) {
    if (typeof key !== "string" || key === "then") return undefined;
    return Object.hasOwn(target, key) ? target[key] : appProxy(key, {});
  },
});
const searchTools = async (query, limit) =>
  (await callTool("search_tools", limit === undefined ? { query } : { query, limit })).tools;
Object.assign(globalThis, { apps, callTool, searchTools, ToolError, ToolTimeout, ToolNotFound, ToolInvalidArguments, ToolBusy, ToolImage });

(async () => {
  for await (const line of lines) {
    const reply = JSON.parse(line);
    const waiter = pending.get(reply.id);
    if (reply.t !== "reply" || waiter === undefined) continue;
    pending.delete(reply.id);
    if (reply.ok) waiter.resolve(wrapValue(reply.value));
    else waiter.reject(new (ERRORS[reply.kind] ?? ToolError)(reply.message, reply.kind, reply.tool));
  }
})();

const errorOf = (e) => (e instanceof Error)
  ? { name: e.name, message: String(e.message), stack: String(e.stack ?? ""), kind: e.kind ?? null }
  : { name: "Error", message: "the program threw a non-Error value: " + Deno.inspect(e), stack: "", kind: null };
const toJson = (value) => JSON.stringify(value === undefined ? null : value,
  (k, v) => typeof v === "bigint" ? v.toString() : v);
let done;
try {
  const source = __WRAP_HEAD__ + start.code + __WRAP_TAIL__;
  const program = await import("data:application/typescript;charset=utf-8," + encodeURIComponent(source));
  const value = await program.default();
  try { done = '{"t":"done","ok":true,"value":' + toJson(value) + "}"; }
  catch (e) { done = JSON.stringify({ t: "done", ok: false, error: { name: "TypeError", stack: "",
    message: "the program's result cannot be converted to JSON: " + String(e.message) } }); }
} catch (e) {
  done = JSON.stringify({ t: "done", ok: false, error: errorOf(e) });
}
writeAll(enc.encode(done + "\n"));
Deno.exit(0);
"""


def prelude_source() -> str:
    """The prelude with the program wrapper filled in."""
    import json

    return PRELUDE.replace("__WRAP_HEAD__", json.dumps(WRAP_HEAD)).replace("__WRAP_TAIL__", json.dumps(WRAP_TAIL))
