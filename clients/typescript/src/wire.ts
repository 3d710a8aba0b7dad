/**
 * Wire protocol v1 and v2 (protocol.md): message shapes and NDJSON framing, sans-IO.
 *
 * Theory of operation
 * -------------------
 * Like Python's `app_client.wire` (and h11), nothing here touches a socket: bytes go into
 * {@link LineFramer.receiveData}, complete lines come out of {@link LineFramer.nextLine},
 * {@link decodeMessage} turns a line into a message object (or throws
 * {@link RemoteProtocolError} with protocol.md's code), and {@link encodeMessage} turns a
 * message into one line of bytes, newline included, refusing one over the peer's limit with
 * {@link LocalProtocolError}.
 *
 * The framer holds at most `maxLineBytes` (plus one read) while it waits for a newline: a
 * longer line is reported once (`line_too_long`) and the rest of it is skipped without being
 * buffered, so a daemon that sends garbage can neither grow our memory nor end the link.
 * The limit counts the line's bytes without its `\n`. Unknown fields are kept as they came
 * (and ignored by the app), so newer daemons interoperate.
 *
 * Version 2 (protocol.md §11) adds `resourceRead` and `promptGet` from the daemon (decoded
 * here; the session refuses them on a version-1 connection) and `setResources`,
 * `resourceUpdated`, `resourceResponse`, `setPrompts`, `promptResponse` from the app; §12
 * adds `complete` (answered by `completeResponse`) and the app's `log`; §13 the app's `elicit`
 * and the daemon's `elicitResult`.
 */
import { LocalProtocolError, RemoteProtocolError } from "./errors.js";

/** The highest protocol version this client speaks (an app with only tools asks for 1). */
export const PROTOCOL_VERSION = 2;
/** The first version with resources and prompts (protocol.md §11). */
export const RESOURCES_VERSION = 2;
export const DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024;
/** MCP's (RFC 5424's) log levels, least severe first (protocol.md §12). */
export const LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** The most bytes a log message's `data` may take as JSON; the daemon drops larger ones. */
export const MAX_LOG_DATA_BYTES = 64 * 1024;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A tool as it travels in `register` / `addTools`. */
export interface ToolSpec {
  name: string;
  description?: string;
  inputSchema?: JsonObject;
  title?: string;
  annotations?: JsonObject;
  outputSchema?: JsonObject;
  timeoutMs?: number;
  pathGuard?: boolean;
  /** Typical user requests for the daemon's tool search only (agents never see them). */
  exampleRequests?: string[];
}

/** A resource as it travels in `register` / `setResources` (protocol v2). */
export interface ResourceSpec {
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  size?: number;
  annotations?: JsonObject;
}

/** A resource template (RFC 6570 level 1) as it travels in `register` / `setResources` (protocol v2). */
export interface ResourceTemplateSpec {
  uriTemplate: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  annotations?: JsonObject;
}

export interface PromptArgumentSpec {
  name: string;
  title?: string;
  description?: string;
  required?: boolean;
}

/** A prompt as it travels in `register` / `setPrompts` (protocol v2). */
export interface PromptSpec {
  name: string;
  title?: string;
  description?: string;
  arguments?: PromptArgumentSpec[];
}

/** The `result` of a `toolResponse`. */
export interface ToolResult {
  success: boolean;
  data?: Json;
  error?: string | null;
  content?: JsonObject[];
  structuredContent?: JsonObject;
  errorKind?: string;
  retryAfterMs?: number;
}

export interface Registered {
  type: "registered";
  appId: string;
  instanceId: string;
  appLabel: string;
  toolNames: Record<string, string>;
  heartbeatIntervalMs: number;
  protocolVersion: number;
  maxLineBytes: number;
  maxTools: number;
  maxSchemaBytes: number;
}

export interface ToolInvocation {
  type: "toolInvocation";
  correlationId: number;
  tool: string;
  parameters: JsonObject;
  timeoutMs?: number;
  progress: boolean;
}

/** Protocol v2: read one of the app's resources (its own URI); answered by `resourceResponse`. */
export interface ResourceRead {
  type: "resourceRead";
  correlationId: number;
  uri: string;
  timeoutMs?: number;
}

