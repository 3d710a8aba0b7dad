/**
 * Type-level tests (issue 30 item 14): this file must compile under `tsc --strict` (the build
 * fails otherwise), and each `// @ts-expect-error` line must be an error (an unused one fails
 * the build too), so wrong uses are proven to be refused. The few runtime checks at the end run
 * under Node's test runner like the other tests.
 *
 * - a tool's handler arguments are `z.infer` of a zod `inputSchema`;
 * - a resource template's handler gets `{name: string}` from the template's literal type;
 * - resource and prompt handlers must return what the package can send.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { z } from "zod";
import {
  App, type PromptValue, type ResourceValue, type TemplateVariableNames, type TemplateVariables, type ZodOutput,
} from "../src/index.js";
import { toContents } from "../src/resources.js";

/** `Equal<A, B>` is `true` only when A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
function expectType<T extends true>(): T | undefined {
  return undefined;
}

const app = new App({ name: "Types", toJSONSchema: z.toJSONSchema });

// --- tools: z.infer of the input schema ------------------------------------------------------
const noteSchema = z.object({ text: z.string(), pinned: z.boolean().default(false), tags: z.array(z.string()).optional() });
expectType<Equal<ZodOutput<typeof noteSchema>, z.infer<typeof noteSchema>>>();
app.tool("note", { inputSchema: noteSchema }, async ({ text, pinned, tags }) => {
  expectType<Equal<typeof text, string>>();
  expectType<Equal<typeof pinned, boolean>>();      // zod's output: the default applied
  expectType<Equal<typeof tags, string[] | undefined>>();
  return text.toUpperCase();
});
app.tool("shout", { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => text.toUpperCase());
// @ts-expect-error: the schema has no `title`
app.tool("wrong", { inputSchema: z.object({ text: z.string() }) }, async ({ title }) => title);
app.tool("count", { inputSchema: z.object({ count: z.number() }) }, async ({ count }) => {
  // @ts-expect-error: `count` is a number, not a string
  const wrong: string = count;
  return wrong;
});
void app.addTool("later", { inputSchema: z.object({ n: z.number() }) }, async ({ n }) => n + 1);
// A JSON Schema keeps `Record<string, unknown>`, or the type the app names.
app.tool("json", { inputSchema: { type: "object", properties: { text: { type: "string" } } } }, async (args) => {
  expectType<Equal<typeof args, Record<string, unknown>>>();
  return null;
});
app.tool<{ text: string }>("named", { inputSchema: { type: "object" } }, async ({ text }) => text.length);

// --- resource templates: variables from the template's literal type -----------------------------
expectType<Equal<TemplateVariableNames<"notes://{book}/pages/{name}">, "book" | "name">>();
expectType<Equal<TemplateVariables<"notes://pages/{name}">, { name: string }>>();
expectType<Equal<TemplateVariables<string>, Record<string, string>>>();
app.resourceTemplate("notes://pages/{name}", {}, async ({ name }) => `# ${name}`);
app.resourceTemplate("notes://{book}/pages/{page}", {}, ({ book, page }) => `${book}: ${page}`);
// @ts-expect-error: the template has no variable `title`
app.resourceTemplate("notes://wrong/{name}", {}, async ({ title }) => String(title));
const dynamic: string = ["files://", "{path}"].join("");
app.resourceTemplate(dynamic, {}, (variables) => Object.keys(variables).join(","));

// --- what resource and prompt handlers may return ------------------------------------------------
app.resource("notes://today", { mimeType: "text/markdown" }, async () => "# Today");
app.resource("notes://logo", { mimeType: "image/png" }, () => new Uint8Array([137, 80, 78, 71]));
app.resource("notes://both", {}, () => [{ text: "a", mimeType: "text/plain" }, { blob: new Uint8Array([1]) }, { blob: "AQ==" }]);
// @ts-expect-error: a number is not a resource's contents
app.resource("notes://count", {}, () => 42);
// @ts-expect-error: a content object needs `text` or `blob`
app.resource("notes://empty", {}, async () => ({ mimeType: "text/plain" }));
app.prompt("review", { arguments: [{ name: "path", required: true }] }, ({ path }) => `Review ${path}.`);
app.prompt("chat", {}, async () => [
  "Hello",
  { role: "assistant", content: { type: "text", text: "Hi" } },
  { role: "user", content: { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" } },
]);
app.prompt("described", {}, () => ({ messages: ["Go"], description: "one message" }));
// @ts-expect-error: a role is "user" or "assistant"
app.prompt("badRole", {}, () => [{ role: "system", content: { type: "text", text: "x" } }]);
// @ts-expect-error: undefined is not a prompt's answer
app.prompt("nothing", {}, () => undefined);
const values: [ResourceValue, PromptValue] = ["text", "text"];
void values;

test("a resource content object's blob may be bytes (sent as base64) or base64 already", () => {
  const contents = toContents([{ blob: new Uint8Array([1, 2, 3]), mimeType: "application/octet-stream" }, { blob: "AQID" }],
    "notes://bytes", undefined);
  assert.deepEqual(contents, [
    { uri: "notes://bytes", blob: "AQID", mimeType: "application/octet-stream" },
    { uri: "notes://bytes", blob: "AQID" },
  ]);
});

test("the typed declarations above are accepted at run time too", () => {
  assert.deepEqual([...app.toolNames].sort(), ["count", "json", "later", "named", "note", "shout", "wrong"]);
  assert.equal(app.resourceUris.length, 9);
  assert.deepEqual(app.promptNames, ["review", "chat", "described", "badRole", "nothing"]);
});
