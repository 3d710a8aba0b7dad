/**
 * The client against a scripted daemon: garbage, over-long lines, a close mid-line, heartbeats
 * while a handler is busy, goodbye on close, version negotiation, `replaced`, fatal refusals.
 */
import assert from "node:assert/strict";
import type * as net from "node:net";
import { test } from "node:test";
import {
  App, InstanceReplaced, RegistrationRejected, RemoteProtocolError, type ToolbridgeError,
} from "../src/index.js";
import { FakeDaemon, registered } from "./fake.js";
import { capturingLogger, nextEvent } from "./helpers.js";

function appFor(fake: FakeDaemon, extra: Partial<ConstructorParameters<typeof App>[0]> = {}): App {
  const app = new App({ name: "Fake", port: fake.port, token: "t", env: {}, logger: capturingLogger(), backoff: { initialMs: 20, capMs: 50 }, ...extra });
  app.tool<{ text: string }>("echo", {}, async ({ text }) => text);
  return app;
}

test("garbage from the daemon is answered with error codes and emitted, and the link goes on", async () => {
  let link: net.Socket | undefined;
  const fake = await FakeDaemon.start((socket) => {
    link = socket;
    socket.write(registered());
  });
  const app = appFor(fake);
  const errors: ToolbridgeError[] = [];
  app.on("error", (err) => errors.push(err));
  try {
    await app.connect({ timeoutMs: 5000 });
    link!.write(Buffer.concat([
      Buffer.from("this is not json\n"),
      Buffer.from([0xff, 0xfe, 0x0a]),
      Buffer.from("[1,2]\n"),
      Buffer.from(JSON.stringify({ type: "fromTheFuture", x: 1 }) + "\n"),
      Buffer.from(JSON.stringify({ type: "toolInvocation", tool: "echo" }) + "\n"),
      Buffer.from(JSON.stringify({ type: "register", appName: "x" }) + "\n"),
      Buffer.from("x".repeat(1001) + "\n"), // one byte over the negotiated maxLineBytes
      Buffer.from("y".repeat(5000)), // a longer one, arriving in pieces
      Buffer.from("y".repeat(5000) + "\n"),
      Buffer.from(JSON.stringify({ type: "ping", id: 7, futureField: true }) + "\n"),
    ]));
    await fake.waitFor((m) => m.type === "pong" && m.id === 7);
    const codes = fake.received.filter((m) => m.type === "error").map((m) => m.code);
    assert.deepEqual(codes, ["invalid_json", "invalid_utf8", "not_an_object", "unknown_type", "invalid_message",
      "unexpected_message", "line_too_long", "line_too_long"]);
    assert.deepEqual(errors.map((e) => (e as RemoteProtocolError).code),
      ["invalid_json", "invalid_utf8", "not_an_object", "unknown_type", "invalid_message", "line_too_long", "line_too_long"]);
    assert.ok(errors.every((e) => e instanceof RemoteProtocolError));
    // Exactly at the limit is fine: a 1000-byte line is read (a ping padded with an unknown field).
    const base = JSON.stringify({ type: "ping", id: 8, pad: "" });
    link!.write(JSON.stringify({ type: "ping", id: 8, pad: "p".repeat(1000 - base.length) }) + "\n");
    await fake.waitFor((m) => m.type === "pong" && m.id === 8);
    assert.equal(app.state, "connected");
  } finally {
    await app.close();
    await fake.close();
  }
});

test("a close in the middle of a line is an error event, then the app reconnects", async () => {
  let count = 0;
  const fake = await FakeDaemon.start((socket) => {
    count += 1;
    socket.write(registered());
    if (count === 1) socket.end('{"type":"toolInvocation","correlationId":1,"tool":"ec');
  });
  const app = appFor(fake);
  const error = nextEvent<[ToolbridgeError]>(app, "error");
  try {
    await app.connect({ timeoutMs: 5000 });
    const [err] = await error;
    assert.equal((err as RemoteProtocolError).code, "truncated_line");
    await nextEvent(app, "connected");
    assert.equal(fake.connections, 2);
  } finally {
    await app.close();
    await fake.close();
  }
});

test("without an 'error' listener garbage never throws out of the library", async () => {
  let link: net.Socket | undefined;
  const fake = await FakeDaemon.start((socket) => {
    link = socket;
    socket.write(registered());
  });
  const logger = capturingLogger();
  const app = appFor(fake, { logger });
  try {
    await app.connect({ timeoutMs: 5000 });
    link!.write("garbage\n" + JSON.stringify({ type: "ping", id: 1 }) + "\n");
    await fake.waitFor((m) => m.type === "pong");
    assert.ok(logger.lines.some((l) => l.level === "warn" && l.message.includes("not valid JSON")));
  } finally {
    await app.close();
    await fake.close();
  }
});

