/**
 * One registered connection: handshake, reader, calls, progress, tool updates, resource reads,
 * prompt gets, goodbye.
 *
 * Theory of operation
 * -------------------
 * A {@link Session} lives for one socket. {@link Session.handshake} sends `register` and waits
 * for `registered` (answering `ping` meanwhile); an `error` instead rejects with
 * {@link RegistrationRejected}. Afterwards the socket's `data` handler is the reader: it feeds
 * the sans-IO {@link LineFramer} (bounded at the negotiated `maxLineBytes`) and acts on each
 * message at once, never waiting for a handler:
 *
 * - `ping` → `pong`, written straight from the reader, so heartbeats flow while handlers run
 *   (as long as no handler blocks the event loop: CPU-heavy work belongs in a worker thread);
 * - `toolInvocation` → a call (below); `toolCancel` → abort that call's signal;
 * - `toolsUpdated` / an `error` without `correlationId` → settle the oldest pending tool update
 *   (`addTools`/`removeTools` carry no id; the daemon answers each in order);
 * - a line that is not a valid message gets a non-fatal `error` reply with the wire's code, and
 *   is reported as a {@link RemoteProtocolError} (the app's `error` event); the link goes on.
 *
 * Version 2 (protocol.md §11): the handshake accepts any version from 1 up to the one the app
 * asked for. `resourceRead` and `promptGet` are requests like calls (same id space, cancelled by
 * `toolCancel`, a deadline timer that aborts their signal and answers an error), but they never
 * take one of the `maxConcurrency` slots, so a read is served while slow tools run (the daemon
 * counts them apart too). On a version-1 connection they are refused (`unexpected_message`)
 * and the app's v2 messages are not sent. A handler's thrown {@link ToolError} message reaches
 * the agent; any other error only its type name, as for tools.
 *
 * Version 2, §12 and §13: `complete` is a request like `resourceRead` (answered by
 * `completeResponse` from the prompt's or template's completion function; empty values for an
 * argument without one). {@link Session.log} sends a `log` at once, never waiting, within the
 * daemon's rate ({@link LogBucket}; the excess is dropped and counted, with a warning in the
 * app's own log at most once a minute, without the data); one tied to a call goes only while
 * that call runs. `ctx.elicit` sends an `elicit` for its call (never for a call that is not
 * running: answered, cancelled, timed out) and waits for the `elicitResult`; when the call ends
 * first, the wait rejects with {@link ElicitationError} `call_not_running`. An `elicitResult`
 * for no question waiting is dropped.
 *
 * Calls: each invocation gets an AbortController and a deadline timer, waits for one of the
 * app's `maxConcurrency` slots, then runs its handler. The slot is held until the handler
 * really settles (JavaScript cannot stop a handler that ignores its signal), so the app never
 * runs more handlers at once than it declared. At the deadline the signal aborts and the call is
 * answered `success: false, errorKind: "timeout"` (the daemon waits a little longer than
 * `timeoutMs` to hear it). After a `toolCancel` the app sends **nothing** for that call: no
 * response, no progress — the daemon ended the call when it sent the cancel.
 *
 * The link ends on end of stream, a socket error, missed heartbeats (nothing at all received
 * for three heartbeat intervals), the daemon's `replaced` error, or {@link Session.goodbye}.
 * Then every running call's signal aborts (no responses are sent) and pending tool updates
 * reject with {@link ConnectionClosed}. Writes go through `socket.write`, which keeps message
 * order; progress waits for the socket to drain when more than {@link PROGRESS_HIGH_WATER}
 * bytes are queued, so a flood of progress cannot grow memory without bound.
 */
import type { Socket } from "node:net";
import { LogBucket, logMessage } from "./applog.js";
import {
  CallCancelled, CallTimeout, ConnectionClosed, ElicitationError, LocalProtocolError, RegistrationRejected,
  RemoteProtocolError, ToolError, ToolUpdateRejected,
} from "./errors.js";
import type {
  CompleteContext, ElicitRequest, Elicitation, PromptContext, RequestContext, ResourceContext, ToolContext,
} from "./context.js";
import {
  findResource, runCompleter, toContents, toPromptAnswer, type CompleteFunction, type PromptDefinition, type ResourceDefinition,
} from "./resources.js";
import { describeError, failure, toToolResult } from "./results.js";
import type { ToolDefinition } from "./tools.js";
import {
  DEFAULT_MAX_LINE_BYTES, LineFramer, RESOURCES_VERSION, decodeMessage, encodeMessage,
  type Complete, type ElicitResult, type Incoming, type JsonObject, type PromptGet, type Registered, type ResourceRead, type ToolInvocation,
  type ToolResult, type ToolSpec,
} from "./wire.js";