/** Protocol v2: render one prompt with string arguments; answered by `promptResponse`. */
export interface PromptGet {
  type: "promptGet";
  correlationId: number;
  name: string;
  arguments: Record<string, string>;
  timeoutMs?: number;
}

/**
 * Protocol v2 (§12): suggest values for one argument of a prompt or one variable of a template
 * (exactly one of `prompt` / `uriTemplate`); answered by `completeResponse`.
 */
export interface Complete {
  type: "complete";
  correlationId: number;
  argument: string;
  value: string;
  prompt?: string;
  uriTemplate?: string;
  arguments: Record<string, string>;
  timeoutMs?: number;
}

/** Protocol v2 (§13): the answer to one of the app's `elicit`s. */
export interface ElicitResult {
  type: "elicitResult";
  correlationId: number;
  elicitId: number;
  action: string;
  content?: JsonObject;
  errorCode?: string;
  error?: string;
}

/** A decoded message from the daemon (only the fields the app uses are typed). */
export type Incoming =
  | Registered
  | ToolInvocation
  | ResourceRead
  | PromptGet
  | Complete
  | ElicitResult
  | { type: "toolCancel"; correlationId: number; reason?: string }
  | { type: "toolsUpdated"; toolNames: Record<string, string> }
  | { type: "ping"; id: Json }
  | { type: "pong"; id: Json }
  | { type: "error"; code: string; message: string; correlationId?: number; fatal: boolean; retryAfterMs?: number }
  | { type: "other"; kind: string };

/** Message types an app may receive; any other known type gets `unexpected_message`. */
const APP_SIDE_TYPES = new Set([
  "register", "toolResponse", "toolProgress", "addTools", "removeTools", "goodbye",
  "agentConnect", "agentConnected", "admin", "adminResult",
  "setResources", "resourceUpdated", "resourceResponse", "setPrompts", "promptResponse",
  "log", "completeResponse", "elicit",
]);

const utf8 = new TextDecoder("utf-8", { fatal: true });

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isInt(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value);
}

function field<T>(kind: string, obj: Record<string, unknown>, name: string,
                  check: (v: unknown) => v is T, what: string, fallback?: T): T {
  const value = obj[name];
  if (value === undefined && fallback !== undefined) return fallback;
  if (!check(value)) {
    throw new RemoteProtocolError("invalid_message",
      `invalid '${kind}' message: '${name}' must be ${what}`, isInt(obj.correlationId) ? obj.correlationId : undefined);
  }
  return value;
}

const isString = (v: unknown): v is string => typeof v === "string";
const isBool = (v: unknown): v is boolean => typeof v === "boolean";
const isJsonObject = (v: unknown): v is JsonObject => isObject(v);
const isAny = (v: unknown): v is Json => v !== undefined;
const isNameMap = (v: unknown): v is Record<string, string> =>
  isObject(v) && Object.values(v).every((x) => typeof x === "string");

function optionalTimeout(kind: string, value: Record<string, unknown>): { timeoutMs?: number } {
  const timeout = value.timeoutMs;
  if (timeout !== undefined && timeout !== null && !isInt(timeout)) {
    throw new RemoteProtocolError("invalid_message", `invalid '${kind}' message: 'timeoutMs' must be an integer`,
      isInt(value.correlationId) ? value.correlationId : undefined);
  }
  return isInt(timeout) ? { timeoutMs: timeout } : {};
}

