/**
 * The client against a REAL daemon (`python -m broker serve` in a subprocess) and an MCP agent
 * connected to that daemon: registration, echo, progress, cancel, deadline, image, structured,
 * errors, addTools/removeTools, and a daemon restart (new port, rotated token) → reconnect.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import {
  App, CallCancelled, CallTimeout, ToolDefinitionError, ToolError, ToolUpdateRejected, image, type ConnectionState,
} from "../src/index.js";
import { Agent, Daemon, capturingLogger, nextEvent, tempHome, until } from "./helpers.js";

const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "base64");
const TEXT_ARG = { type: "object", properties: { text: { type: "string" } }, required: ["text"] } as const;

describe("an app on a real daemon", () => {
  let daemon: Daemon;
  let agent: Agent;
  let app: App;
  const logger = capturingLogger();
  const states: ConnectionState[] = [];
  const aborts: Array<{ tool: string; reason: unknown }> = [];
  let releaseStubborn: () => void = () => undefined;
  let stubbornFinished: Promise<void> = Promise.resolve();
  let slowStarted: () => void = () => undefined;

  before(async () => {
    daemon = await Daemon.start();
    app = new App({ name: "Test", home: daemon.home, env: {}, logger, maxConcurrency: 4 });
    app.on("state", (state) => states.push(state));
    app.tool<{ text: string }>("echo", { description: "Echo", inputSchema: TEXT_ARG as never }, async ({ text }) => text);
    app.tool<{ steps: number }>("progress", { inputSchema: { type: "object", properties: { steps: { type: "integer" } } } },
      async ({ steps }, ctx) => {
        for (let i = 1; i <= steps; i += 1) await ctx.reportProgress(i, steps, `step ${i} of ${steps}`);
        return "done";
      });
    app.tool("slow", {}, async (_args, ctx) => {
      slowStarted();
      try {
        await delay(60_000, undefined, { signal: ctx.signal });
      } catch (err) {
        aborts.push({ tool: "slow", reason: ctx.signal.reason });
        throw err;
      }
      return "finished";
    });
    app.tool("stubborn", { description: "ignores its signal" }, async (_args, ctx) => {
      stubbornFinished = new Promise<void>((resolve) => {
        ctx.signal.addEventListener("abort", () => aborts.push({ tool: "stubborn", reason: ctx.signal.reason }));
        releaseStubborn = resolve;
      });
      slowStarted();
      await stubbornFinished;
      await ctx.reportProgress(1, 1, "too late");
      return "too late";
    });
    app.tool("short", { timeoutMs: 300 }, async (_args, ctx) => {
      try {
        await delay(10_000, undefined, { signal: ctx.signal });
      } catch {
        aborts.push({ tool: "short", reason: ctx.signal.reason });
      }
      return "never seen";
    });
    app.tool("image", {}, async () => [image(PNG), { type: "text", text: "not a block made by text()" }].slice(0, 1));
    app.tool<{ a: number; b: number }>("structured", {
      inputSchema: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"] },
      outputSchema: { type: "object", properties: { sum: { type: "integer" } } },
    }, async ({ a, b }) => ({ structuredContent: { sum: a + b }, data: { sum: a + b } }));
    app.tool("fail", {}, async () => {
      throw new ToolError("the disk is full; free some space");
    });
    app.tool("crash", {}, async () => {
      throw new TypeError("secret detail 12345");
    });
    const registration = await app.connect({ timeoutMs: 20_000 });
    assert.equal(registration.appLabel, "Test");
    agent = await Agent.connect(daemon);
  });

  after(async () => {
    agent?.close();
    await app?.close();
    await daemon?.stop();
  });

  test("registers its tools under agent-facing names, with state events", async () => {
    assert.deepEqual(states.slice(0, 2), ["connecting", "connected"]);
    assert.equal(app.state, "connected");
    assert.equal(app.agentNames.echo, "Test__echo");
    const names = await agent.toolNames();
    for (const tool of ["echo", "progress", "slow", "image", "structured", "fail"]) assert.ok(names.includes(`Test__${tool}`), tool);
  });

  test("echo returns the text", async () => {
    const result = await agent.callTool("Test__echo", { text: "hello ✓" });
    assert.equal(result.isError, false);
    assert.deepEqual(result.content, [{ type: "text", text: "hello ✓" }]);
  });

  test("progress reaches the agent in order", async () => {
    const result = await agent.callTool("Test__progress", { steps: 3 }, { progressToken: "p1" });
    assert.deepEqual(result.content, [{ type: "text", text: "done" }]);
    const progress = agent.notifications.filter((n) => n.method === "notifications/progress" && n.params.progressToken === "p1");
    assert.deepEqual(progress.map((n) => [n.params.progress, n.params.total, n.params.message]),
      [[1, 3, "step 1 of 3"], [2, 3, "step 2 of 3"], [3, 3, "step 3 of 3"]]);
  });

  test("an agent's cancel aborts the handler's signal and nothing is sent for the call", async () => {
    const started = new Promise<void>((resolve) => (slowStarted = resolve));
    const id = agent.newId();
    const call = agent.callTool("Test__slow", {}, undefined, id).catch((err: Error) => err);
    await started;
    agent.notify("notifications/cancelled", { requestId: id, reason: "user pressed stop" });
    await until(() => aborts.some((a) => a.tool === "slow"));
    const reason = aborts.find((a) => a.tool === "slow")!.reason;
    assert.ok(reason instanceof CallCancelled, String(reason));
    void call;
  });

  test("a handler that ignores the cancel: its late result and progress are never sent", async () => {
    const started = new Promise<void>((resolve) => (slowStarted = resolve));
    const id = agent.newId();
    void agent.callTool("Test__stubborn", {}, { progressToken: "late" }, id).catch(() => undefined);
    await started;
    agent.notify("notifications/cancelled", { requestId: id });
    await until(() => aborts.some((a) => a.tool === "stubborn"));
    releaseStubborn();
    await stubbornFinished;
    // Two round trips through the app: a late response or progress would have been answered with
    // `unknown_correlation_id` before the second echo reached the app.
    await agent.callTool("Test__echo", { text: "a" });
    await agent.callTool("Test__echo", { text: "b" });
    const complaints = logger.lines.filter((line) => JSON.stringify(line).includes("unknown_correlation_id"));
    assert.deepEqual(complaints, []);
    assert.ok(!agent.notifications.some((n) => n.params.progressToken === "late"));
  });

  test("the deadline aborts the signal with CallTimeout and the agent hears a timeout", async () => {
    const result = await agent.callTool("Test__short", {});
    assert.equal(result.isError, true);
    assert.match(String(result.content[0]!.text), /short timed out after 0\.[0-9]+ s/);
    await until(() => aborts.some((a) => a.tool === "short"));
    assert.ok(aborts.find((a) => a.tool === "short")!.reason instanceof CallTimeout);
  });

  test("an image result arrives as MCP image content", async () => {
    const result = await agent.callTool("Test__image", {});
    assert.deepEqual(result.content, [{ type: "image", data: PNG.toString("base64"), mimeType: "image/png" }]);
  });

  test("structured content arrives with its data", async () => {
    const result = await agent.callTool("Test__structured", { a: 2, b: 40 });
    assert.deepEqual(result.structuredContent, { sum: 42 });
  });

  test("a ToolError's message reaches the agent; another error's details do not", async () => {
    const failed = await agent.callTool("Test__fail", {});
    assert.equal(failed.isError, true);
    assert.match(String(failed.content[0]!.text), /the disk is full; free some space/);
    const crashed = await agent.callTool("Test__crash", {});
    assert.equal(crashed.isError, true);
    assert.match(String(crashed.content[0]!.text), /crash failed: TypeError/);
    assert.doesNotMatch(JSON.stringify(crashed), /12345/);
  });

  test("addTools and removeTools change what the agent sees; the daemon's refusal rejects", async () => {
    const names = await app.addTool<{ text: string }>("shout", { inputSchema: TEXT_ARG as never }, async ({ text }) => text.toUpperCase());
    assert.equal(names.shout, "Test__shout");
    assert.ok((await agent.toolNames()).includes("Test__shout"));
    assert.deepEqual((await agent.callTool("Test__shout", { text: "hi" })).content, [{ type: "text", text: "HI" }]);
    const after = await app.removeTool("shout");
    assert.equal(after.shout, undefined);
    assert.ok(!(await agent.toolNames()).includes("Test__shout"));
    // Passes the local checks, but the daemon compiles the schema and refuses it.
    await assert.rejects(app.addTool("broken", { inputSchema: { type: "object", properties: { x: { type: "no-such-type" } } } }, async () => 1),
      (err: unknown) => err instanceof ToolUpdateRejected && err.code === "invalid_tool");
    assert.ok(!app.toolNames.includes("broken"));
    // Refused locally, nothing sent.
    await assert.rejects(app.addTool("echo", {}, async () => 1), ToolDefinitionError);
    await assert.rejects(app.addTool("bad name!", {}, async () => 1), ToolDefinitionError);
    await assert.rejects(app.removeTool("nope"), ToolDefinitionError);
    assert.throws(() => app.tool("late", {}, async () => 1), /use `await app.addTools/);
  });
});

describe("a daemon restart", () => {
  test("the app reconnects to the new port with the rotated token, same instance id", async () => {
    const home = tempHome();
    let daemon = await Daemon.start(home);
    const app = new App({ name: "Restart", home, env: {}, logger: capturingLogger(), backoff: { initialMs: 50, capMs: 500 } });
    app.tool("echo", { inputSchema: TEXT_ARG as never }, async ({ text }) => text);
    const states: ConnectionState[] = [];
    app.on("state", (state) => states.push(state));
    try {
      const first = await app.connect({ timeoutMs: 20_000 });
      const disconnected = nextEvent(app, "disconnected");
      const oldPort = daemon.port;
      const oldToken = daemon.token;
      await daemon.stop("SIGKILL"); // abrupt: no runtime.json clean-up, no goodbye
      await disconnected;
      assert.equal(app.state, "reconnecting");
      rmSync(join(home, "token")); // the next daemon makes a new one: a rotated token
      const reconnected = nextEvent<[{ instanceId: string; appLabel: string }]>(app, "connected");
      daemon = await Daemon.start(home);
      assert.notEqual(daemon.port, oldPort);
      assert.notEqual(daemon.token, oldToken);
      const [second] = await reconnected;
      assert.equal(second.instanceId, first.instanceId);
      assert.equal(second.instanceId, app.instanceId);
      const agent = await Agent.connect(daemon);
      try {
        assert.deepEqual((await agent.callTool("Restart__echo", { text: "back" })).content, [{ type: "text", text: "back" }]);
      } finally {
        agent.close();
      }
      assert.ok(states.includes("reconnecting"));
    } finally {
      await app.close();
      await daemon.stop();
    }
    assert.equal(app.state, "disconnected");
  });
});
