/**
 * The {@link App} an application embeds: declare tools, connect, and stay connected.
 *
 * Theory of operation
 * -------------------
 * An App holds the tool table (filled by {@link App.tool} before it connects and by
 * {@link App.addTools} / {@link App.removeTools} at any time) and the connection loop, which
 * {@link App.connect} starts and {@link App.close} stops. Each round of the loop:
 *
 * 1. finds the daemon ({@link findDaemon}: options > environment > the home's `runtime.json`
 *    and `token`, re-read every attempt, so a daemon restarted on another port and a rotated
 *    token are followed);
 * 2. opens the stream (its Unix socket first when runtime.json names one; TLS when asked, with
 *    the daemon's certificate pinned) and registers within {@link CONNECT_TIMEOUT_MS};
 * 3. serves the {@link Session} until the link ends;
 * 4. waits a {@link Backoff} delay (100 ms doubling to 5 s, full jitter, reset by each
 *    successful registration) and starts over.
 *
 * Every attempt uses the same `instanceId` (one random UUID per App object, i.e. per process,
 * unless given or set by `TOOLBRIDGE_INSTANCE_ID`), so the daemon treats a reconnect within its
 * grace period as the same instance coming back: same label, same agent-facing names. A clean
 * {@link App.close} sends `goodbye`, so the daemon releases the names at once and a restarted
 * app is not `App_2`.
 *
 * Registration errors: `unauthorized` (state `"unauthorized"`) and unknown codes are retried
 * with backoff (the token is re-read each time); codes in {@link FATAL_REGISTRATION_CODES} (the
 * registration itself is invalid; retrying cannot help) stop the loop with state `"failed"` and
 * a {@link RegistrationRejected}, as does `replaced` on a live link ({@link InstanceReplaced}).
 * `connect()` rejects with that error when it happens before the first registration;
 * afterwards it is emitted as `error`.
 *
 * Resources and prompts (protocol v2, protocol.md §11): {@link App.resource},
 * {@link App.resourceTemplate} and {@link App.prompt} declare them before connecting;
 * {@link App.addResource} & co. change the set at any time (a connected app sends its complete
 * new set at once, `setResources` / `setPrompts`, which the daemon does not answer). The app
 * asks for protocol version 2 only when it offers a resource, template or prompt when it
 * registers: a tools-only app stays a version-1 app (as Python's `app_client`), so a set that
 * appears later on such a connection reaches the daemon at the next registration. Declare one
 * before connecting to change the set live. {@link App.resourceUpdated} tells subscribed
 * agents a resource changed.
 *
 * Completions, log messages and elicitation (protocol v2, §12 and §13): a prompt argument's or
 * template variable's `complete` (options or a function) answers the daemon's `complete`
 * requests (the app then registers `completions: true`); {@link App.log} and `ctx.log` send log
 * messages; `ctx.elicit` asks the agent's user inside a call. As in Python's `app_client`, an
 * app registers version 2 when it offers a resource, template or prompt, or is created with
 * `logs: true` or `elicitation: true` (a tools-only app that logs or asks says so).
 *
 * Events: `state` (new state, last error), `connected` (the `registered` message),
 * `disconnected` (reason), `toolsUpdated` (agent-facing names), `error` (a
 * {@link ToolbridgeError}: garbage from the daemon, a fatal refusal). `error` is emitted only
 * when someone listens (otherwise it goes to the logger), so the library never crashes its host
 * with Node's "unhandled 'error' event". A repeated connection failure is logged once at warn
 * level and then at debug level, so a daemon that stays down does not flood the log.
 */
