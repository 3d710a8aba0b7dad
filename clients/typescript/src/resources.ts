/**
 * Resources, resource templates and prompts an app offers (wire protocol v2, protocol.md §11).
 *
 * Theory of operation
 * -------------------
 * {@link defineResource}, {@link defineTemplate} and {@link definePrompt} check a declaration
 * the moment it is made (a {@link ToolDefinitionError} from `app.resource()` & co., not a
 * daemon refusal later) and build its wire spec: a resource's `uri` (1-2048 characters, the
 * app's own URI, any scheme) and `name` (1-256); a template's `uriTemplate` (RFC 6570 level 1:
 * literal text and `{name}` variables, at least one); a prompt's `name` (1-128) and up to 64
 * string arguments.
 *
 * {@link findResource} picks what serves a URI the daemon asks for: a listed URI exactly, else
 * the first template (in declaration order) whose pattern matches it; a variable matches
 * `[^/?#]*` and its value is percent-decoded before the handler sees it (as Python's
 * `app_client.resources`).
 *
 * {@link toContents} turns what a read handler returned into `contents`: a string is one text
 * content, a `Uint8Array`/`Buffer` one blob (base64), an object with a string `text` or a
 * `blob` (base64 string, or bytes: encoded here) is taken as it is (`uri` and `mimeType`
 * filled in when missing), or an array of those.
 * {@link toPromptAnswer} does the same for prompts: a string is one user text message; an
 * array holds strings or MCP messages (`{role, content}`); `{messages, description?}` is the
 * whole answer.
 *
 * Completions (protocol v2, §12): a prompt argument's `complete` and a template's
 * `complete: {variable: ...}` give the values to suggest: a list of strings (those starting
 * with what the user typed are offered, ignoring case) or a function `(value, arguments, ctx)`
 * returning (or resolving to) a list of strings or `{values, total?, hasMore?}`.
 * {@link runCompleter} runs one; at most 100 values go back (`total` and `hasMore` say how many
 * there were). An app with any of them registers `completions: true`.
 */
import { ToolDefinitionError } from "./errors.js";
import type { CompleteContext, PromptContext, ResourceContext } from "./context.js";
import type { Json, JsonObject, PromptArgumentSpec, PromptSpec, ResourceSpec, ResourceTemplateSpec } from "./wire.js";

/** At most this many resources, and as many templates and prompts, per app (the daemon's limit). */
export const MAX_RESOURCES = 1000;
export const MAX_PROMPT_ARGUMENTS = 64;
/** MCP's bound on the values of one completion answer. */
export const MAX_COMPLETION_VALUES = 100;

/** What a completion function returns (or resolves to). */
export type CompletionAnswer = readonly string[] | { values: readonly string[]; total?: number; hasMore?: boolean };
/** A completion function: what the user typed, the arguments already chosen, the request's context. */
export type CompleteFunction = (value: string, args: Record<string, string>, ctx: CompleteContext) => CompletionAnswer | Promise<CompletionAnswer>;
/** A prompt argument's or template variable's completion: fixed options, or a function. */
export type CompleteSpec = readonly string[] | CompleteFunction;

/** Fields a resource content object may carry beside its `text` or `blob` (`uri` defaults to the one read). */
interface ResourceContentFields {
  uri?: string;
  mimeType?: string;
  annotations?: JsonObject;
  _meta?: JsonObject;
}
/** A text resource content: `{text, mimeType?}`. */
export interface TextResourceContent extends ResourceContentFields {
  text: string;
}
/** A binary resource content: `{blob, mimeType?}`, the bytes as a Uint8Array/Buffer or already base64. */
export interface BlobResourceContent extends ResourceContentFields {
  blob: Uint8Array | string;
}
export type ResourceContent = TextResourceContent | BlobResourceContent;
/** What a read handler may return (see the module doc): text, bytes, content objects, or a list of them. */
export type ResourceValue = string | Uint8Array | ResourceContent | ReadonlyArray<string | Uint8Array | ResourceContent>;

