/**
 * Declaring tools: names, schemas (JSON Schema or zod v4) and the checks made before sending.
 *
 * Theory of operation
 * -------------------
 * {@link defineTool} checks a tool the moment it is declared, so a mistake surfaces at start-up
 * (a {@link ToolDefinitionError} thrown by `app.tool()`), not as a daemon refusal later:
 *
 * - the name: 1-128 letters, digits, `_ - . / :` and inner spaces (protocol.md §2);
 * - `inputSchema`: a JSON object whose root has `"type": "object"` (a missing schema means
 *   `{"type": "object"}`), that survives JSON encoding, at most 256 KiB encoded (the daemon's
 *   `maxSchemaBytes`); `outputSchema` likewise when given;
 * - `timeoutMs`: a positive integer;
 * - `exampleRequests`: at most 16 strings of 1-200 characters, not only whitespace (the
 *   daemon refuses a tool that breaks these with `invalid_tool`).
 *
 * A zod v4 schema is recognised by duck typing (it has `_zod` and `safeParse`), never by
 * importing zod: its JSON Schema comes from the schema's own `toJSONSchema()` method when it has
 * one (recent zod 4 releases), else from the `toJSONSchema` function given to
 * `new App({toJSONSchema: z.toJSONSchema})`.
 * Calls of such a tool are parsed with `schema.safeParse`, so the handler receives zod's output
 * (defaults applied, types narrowed); a failed parse answers the call with the issues.
 */
import { ToolDefinitionError } from "./errors.js";
import type { JsonObject, ToolSpec } from "./wire.js";
import type { ToolContext } from "./context.js";

export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.\-/: ]{1,128}$/;
export const APP_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,63}$/;
export const MAX_SCHEMA_BYTES = 256 * 1024;
export const MAX_TOOLS = 1000;
/** The daemon's limits on a tool's `exampleRequests` (protocol.md §2): count, and characters each. */
export const MAX_EXAMPLE_REQUESTS = 16;
export const MAX_EXAMPLE_REQUEST_CHARS = 200;

/** The structural part of a zod v4 schema this package uses (no import of zod). */
export interface ZodLike<Out = unknown> {
  _zod: unknown;
  safeParse(value: unknown): { success: true; data: Out } | { success: false; error: { issues?: unknown[]; message?: string } };
  toJSONSchema?: () => unknown;
}

/**
 * What a handler receives for a zod input schema `S`: zod's output type, i.e. `z.infer<S>`
 * (defaults applied), read from the schema's type without importing zod.
 */
export type ZodOutput<S> = S extends { _zod: { output: infer Out } } ? Out : S extends ZodLike<infer Out> ? Out : never;

/** `z.toJSONSchema`, passed in by apps that use zod schemas. */
export type ToJsonSchema = (schema: never) => unknown;

export type Schema = JsonObject | ZodLike;

/** A tool handler: receives the call's arguments and its context; see results.ts for what to return. */
export type ToolHandler<Args = Record<string, unknown>> = (args: Args, ctx: ToolContext) => unknown;

export interface ToolOptions {
  description?: string;
  title?: string;
  inputSchema?: Schema;
  outputSchema?: Schema;
  /** MCP annotations (`readOnlyHint`, `destructiveHint`, ...). */
  annotations?: JsonObject;
  /** The tool's default deadline in ms (the daemon's default, 30 s, applies otherwise). */
  timeoutMs?: number;
  /** `false` opts the tool out of the daemon's path-traversal check (free-text tools may need it). */
  pathGuard?: boolean;
  /**
   * Typical requests a user would make that this tool serves (`"we just unloaded the truck"`):
   * only the daemon's tool search reads them, so agents find the tool from everyday words.
   * At most 16, each 1-200 characters and not only whitespace.
   */
  exampleRequests?: string[];
}

