/**
 * The error tree of `@toolbridge/app` (mirrors Python's `app_client.errors`).
 *
 * Every error this package raises or emits is a {@link ToolbridgeError}, so an app can catch
 * them all at once. Protocol errors say who broke the protocol: {@link LocalProtocolError}
 * means we were about to send something invalid, {@link RemoteProtocolError} means the daemon
 * sent something invalid. Both carry the wire's machine-readable `code` (protocol.md §2).
 *
 * One process may load this package twice: its ES module build (`import`) and its CommonJS
 * build (`require`, e.g. from a CommonJS dependency), each with its own classes. So that
 * `instanceof` still holds across the two (a handler throwing the other copy's
 * {@link ToolError} must still fail the call with its message), every error carries the names
 * of its classes under a `Symbol.for` key that both copies share, and `instanceof` on this
 * package's classes also accepts an error of the other copy's class of the same name. Classes
 * an app derives from these keep ordinary `instanceof`.
 */

/** Shared by every copy of this package in the process (`Symbol.for`), unlike the classes. */
const ERROR_KINDS = Symbol.for("@toolbridge/app.errorKinds");
/** This copy's own error classes: the ones whose `instanceof` recognises the other copy's errors. */
const PACKAGE_CLASSES = new Set<unknown>();

/** Root of every error raised or emitted by this package. */
export class ToolbridgeError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    const kinds: string[] = [];
    for (let cls: unknown = new.target; typeof cls === "function" && cls !== Error; cls = Object.getPrototypeOf(cls)) {
      kinds.push((cls as { name: string }).name);
    }
    Object.defineProperty(this, ERROR_KINDS, { value: kinds, enumerable: false });
  }

  /** `instanceof` that also recognises the other build's errors (see the module doc). */
  static override [Symbol.hasInstance]<T>(this: abstract new (...args: never[]) => T, value: unknown): value is T {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    if (!PACKAGE_CLASSES.has(this) || typeof value !== "object" || value === null) return false;
    const kinds: unknown = (value as { [ERROR_KINDS]?: unknown })[ERROR_KINDS];
    return Array.isArray(kinds) && kinds.includes(this.name);
  }
}

/** A message broke the wire protocol; `code` is one of protocol.md's error codes. */
export class ProtocolError extends ToolbridgeError {
  readonly code: string;
  readonly correlationId: number | undefined;
  constructor(code: string, message: string, correlationId?: number) {
    super(message);
    this.code = code;
    this.correlationId = correlationId;
  }
}

/** We were about to send something the protocol does not allow (e.g. a line over the limit). */
export class LocalProtocolError extends ProtocolError {}

/** The daemon sent something the protocol does not allow (garbage, a line over the limit, ...). */
export class RemoteProtocolError extends ProtocolError {}

/** The connection to the daemon closed (or was never open). */
export class ConnectionClosed extends ToolbridgeError {}

/** No running daemon could be found (no runtime.json or token, or a malformed one). */
export class DaemonNotFound extends ToolbridgeError {}

/** The daemon refused the registration for good (invalid tool, bad app name, ...). */
export class RegistrationRejected extends ToolbridgeError {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * Another process registered this app's `instanceId` and the daemon dropped us. The app stops:
 * reconnecting would only evict the other process in turn (give each process its own id; the
 * default does).
 */
export class InstanceReplaced extends ToolbridgeError {}

/** A tool cannot be declared as given (bad name, bad schema, duplicate, ...). Thrown at once. */
export class ToolDefinitionError extends ToolbridgeError {}

/** The daemon refused an `addTools` / `removeTools` request; `code` says why. */
export class ToolUpdateRejected extends ToolbridgeError {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** `connect({timeoutMs})` ran out before the first registration; `lastError` says what failed. */
export class ConnectTimeout extends ToolbridgeError {}

/** `connect({signal})`: the signal aborted before the first registration; `cause` is its reason. */
export class ConnectAborted extends ToolbridgeError {}

/**
 * Throw this from a tool handler to fail the call with `message` shown to the agent. Any other
 * error fails the call with a generic `"<tool> failed: <ErrorName>"` (its details stay in the
 * app's log), so keep secrets out of a ToolError's message.
 */
export class ToolError extends ToolbridgeError {}

/** The reason a call's `ctx.signal` is aborted with when the daemon cancelled the call. */
export class CallCancelled extends ToolbridgeError {}

/** The reason a call's `ctx.signal` is aborted with when the call's deadline passed. */
export class CallTimeout extends ToolbridgeError {}

/**
 * `ctx.elicit(...)` could not ask the user (protocol.md §13); `code` says why:
 * `elicitation_unsupported` (the agent's client cannot ask, the call did not come from an MCP
 * agent, or the link speaks protocol 1), `elicitation_timeout` (nobody answered in time),
 * `invalid_elicit` (the schema, message or URL is not allowed), `elicitation_pending` (one
 * question at a time per call), `agent_error`, `elicitation_busy`, `call_not_running` (the call
 * was cancelled, timed out or already answered). The call itself goes on: carry on without the
 * answer, or fail it with a {@link ToolError}.
 */
export class ElicitationError extends ToolbridgeError {
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${message} (${code})`);
    this.code = code;
  }
}

for (const cls of [
  ToolbridgeError, ProtocolError, LocalProtocolError, RemoteProtocolError, ConnectionClosed, DaemonNotFound,
  RegistrationRejected, InstanceReplaced, ToolDefinitionError, ToolUpdateRejected, ConnectTimeout, ConnectAborted, ToolError,
  CallCancelled, CallTimeout, ElicitationError,
]) PACKAGE_CLASSES.add(cls);