/** A prompt message's content: MCP's text, image, audio or embedded resource content. */
export type PromptContent =
  | { type: "text"; text: string; annotations?: JsonObject; _meta?: JsonObject }
  | { type: "image" | "audio"; data: string; mimeType: string; annotations?: JsonObject; _meta?: JsonObject }
  | { type: "resource"; resource: JsonObject; annotations?: JsonObject; _meta?: JsonObject }
  | { type: "resource_link"; uri: string; name: string; [key: string]: Json | undefined };
/** One message of a prompt's answer. */
export interface PromptMessage {
  role: "user" | "assistant";
  content: PromptContent;
}
/** What a prompt handler may return: a user message's text, messages, or `{messages, description?}`. */
export type PromptValue = string | PromptMessage | ReadonlyArray<string | PromptMessage>
  | { messages: ReadonlyArray<string | PromptMessage>; description?: string };

/**
 * The variable names of an RFC 6570 level 1 template, from its literal type:
 * `TemplateVariableNames<"notes://{book}/pages/{name}">` is `"book" | "name"`.
 */
export type TemplateVariableNames<T extends string> =
  T extends `${string}{${infer Name}}${infer Rest}` ? Name | TemplateVariableNames<Rest> : never;
/** A template handler's variables: `{name: string}` for `"notes://pages/{name}"` (any string keys for a non-literal template). */
export type TemplateVariables<T extends string> =
  string extends T ? Record<string, string> : { [K in TemplateVariableNames<T>]: string };

type Awaitable<T> = T | Promise<T>;
export type ResourceHandler = (ctx: ResourceContext) => Awaitable<ResourceValue>;
export type TemplateHandler<Variables = Record<string, string>> = (variables: Variables, ctx: ResourceContext) => Awaitable<ResourceValue>;
export type PromptHandler = (args: Record<string, string>, ctx: PromptContext) => Awaitable<PromptValue>;

export interface ResourceOptions {
  /** The resource's name (1-256 characters); defaults to the handler's name, else the URI. */
  name?: string;
  title?: string;
  description?: string;
  mimeType?: string;
  /** Size in bytes, if known. */
  size?: number;
  /** MCP annotations (`audience`, `priority`, ...), passed to agents as they are. */
  annotations?: JsonObject;
}

export interface TemplateOptions extends Omit<ResourceOptions, "size"> {
  /** Completions of the template's variables (protocol v2, §12), by variable name. */
  complete?: Record<string, CompleteSpec>;
}

export interface PromptArgument {
  name: string;
  title?: string;
  description?: string;
  required?: boolean;
  /** Completion of this argument's value (protocol v2, §12): options, or a function. */
  complete?: CompleteSpec;
}

export interface PromptOptions {
  title?: string;
  description?: string;
  /** The prompt's arguments (their values are strings). */
  arguments?: PromptArgument[];
}

/** A resource or template the app offers, and its handler. */
export interface ResourceDefinition {
  /** The URI, or the URI template: the key under which the app keeps it. */
  readonly key: string;
  readonly spec?: ResourceSpec;
  readonly template?: ResourceTemplateSpec;
  readonly pattern?: RegExp;
  readonly variables?: string[];
  readonly mimeType: string | undefined;
  readonly handler: TemplateHandler;
  /** A template's completion functions by variable (empty for none). */
  readonly completers: ReadonlyMap<string, CompleteFunction>;
}

export interface PromptDefinition {
  readonly name: string;
  readonly spec: PromptSpec;
  readonly handler: PromptHandler;
  /** Completion functions by argument (empty for none). */
  readonly completers: ReadonlyMap<string, CompleteFunction>;
}