/** Decode one line (no newline) into a message. Throws RemoteProtocolError (protocol.md codes). */
export function decodeMessage(line: Uint8Array): Incoming {
  let text: string;
  try {
    text = utf8.decode(line);
  } catch {
    throw new RemoteProtocolError("invalid_utf8", "the line is not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new RemoteProtocolError("invalid_json", `the line is not valid JSON (${(err as Error).message})`);
  }
  if (!isObject(value)) throw new RemoteProtocolError("not_an_object", "a message must be a JSON object");
  const kind = value.type;
  if (typeof kind !== "string") {
    throw new RemoteProtocolError("invalid_message", "a message needs a string 'type'");
  }
  switch (kind) {
    case "registered": {
      return {
        type: "registered",
        appId: field(kind, value, "appId", isString, "a string", ""),
        instanceId: field(kind, value, "instanceId", isString, "a string", ""),
        appLabel: field(kind, value, "appLabel", isString, "a string", ""),
        toolNames: field(kind, value, "toolNames", isNameMap, "an object of strings", {}),
        heartbeatIntervalMs: field(kind, value, "heartbeatIntervalMs", isInt, "an integer", 5000),
        // Left out by a broker from before negotiation, which speaks version 1 (protocol.md §7).
        protocolVersion: field(kind, value, "protocolVersion", isInt, "an integer", 1),
        maxLineBytes: field(kind, value, "maxLineBytes", isInt, "an integer", DEFAULT_MAX_LINE_BYTES),
        maxTools: field(kind, value, "maxTools", isInt, "an integer", 1000),
        maxSchemaBytes: field(kind, value, "maxSchemaBytes", isInt, "an integer", 262144),
      };
    }
    case "toolInvocation": {
      const timeout = value.timeoutMs;
      if (timeout !== undefined && timeout !== null && !isInt(timeout)) {
        throw new RemoteProtocolError("invalid_message", "invalid 'toolInvocation' message: 'timeoutMs' must be an integer",
          isInt(value.correlationId) ? value.correlationId : undefined);
      }
      return {
        type: "toolInvocation",
        correlationId: field(kind, value, "correlationId", isInt, "an integer"),
        tool: field(kind, value, "tool", isString, "a string"),
        parameters: field(kind, value, "parameters", isJsonObject, "an object", {}),
        ...(isInt(timeout) ? { timeoutMs: timeout } : {}),
        progress: field(kind, value, "progress", isBool, "a boolean", false),
      };
    }
    case "resourceRead":
      return {
        type: "resourceRead",
        correlationId: field(kind, value, "correlationId", isInt, "an integer"),
        uri: field(kind, value, "uri", isString, "a string"),
        ...optionalTimeout(kind, value),
      };
    case "promptGet":
      return {
        type: "promptGet",
        correlationId: field(kind, value, "correlationId", isInt, "an integer"),
        name: field(kind, value, "name", isString, "a string"),
        arguments: field(kind, value, "arguments", isNameMap, "an object of strings", {}),
        ...optionalTimeout(kind, value),
      };
    case "complete": {
      const prompt = value.prompt;
      const template = value.uriTemplate;
      if ((typeof prompt === "string") === (typeof template === "string")) {
        throw new RemoteProtocolError("invalid_message", "invalid 'complete' message: it names exactly one of 'prompt' and 'uriTemplate'",
          isInt(value.correlationId) ? value.correlationId : undefined);
      }
      return {
        type: "complete",
        correlationId: field(kind, value, "correlationId", isInt, "an integer"),
        argument: field(kind, value, "argument", isString, "a string"),
        value: field(kind, value, "value", isString, "a string", ""),
        ...(typeof prompt === "string" ? { prompt } : {}),
        ...(typeof template === "string" ? { uriTemplate: template } : {}),
        arguments: field(kind, value, "arguments", isNameMap, "an object of strings", {}),
        ...optionalTimeout(kind, value),
      };
    }
    case "elicitResult": {
      const content = value.content;
      if (content !== undefined && content !== null && !isObject(content)) {
        throw new RemoteProtocolError("invalid_message", "invalid 'elicitResult' message: 'content' must be an object",
          isInt(value.correlationId) ? value.correlationId : undefined);
      }
      const errorCode = value.errorCode;
      const error = value.error;
      return {
        type: "elicitResult",
        correlationId: field(kind, value, "correlationId", isInt, "an integer"),
        elicitId: field(kind, value, "elicitId", isInt, "an integer"),
        action: field(kind, value, "action", isString, "a string", "cancel"),
        ...(isObject(content) ? { content: content as JsonObject } : {}),
        ...(typeof errorCode === "string" ? { errorCode } : {}),
        ...(typeof error === "string" ? { error } : {}),
      };
    }
    case "toolCancel": {
      const reason = typeof value.reason === "string" ? { reason: value.reason } : {};
      return { type: "toolCancel", correlationId: field(kind, value, "correlationId", isInt, "an integer"), ...reason };
    }
    case "toolsUpdated":
      return { type: "toolsUpdated", toolNames: field(kind, value, "toolNames", isNameMap, "an object of strings") };
    case "ping":
    case "pong":
      return { type: kind, id: field(kind, value, "id", isAny, "present", null) };
    case "error": {
      const cid = value.correlationId;
      const retry = value.retryAfterMs;
      return {
        type: "error",
        code: field(kind, value, "code", isString, "a string"),
        message: field(kind, value, "message", isString, "a string", ""),
        ...(isInt(cid) ? { correlationId: cid } : {}),
        fatal: value.fatal === true,
        ...(isInt(retry) ? { retryAfterMs: retry } : {}),
      };
    }
    default:
      if (APP_SIDE_TYPES.has(kind)) return { type: "other", kind };
      throw new RemoteProtocolError("unknown_type", `unknown message type '${kind.slice(0, 64)}'`);
  }
}

/** Encode `message` as one line, newline included; refuse one over `maxLineBytes`. */
export function encodeMessage(message: object, maxLineBytes: number = DEFAULT_MAX_LINE_BYTES): Buffer {
  let text: string;
  try {
    text = JSON.stringify(message);
  } catch (err) {
    throw new LocalProtocolError("invalid_message", `cannot encode the message as JSON: ${(err as Error).message}`);
  }
  const data = Buffer.from(text + "\n", "utf8");
  if (data.length - 1 > maxLineBytes) {
    throw new LocalProtocolError("line_too_long",
      `the message is ${data.length - 1} bytes, over the daemon's limit of ${maxLineBytes} bytes`);
  }
  return data;
}

/**
 * Splits a byte stream into newline-terminated lines of bounded length (see the module doc).
 * `nextLine()` returns a line (without `\n`, a trailing `\r` removed), `null` when more data is
 * needed, or throws RemoteProtocolError(`line_too_long`) once per oversized line.
 */
export class LineFramer {
  maxLineBytes: number;
  private chunks: Buffer[] = [];
  private size = 0;
  private discarding = false;
  /** Bytes at the front already known to hold no newline (so a long line is scanned once). */
  private scanned = 0;

  constructor(maxLineBytes: number = DEFAULT_MAX_LINE_BYTES) {
    this.maxLineBytes = maxLineBytes;
  }

  /** Bytes held while waiting for the end of a line. */
  get buffered(): number {
    return this.size;
  }

  receiveData(data: Uint8Array): void {
    if (data.length === 0) return;
    this.chunks.push(Buffer.from(data.buffer, data.byteOffset, data.length));
    this.size += data.length;
  }

  nextLine(): Buffer | null {
    for (;;) {
      const at = this.findNewline();
      if (this.discarding) {
        if (at < 0) {
          this.chunks = [];
          this.size = 0;
          this.scanned = 0;
          return null;
        }
        this.take(at + 1);
        this.discarding = false;
        continue;
      }
      if (at < 0) {
        if (this.size > this.maxLineBytes) this.startDiscarding(this.size);
        return null;
      }
      if (at > this.maxLineBytes) this.startDiscarding(at);
      let line = this.take(at + 1).subarray(0, at);
      if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, line.length - 1);
      if (line.toString("latin1").trim().length > 0) return line;
    }
  }

  private findNewline(): number {
    let offset = 0;
    for (const chunk of this.chunks) {
      if (offset + chunk.length > this.scanned) {
        const at = chunk.indexOf(0x0a, Math.max(0, this.scanned - offset));
        if (at >= 0) return offset + at;
      }
      offset += chunk.length;
    }
    this.scanned = offset;
    return -1;
  }

  private take(count: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    const head = all.subarray(0, count);
    const rest = all.subarray(count);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.size = rest.length;
    this.scanned = 0;
    return head;
  }

  private startDiscarding(seen: number): never {
    this.discarding = true;
    throw new RemoteProtocolError("line_too_long",
      `a line from the daemon exceeded the limit of ${this.maxLineBytes} bytes (at least ${seen} seen); it was discarded`);
  }
}