import { EventEmitter } from "node:events";
import { randomUUID } from "node:crypto";
import { Backoff, type BackoffOptions } from "./backoff.js";
import { findDaemon, type DaemonAddress } from "./discovery.js";
import {
  ConnectionClosed, DaemonNotFound, InstanceReplaced, LocalProtocolError,
  RegistrationRejected, ToolDefinitionError, ToolUpdateRejected, ToolbridgeError,
} from "./errors.js";
import { logMessage } from "./applog.js";
import { abortedError, boundedWait, checkConnectOptions, type ConnectOptions } from "./firstconnect.js";
import { Limiter, Session, type Logger } from "./session.js";
import {
  MAX_TOOLS, checkAppName, defineTool, type ToJsonSchema, type ToolDefinition, type ToolHandler, type ToolOptions,
  type ZodLike, type ZodOutput,
} from "./tools.js";
import { connectDaemon } from "./transport.js";
import {
  MAX_RESOURCES, defineResource, definePrompt, defineTemplate, type PromptDefinition, type PromptHandler, type PromptOptions,
  type ResourceDefinition, type ResourceHandler, type ResourceOptions, type TemplateHandler, type TemplateOptions, type TemplateVariables,
} from "./resources.js";
import { RESOURCES_VERSION, type JsonObject, type Registered } from "./wire.js";

/** Milliseconds allowed for opening the stream plus the register / registered exchange. */
export const CONNECT_TIMEOUT_MS = 10_000;
/**
 * Registration error codes that stop the app (protocol.md §2, "Retrying a registration"): the
 * same `register` would be refused again. Every other code (`unauthorized`, `forbidden`,
 * `register_timeout`, `too_many_connections`, the budgets, codes added later) is retried.
 */
export const FATAL_REGISTRATION_CODES: ReadonlySet<string> = new Set([
  "invalid_app_name", "invalid_register", "invalid_tool", "duplicate_tool", "too_many_tools",
  "unsupported_version", "invalid_message", "invalid_json", "invalid_utf8", "not_an_object",
  "line_too_long", "not_registered",
]);
export const ENV_INSTANCE_ID = "TOOLBRIDGE_INSTANCE_ID";

export type ConnectionState = "disconnected" | "connecting" | "connected" | "reconnecting" | "unauthorized" | "failed";

export interface AppOptions {
  /** The app's name; agents see its tools as `<label>__<tool>`. */
  name: string;
  /** Stable id of this running copy; default: a random UUID per App (per process). */
  instanceId?: string;
  /** Calls run at once (more wait in the daemon's queue). Default 1. */
  maxConcurrency?: number;
  appVersion?: string;
  /** Where the daemon is (see findDaemon): its home directory, or host/port/token directly. */
  home?: string;
  host?: string;
  port?: number;
  token?: string;
  /** Connect over TLS trusting this CA file (also TOOLBRIDGE_TLS_CA). */
  tlsCa?: string;
  /** Reconnect delays (default: 100 ms doubling to 5 s, full jitter). */
  backoff?: Backoff | BackoffOptions;
  /** Where the library logs (default: warnings and errors to console.error). */
  logger?: Partial<Logger>;
  /** `z.toJSONSchema`, for tools declared with zod schemas. */
  toJSONSchema?: ToJsonSchema;
  /**
   * Send `goodbye` on {@link App.close} (default true), so the daemon frees this instance's
   * names at once. `false` suits a program with a stable `instanceId` that restarts at once and
   * wants the grace period to keep its names.
   */
  goodbye?: boolean;
  /** The environment to read TOOLBRIDGE_* from (default process.env). */
  env?: Record<string, string | undefined>;
  /**
   * The app sends log messages to agents ({@link App.log}, `ctx.log`): it then registers with
   * protocol version 2 even when it offers only tools (protocol.md §12).
   */
  logs?: boolean;
  /** The app's tools ask the agent's user (`ctx.elicit`, protocol.md §13): register version 2. */
  elicitation?: boolean;
}

export interface ToolDeclaration extends ToolOptions {
  name: string;
  handler: ToolHandler<never>;
}

export interface AppEvents {
  state: [state: ConnectionState, lastError: string | undefined];
  connected: [registration: Registered];
  disconnected: [reason: string];
  toolsUpdated: [names: Record<string, string>];
  error: [error: ToolbridgeError];
}

const noop = (): void => undefined;
const defaultLogger: Logger = {
  debug: noop,
  info: noop,
  warn: (message, fields) => console.error(`[toolbridge] ${message}`, fields ?? ""),
  error: (message, fields) => console.error(`[toolbridge] ${message}`, fields ?? ""),
};