/** Check a completion spec and make it a function. Throws ToolDefinitionError. */
export function makeCompleter(owner: string, name: string, spec: unknown): CompleteFunction {
  if (typeof spec === "function") return spec as CompleteFunction;
  if (!Array.isArray(spec) || !spec.every((option) => typeof option === "string")) {
    throw new ToolDefinitionError(`${owner}: complete for ${JSON.stringify(name)} must be a list of strings or a function`);
  }
  const options = [...(spec as string[])];
  return (value) => {
    const typed = value.toLowerCase();
    return options.filter((option) => option.toLowerCase().startsWith(typed));
  };
}

/**
 * Run a completion function: `{values, total, hasMore}`, at most {@link MAX_COMPLETION_VALUES}
 * values. Throws what the function threw, TypeError for an answer that is not strings.
 */
export async function runCompleter(fn: CompleteFunction, value: string, args: Record<string, string>, ctx: CompleteContext):
  Promise<{ values: string[]; total: number; hasMore: boolean }> {
  const answer: unknown = await fn(value, { ...args }, ctx);
  let list: unknown = answer;
  let total: number | undefined;
  let hasMore = false;
  if (isPlainObject(answer)) {
    list = answer.values ?? [];
    if (Number.isSafeInteger(answer.total) && (answer.total as number) >= 0) total = answer.total as number;
    hasMore = answer.hasMore === true;
  }
  if (!Array.isArray(list) || !list.every((item) => typeof item === "string")) {
    throw new TypeError("a completion function returns a list of strings or {values: [...]}");
  }
  const values = list as string[];
  return {
    values: values.slice(0, MAX_COMPLETION_VALUES),
    total: total ?? values.length,
    hasMore: hasMore || values.length > MAX_COMPLETION_VALUES,
  };
}

const EXPRESSION = /\{([A-Za-z0-9_]+)\}/g;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function checkString(what: string, value: unknown, max: number): asserts value is string {
  if (typeof value !== "string" || value.length < 1 || value.length > max) {
    throw new ToolDefinitionError(`${what} must be a string of 1-${max} characters, not ${JSON.stringify(value)?.slice(0, 80)}`);
  }
}

function optionalText(owner: string, field: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw new ToolDefinitionError(`${owner}: ${field} must be a string`);
  return value;
}

function common(owner: string, options: TemplateOptions): { title?: string; description?: string; mimeType?: string; annotations?: JsonObject } {
  if (!isPlainObject(options)) throw new ToolDefinitionError(`${owner}: options must be an object`);
  const out: { title?: string; description?: string; mimeType?: string; annotations?: JsonObject } = {};
  const title = optionalText(owner, "title", options.title);
  if (title !== undefined) out.title = title;
  const description = optionalText(owner, "description", options.description);
  if (description !== undefined) out.description = description;
  const mimeType = optionalText(owner, "mimeType", options.mimeType);
  if (mimeType !== undefined) out.mimeType = mimeType;
  if (options.annotations !== undefined) {
    if (!isPlainObject(options.annotations)) throw new ToolDefinitionError(`${owner}: annotations must be an object`);
    out.annotations = JSON.parse(JSON.stringify(options.annotations)) as JsonObject;
  }
  return out;
}

function nameFor(options: { name?: string }, handler: Function, fallback: string): string {
  return options.name ?? (handler.name ? handler.name : fallback.slice(0, 256));
}

/** Check a resource and build its spec (see the module doc). Throws ToolDefinitionError. */
export function defineResource(uri: string, options: ResourceOptions, handler: ResourceHandler): ResourceDefinition {
  checkString("a resource's uri", uri, 2048);
  if (typeof handler !== "function") throw new ToolDefinitionError(`${uri}: the handler must be a function`);
  const name = nameFor(options ?? {}, handler, uri);
  checkString(`${uri}: name`, name, 256);
  const spec: ResourceSpec = { uri, name, ...common(uri, options ?? {}) };
  if (options?.size !== undefined) {
    if (!Number.isSafeInteger(options.size) || options.size < 0) throw new ToolDefinitionError(`${uri}: size must be a non-negative integer (bytes)`);
    spec.size = options.size;
  }
  return { key: uri, spec, mimeType: spec.mimeType, handler: (_variables, ctx) => handler(ctx), completers: new Map() };
}

