/**
 * Resources, templates and prompts (wire protocol v2, protocol.md §11): declarations and their
 * checks, then an app on a REAL daemon with an MCP agent listing, reading, getting, subscribing
 * and cancelling, then a scripted daemon for what a real one never does (a version-1 answer,
 * a read on a v1 connection, an answer over the line limit, a deadline).
 */
import assert from "node:assert/strict";
import type * as net from "node:net";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import {
  App, CallCancelled, ToolDefinitionError, ToolError, defineTemplate, findResource,
} from "../src/index.js";
import { FakeDaemon, registered } from "./fake.js";
import { Agent, Daemon, capturingLogger, until } from "./helpers.js";

const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "base64");

describe("declarations", () => {
  test("a template matches level-1 expansions and percent-decodes the values", () => {
    const page = defineTemplate("notes://pages/{name}.md", {}, () => "x");
    const table = new Map([[page.key, page]]);
    assert.deepEqual(findResource(table, "notes://pages/plan%20b.md")?.variables, { name: "plan b" });
    assert.equal(findResource(table, "notes://pages/a/b.md"), undefined, "a variable does not span '/'");
    assert.equal(findResource(table, "notes://pages/x.mdx"), undefined);
    assert.deepEqual(findResource(table, "notes://pages/%E0%A4.md")?.variables, { name: "%E0%A4" }, "bad encoding: kept as it came");
  });

  test("bad declarations throw at once, before anything is sent", () => {
    const app = new App({ name: "Decl", env: {} });
    assert.throws(() => app.resource("", {}, () => ""), ToolDefinitionError);
    assert.throws(() => app.resource("x://a", { name: "n".repeat(257) }, () => ""), ToolDefinitionError);
    assert.throws(() => app.resource("x://a", { size: -1 }, () => ""), ToolDefinitionError);
    assert.throws(() => app.resourceTemplate("x://plain", {}, () => ""), /no \{variable\}/);
    assert.throws(() => app.resourceTemplate("x://{a}/{+path}", {}, () => ""), /RFC 6570 level 1/);
    assert.throws(() => app.prompt("p", { arguments: [{ name: "a" }, { name: "a" }] }, () => ""), /declared twice/);
    app.resource("x://a", {}, () => "");
    assert.throws(() => app.resource("x://a", {}, () => ""), /already offers/);
    assert.throws(() => app.removeResource("x://nope"), ToolDefinitionError);
    assert.throws(() => app.removePrompt("nope"), ToolDefinitionError);
    assert.deepEqual(app.resourceUris, ["x://a"]);
  });
});

