/** Unit tests of the sans-IO parts: framer, decoding, discovery, tool checks (zod too), results, backoff. */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  App, Backoff, DaemonNotFound, LineFramer, RemoteProtocolError, ToolDefinitionError, decodeMessage, defineTool,
  encodeMessage, findDaemon, image, result, text, toToolResult, LocalProtocolError,
} from "../src/index.js";

function lines(framer: LineFramer): Array<string | { error: string }> {
  const out: Array<string | { error: string }> = [];
  for (;;) {
    try {
      const line = framer.nextLine();
      if (line === null) return out;
      out.push(line.toString("utf8"));
    } catch (err) {
      out.push({ error: (err as RemoteProtocolError).code });
    }
  }
}

test("the framer splits lines, tolerates CRLF, skips empty lines and bounds its buffer", () => {
  const framer = new LineFramer(10);
  framer.receiveData(Buffer.from("ab\r\n\n  \ncd"));
  assert.deepEqual(lines(framer), ["ab"]);
  framer.receiveData(Buffer.from("ef\n"));
  assert.deepEqual(lines(framer), ["cdef"]);
  framer.receiveData(Buffer.from("0123456789\n")); // exactly at the limit
  assert.deepEqual(lines(framer), ["0123456789"]);
  framer.receiveData(Buffer.from("0123456789A\nok\n")); // one over
  assert.deepEqual(lines(framer), [{ error: "line_too_long" }, "ok"]);
  for (let i = 0; i < 100; i += 1) {
    framer.receiveData(Buffer.from("x".repeat(7)));
    lines(framer);
    assert.ok(framer.buffered <= 17, `buffer grew to ${framer.buffered}`);
  }
  framer.receiveData(Buffer.from("tail\nnext\n"));
  assert.deepEqual(lines(framer), ["next"]);
});

test("decoding maps every kind of bad line to protocol.md's code", () => {
  const code = (data: string | Buffer): string => {
    try {
      decodeMessage(typeof data === "string" ? Buffer.from(data) : data);
      return "ok";
    } catch (err) {
      return (err as RemoteProtocolError).code;
    }
  };
  assert.equal(code("{"), "invalid_json");
  assert.equal(code(Buffer.from([0x7b, 0xff, 0x7d])), "invalid_utf8");
  assert.equal(code("3"), "not_an_object");
  assert.equal(code("{}"), "invalid_message");
  assert.equal(code('{"type":"nope"}'), "unknown_type");
  assert.equal(code('{"type":"toolCancel"}'), "invalid_message");
  assert.equal(code('{"type":"toolInvocation","correlationId":1,"tool":"x","extra":{"a":1}}'), "ok");
  assert.deepEqual(decodeMessage(Buffer.from('{"type":"error","code":"c","message":"m"}')),
    { type: "error", code: "c", message: "m", fatal: false });
});

test("encoding refuses a line over the peer's limit (the newline not counted)", () => {
  const message = { type: "ping", id: 1 };
  const size = JSON.stringify(message).length;
  assert.equal(encodeMessage(message, size).length, size + 1);
  assert.throws(() => encodeMessage(message, size - 1), LocalProtocolError);
});