/** Check a template (RFC 6570 level 1) and build its spec and pattern. Throws ToolDefinitionError. */
export function defineTemplate(uriTemplate: string, options: TemplateOptions, handler: TemplateHandler): ResourceDefinition {
  checkString("a resource template", uriTemplate, 2048);
  if (typeof handler !== "function") throw new ToolDefinitionError(`${uriTemplate}: the handler must be a function`);
  const variables = [...uriTemplate.matchAll(EXPRESSION)].map((m) => m[1]!);
  if (variables.length === 0) throw new ToolDefinitionError(`the template ${JSON.stringify(uriTemplate)} has no {variable}: declare it with app.resource()`);
  const leftover = uriTemplate.replace(EXPRESSION, "");
  if (leftover.includes("{") || leftover.includes("}")) {
    throw new ToolDefinitionError(`the template ${JSON.stringify(uriTemplate)} uses more than RFC 6570 level 1 ({name} only)`);
  }
  if (new Set(variables).size !== variables.length) throw new ToolDefinitionError(`the template ${JSON.stringify(uriTemplate)} repeats a variable`);
  const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  let source = "";
  let last = 0;
  for (const m of uriTemplate.matchAll(EXPRESSION)) {
    source += escape(uriTemplate.slice(last, m.index)) + "([^/?#]*)";
    last = m.index! + m[0].length;
  }
  source += escape(uriTemplate.slice(last));
  const name = nameFor(options ?? {}, handler, uriTemplate);
  checkString(`${uriTemplate}: name`, name, 256);
  const template: ResourceTemplateSpec = { uriTemplate, name, ...common(uriTemplate, options ?? {}) };
  const completers = new Map<string, CompleteFunction>();
  const complete: unknown = options?.complete;
  if (complete !== undefined) {
    if (!isPlainObject(complete)) throw new ToolDefinitionError(`${uriTemplate}: complete must map variables to completions`);
    for (const [variable, spec] of Object.entries(complete)) {
      if (!variables.includes(variable)) {
        throw new ToolDefinitionError(`${uriTemplate}: complete names ${JSON.stringify(variable)}, which is not one of its variables (${variables.join(", ")})`);
      }
      completers.set(variable, makeCompleter(uriTemplate, variable, spec));
    }
  }
  return { key: uriTemplate, template, pattern: new RegExp(`^${source}$`, "s"), variables, mimeType: template.mimeType, handler, completers };
}

/** Check a prompt and build its spec. Throws ToolDefinitionError. */
export function definePrompt(name: string, options: PromptOptions, handler: PromptHandler): PromptDefinition {
  checkString("a prompt's name", name, 128);
  if (typeof handler !== "function") throw new ToolDefinitionError(`${name}: the handler must be a function`);
  const spec: PromptSpec = { name };
  const { title, description } = common(name, options ?? {});
  if (title !== undefined) spec.title = title;
  if (description !== undefined) spec.description = description;
  const args = options?.arguments ?? [];
  if (!Array.isArray(args) || args.length > MAX_PROMPT_ARGUMENTS) {
    throw new ToolDefinitionError(`${name}: arguments must be an array of at most ${MAX_PROMPT_ARGUMENTS}`);
  }
  const seen = new Set<string>();
  const completers = new Map<string, CompleteFunction>();
  spec.arguments = args.map((arg) => {
    if (!isPlainObject(arg)) throw new ToolDefinitionError(`${name}: each argument must be an object`);
    checkString(`${name}: an argument's name`, arg.name, 128);
    if (seen.has(arg.name)) throw new ToolDefinitionError(`${name}: the argument ${JSON.stringify(arg.name)} is declared twice`);
    seen.add(arg.name);
    const out: PromptArgumentSpec = { name: arg.name };
    const argTitle = optionalText(name, "an argument's title", arg.title);
    if (argTitle !== undefined) out.title = argTitle;
    const argDescription = optionalText(name, "an argument's description", arg.description);
    if (argDescription !== undefined) out.description = argDescription;
    if (arg.required !== undefined) {
      if (typeof arg.required !== "boolean") throw new ToolDefinitionError(`${name}: an argument's required must be a boolean`);
      if (arg.required) out.required = true;
    }
    if (arg.complete !== undefined) completers.set(arg.name, makeCompleter(name, arg.name, arg.complete));
    return out;
  });
  return { name, spec, handler, completers };
}

