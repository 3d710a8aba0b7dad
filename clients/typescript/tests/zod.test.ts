/** A real zod v4 schema (a devDependency only; the package never imports zod): JSON Schema out, parsing in. */
import assert from "node:assert/strict";
import type * as net from "node:net";
import { test } from "node:test";
import { z } from "zod";
import { App } from "../src/index.js";
import { FakeDaemon, registered } from "./fake.js";
import { capturingLogger } from "./helpers.js";

test("zod schemas: sent as JSON Schema, arguments parsed (defaults applied), bad ones refused with the issues", async () => {
  let link: net.Socket | undefined;
  const fake = await FakeDaemon.start((socket) => {
    link = socket;
    socket.write(registered());
  });
  const Args = z.object({ text: z.string().min(1), times: z.number().int().default(2) });
  // zod 4.2+ schemas convert themselves (schema.toJSONSchema()); older 4.x need the option.
  const app = new App({ name: "Zod", port: fake.port, token: "t", env: {}, logger: capturingLogger() });
  app.tool<z.output<typeof Args>>("repeat", { inputSchema: Args }, async ({ text, times }) => text.repeat(times));
  const viaOption = new App({ name: "Zod", env: {}, toJSONSchema: z.toJSONSchema });
  viaOption.tool("repeat", { inputSchema: { ...Args, toJSONSchema: undefined } as never }, async () => 1);
  try {
    await app.connect({ timeoutMs: 5000 });
    const register = fake.received[0] as { tools: Array<{ name: string; inputSchema: Record<string, unknown> }> };
    const schema = register.tools[0]!.inputSchema;
    assert.equal(schema.type, "object");
    assert.deepEqual(Object.keys(schema.properties as object).sort(), ["text", "times"]);
    link!.write(JSON.stringify({ type: "toolInvocation", correlationId: 1, tool: "repeat", parameters: { text: "ab" } }) + "\n");
    link!.write(JSON.stringify({ type: "toolInvocation", correlationId: 2, tool: "repeat", parameters: { text: "" } }) + "\n");
    const ok = await fake.waitFor((m) => m.type === "toolResponse" && m.correlationId === 1);
    assert.deepEqual(ok.result, { success: true, data: "abab" });
    const bad = await fake.waitFor((m) => m.type === "toolResponse" && m.correlationId === 2);
    const result = bad.result as { success: boolean; error: string };
    assert.equal(result.success, false);
    assert.match(result.error, /^invalid arguments for repeat: at \$\.text: /);
  } finally {
    await app.close();
    await fake.close();
  }
});