test("discovery: options > environment > home files; nothing falls back to a default port", () => {
  const home = mkdtempSync(join(tmpdir(), "tb-disc-"));
  assert.throws(() => findDaemon({ home, env: {} }), (err: unknown) => err instanceof DaemonNotFound && /not running/.test(err.message));
  writeFileSync(join(home, "runtime.json"), JSON.stringify({ pid: 1, host: "127.0.0.1", port: 4100, socket: join(home, "s.sock") }));
  assert.throws(() => findDaemon({ home, env: {} }), /no toolbridge token file/);
  writeFileSync(join(home, "token"), "secret\n");
  const fromFiles = findDaemon({ home, env: {} });
  assert.deepEqual({ ...fromFiles }, { host: "127.0.0.1", port: 4100, tls: false, runtimeFile: join(home, "runtime.json"), socket: join(home, "s.sock") });
  assert.equal(fromFiles.token, "secret");
  assert.ok(!JSON.stringify(fromFiles).includes("secret"), "the token is never serialised");
  const fromEnv = findDaemon({ env: { TOOLBRIDGE_HOME: home, TOOLBRIDGE_PORT: "4200", TOOLBRIDGE_TOKEN: "other" } });
  assert.equal(fromEnv.port, 4200);
  assert.equal(fromEnv.token, "other");
  assert.equal(fromEnv.socket, undefined, "a chosen port is not the runtime.json's socket");
  assert.equal(findDaemon({ home, port: 4300, token: "x", env: { TOOLBRIDGE_PORT: "4200" } }).port, 4300);
  assert.throws(() => findDaemon({ home, env: { TOOLBRIDGE_PORT: "http" } }), /not a port number/);
  writeFileSync(join(home, "runtime.json"), JSON.stringify({ pid: 1, host: "127.0.0.1", port: 4100, tls: true, tlsCert: "/c.pem" }));
  const pinned = findDaemon({ home, env: {} });
  assert.equal(pinned.tls, true);
  assert.equal(pinned.tlsPin, "/c.pem");
  assert.equal(findDaemon({ home, env: { TOOLBRIDGE_TLS_CA: "/ca.pem" } }).tlsCa, "/ca.pem");
  writeFileSync(join(home, "runtime.json"), "{not json");
  assert.throws(() => findDaemon({ home, env: {} }), /not a valid toolbridge runtime file/);
});

test("tools are checked before anything is sent", () => {
  const ok = async (): Promise<number> => 1;
  for (const name of ["", " lead", "trail ", "bad!", "x".repeat(129)]) {
    assert.throws(() => defineTool(name, {}, ok), ToolDefinitionError, name);
  }
  assert.equal(defineTool("a.b/c:d e-f_g", {}, ok).spec.name, "a.b/c:d e-f_g");
  assert.throws(() => defineTool("t", { inputSchema: { type: "string" } }, ok), /"type": "object"/);
  assert.throws(() => defineTool("t", { inputSchema: [] as never }, ok), /JSON Schema object/);
  assert.throws(() => defineTool("t", { inputSchema: { type: "object", big: "x".repeat(300_000) } }, ok), /over the limit/);
  assert.throws(() => defineTool("t", { timeoutMs: 0 }, ok), /timeoutMs/);
  assert.throws(() => defineTool("t", { inputSchema: { type: "object", n: 10n } as never }, ok), /not JSON/);
  assert.deepEqual(defineTool("t", { pathGuard: false }, ok).spec, { name: "t", inputSchema: { type: "object" }, pathGuard: false });
  const app = new App({ name: "Checks", env: {} });
  app.tool("one", {}, ok);
  assert.throws(() => app.tool("one", {}, ok), /already has a tool/);
  assert.throws(() => new App({ name: "bad__name" }), ToolDefinitionError);
  assert.throws(() => new App({ name: "toolbridge" }), ToolDefinitionError);
  assert.throws(() => new App({ name: "Ok", instanceId: "#1" }), /reserved/);
  assert.equal(new App({ name: "Ok", env: { TOOLBRIDGE_INSTANCE_ID: "fixed" } }).instanceId, "fixed");
  assert.notEqual(new App({ name: "Ok", env: {} }).instanceId, new App({ name: "Ok", env: {} }).instanceId);
});