describe("resources and prompts on a real daemon", () => {
  let daemon: Daemon;
  let agent: Agent;
  let app: App;
  const logger = capturingLogger();
  const aborted: unknown[] = [];
  let slowStarted: () => void = () => undefined;

  before(async () => {
    daemon = await Daemon.start();
    app = new App({ name: "Docs", home: daemon.home, env: {}, logger });
    app.tool<{ text: string }>("echo", {}, async ({ text }) => text);
    app.resource("docs://readme", { mimeType: "text/plain", description: "Read me" }, async () => "hello from Docs");
    app.resource("docs://logo.png", { name: "logo", mimeType: "image/png", size: PNG.length }, () => PNG);
    app.resource("docs://slow", { name: "slow" }, async (ctx) => {
      slowStarted();
      try {
        await delay(60_000, undefined, { signal: ctx.signal });
      } catch (err) {
        aborted.push(ctx.signal.reason);
        throw err;
      }
      return "never";
    });
    app.resourceTemplate("docs://pages/{name}", { name: "page", mimeType: "text/markdown" }, async ({ name }) => {
      if (name === "secret") throw new ToolError("that page is private");
      if (name === "crash") throw new TypeError("detail 4242");
      return `# ${name}`;
    });
    app.prompt("review", {
      description: "Review a page",
      arguments: [{ name: "page", required: true }, { name: "focus", description: "what to look for" }],
    }, async ({ page, focus }) => `Review ${page} for ${focus ?? "bugs"}.`);
    app.prompt("picture", {}, () => ({
      description: "a picture and a page",
      messages: [
        { role: "user", content: { type: "image", data: PNG.toString("base64"), mimeType: "image/png" } },
        { role: "assistant", content: { type: "resource", resource: { uri: "docs://readme", mimeType: "text/plain", text: "hello" } } },
      ],
    }));
    const registration = await app.connect({ timeoutMs: 20_000 });
    assert.equal(registration.protocolVersion, 2);
    agent = await Agent.connect(daemon);
  });

  after(async () => {
    agent?.close();
    await app?.close();
    await daemon?.stop();
  });

  test("resources/list and resources/templates/list show them under toolbridge://Docs/", async () => {
    const listing = (await agent.request("resources/list", {})) as { resources: Array<Record<string, unknown>> };
    const byUri = new Map(listing.resources.map((r) => [r.uri, r]));
    assert.deepEqual([...byUri.keys()].sort(), ["toolbridge://Docs/docs://logo.png", "toolbridge://Docs/docs://readme", "toolbridge://Docs/docs://slow"]);
    assert.equal(byUri.get("toolbridge://Docs/docs://readme")!.description, "Read me");
    assert.equal(byUri.get("toolbridge://Docs/docs://logo.png")!.size, PNG.length);
    const templates = (await agent.request("resources/templates/list", {})) as { resourceTemplates: Array<Record<string, unknown>> };
    assert.deepEqual(templates.resourceTemplates.map((t) => [t.uriTemplate, t.name, t.mimeType]),
      [["toolbridge://Docs/docs://pages/{name}", "page", "text/markdown"]]);
  });

  test("reads return text, blobs and template expansions; the app's own URIs map back", async () => {
    const text = (await agent.request("resources/read", { uri: "toolbridge://Docs/docs://readme" })) as { contents: unknown[] };
    assert.deepEqual(text.contents, [{ uri: "toolbridge://Docs/docs://readme", mimeType: "text/plain", text: "hello from Docs" }]);
    const blob = (await agent.request("resources/read", { uri: "toolbridge://Docs/docs://logo.png" })) as { contents: unknown[] };
    assert.deepEqual(blob.contents, [{ uri: "toolbridge://Docs/docs://logo.png", mimeType: "image/png", blob: PNG.toString("base64") }]);
    const page = (await agent.request("resources/read", { uri: "toolbridge://Docs/docs://pages/plan%20b" })) as { contents: unknown[] };
    assert.deepEqual(page.contents, [{ uri: "toolbridge://Docs/docs://pages/plan%20b", mimeType: "text/markdown", text: "# plan b" }]);
  });

  test("a ToolError's message reaches the agent, another error's details do not; unknown URIs are refused", async () => {
    await assert.rejects(agent.request("resources/read", { uri: "toolbridge://Docs/docs://pages/secret" }), /that page is private/);
    await assert.rejects(agent.request("resources/read", { uri: "toolbridge://Docs/docs://pages/crash" }),
      (err: Error) => /reading 'docs:\/\/pages\/crash' failed: TypeError/.test(err.message) && !err.message.includes("4242"));
    await assert.rejects(agent.request("resources/read", { uri: "toolbridge://Docs/docs://nope" }),
      (err: Error & { rpc?: { code: number } }) => err.rpc?.code === -32002);
  });

  test("prompts/list and prompts/get: arguments, text, image and embedded resources", async () => {
    const listing = (await agent.request("prompts/list", {})) as { prompts: Array<Record<string, unknown>> };
    const review = listing.prompts.find((p) => p.name === "Docs__review")!;
    assert.equal(review.description, "Review a page");
    assert.deepEqual(review.arguments, [{ name: "page", required: true }, { name: "focus", description: "what to look for" }]);
    const got = (await agent.request("prompts/get", { name: "Docs__review", arguments: { page: "a.md" } })) as Record<string, unknown>;
    assert.deepEqual(got, { description: "Review a page", messages: [{ role: "user", content: { type: "text", text: "Review a.md for bugs." } }] });
    const picture = (await agent.request("prompts/get", { name: "Docs__picture" })) as { description: string; messages: Array<{ content: Record<string, unknown> }> };
    assert.equal(picture.description, "a picture and a page");
    assert.deepEqual(picture.messages[0]!.content, { type: "image", data: PNG.toString("base64"), mimeType: "image/png" });
    assert.equal((picture.messages[1]!.content.resource as { uri: string }).uri, "toolbridge://Docs/docs://readme");
    await assert.rejects(agent.request("prompts/get", { name: "Docs__review", arguments: {} }),
      (err: Error & { rpc?: { code: number } }) => err.rpc?.code === -32602 && /page/.test(err.message));
  });

  test("resourceUpdated reaches a subscribed agent", async () => {
    await agent.request("resources/subscribe", { uri: "toolbridge://Docs/docs://readme" });
    app.resourceUpdated("docs://logo.png"); // not subscribed: not sent
    app.resourceUpdated("docs://readme");
    await agent.waitNotification((n) => n.method === "notifications/resources/updated");
    const updates = agent.notifications.filter((n) => n.method === "notifications/resources/updated").map((n) => n.params.uri);
    assert.deepEqual(updates, ["toolbridge://Docs/docs://readme"]);
  });

  test("addResource / removeResource / addPrompt change what the agent sees (setResources, setPrompts)", async () => {
    const listChanged = (method: string): number => agent.notifications.filter((n) => n.method === method).length;
    const before = listChanged("notifications/resources/list_changed");
    app.addResource("docs://fresh", { name: "fresh" }, () => "fresh text");
    await agent.waitNotification(() => listChanged("notifications/resources/list_changed") > before);
    const fresh = (await agent.request("resources/read", { uri: "toolbridge://Docs/docs://fresh" })) as { contents: Array<{ text: string }> };
    assert.equal(fresh.contents[0]!.text, "fresh text");
    const mid = listChanged("notifications/resources/list_changed");
    app.removeResource("docs://fresh");
    await agent.waitNotification(() => listChanged("notifications/resources/list_changed") > mid);
    await assert.rejects(agent.request("resources/read", { uri: "toolbridge://Docs/docs://fresh" }));
    const prompts = listChanged("notifications/prompts/list_changed");
    app.addPrompt("hello", {}, () => "Say hello.");
    await agent.waitNotification(() => listChanged("notifications/prompts/list_changed") > prompts);
    const got = (await agent.request("prompts/get", { name: "Docs__hello" })) as { messages: unknown[] };
    assert.deepEqual(got.messages, [{ role: "user", content: { type: "text", text: "Say hello." } }]);
    app.removePrompt("hello");
  });

  test("an agent's cancel aborts the read's signal, and nothing is sent for it", async () => {
    const started = new Promise<void>((resolve) => (slowStarted = resolve));
    const id = agent.newId();
    void agent.requestWithId(id, "resources/read", { uri: "toolbridge://Docs/docs://slow" }).catch(() => undefined);
    await started;
    agent.notify("notifications/cancelled", { requestId: id });
    await until(() => aborted.length === 1);
    assert.ok(aborted[0] instanceof CallCancelled, String(aborted[0]));
    // Two round trips: an answer after the cancel would have drawn unknown_correlation_id.
    await agent.callTool("Docs__echo", { text: "a" });
    await agent.callTool("Docs__echo", { text: "b" });
    assert.deepEqual(logger.lines.filter((line) => JSON.stringify(line).includes("unknown_correlation_id")), []);
  });
});

