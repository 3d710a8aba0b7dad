/**
 * Completions, log messages and elicitation (wire protocol v2, protocol.md §12 and §13): the
 * bounds and checks alone, then an app on a REAL daemon with an MCP agent completing arguments,
 * hearing log messages and answering a question, then a scripted daemon for the version rule.
 */
import assert from "node:assert/strict";
import type * as net from "node:net";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import {
  App, ElicitationError, LogBucket, MAX_LOG_DATA_BYTES, RemoteProtocolError, ToolDefinitionError, ToolError, decodeMessage,
  definePrompt, logMessage, runCompleter, type CompleteContext,
} from "../src/index.js";
import { FakeDaemon, registered } from "./fake.js";
import { Agent, Daemon, capturingLogger, until } from "./helpers.js";

const noContext = {} as CompleteContext;

describe("bounds and checks", () => {
  test("complete and elicitResult decode with their defaults; a complete names exactly one of prompt and uriTemplate", () => {
    const line = (value: object): Buffer => Buffer.from(JSON.stringify(value));
    assert.deepEqual(decodeMessage(line({ type: "complete", correlationId: 3, prompt: "p", argument: "a" })),
      { type: "complete", correlationId: 3, argument: "a", value: "", prompt: "p", arguments: {} });
    assert.throws(() => decodeMessage(line({ type: "complete", correlationId: 3, prompt: "p", uriTemplate: "x://{a}", argument: "a" })),
      (err: RemoteProtocolError) => err.code === "invalid_message" && err.correlationId === 3);
    assert.deepEqual(decodeMessage(line({ type: "elicitResult", correlationId: 1, elicitId: 2 })),
      { type: "elicitResult", correlationId: 1, elicitId: 2, action: "cancel" });
    assert.throws(() => decodeMessage(line({ type: "elicitResult", correlationId: 1, elicitId: 2, content: [1] })), RemoteProtocolError);
  });

  test("a log message keeps to the protocol: known levels, data cut to 64 KiB, logger cut to 128", () => {
    assert.throws(() => logMessage("verbose", "x"), RangeError);
    assert.deepEqual(logMessage("info", { a: 1 }, "sync", 7), { type: "log", level: "info", data: { a: 1 }, logger: "sync", correlationId: 7 });
    const long = logMessage("warning", "é\n".repeat(MAX_LOG_DATA_BYTES));
    assert.ok(Buffer.byteLength(JSON.stringify(long.data)) <= MAX_LOG_DATA_BYTES);
    assert.match(long.data as string, /\[\.\.\. cut: the log data was \d+ bytes/);
    const big = logMessage("error", { blob: "x".repeat(MAX_LOG_DATA_BYTES) });
    assert.match(big.data as string, /omitted: over the 65536-byte limit/);
    assert.equal((logMessage("info", 1, "l".repeat(300)).logger as string).length, 128);
    assert.equal(logMessage("info", 1, "").logger, undefined);
  });

  test("the log bucket lets 100 go at once, then 20 per second", () => {
    let now = 0;
    const bucket = new LogBucket(undefined, undefined, () => now);
    let sent = 0;
    for (let i = 0; i < 150; i += 1) if (bucket.take()) sent += 1;
    assert.equal(sent, 100);
    assert.equal(bucket.dropped, 50);
    now += 500; // half a second: 10 more
    sent = 0;
    for (let i = 0; i < 50; i += 1) if (bucket.take()) sent += 1;
    assert.equal(sent, 10);
  });

  test("completions: options by prefix (ignoring case), functions, at most 100 values", async () => {
    const prompt = definePrompt("review", { arguments: [{ name: "lang", complete: ["Python", "perl", "Rust"] }, { name: "focus" }] }, () => "x");
    assert.deepEqual([...prompt.completers.keys()], ["lang"]);
    assert.deepEqual(await runCompleter(prompt.completers.get("lang")!, "P", {}, noContext), { values: ["Python", "perl"], total: 2, hasMore: false });
    const many = Array.from({ length: 150 }, (_, i) => `n${i}`);
    assert.deepEqual(await runCompleter(async () => many, "", {}, noContext), { values: many.slice(0, 100), total: 150, hasMore: true });
    assert.deepEqual(await runCompleter((v, args) => ({ values: [v + args.lang], total: 9, hasMore: true }), "a", { lang: "b" }, noContext),
      { values: ["ab"], total: 9, hasMore: true });
    await assert.rejects(runCompleter(() => [1] as unknown as string[], "", {}, noContext), TypeError);
    assert.throws(() => definePrompt("p", { arguments: [{ name: "a", complete: "abc" as unknown as string[] }] }, () => ""), ToolDefinitionError);
    const app = new App({ name: "Decl", env: {} });
    assert.throws(() => app.resourceTemplate("x://{a}", { complete: { b: ["x"] } }, () => ""), /not one of its variables/);
  });
});

describe("completions, log messages and elicitation on a real daemon", () => {
  let daemon: Daemon;
  let app: App;
  const logger = capturingLogger();

  before(async () => {
    daemon = await Daemon.start();
    app = new App({ name: "Desk", home: daemon.home, env: {}, logger });
    app.prompt("review", {
      arguments: [
        { name: "language", required: true, complete: ["python", "perl", "rust"] },
        { name: "framework", complete: async (value, args) => (args.language === "python" ? ["flask", "fastapi"] : ["axum"]).filter((f) => f.startsWith(value)) },
        { name: "focus" },
      ],
    }, ({ language }) => `Review this ${language} code.`);
    app.resourceTemplate("desk://notes/{name}", {
      complete: {
        name: (value) => {
          if (value === "boom") throw new ToolError("the index is still loading");
          return { values: [`${value}-1`, `${value}-2`], total: 40, hasMore: true };
        },
      },
    }, ({ name }) => `# ${name}`);
    app.tool("work", {}, async (_args, ctx) => {
      ctx.log("debug", "warming up", "work");
      ctx.log("warning", { step: 2, of: 2 }, "work");
      return "done";
    });
    app.tool<{ text: string }>("shout", {}, async ({ text }) => {
      app.log("notice", text, "bg");
      return "shouted";
    });
    app.tool("ask", {}, async (_args, ctx) => {
      try {
        const answer = await ctx.elicit("Overwrite report.txt?", {
          type: "object", properties: { overwrite: { type: "boolean" } }, required: ["overwrite"],
        });
        return { action: answer.action, content: answer.content };
      } catch (err) {
        if (err instanceof ElicitationError) return { errorCode: err.code };
        throw err;
      }
    });
    const registration = await app.connect({ timeoutMs: 15_000 });
    assert.equal(registration.protocolVersion, 2);
  });

  after(async () => {
    await app.close();
    await daemon.stop();
  });

  test("an agent completes prompt arguments and template variables", async () => {
    const agent = await Agent.connect(daemon);
    try {
      const complete = async (ref: Record<string, unknown>, name: string, value: string, context?: Record<string, string>) => {
        const params: Record<string, unknown> = { ref, argument: { name, value } };
        if (context !== undefined) params.context = { arguments: context };
        return ((await agent.request("completion/complete", params)) as { completion: { values: string[]; total?: number; hasMore?: boolean } }).completion;
      };
      const review = { type: "ref/prompt", name: "Desk__review" };
      assert.deepEqual((await complete(review, "language", "p")).values, ["python", "perl"]);
      assert.deepEqual((await complete(review, "framework", "f", { language: "python" })).values, ["flask", "fastapi"]);
      assert.deepEqual((await complete(review, "focus", "b")).values, []);
      const notes = { type: "ref/resource", uri: "toolbridge://Desk/desk://notes/{name}" };
      const got = await complete(notes, "name", "plan");
      assert.deepEqual(got.values, ["plan-1", "plan-2"]);
      assert.equal(got.total, 40);
      assert.equal(got.hasMore, true);
      await assert.rejects(complete(notes, "name", "boom"), /the index is still loading/);
    } finally {
      agent.close();
    }
  });

  test("log messages reach an agent that set its level: app-wide and those of its own call", async () => {
    const agent = await Agent.connect(daemon);
    try {
      await agent.request("logging/setLevel", { level: "info" });
      const heard = (data: unknown) => agent.waitNotification((n) => n.method === "notifications/message"
        && JSON.stringify(n.params.data) === JSON.stringify(data));
      const work = await agent.callTool("Desk__work", {});
      assert.ok(!work.isError, JSON.stringify(work));
      await heard({ step: 2, of: 2 });
      await agent.callTool("Desk__shout", { text: "hello everyone" });
      await heard("hello everyone");
      const messages = agent.notifications.filter((n) => n.method === "notifications/message").map((n) => n.params);
      assert.deepEqual(messages.map((m) => [m.level, m.logger]), [["warning", "Desk.work"], ["notice", "Desk.bg"]],
        "the debug message is below the level the agent set");
    } finally {
      agent.close();
    }
  });

  test("a tool asks the user: the agent's answer comes back; an agent without the capability is not asked", async () => {
    const asking = await Agent.connect(daemon, { elicitation: { form: {} } });
    const asked: Array<Record<string, unknown>> = [];
    asking.onRequest = async (method, params) => {
      assert.equal(method, "elicitation/create");
      asked.push(params);
      return { action: "accept", content: { overwrite: true } };
    };
    try {
      const result = await asking.callTool("Desk__ask", {});
      assert.deepEqual(result.structuredContent, { action: "accept", content: { overwrite: true } });
      assert.equal(asked.length, 1);
      assert.equal(asked[0]!.message, "Overwrite report.txt?");
    } finally {
      asking.close();
    }
    const plain = await Agent.connect(daemon);
    try {
      const result = await plain.callTool("Desk__ask", {});
      assert.deepEqual(result.structuredContent, { errorCode: "elicitation_unsupported" });
    } finally {
      plain.close();
    }
  });
});

describe("the version rule and the call rule, with a scripted daemon", () => {
  const outcomes: string[] = [];

  async function withFake(options: { logs?: boolean; elicitation?: boolean }, version: number,
    body: (fake: FakeDaemon, link: () => net.Socket, app: App) => Promise<void>): Promise<void> {
    let socket: net.Socket | undefined;
    const fake = await FakeDaemon.start((s, register) => {
      socket = s;
      s.write(registered({ protocolVersion: Math.min(version, register.protocolVersion as number), maxLineBytes: 100_000 }));
    });
    const app = new App({ name: "Fake", port: fake.port, token: "t", env: {}, logger: capturingLogger(), ...options });
    app.tool("ask", {}, async (_args, ctx) => {
      await delay(300); // deaf to the cancel, then asks
      try {
        await ctx.elicit("Still there?", { type: "object", properties: {} });
        outcomes.push("asked");
        return "asked";
      } catch (err) {
        outcomes.push((err as ElicitationError).code);
        return `not asked: ${(err as ElicitationError).code}`;
      }
    });
    app.tool("chatty", {}, async (_args, ctx) => {
      for (let i = 0; i < 150; i += 1) ctx.log("info", i);
      return "said";
    });
    try {
      await app.connect({ timeoutMs: 5000 });
      await body(fake, () => socket!, app);
    } finally {
      await app.close();
      await fake.close();
    }
  }

  test("a tools-only app registers version 1 unless it logs or asks; on version 1 nothing is sent", async () => {
    await withFake({}, 2, async (fake, _link, app) => {
      assert.equal(fake.received[0]!.protocolVersion, 1);
      app.log("info", "dropped");
    });
    await withFake({ logs: true }, 2, async (fake) => {
      assert.equal(fake.received[0]!.protocolVersion, 2);
      assert.equal(fake.received[0]!.completions, undefined);
    });
    await withFake({ elicitation: true }, 1, async (fake, link) => {
      assert.equal(fake.received[0]!.protocolVersion, 2);
      link().write(JSON.stringify({ type: "toolInvocation", correlationId: 1, tool: "ask", parameters: {} }) + "\n");
      const response = await fake.waitFor((m) => m.type === "toolResponse");
      assert.deepEqual((response.result as { data: unknown }).data, "not asked: elicitation_unsupported");
      assert.ok(!fake.received.some((m) => m.type === "elicit"));
    });
  });

  test("no elicit for a cancelled call; a call's log messages keep to the daemon's rate", async () => {
    await withFake({ elicitation: true }, 2, async (fake, link) => {
      link().write(JSON.stringify({ type: "toolInvocation", correlationId: 1, tool: "ask", parameters: {} }) + "\n");
      link().write(JSON.stringify({ type: "toolCancel", correlationId: 1, reason: "cancelled" }) + "\n");
      outcomes.length = 0;
      link().write(JSON.stringify({ type: "toolInvocation", correlationId: 2, tool: "chatty", parameters: {} }) + "\n");
      await fake.waitFor((m) => m.type === "toolResponse" && m.correlationId === 2);
      await until(() => outcomes.length > 0); // the cancelled handler has asked, and was refused
      assert.deepEqual(outcomes, ["call_not_running"]);
      link().write(JSON.stringify({ type: "ping", id: 5 }) + "\n");
      await fake.waitFor((m) => m.type === "pong"); // the link still serves, and everything sent has arrived
      assert.ok(!fake.received.some((m) => m.correlationId === 1), "nothing at all for the cancelled call");
      assert.equal(fake.received.filter((m) => m.type === "log" && m.correlationId === 2).length, 100);
    });
  });
});