test("pings are answered while a handler keeps the call busy; close sends goodbye and aborts the call", async () => {
  let link: net.Socket | undefined;
  const fake = await FakeDaemon.start((socket) => {
    link = socket;
    socket.write(registered());
  });
  const app = appFor(fake);
  let aborted: unknown;
  const started = new Promise<void>((resolve) => {
    app.tool("busy", {}, async (_args, ctx) => {
      resolve();
      await new Promise<void>((done) => ctx.signal.addEventListener("abort", () => done()));
      aborted = ctx.signal.reason;
      return "late";
    });
  });
  await app.connect({ timeoutMs: 5000 });
  link!.write(JSON.stringify({ type: "toolInvocation", correlationId: 5, tool: "busy", parameters: {}, timeoutMs: 30000 }) + "\n");
  await started;
  for (let id = 1; id <= 3; id += 1) {
    link!.write(JSON.stringify({ type: "ping", id }) + "\n");
    await fake.waitFor((m) => m.type === "pong" && m.id === id);
  }
  await app.close();
  await fake.waitClosed();
  assert.equal(app.state, "disconnected");
  const sent = fake.received.map((m) => m.type);
  assert.equal(sent.at(-1), "goodbye");
  assert.ok(!fake.received.some((m) => m.type === "toolResponse"), "no response after close");
  assert.ok(aborted instanceof Error && aborted.name === "ConnectionClosed");
  await fake.close();
});

test("register carries protocolVersion 1; an answer of another version is refused for good", async () => {
  const fake = await FakeDaemon.start((socket) => socket.write(registered({ protocolVersion: 2 })));
  const app = appFor(fake);
  try {
    await assert.rejects(app.connect({ timeoutMs: 5000 }),
      (err: unknown) => err instanceof RegistrationRejected && err.code === "unsupported_version");
    assert.equal(fake.received[0]!.protocolVersion, 1);
    assert.equal(app.state, "failed");
  } finally {
    await fake.close();
  }
});

test("refusals follow protocol.md's retry rules: unauthorized and forbidden are retried, not_registered is not", async () => {
  const refusals = [
    { code: "unauthorized", message: "wrong token" },
    { code: "forbidden", message: "the token may not register this name" },
    { code: "not_registered", message: "another message came first" },
  ];
  let count = 0;
  const fake = await FakeDaemon.start((socket) => {
    socket.end(JSON.stringify({ type: "error", fatal: true, ...refusals[count++] }) + "\n");
  });
  const app = appFor(fake);
  const states: string[] = [];
  app.on("state", (state) => states.push(state));
  try {
    await assert.rejects(app.connect({ timeoutMs: 5000 }),
      (err: unknown) => err instanceof RegistrationRejected && err.code === "not_registered");
    assert.deepEqual(states, ["connecting", "unauthorized", "reconnecting", "failed"]);
    assert.equal(count, 3);
  } finally {
    await fake.close();
  }
});

test("goodbye: false closes without goodbye (for stable-id programs that restart at once)", async () => {
  const fake = await FakeDaemon.start((socket) => socket.write(registered()));
  const app = appFor(fake, { goodbye: false, instanceId: "doc-1" });
  await app.connect({ timeoutMs: 5000 });
  await app.close();
  await fake.waitClosed();
  assert.deepEqual(fake.received.map((m) => m.type), ["register"]);
  await fake.close();
});

test("'replaced' on a live link stops the app with InstanceReplaced (emitted as 'error')", async () => {
  let link: net.Socket | undefined;
  const fake = await FakeDaemon.start((socket) => {
    link = socket;
    socket.write(registered());
  });
  const app = appFor(fake, { instanceId: "shared-id" });
  try {
    await app.connect({ timeoutMs: 5000 });
    assert.equal(fake.received[0]!.instanceId, "shared-id");
    const error = nextEvent<[ToolbridgeError]>(app, "error");
    link!.end(JSON.stringify({ type: "error", code: "replaced", message: "another connection registered", fatal: true }) + "\n");
    const [err] = await error;
    assert.ok(err instanceof InstanceReplaced);
    assert.equal(app.state, "failed");
    assert.equal(fake.connections, 1);
  } finally {
    await app.close();
    await fake.close();
  }
});