describe("version 2 against a scripted daemon", () => {
  async function withFake(answer: Record<string, unknown>, body: (fake: FakeDaemon, link: () => net.Socket, app: App) => Promise<void>,
    declare: (app: App) => void = (app) => app.resource("x://a", {}, () => "a")): Promise<void> {
    let socket: net.Socket | undefined;
    const fake = await FakeDaemon.start((s) => {
      socket = s;
      s.write(registered(answer));
    });
    const app = new App({ name: "Fake", port: fake.port, token: "t", env: {}, logger: capturingLogger(), backoff: { initialMs: 20, capMs: 50 } });
    app.tool<{ text: string }>("echo", {}, async ({ text }) => text);
    declare(app);
    try {
      await app.connect({ timeoutMs: 5000 });
      await body(fake, () => socket!, app);
    } finally {
      await app.close();
      await fake.close();
    }
  }

  test("a tools-only app registers version 1; one with resources or prompts version 2 with them", async () => {
    await withFake({}, async (fake) => {
      const register = fake.received[0]!;
      assert.equal(register.protocolVersion, 1);
      assert.equal(register.resources, undefined);
    }, () => undefined);
    await withFake({ protocolVersion: 2 }, async (fake) => {
      const register = fake.received[0]!;
      assert.equal(register.protocolVersion, 2);
      assert.deepEqual(register.resources, [{ uri: "x://a", name: "x://a" }]);
      assert.deepEqual(register.resourceTemplates, []);
      assert.deepEqual(register.prompts, [{ name: "p", arguments: [{ name: "q", required: true }] }]);
    }, (app) => {
      app.resource("x://a", {}, () => "a");
      app.prompt("p", { arguments: [{ name: "q", required: true }] }, () => "");
    });
  });

  test("a daemon that answers version 1: no v2 message is sent, and a read is refused", async () => {
    await withFake({ protocolVersion: 1 }, async (fake, link, app) => {
      app.resourceUpdated("x://a");
      app.addResource("x://b", {}, () => "b");
      link().write(JSON.stringify({ type: "resourceRead", correlationId: 5, uri: "x://a" }) + "\n");
      const refusal = await fake.waitFor((m) => m.type === "error");
      assert.equal(refusal.code, "unexpected_message");
      assert.equal(refusal.correlationId, 5);
      link().write(JSON.stringify({ type: "ping", id: 1 }) + "\n");
      await fake.waitFor((m) => m.type === "pong");
      assert.deepEqual(fake.received.map((m) => m.type), ["register", "error", "pong"]);
    });
  });

  test("a read past its deadline is answered with an error; an answer over the line limit becomes an error", async () => {
    await withFake({ protocolVersion: 2, maxLineBytes: 2000 }, async (fake, link) => {
      link().write(JSON.stringify({ type: "resourceRead", correlationId: 1, uri: "x://slow", timeoutMs: 100 }) + "\n");
      const late = await fake.waitFor((m) => m.correlationId === 1);
      assert.deepEqual(late, { type: "resourceResponse", correlationId: 1, error: "reading 'x://slow' timed out" });
      link().write(JSON.stringify({ type: "resourceRead", correlationId: 2, uri: "x://big" }) + "\n");
      const big = await fake.waitFor((m) => m.correlationId === 2);
      assert.match(String(big.error), /the resource cannot be sent \(the message is \d+ bytes, over the daemon's limit of 2000 bytes\)/);
      link().write(JSON.stringify({ type: "promptGet", correlationId: 3, name: "nope", arguments: {} }) + "\n");
      assert.deepEqual(await fake.waitFor((m) => m.correlationId === 3),
        { type: "promptResponse", correlationId: 3, error: "this app has no prompt 'nope'" });
      link().write(JSON.stringify({ type: "resourceRead", correlationId: 4, uri: "x://other" }) + "\n");
      assert.deepEqual(await fake.waitFor((m) => m.correlationId === 4),
        { type: "resourceResponse", correlationId: 4, error: "this app has no resource 'x://other'" });
    }, (app) => {
      app.resource("x://slow", {}, (ctx) => delay(10_000, "late", { signal: ctx.signal }));
      app.resource("x://big", {}, () => "x".repeat(5000));
    });
  });
});
