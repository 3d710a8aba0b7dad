/**
 * Turning what a handler returns (or throws) into the wire's `result` (as `app_client.results`).
 *
 * A handler may return:
 *
 * - a block made by {@link text} / {@link image}, or a non-empty array of such blocks: sent as
 *   MCP `content`;
 * - a *result object*: an object with a `content` array of blocks (each with a string `type`)
 *   and/or a `structuredContent` object, optionally `data`, and no other keys
 *   (`{content: [...]}`, `{structuredContent: {...}, data: ...}`) — or one made by
 *   {@link result}, which may carry any keys;
 * - anything else: JSON data, sent as `result.data` (`undefined` becomes `null`; a value
 *   JSON cannot encode, such as a BigInt or a cycle, fails the call).
 *
 * Failures: a thrown {@link ToolError} sends its message as it is; any other error sends only
 * `"<tool> failed: <ErrorName>"`, so no stack trace or local value reaches the agent.
 */
import { ToolError } from "./errors.js";
import type { Json, JsonObject, ToolResult } from "./wire.js";

const BLOCK = Symbol.for("@toolbridge/app.contentBlock");
const RESULT = Symbol.for("@toolbridge/app.result");

export type ContentBlock = JsonObject & { readonly type: string };

export interface ResultInit {
  content?: ContentBlock[] | JsonObject[];
  structuredContent?: JsonObject;
  data?: unknown;
}

function mark<T extends object>(value: T, symbol: symbol): T {
  Object.defineProperty(value, symbol, { value: true, enumerable: false });
  return value;
}

/** A text content block: `{type: "text", text}`. */
export function text(value: string): ContentBlock {
  if (typeof value !== "string") throw new TypeError(`text() takes a string, not ${typeof value}`);
  return mark({ type: "text", text: value }, BLOCK);
}

/** An image content block from raw bytes (or a base64 string), PNG by default. */
export function image(data: Uint8Array | string, mimeType = "image/png"): ContentBlock {
  if (!mimeType.startsWith("image/")) throw new TypeError(`image() needs an image/* MIME type, not ${JSON.stringify(mimeType)}`);
  let encoded: string;
  if (typeof data === "string") encoded = data;
  else if (data instanceof Uint8Array) encoded = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64");
  else throw new TypeError("image() takes a Uint8Array/Buffer or a base64 string");
  return mark({ type: "image", data: encoded, mimeType }, BLOCK);
}

/** An explicit result: content blocks, structured content and data together. */
export function result(init: ResultInit): ResultInit {
  return mark({ ...init }, RESULT);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isBlock(value: unknown): boolean {
  return isObject(value) && typeof value.type === "string";
}

const RESULT_KEYS = new Set(["content", "structuredContent", "data"]);

function isResultObject(value: Record<string, unknown>): boolean {
  if ((value as { [RESULT]?: boolean })[RESULT]) return true;
  const keys = Object.keys(value);
  if (keys.length === 0 || !keys.every((k) => RESULT_KEYS.has(k))) return false;
  const contentOk = value.content === undefined || (Array.isArray(value.content) && value.content.every(isBlock));
  const structuredOk = value.structuredContent === undefined || isObject(value.structuredContent);
  return contentOk && structuredOk && (value.content !== undefined || value.structuredContent !== undefined);
}

function toJson(value: unknown): Json {
  if (value === undefined) return null;
  const encoded = JSON.stringify(value);
  if (encoded === undefined) throw new TypeError(`a ${typeof value} cannot be sent as JSON`);
  return JSON.parse(encoded) as Json;
}

/** Map a handler's return value to a successful result (see the module doc). Throws TypeError for non-JSON. */
export function toToolResult(value: unknown): ToolResult {
  if (isObject(value) && (value as { [BLOCK]?: boolean })[BLOCK]) return { success: true, content: [toJson(value) as JsonObject] };
  if (Array.isArray(value) && value.length > 0 && value.every((v) => isObject(v) && (v as { [BLOCK]?: boolean })[BLOCK])) {
    return { success: true, content: toJson(value) as JsonObject[] };
  }
  if (isObject(value) && isResultObject(value)) {
    const out: ToolResult = { success: true };
    if (value.content !== undefined) out.content = toJson(value.content) as JsonObject[];
    if (value.structuredContent !== undefined) out.structuredContent = toJson(value.structuredContent) as JsonObject;
    if (value.data !== undefined) out.data = toJson(value.data);
    return out;
  }
  return { success: true, data: toJson(value) };
}

/** A failed result carrying `message` for the agent, and the failure's kind when known. */
export function failure(message: string, kind?: string): ToolResult {
  return kind === undefined ? { success: false, error: message } : { success: false, error: message, errorKind: kind };
}

/** The safe message sent when a handler threw `err`: a ToolError's own, else only the error's type. */
export function describeError(tool: string, err: unknown): string {
  if (err instanceof ToolError) return err.message;
  const name = err instanceof Error ? err.name || err.constructor.name : typeof err;
  return `${tool} failed: ${name}`;
}