/** The definition that serves `uri` and the template's variables (percent-decoded), or undefined. */
export function findResource(definitions: ReadonlyMap<string, ResourceDefinition>, uri: string):
  { definition: ResourceDefinition; variables: Record<string, string> } | undefined {
  const exact = definitions.get(uri);
  if (exact?.spec !== undefined) return { definition: exact, variables: {} };
  for (const definition of definitions.values()) {
    if (definition.pattern === undefined) continue;
    const match = definition.pattern.exec(uri);
    if (match === null) continue;
    const variables: Record<string, string> = {};
    definition.variables!.forEach((variable, index) => {
      const raw = match[index + 1] ?? "";
      try {
        variables[variable] = decodeURIComponent(raw);
      } catch {
        variables[variable] = raw; // not valid percent-encoding: the value as it came
      }
    });
    return { definition, variables };
  }
  return undefined;
}

function toJson(value: unknown): Json {
  const encoded = JSON.stringify(value);
  if (encoded === undefined) throw new TypeError(`a ${typeof value} cannot be sent as JSON`);
  return JSON.parse(encoded) as Json;
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** Map a read handler's return value to `contents` (see the module doc). Throws TypeError. */
export function toContents(value: unknown, uri: string, mimeType: string | undefined): JsonObject[] {
  const items = Array.isArray(value) ? value : [value];
  return items.map((item: unknown) => {
    let content: JsonObject;
    if (typeof item === "string") content = { uri, text: item };
    else if (item instanceof Uint8Array) content = { uri, blob: base64(item) };
    else if (isPlainObject(item) && item.blob instanceof Uint8Array) content = { uri, ...(toJson({ ...item, blob: base64(item.blob) }) as JsonObject) };
    else if (isPlainObject(item) && (typeof item.text === "string" || typeof item.blob === "string")) content = { uri, ...(toJson(item) as JsonObject) };
    else {
      throw new TypeError("a resource handler returns a string, a Uint8Array, a content object with 'text' or 'blob' (base64 or a Uint8Array), "
        + `or an array of those; got ${item === null ? "null" : typeof item}`);
    }
    if (mimeType !== undefined && content.mimeType === undefined) content.mimeType = mimeType;
    return content;
  });
}

/** Map a prompt handler's return value to `messages` and `description`. Throws TypeError. */
export function toPromptAnswer(value: unknown, description: string | undefined): { messages: JsonObject[]; description: string | undefined } {
  let items: unknown = value;
  if (isPlainObject(value) && Array.isArray(value.messages)) {
    if (value.description !== undefined) {
      if (typeof value.description !== "string") throw new TypeError("a prompt's description must be a string");
      description = value.description;
    }
    items = value.messages;
  }
  const list = Array.isArray(items) ? items : [items];
  const messages = list.map((item: unknown) => {
    if (typeof item === "string") return { role: "user", content: { type: "text", text: item } } as JsonObject;
    if (isPlainObject(item) && typeof item.role === "string" && isPlainObject(item.content)) return toJson(item) as JsonObject;
    throw new TypeError("a prompt handler returns a string, a message {role, content}, an array of those, "
      + `or {messages: [...], description?}; got ${item === null ? "null" : typeof item}`);
  });
  return { messages, description };
}