/** A promise-chain mutex: registration and tool updates never interleave. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  async run<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise((resolve) => {
      release = resolve;
    });
    await previous;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

export class App extends EventEmitter<AppEvents> {
  readonly name: string;
  readonly instanceId: string;
  readonly maxConcurrency: number;
  readonly appVersion: string | undefined;
  private readonly options: AppOptions;
  private readonly logger: Logger;
  private readonly backoff: Backoff;
  private readonly table = new Map<string, ToolDefinition>();
  /** Protocol v2: resources and templates by URI / URI template, prompts by name. */
  private readonly resourceTable = new Map<string, ResourceDefinition>();
  private readonly promptTable = new Map<string, PromptDefinition>();
  /** Bumped at each change of the sets; the registration remembers what it carried. */
  private resourceGeneration = 0;
  private promptGeneration = 0;
  private readonly lock = new Mutex();
  private stateValue: ConnectionState = "disconnected";
  private lastErrorValue: string | undefined;
  private registrationValue: Registered | undefined;
  private names: Record<string, string> = {};
  private session: Session | undefined;
  private loop: Promise<void> | undefined;
  private stop: AbortController | undefined;
  private firstConnect: { resolve(r: Registered): void; reject(e: Error): void } | undefined;

  constructor(options: AppOptions) {
    super();
    checkAppName(options?.name);
    const env = options.env ?? process.env;
    const instanceId = options.instanceId ?? (env[ENV_INSTANCE_ID] || randomUUID());
    if (typeof instanceId !== "string" || instanceId.length < 1 || instanceId.length > 200) {
      throw new ToolDefinitionError("instanceId must be 1-200 characters");
    }
    if (instanceId.startsWith("#")) throw new ToolDefinitionError("instanceId must not start with '#' (reserved for ids the daemon assigns)");
    const concurrency = options.maxConcurrency ?? 1;
    if (!Number.isSafeInteger(concurrency) || concurrency < 1) throw new ToolDefinitionError("maxConcurrency must be an integer of at least 1");
    this.name = options.name;
    this.instanceId = instanceId;
    this.maxConcurrency = concurrency;
    this.appVersion = options.appVersion;
    this.options = options;
    this.logger = { ...defaultLogger, ...(options.logger ?? {}) };
    this.backoff = options.backoff instanceof Backoff ? options.backoff : new Backoff(options.backoff);
  }

  // --- read-only views -------------------------------------------------------------------

  get state(): ConnectionState {
    return this.stateValue;
  }

  /** Why the last attempt failed or the last link ended (undefined while connected). */
  get lastError(): string | undefined {
    return this.lastErrorValue;
  }

  /** The daemon's `registered` message for the current link. */
  get registration(): Registered | undefined {
    return this.registrationValue;
  }

  /** Registered tool name → agent-facing name (empty while not connected). */
  get agentNames(): Readonly<Record<string, string>> {
    return { ...this.names };
  }

  /** The declared tools' names. */
  get toolNames(): string[] {
    return [...this.table.keys()];
  }

  get running(): boolean {
    return this.loop !== undefined;
  }

  // --- declaring tools -------------------------------------------------------------------

  /**
   * Declare a tool before {@link connect} (afterwards use {@link addTools}). Checks it at once:
   * throws {@link ToolDefinitionError} for a bad name or schema, or a duplicate. With a zod
   * object as `inputSchema`, the handler's arguments are typed `z.infer` of it (and parsed by
   * it at each call).
   */
  tool<S extends ZodLike>(name: string, options: ToolOptions & { inputSchema: S }, handler: ToolHandler<ZodOutput<S>>): this;
  /**
   * With a JSON Schema (or none) the arguments are `Record<string, unknown>`; name their type
   * with `app.tool<{text: string}>(...)` or an annotation on the handler's parameter (neither
   * is checked against the schema, zod's or not).
   */
  tool<Args = Record<string, unknown>>(name: string, options: ToolOptions, handler: ToolHandler<Args>): this;
  tool(name: string, options: ToolOptions, handler: ToolHandler<never>): this {
    if (this.running) throw new ToolDefinitionError(`${this.name} is running: use \`await app.addTools([...])\` to add tools now`);
    const definition = defineTool(name, options, handler as ToolHandler<never>, this.options.toJSONSchema);
    this.checkNew([definition]);
    this.table.set(name, definition);
    return this;
  }

  private checkNew(definitions: ToolDefinition[]): void {
    const seen = new Set<string>();
    for (const { name } of definitions) {
      if (this.table.has(name) || seen.has(name)) throw new ToolDefinitionError(`${this.name} already has a tool named '${name}'`);
      seen.add(name);
    }
    const limit = this.registrationValue?.maxTools ?? MAX_TOOLS;
    if (this.table.size + definitions.length > limit) {
      throw new ToolDefinitionError(`${this.name} would have ${this.table.size + definitions.length} tools; the limit is ${limit}`);
    }
  }

  /**
   * Add tools at runtime; when connected, resolves once the daemon confirmed them (with the new
   * agent-facing names), else at once (the next registration carries them). Rejects with
   * ToolDefinitionError (nothing sent) or ToolUpdateRejected (the tools are not kept).
   */
  async addTools(tools: ToolDeclaration[]): Promise<Record<string, string>> {
    const definitions = tools.map(({ name, handler, ...options }) => defineTool(name, options, handler, this.options.toJSONSchema));
    return this.lock.run(async () => {
      this.checkNew(definitions);
      for (const definition of definitions) this.table.set(definition.name, definition);
      const session = this.session;
      if (session === undefined) return this.agentNames;
      try {
        return await session.updateTools({ type: "addTools", tools: definitions.map((d) => d.spec) });
      } catch (err) {
        if (err instanceof ConnectionClosed) return this.agentNames;
        for (const definition of definitions) this.table.delete(definition.name);
        if (err instanceof LocalProtocolError) throw new ToolUpdateRejected(err.code, err.message);
        throw err;
      }
    });
  }

  /** Add one tool at runtime (see {@link addTools}). */
  addTool<S extends ZodLike>(name: string, options: ToolOptions & { inputSchema: S }, handler: ToolHandler<ZodOutput<S>>): Promise<Record<string, string>>;
  addTool<Args = Record<string, unknown>>(name: string, options: ToolOptions, handler: ToolHandler<Args>): Promise<Record<string, string>>;
  addTool(name: string, options: ToolOptions, handler: ToolHandler<never>): Promise<Record<string, string>> {
    return this.addTools([{ ...options, name, handler }]);
  }

  /**
   * Withdraw tools; when connected, resolves once the daemon confirmed. Rejects with
   * ToolDefinitionError for a name the app does not have, ToolUpdateRejected if the daemon
   * refused (the tools are then kept).
   */
  async removeTools(names: string[]): Promise<Record<string, string>> {
    return this.lock.run(async () => {
      for (const name of names) {
        if (!this.table.has(name)) throw new ToolDefinitionError(`${this.name} has no tool named '${name}'`);
      }
      const removed = names.map((name) => this.table.get(name)!);
      for (const name of names) this.table.delete(name);
      const session = this.session;
      if (session === undefined) return this.agentNames;
      try {
        return await session.updateTools({ type: "removeTools", names });
      } catch (err) {
        if (err instanceof ConnectionClosed) return this.agentNames;
        for (const definition of removed) this.table.set(definition.name, definition);
        throw err;
      }
    });
  }

  removeTool(name: string): Promise<Record<string, string>> {
    return this.removeTools([name]);
  }

  // --- resources and prompts (protocol v2) ------------------------------------------------

  /** URIs and URI templates of the resources offered. */
  get resourceUris(): string[] {
    return [...this.resourceTable.keys()];
  }

  /** Names of the prompts offered. */
  get promptNames(): string[] {
    return [...this.promptTable.keys()];
  }

  /**
   * Declare a resource before {@link connect} (afterwards use {@link addResource}). The handler
   * gets a {@link ResourceContext} and returns a string (text), a Uint8Array (a blob), a content
   * object (`{text}` or `{blob}`, base64) or an array of those. Agents see it as
   * `toolbridge://<label>/<uri>`. Throws {@link ToolDefinitionError} for a bad declaration.
   */
  resource(uri: string, options: ResourceOptions, handler: ResourceHandler): this {
    this.notRunning("resources", "addResource");
    this.addResource(uri, options, handler);
    return this;
  }

  /**
   * Declare a family of resources (RFC 6570 level 1, `notes://pages/{name}`) before
   * {@link connect}; the handler gets the variables (percent-decoded strings; typed from the
   * template's literal: `{name: string}` for `"notes://pages/{name}"`) and the context.
   */
  resourceTemplate<T extends string>(uriTemplate: T, options: TemplateOptions, handler: TemplateHandler<TemplateVariables<T>>): this {
    this.notRunning("resource templates", "addResourceTemplate");
    this.addResourceTemplate(uriTemplate, options, handler);
    return this;
  }

  /**
   * Declare a prompt before {@link connect}. The handler gets the arguments (strings; the
   * daemon has checked that the required ones are there and no others) and returns a string
   * (one user message), an array of strings or MCP messages (`{role, content}` with text,
   * image, audio or embedded resource content), or `{messages, description}`. Agents see it as
   * `<label>__<name>`.
   */
  prompt(name: string, options: PromptOptions, handler: PromptHandler): this {
    this.notRunning("prompts", "addPrompt");
    this.addPrompt(name, options, handler);
    return this;
  }

  private notRunning(what: string, instead: string): void {
    if (this.running) throw new ToolDefinitionError(`${this.name} is running: use \`app.${instead}(...)\` to offer ${what} now`);
  }

  /** Offer a resource at any time (see {@link resource}); a connected app sends its new set at once. */
  addResource(uri: string, options: ResourceOptions, handler: ResourceHandler): void {
    this.putResource(defineResource(uri, options, handler));
  }

  /** Offer a resource template at any time (see {@link resourceTemplate}). */
  addResourceTemplate<T extends string>(uriTemplate: T, options: TemplateOptions, handler: TemplateHandler<TemplateVariables<T>>): void {
    this.putResource(defineTemplate(uriTemplate, options, handler as TemplateHandler));
  }

  private putResource(definition: ResourceDefinition): void {
    if (this.resourceTable.has(definition.key)) throw new ToolDefinitionError(`${this.name} already offers ${JSON.stringify(definition.key)}`);
    const kind = definition.spec !== undefined ? "spec" : "template";
    const count = [...this.resourceTable.values()].filter((d) => (d.spec !== undefined ? "spec" : "template") === kind).length;
    if (count >= MAX_RESOURCES) throw new ToolDefinitionError(`${this.name} would offer more than ${MAX_RESOURCES} resources (or templates)`);
    this.resourceTable.set(definition.key, definition);
    this.publishResources();
  }

  /** Stop offering the resource or template `uri`; throws ToolDefinitionError if it is not offered. */
  removeResource(uri: string): void {
    if (!this.resourceTable.delete(uri)) throw new ToolDefinitionError(`${this.name} offers no resource ${JSON.stringify(uri)}`);
    this.publishResources();
  }

  /** Offer a prompt at any time (see {@link prompt}); a connected app sends its new set at once. */
  addPrompt(name: string, options: PromptOptions, handler: PromptHandler): void {
    const definition = definePrompt(name, options, handler);
    if (this.promptTable.has(name)) throw new ToolDefinitionError(`${this.name} already has a prompt named ${JSON.stringify(name)}`);
    if (this.promptTable.size >= MAX_RESOURCES) throw new ToolDefinitionError(`${this.name} would offer more than ${MAX_RESOURCES} prompts`);
    this.promptTable.set(name, definition);
    this.publishPrompts();
  }

  /** Stop offering the prompt `name`; throws ToolDefinitionError if it is not offered. */
  removePrompt(name: string): void {
    if (!this.promptTable.delete(name)) throw new ToolDefinitionError(`${this.name} has no prompt named ${JSON.stringify(name)}`);
    this.publishPrompts();
  }

  /**
   * Send a log message to the agents that asked for `level` or a less severe one (protocol.md
   * §12). `level` is one of MCP's: `debug`, `info`, `notice`, `warning`, `error`, `critical`,
   * `alert`, `emergency` (RangeError otherwise); `data` any JSON value (at most 64 KiB as JSON;
   * longer is cut); `logger` names the part of the app it comes from (agents see
   * `<label>.<logger>`). Never waits; dropped while not connected or over the daemon's rate
   * (100 at once, then 20 per second). Needs `logs: true` in an app that offers only tools.
   * Inside a tool, `ctx.log` reaches only the agent that made the call. Never put secrets in it.
   */
  log(level: string, data: unknown, logger?: string): void {
    const message = logMessage(level, data, logger);
    this.session?.log(message);
  }

  /**
   * Tell subscribed agents that the resource `uri` (this app's own URI, listed or matching a
   * template) changed. Never throws and never waits; dropped when not connected, or when the
   * connection speaks protocol version 1.
   */
  resourceUpdated(uri: string): void {
    if (typeof uri !== "string" || uri.length === 0) throw new TypeError("resourceUpdated() takes the resource's URI");
    this.session?.sendV2({ type: "resourceUpdated", uri });
  }

  private hasCompleters(): boolean {
    return [...this.resourceTable.values()].some((d) => d.completers.size > 0)
      || [...this.promptTable.values()].some((d) => d.completers.size > 0);
  }

  private resourceSets(): { resources: JsonObject[]; resourceTemplates: JsonObject[] } {
    const definitions = [...this.resourceTable.values()];
    return {
      resources: definitions.flatMap((d) => (d.spec !== undefined ? [d.spec as unknown as JsonObject] : [])),
      resourceTemplates: definitions.flatMap((d) => (d.template !== undefined ? [d.template as unknown as JsonObject] : [])),
    };
  }

  private promptSet(): JsonObject[] {
    return [...this.promptTable.values()].map((d) => d.spec as unknown as JsonObject);
  }

  private publishResources(): void {
    this.resourceGeneration += 1;
    const session = this.session;
    if (session === undefined) return;
    if (!session.sendV2({ type: "setResources", ...this.resourceSets() })) this.noteV1("resources");
  }

  private publishPrompts(): void {
    this.promptGeneration += 1;
    const session = this.session;
    if (session === undefined) return;
    if (!session.sendV2({ type: "setPrompts", prompts: this.promptSet() })) this.noteV1("prompts");
  }

  private noteV1(what: string): void {
    if (this.session?.protocolVersion === 1) {
      this.logger.info(`toolbridge: this connection speaks protocol version 1, so the new ${what} reach the daemon when the app next registers`
        + " (declare one before connecting to change them live)");
    }
  }

  // --- running ---------------------------------------------------------------------------

  /**
   * Start the connection loop; resolves with the `registered` message once registered.
   *
   * With no daemon (none running, or not yet started), the default is to keep trying, with
   * backoff, until one comes: right for a desktop app that may start before the daemon. The
   * app's `state` is `"connecting"` meanwhile and {@link lastError} says why (the first failure
   * is logged at warn level). {@link ConnectOptions} bound that wait: after `timeoutMs`, or
   * when `signal` aborts, the app stops (as {@link close}) and this rejects with
   * {@link ConnectTimeout} or {@link ConnectAborted}, whose message carries the last failure.
   * Rejects with RegistrationRejected for a refusal retrying cannot fix, with
   * ConnectionClosed when {@link close} is called first. Once registered, neither option has
   * any effect: the app keeps reconnecting until {@link close}.
   */
  connect(options: ConnectOptions = {}): Promise<Registered> {
    if (this.running) return Promise.reject(new ToolbridgeError(`${this.name} is already running`));
    const invalid = checkConnectOptions(options);
    if (invalid !== undefined) return Promise.reject(invalid);
    if (options.signal?.aborted) return Promise.reject(abortedError(this.name, options.signal, this.lastErrorValue));
    const first = new Promise<Registered>((resolve, reject) => {
      this.firstConnect = { resolve, reject };
    });
    const stop = new AbortController();
    this.stop = stop;
    this.backoff.reset();
    this.lastErrorValue = undefined;
    this.setState("connecting");
    this.loop = this.runLoop(stop.signal).finally(() => {
      this.loop = undefined;
    });
    return boundedWait(first, options, this.name, () => this.lastErrorValue, () => this.close());
  }

  /** Resolves when the app is registered (at once if it is). */
  waitConnected(): Promise<Registered> {
    if (this.stateValue === "connected" && this.registrationValue !== undefined) return Promise.resolve(this.registrationValue);
    return new Promise((resolve) => this.once("connected", resolve));
  }

  /**
   * Stop: abort running calls (their signals fire; no responses), send `goodbye` so the daemon
   * releases this instance's names at once, close the connection and end the loop. Idempotent.
   */
  async close(): Promise<void> {
    const loop = this.loop;
    if (loop === undefined) return;
    this.stop?.abort();
    await this.session?.goodbye(this.options.goodbye ?? true);
    await loop;
  }

  private async runLoop(stop: AbortSignal): Promise<void> {
    const limiter = new Limiter(this.maxConcurrency);
    try {
      while (!stop.aborted) {
        await this.attempt(limiter, stop);
        if (stop.aborted) break;
        await sleep(this.backoff.nextDelay(), stop);
      }
      this.firstConnect?.reject(new ConnectionClosed(`${this.name} was closed before it registered`));
      this.setState("disconnected");
    } catch (err) {
      const error = err instanceof ToolbridgeError ? err : new ToolbridgeError(String(err), { cause: err });
      this.lastErrorValue = error.message;
      this.setState("failed");
      if (this.firstConnect !== undefined) this.firstConnect.reject(error);
      else this.emitError(error);
    } finally {
      this.firstConnect = undefined;
    }
  }

  /** One connection: returns when it failed or ended; throws only what stops the app. */
  private async attempt(limiter: Limiter, stop: AbortSignal): Promise<void> {
    let address: DaemonAddress;
    try {
      const discovery: Parameters<typeof findDaemon>[0] = { env: this.options.env ?? process.env };
      if (this.options.home !== undefined) discovery.home = this.options.home;
      if (this.options.host !== undefined) discovery.host = this.options.host;
      if (this.options.port !== undefined) discovery.port = this.options.port;
      if (this.options.token !== undefined) discovery.token = this.options.token;
      if (this.options.tlsCa !== undefined) discovery.tlsCa = this.options.tlsCa;
      address = findDaemon(discovery);
    } catch (err) {
      if (!(err instanceof DaemonNotFound)) throw err;
      this.noteFailure(err.message);
      return;
    }
    const attemptSignal = AbortSignal.any([stop, AbortSignal.timeout(CONNECT_TIMEOUT_MS)]);
    let session: Session | undefined;
    let registered: Registered;
    let via: string;
    try {
      const opened = await connectDaemon(address, attemptSignal);
      via = opened.via;
      const current = new Session(opened.socket, {
        tools: this.table,
        resources: this.resourceTable,
        prompts: this.promptTable,
        limiter,
        log: this.logger,
        onNames: (names) => {
          this.names = { ...names };
          this.safeEmit("toolsUpdated", { ...names });
        },
        onProtocolError: (err) => this.emitError(err as ToolbridgeError),
      });
      session = current;
      const onAbort = (): void => current.end(stop.aborted ? "the app is closing" : `no answer within ${CONNECT_TIMEOUT_MS / 1000} s`);
      attemptSignal.addEventListener("abort", onAbort, { once: true });
      try {
        registered = await this.lock.run(async () => {
          const register = this.registerMessage(address.token);
          const asked = register.protocolVersion as number;
          const sent = { resources: this.resourceGeneration, prompts: this.promptGeneration };
          const answer = await current.handshake(register, asked);
          this.session = current;
          // A set changed while the registration was on its way: send the new one now.
          if (sent.resources !== this.resourceGeneration) current.sendV2({ type: "setResources", ...this.resourceSets() });
          if (sent.prompts !== this.promptGeneration) current.sendV2({ type: "setPrompts", prompts: this.promptSet() });
          if (answer.protocolVersion < asked) {
            this.logger.warn("toolbridge: the daemon speaks protocol version 1, so this app's resources, prompts, log messages "
              + "and questions to the user are not offered (update toolbridge)");
          }
          return answer;
        });
      } finally {
        attemptSignal.removeEventListener("abort", onAbort);
      }
    } catch (err) {
      session?.end("registration failed");
      if (stop.aborted) return;
      if (err instanceof RegistrationRejected) {
        if (FATAL_REGISTRATION_CODES.has(err.code)) {
          this.logger.error("toolbridge: the daemon refused the registration", { code: err.code, error: err.message });
          throw err;
        }
        if (err.code === "unauthorized") {
          this.noteFailure(`toolbridge refused the token (${err.message}); retrying with the current token`, "unauthorized");
        } else {
          this.noteFailure(`toolbridge refused the registration (${err.code}: ${err.message})`);
        }
        return;
      }
      if (err instanceof ConnectionClosed) {
        this.noteFailure(`registration failed: ${err.message}`);
        return;
      }
      const where = `${address.host}:${address.port}`;
      const hint = address.runtimeFile !== undefined
        ? ` (the port came from ${address.runtimeFile}: the daemon may have exited; start it with \`toolbridge serve\`)` : "";
      const detail = (err as { name?: string }).name === "TimeoutError" ? `did not answer within ${CONNECT_TIMEOUT_MS / 1000} s` : (err as Error).message;
      this.noteFailure(`cannot connect to toolbridge at ${where}: ${detail}${hint}`);
      return;
    }
    this.registrationValue = registered;
    this.names = { ...registered.toolNames };
    this.lastErrorValue = undefined;
    this.backoff.reset();
    this.logger.info("toolbridge: connected", { via, label: registered.appLabel, tools: Object.keys(registered.toolNames).length });
    this.setState("connected");
    if (this.firstConnect !== undefined) {
      this.firstConnect.resolve(registered);
      this.firstConnect = undefined;
    }
    this.safeEmit("connected", registered);
    const ended = await session.serve();
    this.session = undefined;
    this.registrationValue = undefined;
    this.names = {};
    if (ended.replaced) throw new InstanceReplaced("another process registered with this app's instance id; not reconnecting");
    this.lastErrorValue = ended.reason;
    if (!stop.aborted) {
      this.logger.warn("toolbridge: disconnected; reconnecting", { reason: ended.reason });
      this.setState("reconnecting");
    }
    this.safeEmit("disconnected", ended.reason);
  }

  private registerMessage(token: string): Record<string, unknown> {
    // Version 2 only when it is needed (protocol.md §11-13): a tools-only app stays a v1 app
    // unless it says it logs or asks the user.
    const v2 = this.resourceTable.size > 0 || this.promptTable.size > 0 || this.options.logs === true
      || this.options.elicitation === true;
    const message: Record<string, unknown> = {
      type: "register",
      appName: this.name,
      token,
      tools: [...this.table.values()].map((d) => d.spec),
      instanceId: this.instanceId,
      protocolVersion: v2 ? RESOURCES_VERSION : 1,
      maxConcurrency: this.maxConcurrency,
    };
    if (v2) Object.assign(message, this.resourceSets(), { prompts: this.promptSet() });
    if (v2 && this.hasCompleters()) message.completions = true;
    if (this.appVersion !== undefined) message.appVersion = this.appVersion;
    return message;
  }

  // --- state and events ------------------------------------------------------------------

  private setState(state: ConnectionState): void {
    if (state === this.stateValue) return;
    this.stateValue = state;
    this.safeEmit("state", state, this.lastErrorValue);
  }

  private noteFailure(message: string, state: ConnectionState = "reconnecting"): void {
    if (message !== this.lastErrorValue) this.logger.warn("toolbridge: connection attempt failed", { error: message });
    else this.logger.debug("toolbridge: connection attempt failed again", { error: message });
    this.lastErrorValue = message;
    this.setState(this.stateValue === "connecting" && state === "reconnecting" ? "connecting" : state);
  }

  /** Emit `error` if anyone listens (never Node's unhandled-'error' throw); log it otherwise. */
  private emitError(error: ToolbridgeError): void {
    if (this.listenerCount("error") > 0) this.safeEmit("error", error);
    else this.logger.warn(`toolbridge: ${error.message}`, { error: error.name });
  }

  /** Emit without letting a throwing listener break the connection loop. */
  private safeEmit<K extends keyof AppEvents>(event: K, ...args: AppEvents[K]): void {
    try {
      (this.emit as (e: K, ...a: AppEvents[K]) => boolean)(event, ...args);
    } catch (err) {
      this.logger.error(`toolbridge: a '${String(event)}' listener threw`, { error: String(err) });
    }
  }
}