/** Missed heartbeat intervals after which a silent link counts as dead. */
export const HEARTBEAT_MISSES = 3;
/** Bytes queued on the socket above which progress waits for it to drain. */
export const PROGRESS_HIGH_WATER = 1024 * 1024;
/** While log messages are being dropped, at most one warning per this many ms. */
export const LOG_DROP_WARNING_MS = 60_000;

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export interface SessionHooks {
  tools: ReadonlyMap<string, ToolDefinition>;
  /** Protocol v2: resources and templates by URI / URI template, prompts by name. */
  resources: ReadonlyMap<string, ResourceDefinition>;
  prompts: ReadonlyMap<string, PromptDefinition>;
  limiter: Limiter;
  log: Logger;
  onNames(names: Record<string, string>): void;
  onProtocolError(err: Error): void;
}

export interface EndResult {
  reason: string;
  replaced: boolean;
}

/** A counting semaphore; `acquire` gives up when `signal` aborts. */
export class Limiter {
  private free: number;
  private readonly waiters: Array<() => void> = [];

  constructor(readonly total: number) {
    this.free = total;
  }

  acquire(signal: AbortSignal): Promise<boolean> {
    if (this.free > 0) {
      this.free -= 1;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const grant = (): void => {
        signal.removeEventListener("abort", onAbort);
        resolve(true);
      };
      const onAbort = (): void => {
        const at = this.waiters.indexOf(grant);
        if (at >= 0) this.waiters.splice(at, 1);
        resolve(false);
      };
      this.waiters.push(grant);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  release(): void {
    const next = this.waiters.shift();
    if (next !== undefined) next();
    else this.free += 1;
  }
}

interface Call {
  readonly invocation: ToolInvocation;
  readonly controller: AbortController;
  /** Settled: answered, cancelled or lost; nothing more goes out for it. */
  done: boolean;
  timer: NodeJS.Timeout | undefined;
}

/** A protocol-v2 request (`resourceRead` / `promptGet`) being answered. */
interface Request {
  readonly correlationId: number;
  readonly controller: AbortController;
  /** Answered, cancelled or lost; nothing more goes out for it. */
  done: boolean;
  timer: NodeJS.Timeout | undefined;
}

type RequestAnswer = { type: "resourceResponse" | "promptResponse" | "completeResponse"; correlationId: number } & JsonObject;

/** An `elicit` sent, waiting for its `elicitResult` (§13). */
interface PendingElicit {
  readonly correlationId: number;
  resolve(answer: Elicitation): void;
  reject(err: ElicitationError): void;
}

interface PendingUpdate {
  resolve(names: Record<string, string>): void;
  reject(err: Error): void;
}

export class Session {
  private readonly framer = new LineFramer(DEFAULT_MAX_LINE_BYTES);
  private peerMaxLineBytes = DEFAULT_MAX_LINE_BYTES;
  private readonly calls = new Map<number, Call>();
  private readonly requests = new Map<number, Request>();
  /** §13: questions waiting for their answers, by elicit id (unique on the connection). */
  private readonly elicits = new Map<number, PendingElicit>();
  private nextElicitId = 1;
  private readonly logBucket = new LogBucket();
  private nextDropWarning = 0;
  private logVersionWarned = false;
  /** The negotiated protocol version (1 until `registered`). */
  private version = 1;
  private askedVersion = 1;
  private readonly pending: PendingUpdate[] = [];
  private phase: "handshake" | "serving" | "ended" = "handshake";
  private handshakeWaiter: { resolve(r: Registered): void; reject(e: Error): void } | undefined;
  private lastReceived = Date.now();
  private watchdog: NodeJS.Timeout | undefined;
  private endReason: string | undefined;
  private replaced = false;
  /** Set by goodbye(): the daemon's answers from now on are not worth a warning. */
  private closing = false;
  private readonly ended: Promise<EndResult>;
  private resolveEnded!: (result: EndResult) => void;

  constructor(private readonly socket: Socket, private readonly hooks: SessionHooks) {
    this.ended = new Promise((resolve) => {
      this.resolveEnded = resolve;
    });
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (err: Error) => this.end(`the connection failed (${err.message})`));
    socket.on("close", () => {
      if (this.phase === "serving" && this.framer.buffered > 0) {
        // A close in the middle of a line: the partial line is dropped, and the app hears of it.
        this.hooks.onProtocolError(new RemoteProtocolError("truncated_line",
          `the daemon closed the connection in the middle of a line (${this.framer.buffered} bytes dropped)`));
      }
      this.end("the daemon closed the connection");
    });
  }

  /** Calls received and not yet answered, cancelled or lost. */
  get activeCalls(): number {
    return this.calls.size;
  }

  /** The protocol version spoken on this connection (from `registered`; 1 before it). */
  get protocolVersion(): number {
    return this.version;
  }

  // --- handshake -------------------------------------------------------------------------

  /**
   * Send `register` (whose `protocolVersion` is `askedVersion`); resolve with `registered`,
   * reject with RegistrationRejected or ConnectionClosed.
   */
  handshake(register: object, askedVersion = 1): Promise<Registered> {
    this.askedVersion = askedVersion;
    return new Promise((resolve, reject) => {
      this.handshakeWaiter = { resolve, reject };
      try {
        this.write(register);
      } catch (err) {
        this.handshakeWaiter = undefined;
        reject(err);
      }
    });
  }

  private settleHandshake(message: Incoming | Error): void {
    const waiter = this.handshakeWaiter;
    if (waiter === undefined) return;
    if (message instanceof Error) {
      this.handshakeWaiter = undefined;
      waiter.reject(message);
      this.end(message.message);
      return;
    }
    if (message.type === "registered") {
      if (message.protocolVersion < 1 || message.protocolVersion > this.askedVersion) {
        // Negotiation (protocol.md §7): the daemon answers min(ours, its highest). Any other
        // answer is a version this client cannot speak, so it closes the connection itself.
        this.handshakeWaiter = undefined;
        waiter.reject(new RegistrationRejected("unsupported_version",
          `the daemon answered protocol version ${message.protocolVersion}; this app asked for ${this.askedVersion}`));
        this.end("unsupported protocol version");
        return;
      }
      this.handshakeWaiter = undefined;
      this.phase = "serving";
      this.version = message.protocolVersion;
      this.peerMaxLineBytes = message.maxLineBytes > 0 ? message.maxLineBytes : DEFAULT_MAX_LINE_BYTES;
      this.framer.maxLineBytes = this.peerMaxLineBytes;
      this.startWatchdog(message.heartbeatIntervalMs);
      waiter.resolve(message);
    } else if (message.type === "error") {
      this.handshakeWaiter = undefined;
      waiter.reject(new RegistrationRejected(message.code, message.message));
      this.end(`registration refused (${message.code})`);
    } else if (message.type === "ping") {
      this.trySend({ type: "pong", id: message.id });
    }
  }

  // --- serving ---------------------------------------------------------------------------

  /** Resolves when the link ends, with why (and whether another registration replaced us). */
  serve(): Promise<EndResult> {
    return this.ended;
  }

  private startWatchdog(intervalMs: number): void {
    if (!(intervalMs > 0)) return;
    const limit = HEARTBEAT_MISSES * intervalMs;
    this.lastReceived = Date.now();
    this.watchdog = setInterval(() => {
      if (Date.now() - this.lastReceived > limit) {
        this.end(`no message from the daemon for ${limit / 1000} s (missed heartbeats)`);
      }
    }, Math.max(50, Math.min(intervalMs, 1000)));
    this.watchdog.unref();
  }

  private onData(chunk: Buffer): void {
    if (this.phase === "ended") return;
    this.lastReceived = Date.now();
    this.framer.receiveData(chunk);
    for (;;) {
      let message: Incoming;
      try {
        const line = this.framer.nextLine();
        if (line === null) return;
        message = decodeMessage(line);
      } catch (err) {
        // Only RemoteProtocolError is expected; anything else is still the peer's bad line, and
        // must never escape into the socket's event handler (that would crash the host app).
        this.onBadLine(err instanceof RemoteProtocolError ? err
          : new RemoteProtocolError("invalid_message", `the line could not be read (${String(err)})`));
        if (this.isEnded()) return;
        continue;
      }
      try {
        this.dispatch(message);
      } catch (err) {
        // Never let a bug or a throwing callback escape into the socket's event handler.
        this.hooks.log.error("toolbridge: message handling failed", { error: String(err) });
      }
      if (this.isEnded()) return;
    }
  }

  /** A method, so TypeScript does not narrow the phase across calls that may end the link. */
  private isEnded(): boolean {
    return this.phase === "ended";
  }

  private onBadLine(err: RemoteProtocolError): void {
    if (this.phase === "handshake") {
      this.settleHandshake(new ConnectionClosed(
        `the peer sent an invalid message before registration (${err.code}: ${err.message}); is it a toolbridge daemon?`));
      return;
    }
    this.hooks.log.warn("toolbridge: invalid message from the daemon", { code: err.code, error: err.message });
    this.hooks.onProtocolError(err);
    this.trySend({ type: "error", code: err.code, message: err.message });
  }

  private dispatch(message: Incoming): void {
    if (this.phase === "handshake") {
      this.settleHandshake(message);
      return;
    }
    switch (message.type) {
      case "ping":
        this.trySend({ type: "pong", id: message.id });
        break;
      case "toolInvocation":
        this.startCall(message);
        break;
      case "resourceRead":
      case "promptGet":
      case "complete":
        if (this.version < RESOURCES_VERSION) {
          this.trySend({ type: "error", code: "unexpected_message", correlationId: message.correlationId,
            message: `'${message.type}' needs protocol version 2; this connection speaks ${this.version}` });
        } else {
          this.startRequest(message);
        }
        break;
      case "elicitResult":
        if (this.version < RESOURCES_VERSION) {
          this.trySend({ type: "error", code: "unexpected_message", correlationId: message.correlationId,
            message: `'elicitResult' needs protocol version 2; this connection speaks ${this.version}` });
        } else {
          this.onElicitResult(message);
        }
        break;
      case "toolCancel":
        if (this.requests.has(message.correlationId)) this.cancelRequest(message.correlationId, message.reason);
        else this.cancelCall(message.correlationId, message.reason);
        break;
      case "toolsUpdated":
        this.pending.shift()?.resolve(message.toolNames);
        this.hooks.onNames(message.toolNames);
        break;
      case "error":
        this.onError(message);
        break;
      case "pong":
      case "registered":
        break;
      case "other":
        this.trySend({ type: "error", code: "unexpected_message", message: `an app does not accept '${message.kind}' messages` });
        break;
    }
  }

  private onError(message: Extract<Incoming, { type: "error" }>): void {
    const fields = { code: message.code, error: message.message, correlationId: message.correlationId };
    if (message.code === "replaced") {
      this.hooks.log.error("toolbridge: another process registered this instance id; not reconnecting", fields);
      this.replaced = true;
      this.end("replaced by another registration of this instance");
    } else if (message.correlationId === undefined && this.pending.length > 0) {
      this.hooks.log.warn("toolbridge: the daemon refused a tool update", fields);
      this.pending.shift()!.reject(new ToolUpdateRejected(message.code, message.message));
    } else if (this.closing) {
      this.hooks.log.debug("toolbridge: the daemon answered while we were closing", fields);
    } else if (message.fatal) {
      this.hooks.log.error("toolbridge: the daemon reported a fatal error and will close the connection", fields);
    } else {
      this.hooks.log.warn("toolbridge: the daemon reported an error", fields);
    }
  }

  // --- writing ---------------------------------------------------------------------------

  /** Encode and write one message; throws ConnectionClosed or LocalProtocolError (over the limit). */
  private write(message: object): void {
    if (this.phase === "ended" || this.socket.destroyed || !this.socket.writable) {
      throw new ConnectionClosed(this.endReason ?? "the connection is closed");
    }
    this.socket.write(encodeMessage(message, this.peerMaxLineBytes));
  }

  private trySend(message: object): boolean {
    try {
      this.write(message);
      return true;
    } catch (err) {
      if (!(err instanceof ConnectionClosed)) this.hooks.log.warn("toolbridge: message not sent", { error: String(err) });
      return false;
    }
  }

  // --- calls -----------------------------------------------------------------------------

  private startCall(invocation: ToolInvocation): void {
    const cid = invocation.correlationId;
    if (this.calls.has(cid) || this.requests.has(cid)) {
      this.hooks.log.warn("toolbridge: duplicate correlation id; invocation ignored", { correlationId: cid });
      this.trySend({ type: "error", code: "duplicate_correlation_id", message: `call ${cid} is already running` });
      return;
    }
    const call: Call = { invocation, controller: new AbortController(), done: false, timer: undefined };
    this.calls.set(cid, call);
    const timeoutMs = invocation.timeoutMs;
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    let started = false;
    if (timeoutMs !== undefined) {
      call.timer = setTimeout(() => {
        if (call.done) return;
        const seconds = timeoutMs / 1000;
        call.controller.abort(new CallTimeout(`${invocation.tool} timed out after ${seconds} s`));
        this.hooks.log.warn("toolbridge: tool call timed out", { tool: invocation.tool, correlationId: cid, started });
        this.respond(call, started
          ? failure(`${invocation.tool} timed out after ${seconds} s`, "timeout")
          : failure(`${invocation.tool} timed out after ${seconds} s without starting: the app was still busy `
            + `with earlier calls (it runs ${this.hooks.limiter.total} at a time)`, "timeout"));
      }, timeoutMs);
    }
    const session = this;
    const ctx: ToolContext = {
      correlationId: cid,
      tool: invocation.tool,
      signal: call.controller.signal,
      deadline,
      timeoutMs,
      progressRequested: invocation.progress,
      timeRemaining: () => (deadline === undefined ? Infinity : deadline - Date.now()),
      reportProgress: (progress, total, message) => session.progress(call, progress, total, message),
      log: (level, data, logger) => session.log(logMessage(level, data, logger, cid)),
      elicit: (message, request) => session.elicit(call, message, request),
    };
    this.runCall(call, ctx, () => {
      started = true;
    }).catch((err: unknown) => {
      // A bug (or a throwing user-supplied parser): fail the call rather than leave it hanging,
      // and never leave an unhandled rejection behind.
      this.hooks.log.error("toolbridge: running a call failed", { tool: invocation.tool, error: String(err) });
      this.respond(call, failure(`${invocation.tool} failed: internal error in the app's toolbridge client`));
    });
  }

  private async runCall(call: Call, ctx: ToolContext, markStarted: () => void): Promise<void> {
    const { tool: name, parameters } = call.invocation;
    const definition = this.hooks.tools.get(name);
    if (definition === undefined) {
      this.respond(call, failure(`unknown tool '${name}'`));
      return;
    }
    let args: unknown = parameters;
    if (definition.parse !== undefined) {
      const parsed = definition.parse(parameters);
      if (!parsed.success) {
        this.respond(call, failure(`invalid arguments for ${name}: ${describeIssues(parsed.error)}`));
        return;
      }
      args = parsed.data;
    }
    if (!(await this.hooks.limiter.acquire(call.controller.signal))) return;
    let outcome: ToolResult;
    try {
      markStarted();
      const value = await (definition.handler as (a: unknown, c: ToolContext) => unknown)(args, ctx);
      if (call.done) return;
      try {
        outcome = toToolResult(value);
      } catch (err) {
        this.hooks.log.error("toolbridge: tool returned a value that cannot be sent", { tool: name, error: String(err) });
        outcome = failure(`${name} failed: it returned a value that is not JSON`);
      }
    } catch (err) {
      if (call.done) return; // cancelled, timed out or lost: the error is the abort's echo
      if (err instanceof ToolError) this.hooks.log.info("toolbridge: tool reported an error", { tool: name });
      else this.hooks.log.error("toolbridge: tool handler threw", { tool: name, error: err instanceof Error ? err.stack ?? err.message : String(err) });
      outcome = failure(describeError(name, err));
    } finally {
      this.hooks.limiter.release();
    }
    this.respond(call, outcome);
  }

  private respond(call: Call, result: ToolResult): void {
    if (call.done) return;
    this.finish(call);
    const cid = call.invocation.correlationId;
    try {
      this.write({ type: "toolResponse", correlationId: cid, result });
    } catch (err) {
      if (err instanceof LocalProtocolError) {
        this.hooks.log.error("toolbridge: tool result cannot be sent", { tool: call.invocation.tool, error: err.message });
        const reason = err.code === "line_too_long" ? "too large" : "not encodable";
        this.trySend({ type: "toolResponse", correlationId: cid,
          result: failure(`${call.invocation.tool} failed: its result is ${reason} (${err.message})`) });
      }
      // ConnectionClosed: the daemon already failed the call.
    }
  }

  private finish(call: Call): void {
    call.done = true;
    if (call.timer !== undefined) clearTimeout(call.timer);
    const cid = call.invocation.correlationId;
    this.calls.delete(cid);
    // Its open questions end with it: a late answer is dropped, and the handler hears why.
    for (const [id, pending] of [...this.elicits]) {
      if (pending.correlationId !== cid) continue;
      this.elicits.delete(id);
      pending.reject(new ElicitationError("call_not_running", `call ${cid} ended before the user answered`));
    }
  }

  private cancelCall(cid: number, reason: string | undefined): void {
    const call = this.calls.get(cid);
    if (call === undefined) {
      this.hooks.log.debug("toolbridge: toolCancel for a call not running", { correlationId: cid });
      return;
    }
    this.hooks.log.info("toolbridge: call cancelled by the daemon", { tool: call.invocation.tool, correlationId: cid, reason });
    this.finish(call);
    call.controller.abort(new CallCancelled(`${call.invocation.tool} was cancelled (${reason ?? "cancelled"})`));
  }

  private async progress(call: Call, progress: number, total?: number, message?: string): Promise<void> {
    if (call.done || this.phase !== "serving") return;
    if (typeof progress !== "number" || !Number.isFinite(progress)) throw new TypeError("progress must be a finite number");
    if (total !== undefined && (typeof total !== "number" || !Number.isFinite(total))) throw new TypeError("total must be a finite number");
    if (this.socket.writableLength > PROGRESS_HIGH_WATER) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.socket.off("drain", done);
          this.socket.off("close", done);
          call.controller.signal.removeEventListener("abort", done);
          resolve();
        };
        this.socket.once("drain", done);
        this.socket.once("close", done);
        call.controller.signal.addEventListener("abort", done, { once: true });
      });
      if (call.done || this.phase !== "serving") return;
    }
    const update: JsonObject = { type: "toolProgress", correlationId: call.invocation.correlationId, progress };
    if (total !== undefined) update.total = total;
    if (message !== undefined) update.message = String(message);
    this.trySend(update);
  }

  // --- resource reads and prompt gets (protocol v2) ----------------------------------------

  private startRequest(message: ResourceRead | PromptGet | Complete): void {
    const cid = message.correlationId;
    if (this.calls.has(cid) || this.requests.has(cid)) {
      this.hooks.log.warn("toolbridge: duplicate correlation id; request ignored", { correlationId: cid });
      this.trySend({ type: "error", code: "duplicate_correlation_id", message: `call ${cid} is already running` });
      return;
    }
    const request: Request = { correlationId: cid, controller: new AbortController(), done: false, timer: undefined };
    this.requests.set(cid, request);
    const what = message.type === "resourceRead" ? `reading '${message.uri}'`
      : message.type === "promptGet" ? `the prompt '${message.name}'` : `completing '${message.argument}'`;
    const kind = message.type === "resourceRead" ? "resourceResponse" : message.type === "promptGet" ? "promptResponse" : "completeResponse";
    const timeoutMs = message.timeoutMs;
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    if (timeoutMs !== undefined) {
      request.timer = setTimeout(() => {
        if (request.done) return;
        request.controller.abort(new CallTimeout(`${what} timed out after ${timeoutMs / 1000} s`));
        this.hooks.log.warn("toolbridge: request timed out", { correlationId: cid, kind: message.type });
        this.answer(request, { type: kind, correlationId: cid, error: `${what} timed out` });
      }, timeoutMs);
    }
    const base: RequestContext = {
      correlationId: cid,
      signal: request.controller.signal,
      deadline,
      timeoutMs,
      timeRemaining: () => (deadline === undefined ? Infinity : deadline - Date.now()),
    };
    const run = message.type === "resourceRead" ? this.runRead(message, request, { ...base, uri: message.uri })
      : message.type === "promptGet" ? this.runPrompt(message, request, { ...base, prompt: message.name })
        : this.runComplete(message, request, {
          ...base, prompt: message.prompt, uriTemplate: message.uriTemplate, argument: message.argument,
        });
    run.catch((err: unknown) => {
      this.hooks.log.error("toolbridge: answering a request failed", { kind: message.type, error: String(err) });
      this.answer(request, { type: kind, correlationId: cid, error: `${what} failed: internal error in the app's toolbridge client` });
    });
  }

  private async runRead(read: ResourceRead, request: Request, ctx: ResourceContext): Promise<void> {
    const { correlationId: cid, uri } = read;
    const found = findResource(this.hooks.resources, uri);
    if (found === undefined) {
      this.answer(request, { type: "resourceResponse", correlationId: cid, error: `this app has no resource '${uri}'` });
      return;
    }
    let answer: RequestAnswer;
    try {
      const value = await found.definition.handler(found.variables, ctx);
      if (request.done) return;
      try {
        answer = { type: "resourceResponse", correlationId: cid, contents: toContents(value, uri, found.definition.mimeType) };
      } catch (err) {
        this.hooks.log.error("toolbridge: a resource handler returned a value that cannot be sent", { error: String(err) });
        answer = { type: "resourceResponse", correlationId: cid, error: `reading '${uri}' failed: it returned a value that cannot be sent` };
      }
    } catch (err) {
      if (request.done) return; // cancelled, timed out or lost: the error is the abort's echo
      this.logHandlerError("resource", err);
      answer = { type: "resourceResponse", correlationId: cid, error: describeError(`reading '${uri}'`, err) };
    }
    this.answer(request, answer);
  }

  private async runPrompt(get: PromptGet, request: Request, ctx: PromptContext): Promise<void> {
    const { correlationId: cid, name } = get;
    const definition = this.hooks.prompts.get(name);
    if (definition === undefined) {
      this.answer(request, { type: "promptResponse", correlationId: cid, error: `this app has no prompt '${name}'` });
      return;
    }
    let answer: RequestAnswer;
    try {
      const value = await definition.handler({ ...get.arguments }, ctx);
      if (request.done) return;
      try {
        const { messages, description } = toPromptAnswer(value, definition.spec.description);
        answer = { type: "promptResponse", correlationId: cid, messages };
        if (description !== undefined) answer.description = description;
      } catch (err) {
        this.hooks.log.error("toolbridge: a prompt handler returned a value that cannot be sent", { prompt: name, error: String(err) });
        answer = { type: "promptResponse", correlationId: cid, error: `the prompt '${name}' failed: it returned a value that cannot be sent` };
      }
    } catch (err) {
      if (request.done) return;
      this.logHandlerError("prompt", err);
      answer = { type: "promptResponse", correlationId: cid, error: describeError(`the prompt '${name}'`, err) };
    }
    this.answer(request, answer);
  }

  private async runComplete(request: Complete, pending: Request, ctx: CompleteContext): Promise<void> {
    const cid = request.correlationId;
    let completers: ReadonlyMap<string, CompleteFunction> | undefined;
    let what: string;
    if (request.prompt !== undefined) {
      completers = this.hooks.prompts.get(request.prompt)?.completers;
      what = `prompt '${request.prompt}'`;
    } else {
      const definition = this.hooks.resources.get(request.uriTemplate ?? "");
      completers = definition?.template !== undefined ? definition.completers : undefined;
      what = `resource template '${request.uriTemplate}'`;
    }
    if (completers === undefined) {
      this.answer(pending, { type: "completeResponse", correlationId: cid, values: [], error: `this app has no ${what}` });
      return;
    }
    const fn = completers.get(request.argument);
    if (fn === undefined) {
      this.answer(pending, { type: "completeResponse", correlationId: cid, values: [] }); // nothing to suggest for it
      return;
    }
    let answer: RequestAnswer;
    try {
      const { values, total, hasMore } = await runCompleter(fn, request.value, request.arguments, ctx);
      if (pending.done) return;
      answer = { type: "completeResponse", correlationId: cid, values, total, hasMore };
    } catch (err) {
      if (pending.done) return;
      this.logHandlerError("completion", err);
      answer = { type: "completeResponse", correlationId: cid, values: [], error: describeError(`completing '${request.argument}'`, err) };
    }
    this.answer(pending, answer);
  }

  private logHandlerError(kind: string, err: unknown): void {
    if (err instanceof ToolError) this.hooks.log.info(`toolbridge: ${kind} handler reported an error`);
    else this.hooks.log.error(`toolbridge: ${kind} handler threw`, { error: err instanceof Error ? err.stack ?? err.message : String(err) });
  }

  /** Send a request's one answer (nothing once it is done); one over the line limit becomes an error answer. */
  private answer(request: Request, answer: RequestAnswer): void {
    if (request.done) return;
    this.finishRequest(request);
    try {
      this.write(answer);
    } catch (err) {
      if (err instanceof LocalProtocolError) {
        this.hooks.log.error("toolbridge: an answer cannot be sent", { kind: answer.type, error: err.message });
        const what = answer.type === "resourceResponse" ? "the resource" : answer.type === "promptResponse" ? "the prompt" : "the suggestions";
        this.trySend({ type: answer.type, correlationId: request.correlationId, error: `${what} cannot be sent (${err.message})` });
      }
    }
  }

  private finishRequest(request: Request): void {
    request.done = true;
    if (request.timer !== undefined) clearTimeout(request.timer);
    this.requests.delete(request.correlationId);
  }

  private cancelRequest(cid: number, reason: string | undefined): void {
    const request = this.requests.get(cid)!;
    this.hooks.log.info("toolbridge: request cancelled by the daemon", { correlationId: cid, reason });
    this.finishRequest(request);
    request.controller.abort(new CallCancelled(`request ${cid} was cancelled (${reason ?? "cancelled"})`));
  }

  private abortRequests(reason: string): void {
    for (const request of [...this.requests.values()]) {
      this.finishRequest(request);
      request.controller.abort(new ConnectionClosed(reason));
    }
  }

  // --- log messages and elicitation (protocol v2, §12 and §13) ------------------------------

  /**
   * Send a `log` (made by `logMessage`) now, never waiting: dropped on a version-1 link (with one
   * warning), when its call is over, or over the daemon's rate (counted; a warning at most once
   * a minute, without the data).
   */
  log(message: JsonObject): void {
    if (this.phase !== "serving") return;
    if (this.version < RESOURCES_VERSION) {
      if (!this.logVersionWarned) {
        this.logVersionWarned = true;
        this.hooks.log.warn("toolbridge: log messages are not sent: this connection speaks protocol 1; create the App with "
          + "`logs: true` (or offer a resource or prompt) to send them");
      }
      return;
    }
    const cid = message.correlationId;
    if (typeof cid === "number" && !this.calls.has(cid)) return; // its call is over
    if (this.logBucket.take()) {
      this.trySend(message);
      return;
    }
    const now = Date.now();
    if (now >= this.nextDropWarning) {
      this.nextDropWarning = now + LOG_DROP_WARNING_MS;
      this.hooks.log.warn("toolbridge: log messages for agents dropped: over the daemon's rate", { droppedTotal: this.logBucket.dropped });
    }
  }

  /** Send an `elicit` for `call` and wait for its `elicitResult` (rejects with ElicitationError). */
  private elicit(call: Call, message: string, request: ElicitRequest): Promise<Elicitation> {
    const cid = call.invocation.correlationId;
    if (typeof message !== "string" || message.length === 0) {
      return Promise.reject(new TypeError("elicit needs a message (what to ask)"));
    }
    const fields = request as Record<string, unknown>;
    // `{url}` without a `type` is URL mode; anything else that is an object is the form's schema.
    const url = typeof fields === "object" && fields !== null && typeof fields.url === "string" && fields.type === undefined
      ? fields.url : undefined;
    if (url === undefined && (typeof fields !== "object" || fields === null || Array.isArray(fields))) {
      return Promise.reject(new TypeError("elicit needs a schema (a form) or {url}"));
    }
    if (this.version < RESOURCES_VERSION || this.phase !== "serving") {
      return Promise.reject(new ElicitationError(this.phase !== "serving" ? "call_not_running" : "elicitation_unsupported",
        this.phase !== "serving" ? "the connection is closed"
          : "this link speaks wire protocol 1, which has no elicitation: create the App with `elicitation: true`"));
    }
    if (call.done || !this.calls.has(cid)) {
      return Promise.reject(new ElicitationError("call_not_running", `call ${cid} is not running`));
    }
    const elicitId = this.nextElicitId++;
    const line: JsonObject = url !== undefined
      ? { type: "elicit", correlationId: cid, elicitId, mode: "url", message, url }
      : { type: "elicit", correlationId: cid, elicitId, mode: "form", message, requestedSchema: request as JsonObject };
    return new Promise<Elicitation>((resolve, reject) => {
      try {
        this.write(line);
      } catch (err) {
        if (err instanceof LocalProtocolError) reject(new ElicitationError("invalid_elicit", err.message));
        else reject(new ElicitationError("call_not_running", err instanceof Error ? err.message : String(err)));
        return;
      }
      this.elicits.set(elicitId, { correlationId: cid, resolve, reject });
    });
  }

  private onElicitResult(result: ElicitResult): void {
    const pending = this.elicits.get(result.elicitId);
    if (pending === undefined || pending.correlationId !== result.correlationId) {
      this.hooks.log.debug("toolbridge: elicitResult for no question waiting", { correlationId: result.correlationId });
      return;
    }
    this.elicits.delete(result.elicitId);
    if (result.errorCode !== undefined) {
      pending.reject(new ElicitationError(result.errorCode, result.error ?? "the user was not asked"));
    } else {
      pending.resolve({ action: result.action, content: { ...(result.content ?? {}) } });
    }
  }

  /**
   * Send a protocol-v2 message that gets no answer (`setResources`, `setPrompts`,
   * `resourceUpdated`). Returns false (nothing sent) when the link is not serving or speaks
   * version 1.
   */
  sendV2(message: JsonObject): boolean {
    if (this.phase !== "serving" || this.version < RESOURCES_VERSION) return false;
    return this.trySend(message);
  }

  // --- tool updates ----------------------------------------------------------------------

  /** Send `addTools` / `removeTools`; resolve with the daemon's new name map. */
  updateTools(message: { type: "addTools"; tools: ToolSpec[] } | { type: "removeTools"; names: string[] }): Promise<Record<string, string>> {
    return new Promise((resolve, reject) => {
      const entry: PendingUpdate = { resolve, reject };
      this.pending.push(entry);
      try {
        this.write(message);
      } catch (err) {
        this.pending.splice(this.pending.indexOf(entry), 1);
        reject(err);
      }
    });
  }

  // --- ending ----------------------------------------------------------------------------

  /** End the link (first reason wins): abort every call, fail pending updates, destroy the socket. */
  end(reason: string): void {
    if (this.phase === "ended") return;
    this.phase = "ended";
    this.endReason = reason;
    if (this.watchdog !== undefined) clearInterval(this.watchdog);
    for (const call of [...this.calls.values()]) {
      this.finish(call);
      call.controller.abort(new ConnectionClosed(reason));
    }
    this.abortRequests(reason);
    for (const entry of this.pending.splice(0)) entry.reject(new ConnectionClosed(reason));
    if (this.handshakeWaiter !== undefined) {
      const waiter = this.handshakeWaiter;
      this.handshakeWaiter = undefined;
      waiter.reject(new ConnectionClosed(reason));
    }
    this.socket.destroy();
    this.resolveEnded({ reason, replaced: this.replaced });
  }

  /**
   * Quit on purpose: abort running calls (no responses), send `goodbye` (unless `sayGoodbye` is
   * false) so the daemon releases this instance's names at once, close our side and wait
   * (bounded) for the daemon to close.
   */
  async goodbye(sayGoodbye = true, waitMs = 2000): Promise<void> {
    if (this.phase === "ended") return;
    this.closing = true;
    for (const call of [...this.calls.values()]) {
      this.finish(call);
      call.controller.abort(new ConnectionClosed("the app is closing"));
    }
    this.abortRequests("the app is closing");
    if (this.phase === "serving" && sayGoodbye) this.trySend({ type: "goodbye" });
    const closed = new Promise<void>((resolve) => {
      if (this.socket.destroyed) resolve();
      else this.socket.once("close", () => resolve());
    });
    this.socket.end();
    const timer = setTimeout(() => this.socket.destroy(), waitMs);
    await closed;
    clearTimeout(timer);
    this.end("the app closed the connection");
  }
}

function describeIssues(error: { issues?: unknown[]; message?: string }): string {
  if (Array.isArray(error.issues) && error.issues.length > 0) {
    return error.issues.slice(0, 5).map((issue) => {
      const record = issue as { path?: unknown[]; message?: string };
      const path = Array.isArray(record.path) && record.path.length > 0 ? `at $.${record.path.join(".")}: ` : "";
      return `${path}${record.message ?? "invalid"}`;
    }).join("; ");
  }
  return error.message ?? "they do not match the input schema";
}
