/**
 * The per-call object a handler receives: ids, deadline, cancellation signal and progress.
 *
 * `signal` is aborted when the call ends without its result being wanted: a `toolCancel` from
 * the daemon (reason: {@link CallCancelled}), the call's deadline (reason: {@link CallTimeout}),
 * the connection being lost or the app closing (reason: {@link ConnectionClosed}). Pass it to
 * `fetch`, timers, child processes, ... so the work stops too. JavaScript cannot interrupt a
 * handler: one that ignores the signal runs on, and whatever it returns is discarded.
 *
 * `reportProgress` does nothing once the call is finished or cancelled and never throws when
 * the connection has gone; `progress` should grow from update to update (the daemon drops
 * updates that do not).
 *
 * Protocol v2: `log` (§12) sends a log message tied to this call (only the agent request that
 * made it hears it; never waits; nothing once the call is over). `elicit` (§13) asks the
 * agent's user while the call runs and resolves with the answer, or rejects with an
 * {@link ElicitationError} whose `code` says why the user could not be asked; the call's
 * deadline keeps running meanwhile.
 */
import type { CallCancelled, CallTimeout, ConnectionClosed, ElicitationError } from "./errors.js";
import type { JsonObject } from "./wire.js";

/** The user's answer to `ctx.elicit`. */
export interface Elicitation {
  /** `accept` (submitted; for a URL: agreed to open it), `decline` (said no) or `cancel` (dismissed it). */
  readonly action: "accept" | "decline" | "cancel" | string;
  /** With `accept` in form mode: the values by property name; otherwise empty. */
  readonly content: JsonObject;
}

/** The form (MCP's restricted flat JSON Schema), or `{url}` to send the user to a page. */
export type ElicitRequest = JsonObject | { url: string };

export interface ToolContext {
  /** The daemon's id of this call. */
  readonly correlationId: number;
  /** The tool name as the app registered it. */
  readonly tool: string;
  /** Aborted on cancel, deadline, lost connection or close (see the module doc). */
  readonly signal: AbortSignal;
  /** The deadline as epoch milliseconds (`Date.now()` scale), or `undefined` when the call has none. */
  readonly deadline: number | undefined;
  /** The time the daemon gave the call, in ms. */
  readonly timeoutMs: number | undefined;
  /** The agent asked for progress updates (they are welcome anyway). */
  readonly progressRequested: boolean;
  /** Milliseconds until the deadline (`Infinity` without one). */
  timeRemaining(): number;
  /** Send a `toolProgress` for this call; resolves when it is handed to the socket. */
  reportProgress(progress: number, total?: number, message?: string): Promise<void>;
  /**
   * Protocol v2: a log message about this call, for the agent that made it (if it asked for
   * `level`). Levels, bounds and rate as `app.log`; RangeError for an unknown level. Never
   * waits; does nothing once the call is over.
   */
  log(level: string, data: unknown, logger?: string): void;
  /**
   * Protocol v2: ask the agent's user (`schema`: a form, MCP's flat subset of JSON Schema; or
   * `{url}`: send the user to a page, for anything sensitive). Resolves with the answer; rejects
   * with {@link ElicitationError} (see its codes) when the user could not be asked.
   */
  elicit(message: string, request: ElicitRequest): Promise<Elicitation>;
}

export type { ElicitationError };

/** The reasons `ctx.signal` may be aborted with. */
export type AbortReason = CallCancelled | CallTimeout | ConnectionClosed;

/**
 * What a resource or prompt handler receives (protocol v2): the request's id, deadline and
 * signal. The signal aborts as a tool call's does: the daemon's `toolCancel` for the request
 * ({@link CallCancelled}), its deadline ({@link CallTimeout}), a lost connection or the app
 * closing ({@link ConnectionClosed}); after that nothing is sent for the request.
 */
export interface RequestContext {
  /** The daemon's id of this request (from the same sequence as tool calls'). */
  readonly correlationId: number;
  readonly signal: AbortSignal;
  /** The deadline as epoch milliseconds, or `undefined` when the request has none. */
  readonly deadline: number | undefined;
  readonly timeoutMs: number | undefined;
  /** Milliseconds until the deadline (`Infinity` without one). */
  timeRemaining(): number;
}

/** A read's context: the URI asked for, exactly as the app declared or expanded it. */
export interface ResourceContext extends RequestContext {
  readonly uri: string;
}

/** A completion request's context (protocol v2, §12): the prompt or template and the argument. */
export interface CompleteContext extends RequestContext {
  /** The prompt's name, when the completion is for a prompt's argument. */
  readonly prompt: string | undefined;
  /** The template, when the completion is for a template's variable. */
  readonly uriTemplate: string | undefined;
  readonly argument: string;
}

/** A prompt get's context: the prompt's name. */
export interface PromptContext extends RequestContext {
  readonly prompt: string;
}
