/**
 * `connect()` with no daemon (issue 30 item 14): the default keeps trying; `timeoutMs` and
 * `signal` bound the wait with a clear error and leave the app stopped. And the error classes
 * agree with those of the package's other build (ESM / CommonJS), which a process may load too.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  App, ConnectAborted, ConnectTimeout, ConnectionClosed, ToolError, ToolbridgeError, type Logger,
} from "../src/index.js";
import { tempHome } from "./helpers.js";

/** An app on an empty home (no runtime.json, no token: no daemon), quick retries, and a
 * logger that resolves `failedTwice` at the second failed attempt. */
function appWithoutDaemon(): { app: App; failedTwice: Promise<void> } {
  let failures = 0;
  let resolveFailedTwice!: () => void;
  const failedTwice = new Promise<void>((resolve) => {
    resolveFailedTwice = resolve;
  });
  const note = (message: string): void => {
    if (message.includes("connection attempt failed") && ++failures === 2) resolveFailedTwice();
  };
  const logger: Partial<Logger> = { warn: note, debug: note };
  const app = new App({ name: "Lonely", home: tempHome(), env: {}, logger, backoff: { initialMs: 1, capMs: 5 } });
  return { app, failedTwice };
}

test("by default connect() keeps trying while there is no daemon; close() ends it with ConnectionClosed", async () => {
  const { app, failedTwice } = appWithoutDaemon();
  const connecting = app.connect();
  await failedTwice;
  assert.equal(app.state, "connecting");
  assert.match(app.lastError ?? "", /no .*runtime\.json|toolbridge serve|not running|no daemon/i);
  await app.close();
  await assert.rejects(connecting, (err) => err instanceof ConnectionClosed && /closed before it registered/.test(err.message));
  assert.equal(app.running, false);
});

test("connect({timeoutMs}) with no daemon rejects with ConnectTimeout naming the last failure, and stops the app", async () => {
  const { app } = appWithoutDaemon();
  await assert.rejects(app.connect({ timeoutMs: 50 }), (err) => {
    assert.ok(err instanceof ConnectTimeout);
    assert.match(err.message, /^Lonely did not register within 50 ms: /);
    return true;
  });
  assert.equal(app.running, false);
  assert.equal(app.state, "disconnected");
});

test("connect({signal}) rejects with ConnectAborted (cause: the signal's reason) when it aborts, and stops the app", async () => {
  const { app, failedTwice } = appWithoutDaemon();
  const controller = new AbortController();
  const connecting = app.connect({ signal: controller.signal, timeoutMs: 600_000 });
  await failedTwice;
  const reason = new Error("the user quit");
  controller.abort(reason);
  await assert.rejects(connecting, (err) => {
    assert.ok(err instanceof ConnectAborted);
    assert.equal((err as ConnectAborted).cause, reason);
    assert.match((err as Error).message, /^Lonely: connect\(\) was aborted before the app registered \(last attempt: .+\)$/);
    return true;
  });
  assert.equal(app.running, false);
  assert.equal(app.state, "disconnected");
});

test("an already aborted signal rejects at once without starting; a bad timeoutMs is a RangeError", async () => {
  const { app } = appWithoutDaemon();
  await assert.rejects(app.connect({ signal: AbortSignal.abort() }), ConnectAborted);
  assert.equal(app.running, false);
  assert.equal(app.state, "disconnected");
  for (const timeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
    await assert.rejects(app.connect({ timeoutMs }), RangeError);
    assert.equal(app.running, false);
  }
});

test("the package's errors are recognised across its two builds (a ToolError of the other copy is a ToolError)", () => {
  // What the other build's ToolError looks like from here: another class of the same name,
  // carrying the names of its classes under the key both builds share.
  const otherCopy = Object.assign(new Error("from the other build"), { name: "ToolError" });
  Object.defineProperty(otherCopy, Symbol.for("@toolbridge/app.errorKinds"), { value: ["ToolError", "ToolbridgeError"] });
  assert.ok(otherCopy instanceof ToolError);
  assert.ok(otherCopy instanceof ToolbridgeError);
  assert.ok(!(otherCopy instanceof ConnectTimeout));
  assert.ok(!(new ToolError("x") instanceof ConnectTimeout));
  // Classes an app derives keep ordinary instanceof.
  class AppError extends ToolError {}
  assert.ok(new AppError("x") instanceof ToolError);
  assert.ok(!(new ToolError("x") instanceof AppError));
  assert.ok(!(otherCopy instanceof AppError));
  assert.ok(!({} instanceof ToolError));
});