export interface ToolDefinition {
  readonly name: string;
  readonly spec: ToolSpec;
  readonly handler: ToolHandler<never>;
  /** Present for a zod input schema: parses (validates) the arguments. */
  readonly parse?: ZodLike["safeParse"];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isZodSchema(value: unknown): value is ZodLike {
  return isPlainObject(value) && "_zod" in value && typeof (value as { safeParse?: unknown }).safeParse === "function";
}

export function checkToolName(name: unknown): asserts name is string {
  if (typeof name !== "string" || !TOOL_NAME_PATTERN.test(name) || name !== name.trim()) {
    throw new ToolDefinitionError(`invalid tool name ${JSON.stringify(name)}: use 1-128 letters, digits, '_', '-', '.', '/', ':' and inner spaces`);
  }
}

export function checkAppName(name: unknown): asserts name is string {
  if (typeof name !== "string" || !APP_NAME_PATTERN.test(name) || name.includes("__") || name.toLowerCase() === "toolbridge") {
    throw new ToolDefinitionError(`invalid app name ${JSON.stringify(name)}: 1-64 letters, digits, spaces, '_', '-' or '.', `
      + "starting with a letter or digit, without '__', not 'toolbridge'");
  }
}

function toJsonSchema(tool: string, which: string, schema: Schema, convert: ToJsonSchema | undefined): JsonObject {
  let value: unknown = schema;
  if (isZodSchema(schema)) {
    try {
      if (typeof schema.toJSONSchema === "function") value = schema.toJSONSchema();
      else if (convert !== undefined) value = convert(schema as never);
      else {
        throw new ToolDefinitionError(`${tool}: ${which} is a zod schema; pass \`toJSONSchema: z.toJSONSchema\` to new App() so it can be sent as JSON Schema`);
      }
    } catch (err) {
      if (err instanceof ToolDefinitionError) throw err;
      throw new ToolDefinitionError(`${tool}: ${which} cannot be converted to JSON Schema (${(err as Error).message})`);
    }
  }
  if (!isPlainObject(value)) throw new ToolDefinitionError(`${tool}: ${which} must be a JSON Schema object`);
  let encoded: string;
  try {
    encoded = JSON.stringify(value);
  } catch (err) {
    throw new ToolDefinitionError(`${tool}: ${which} is not JSON (${(err as Error).message})`);
  }
  const copy = JSON.parse(encoded) as JsonObject;
  if (copy.type !== "object") {
    throw new ToolDefinitionError(`${tool}: ${which} must have "type": "object" at its root (tools take named arguments)`);
  }
  const size = Buffer.byteLength(encoded, "utf8");
  if (size > MAX_SCHEMA_BYTES) {
    throw new ToolDefinitionError(`${tool}: ${which} is ${size} bytes encoded, over the limit of ${MAX_SCHEMA_BYTES}`);
  }
  return copy;
}

/** A checked copy of a tool's `exampleRequests` (the daemon's limits, protocol.md §2). */
function checkExampleRequests(tool: string, value: unknown): string[] {
  const fix = `give at most ${MAX_EXAMPLE_REQUESTS} strings of 1-${MAX_EXAMPLE_REQUEST_CHARS} characters, not only whitespace`;
  if (!Array.isArray(value)) throw new ToolDefinitionError(`${tool}: exampleRequests must be an array of strings; ${fix}`);
  if (value.length > MAX_EXAMPLE_REQUESTS) {
    throw new ToolDefinitionError(`${tool}: exampleRequests has ${value.length} entries, over the limit of ${MAX_EXAMPLE_REQUESTS}; keep the most typical ones`);
  }
  value.forEach((item: unknown, i) => {
    if (typeof item !== "string") throw new ToolDefinitionError(`${tool}: exampleRequests[${i}] is not a string; ${fix}`);
    if (item.trim() === "") throw new ToolDefinitionError(`${tool}: exampleRequests[${i}] ${JSON.stringify(item)} is empty or only whitespace; ${fix}`);
    // Counted in code points, as the daemon (Python) counts characters, not UTF-16 units.
    const chars = [...item].length;
    if (chars > MAX_EXAMPLE_REQUEST_CHARS) {
      throw new ToolDefinitionError(`${tool}: exampleRequests[${i}] ${JSON.stringify(`${item.slice(0, 40)}...`)} is ${chars} characters; ${fix}`);
    }
  });
  return [...value] as string[];
}

/** Check a tool and build its wire spec (see the module doc). Throws ToolDefinitionError. */
export function defineTool(name: string, options: ToolOptions, handler: ToolHandler<never>, convert?: ToJsonSchema): ToolDefinition {
  checkToolName(name);
  if (typeof handler !== "function") throw new ToolDefinitionError(`${name}: the handler must be a function`);
  if (typeof options !== "object" || options === null || Array.isArray(options)) throw new ToolDefinitionError(`${name}: options must be an object`);
  const spec: ToolSpec = { name };
  if (options.description !== undefined) {
    if (typeof options.description !== "string") throw new ToolDefinitionError(`${name}: description must be a string`);
    spec.description = options.description;
  }
  if (options.title !== undefined) {
    if (typeof options.title !== "string") throw new ToolDefinitionError(`${name}: title must be a string`);
    spec.title = options.title;
  }
  spec.inputSchema = options.inputSchema === undefined ? { type: "object" } : toJsonSchema(name, "inputSchema", options.inputSchema, convert);
  if (options.outputSchema !== undefined) spec.outputSchema = toJsonSchema(name, "outputSchema", options.outputSchema, convert);
  if (options.annotations !== undefined) {
    if (!isPlainObject(options.annotations)) throw new ToolDefinitionError(`${name}: annotations must be an object`);
    spec.annotations = JSON.parse(JSON.stringify(options.annotations)) as JsonObject;
  }
  if (options.timeoutMs !== undefined) {
    if (!Number.isSafeInteger(options.timeoutMs) || options.timeoutMs <= 0) {
      throw new ToolDefinitionError(`${name}: timeoutMs must be a positive integer (milliseconds)`);
    }
    spec.timeoutMs = options.timeoutMs;
  }
  if (options.pathGuard !== undefined) {
    if (typeof options.pathGuard !== "boolean") throw new ToolDefinitionError(`${name}: pathGuard must be a boolean`);
    if (!options.pathGuard) spec.pathGuard = false;
  }
  if (options.exampleRequests !== undefined) {
    // A copy, so later changes to the caller's array do not change what was checked.
    const examples = checkExampleRequests(name, options.exampleRequests);
    if (examples.length > 0) spec.exampleRequests = examples;   // an empty list is the same as none
  }
  const input = options.inputSchema;
  if (isZodSchema(input)) return { name, spec, handler, parse: input.safeParse.bind(input) };
  return { name, spec, handler };
}