test("a result over the daemon's line limit becomes a clear failure", async () => {
  let link: net.Socket | undefined;
  const fake = await FakeDaemon.start((socket) => {
    link = socket;
    socket.write(registered());
  });
  const app = appFor(fake);
  app.tool("big", {}, async () => "z".repeat(2000));
  try {
    await app.connect({ timeoutMs: 5000 });
    link!.write(JSON.stringify({ type: "toolInvocation", correlationId: 9, tool: "big", parameters: {} }) + "\n");
    const response = await fake.waitFor((m) => m.type === "toolResponse");
    const result = response.result as { success: boolean; error: string };
    assert.equal(result.success, false);
    assert.match(result.error, /big failed: its result is too large/);
  } finally {
    await app.close();
    await fake.close();
  }
});

test("sync throws, non-JSON results and unknown tools each become a clear failure", async () => {
  let link: net.Socket | undefined;
  const fake = await FakeDaemon.start((socket) => {
    link = socket;
    socket.write(registered());
  });
  const app = appFor(fake);
  app.tool("sync_throw", {}, () => {
    throw new RangeError("private detail");
  });
  app.tool("bigint", {}, () => 10n);
  try {
    await app.connect({ timeoutMs: 5000 });
    const invoke = (cid: number, tool: string): void => {
      link!.write(JSON.stringify({ type: "toolInvocation", correlationId: cid, tool, parameters: {} }) + "\n");
    };
    invoke(1, "sync_throw");
    invoke(2, "bigint");
    invoke(3, "missing");
    const errors: Record<number, string> = {};
    for (const cid of [1, 2, 3]) {
      const response = await fake.waitFor((m) => m.type === "toolResponse" && m.correlationId === cid);
      const result = response.result as { success: boolean; error: string };
      assert.equal(result.success, false);
      errors[cid] = result.error;
    }
    assert.deepEqual(errors, {
      1: "sync_throw failed: RangeError",
      2: "bigint failed: it returned a value that is not JSON",
      3: "unknown tool 'missing'",
    });
  } finally {
    await app.close();
    await fake.close();
  }
});

test("a handler that ignores its cancel keeps its slot: the next call times out 'without starting', and nothing goes out for the first", async () => {
  let link: net.Socket | undefined;
  const fake = await FakeDaemon.start((socket) => {
    link = socket;
    socket.write(registered());
  });
  const app = appFor(fake); // maxConcurrency 1
  let release: () => void = () => undefined;
  const started = new Promise<void>((resolve) => {
    app.tool("stubborn", {}, async () => {
      resolve();
      await new Promise<void>((done) => (release = done));
      return "late";
    });
  });
  let secondRan = false;
  app.tool("second", {}, async () => {
    secondRan = true;
    return "ran";
  });
  const send = (message: object): void => {
    link!.write(JSON.stringify(message) + "\n");
  };
  try {
    await app.connect({ timeoutMs: 5000 });
    send({ type: "toolInvocation", correlationId: 1, tool: "stubborn", parameters: {} });
    await started;
    send({ type: "toolCancel", correlationId: 1, reason: "cancelled" });
    send({ type: "toolInvocation", correlationId: 2, tool: "second", parameters: {}, timeoutMs: 200 });
    const response = await fake.waitFor((m) => m.type === "toolResponse" && m.correlationId === 2);
    assert.deepEqual(response.result, {
      success: false, errorKind: "timeout",
      error: "second timed out after 0.2 s without starting: the app was still busy with earlier calls (it runs 1 at a time)",
    });
    release();
    send({ type: "ping", id: 99 }); // a round trip after the stubborn handler settled
    await fake.waitFor((m) => m.type === "pong" && m.id === 99);
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(!fake.received.some((m) => m.correlationId === 1), "nothing for the cancelled call");
    assert.equal(secondRan, false, "the timed-out call never started late");
  } finally {
    await app.close();
    await fake.close();
  }
});

test("a daemon that goes silent is dropped after three heartbeat intervals, then the app reconnects", async () => {
  const fake = await FakeDaemon.start((socket) => socket.write(registered({ heartbeatIntervalMs: 100 })));
  const app = appFor(fake);
  try {
    await app.connect({ timeoutMs: 5000 });
    const [reason] = await nextEvent<[string]>(app, "disconnected");
    assert.match(reason, /no message from the daemon for 0.3 s \(missed heartbeats\)/);
    await nextEvent(app, "connected");
    assert.equal(fake.connections, 2);
  } finally {
    await app.close();
    await fake.close();
  }
});
