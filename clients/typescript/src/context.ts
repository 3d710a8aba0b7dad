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
 */
import type { CallCancelled, CallTimeout, ConnectionClosed } from "./errors.js";

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
}

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

/** A prompt get's context: the prompt's name. */
export interface PromptContext extends RequestContext {
  readonly prompt: string;
}