test("exampleRequests: checked against the daemon's limits, copied, sent only when non-empty", () => {
  const ok = async (): Promise<number> => 1;
  const examples = ["my pallet came in, log it", "we just unloaded the truck"];
  const tool = defineTool("log", { exampleRequests: examples }, ok);
  assert.deepEqual(tool.spec, { name: "log", inputSchema: { type: "object" }, exampleRequests: examples });
  examples.push("changed later");
  assert.equal(tool.spec.exampleRequests!.length, 2, "the spec holds a copy");
  assert.ok(!("exampleRequests" in defineTool("t", { exampleRequests: [] }, ok).spec), "an empty list is left out");
  assert.ok(!("exampleRequests" in defineTool("t", {}, ok).spec));
  const sixteen = Array.from({ length: 16 }, (_, i) => `request ${i}`);
  assert.equal(defineTool("t", { exampleRequests: sixteen }, ok).spec.exampleRequests!.length, 16);
  assert.throws(() => defineTool("t", { exampleRequests: [...sixteen, "one more"] }, ok), /t: exampleRequests has 17 entries, over the limit of 16/);
  // 200 characters in code points (as the daemon counts), though 400 UTF-16 units.
  assert.equal(defineTool("t", { exampleRequests: ["\u{1F69A}".repeat(200)] }, ok).spec.exampleRequests!.length, 1);
  assert.equal(defineTool("t", { exampleRequests: [" padded "] }, ok).spec.exampleRequests![0], " padded ", "not trimmed");
  assert.throws(() => defineTool("t", { exampleRequests: ["x".repeat(201)] }, ok), /exampleRequests\[0\] .* is 201 characters; give at most 16 strings of 1-200 characters/);
  assert.throws(() => defineTool("t", { exampleRequests: ["fine", ""] }, ok), /exampleRequests\[1\] "" is empty or only whitespace/);
  assert.throws(() => defineTool("t", { exampleRequests: [" \t\n"] }, ok), /only whitespace/);
  assert.throws(() => defineTool("t", { exampleRequests: [42] as never }, ok), /exampleRequests\[0\] is not a string/);
  assert.throws(() => defineTool("t", { exampleRequests: "log my pallet" as never }, ok), ToolDefinitionError);
  const app = new App({ name: "Examples", env: {} });
  assert.throws(() => app.tool("bad", { exampleRequests: [""] }, ok), /bad: exampleRequests/);
});

test("a zod v4 schema is used through duck typing: JSON Schema out, safeParse in", () => {
  const fakeZod = {
    _zod: {},
    safeParse: (value: unknown) => (typeof (value as { n?: unknown }).n === "number"
      ? { success: true as const, data: { n: (value as { n: number }).n, defaulted: true } }
      : { success: false as const, error: { issues: [{ path: ["n"], message: "Expected number" }] } }),
  };
  assert.throws(() => defineTool("z", { inputSchema: fakeZod }, async () => 1), /toJSONSchema: z.toJSONSchema/);
  const converted = defineTool("z", { inputSchema: fakeZod }, async () => 1,
    () => ({ type: "object", properties: { n: { type: "number" } } }));
  assert.deepEqual(converted.spec.inputSchema, { type: "object", properties: { n: { type: "number" } } });
  assert.deepEqual(converted.parse!({ n: 2 }), { success: true, data: { n: 2, defaulted: true } });
  const withMethod = { ...fakeZod, toJSONSchema: () => ({ type: "object" }) };
  assert.deepEqual(defineTool("z", { inputSchema: withMethod }, async () => 1).spec.inputSchema, { type: "object" });
});

test("results: data, content blocks, result objects, images", () => {
  assert.deepEqual(toToolResult("hi"), { success: true, data: "hi" });
  assert.deepEqual(toToolResult(undefined), { success: true, data: null });
  assert.deepEqual(toToolResult({ content: "not blocks" }), { success: true, data: { content: "not blocks" } });
  assert.deepEqual(toToolResult(text("t")), { success: true, content: [{ type: "text", text: "t" }] });
  assert.deepEqual(toToolResult([text("a"), image(Buffer.from([1, 2]))]),
    { success: true, content: [{ type: "text", text: "a" }, { type: "image", data: "AQI=", mimeType: "image/png" }] });
  assert.deepEqual(toToolResult({ content: [{ type: "text", text: "x" }] }), { success: true, content: [{ type: "text", text: "x" }] });
  assert.deepEqual(toToolResult({ structuredContent: { a: 1 }, data: { a: 1 } }),
    { success: true, structuredContent: { a: 1 }, data: { a: 1 } });
  assert.deepEqual(toToolResult(result({ data: 5, content: [text("five")] })),
    { success: true, content: [{ type: "text", text: "five" }], data: 5 });
  assert.throws(() => toToolResult(10n), TypeError);
  assert.throws(() => image("x", "text/plain"), TypeError);
});

test("backoff: full jitter under a doubling cap, reset after success", () => {
  const backoff = new Backoff({ initialMs: 100, capMs: 1000, random: () => 0.999999 });
  const delays = Array.from({ length: 6 }, () => Math.round(backoff.nextDelay()));
  assert.deepEqual(delays, [100, 200, 400, 800, 1000, 1000]);
  backoff.reset();
  assert.equal(Math.round(backoff.nextDelay()), 100);
});
