/**
 * Test helpers: a real toolbridge daemon in a subprocess (`python -m broker serve` on a temp home,
 * free port), and a minimal MCP agent that talks to it over `agentConnect` on the app port (the
 * same path `toolbridge stdio` relays through), plus a capturing logger.
 *
 * The Python interpreter is `$TOOLBRIDGE_PYTHON` (the pytest wrapper sets it), else the
 * repository's `.venv` made by `python3 dev.py test`, else `python3`.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "../src/index.js";

export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const REPO_ROOT = resolve(PACKAGE_ROOT, "..", "..");

export function pythonCommand(): string {
  if (process.env.TOOLBRIDGE_PYTHON) return process.env.TOOLBRIDGE_PYTHON;
  const venv = process.platform === "win32" ? join(REPO_ROOT, ".venv", "Scripts", "python.exe") : join(REPO_ROOT, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

/** The environment without the caller's TOOLBRIDGE_* settings (tests choose their own). */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("TOOLBRIDGE_")) env[key] = value;
  }
  return { ...env, ...extra };
}

export function tempHome(): string {
  return mkdtempSync(join(tmpdir(), "tb-ts-"));
}

/** Lines of a readable stream, one callback each. */
function onLines(stream: NodeJS.ReadableStream, callback: (line: string) => void): void {
  let buffer = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    buffer += chunk;
    let at: number;
    while ((at = buffer.indexOf("\n")) >= 0) {
      callback(buffer.slice(0, at));
      buffer = buffer.slice(at + 1);
    }
  });
}

export class Daemon {
  private constructor(readonly home: string, readonly port: number, readonly process: ChildProcess, readonly log: string[]) {}

  get token(): string {
    return readFileSync(join(this.home, "token"), "utf8").trim();
  }

  /** Start a daemon on `home` (a new temp home by default); resolves once it listens. */
  static start(home: string = tempHome(), extraArgs: string[] = [], timeoutMs = 30_000): Promise<Daemon> {
    const child = spawn(pythonCommand(), ["-m", "broker", "serve", "--home", home, "--port", "0", "--no-http",
      "--log-format", "json", "--log-level", "info", ...extraArgs], { cwd: REPO_ROOT, env: cleanEnv(), stdio: ["ignore", "ignore", "pipe"] });
    const log: string[] = [];
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`the daemon did not start within ${timeoutMs} ms:\n${log.join("\n")}`));
      }, timeoutMs);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the daemon exited (${code}) before it started:\n${log.join("\n")}`));
      });
      onLines(child.stderr!, (line) => {
        log.push(line);
        try {
          const event = JSON.parse(line) as { event?: string; port?: number };
          if (event.event === "daemon_started" && typeof event.port === "number") {
            clearTimeout(timer);
            child.removeAllListeners("exit");
            resolvePromise(new Daemon(home, event.port, child, log));
          }
        } catch {
          // not a JSON log line
        }
      });
    });
  }

  /** Stop it (SIGTERM: graceful; SIGKILL: abrupt) and wait for the process to end. */
  stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return Promise.resolve();
    return new Promise((resolvePromise) => {
      this.process.once("exit", () => resolvePromise());
      this.process.kill(signal);
    });
  }
}

export interface RpcError {
  code: number;
  message: string;
}

/** A minimal MCP client over the daemon's agentConnect (JSON-RPC, one message per line). */
export class Agent {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  readonly notifications: Array<{ method: string; params: Record<string, unknown> }> = [];
  private readonly listeners: Array<() => void> = [];
  /** Answers the daemon's own requests (`elicitation/create`); the default refuses them. */
  onRequest: (method: string, params: Record<string, unknown>) => Promise<unknown> = async (method) => {
    throw new Error(`the test agent does not answer ${method}`);
  };

  private constructor(private readonly socket: net.Socket) {
    onLines(socket, (line) => {
      if (!line.trim()) return;
      const message = JSON.parse(line) as { id?: number; result?: unknown; error?: RpcError; method?: string; params?: Record<string, unknown> };
      if (message.method !== undefined && message.id !== undefined) {
        const id = message.id;
        this.onRequest(message.method, message.params ?? {}).then(
          (result) => socket.write(JSON.stringify({ jsonrpc: "2.0", id, result }) + "\n"),
          (err: Error) => socket.write(JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32603, message: err.message } }) + "\n"));
        return;
      }
      if (message.method !== undefined && message.id === undefined) {
        this.notifications.push({ method: message.method, params: message.params ?? {} });
        for (const listener of this.listeners.splice(0)) listener();
        return;
      }
      const waiter = message.id !== undefined ? this.waiting.get(message.id) : undefined;
      if (waiter === undefined) return;
      this.waiting.delete(message.id!);
      if (message.error) waiter.reject(Object.assign(new Error(message.error.message), { rpc: message.error }));
      else waiter.resolve(message.result);
    });
    socket.on("close", () => {
      for (const waiter of this.waiting.values()) waiter.reject(new Error("the agent connection closed"));
      this.waiting.clear();
    });
  }

  static async connect(daemon: Daemon, capabilities: Record<string, unknown> = {}): Promise<Agent> {
    const socket = net.connect({ host: "127.0.0.1", port: daemon.port });
    await new Promise<void>((resolvePromise, reject) => {
      socket.once("connect", resolvePromise);
      socket.once("error", reject);
    });
    socket.write(JSON.stringify({ type: "agentConnect", token: daemon.token }) + "\n");
    const first = await new Promise<string>((resolvePromise) => {
      let buffer = "";
      const onData = (chunk: Buffer): void => {
        buffer += chunk.toString("utf8");
        const at = buffer.indexOf("\n");
        if (at >= 0) {
          socket.off("data", onData);
          if (buffer.length > at + 1) socket.unshift(Buffer.from(buffer.slice(at + 1), "utf8"));
          resolvePromise(buffer.slice(0, at));
        }
      };
      socket.on("data", onData);
    });
    if ((JSON.parse(first) as { type?: string }).type !== "agentConnected") throw new Error(`agentConnect refused: ${first}`);
    const agent = new Agent(socket);
    await agent.request("initialize", { protocolVersion: "2025-11-25", capabilities, clientInfo: { name: "ts-tests", version: "0" } });
    agent.notify("notifications/initialized", {});
    return agent;
  }

  request(method: string, params: Record<string, unknown>): Promise<unknown> {
    const id = this.nextId++;
    return this.requestWithId(id, method, params);
  }

  requestWithId(id: number, method: string, params: Record<string, unknown>): Promise<unknown> {
    return new Promise((resolvePromise, reject) => {
      this.waiting.set(id, { resolve: resolvePromise, reject });
      this.socket.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  }

  /** A fresh request id (for calls the test wants to cancel by id). */
  newId(): number {
    return this.nextId++;
  }

  notify(method: string, params: Record<string, unknown>): void {
    this.socket.write(JSON.stringify({ jsonrpc: "2.0", method, params }) + "\n");
  }

  async callTool(name: string, args: Record<string, unknown>, meta?: Record<string, unknown>, id = this.newId()): Promise<CallResult> {
    const params: Record<string, unknown> = { name, arguments: args };
    if (meta !== undefined) params._meta = meta;
    return (await this.requestWithId(id, "tools/call", params)) as CallResult;
  }

  async toolNames(): Promise<string[]> {
    const listing = (await this.request("tools/list", {})) as { tools: Array<{ name: string }> };
    return listing.tools.map((tool) => tool.name).sort();
  }

  /** Resolves when a notification matching `predicate` has arrived. */
  async waitNotification(predicate: (n: { method: string; params: Record<string, unknown> }) => boolean): Promise<void> {
    while (!this.notifications.some(predicate)) await new Promise<void>((r) => this.listeners.push(r));
  }

  close(): void {
    this.socket.destroy();
  }
}

export interface CallResult {
  content: Array<Record<string, unknown>>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** A logger that keeps every line, for assertions. */
export function capturingLogger(): Logger & { lines: Array<{ level: string; message: string; fields?: Record<string, unknown> }> } {
  const lines: Array<{ level: string; message: string; fields?: Record<string, unknown> }> = [];
  const at = (level: string) => (message: string, fields?: Record<string, unknown>): void => {
    lines.push(fields === undefined ? { level, message } : { level, message, fields });
  };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** Resolves with the first event `name` from `emitter` whose arguments satisfy `predicate`. */
export function nextEvent<T extends unknown[]>(emitter: { on(e: string, l: (...a: never[]) => void): unknown; off(e: string, l: (...a: never[]) => void): unknown },
  name: string, predicate: (...args: T) => boolean = () => true): Promise<T> {
  return new Promise((resolvePromise) => {
    const listener = (...args: T): void => {
      if (predicate(...args)) {
        emitter.off(name, listener as never);
        resolvePromise(args);
      }
    };
    emitter.on(name, listener as never);
  });
}

/** Wait until `predicate()` holds, re-checking on each of `emitter`'s events (bounded). */
export async function until(predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000, stepMs = 20): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/**
 * A test CA and a server certificate for 127.0.0.1 / localhost signed by it (made with Python's
 * trustme, which the test environment has), plus a second, unrelated CA. Returns file paths.
 */
export function makeCertificates(dir: string): { cert: string; key: string; ca: string; otherCa: string } {
  const paths = { cert: join(dir, "server.pem"), key: join(dir, "server.key"), ca: join(dir, "ca.pem"), otherCa: join(dir, "other.pem") };
  const script = [
    "import sys, trustme",
    "ca = trustme.CA()",
    "cert = ca.issue_cert('127.0.0.1', 'localhost')",
    "open(sys.argv[1], 'wb').write(b''.join(b.bytes() for b in cert.cert_chain_pems))",
    "cert.private_key_pem.write_to_path(sys.argv[2])",
    "ca.cert_pem.write_to_path(sys.argv[3])",
    "trustme.CA().cert_pem.write_to_path(sys.argv[4])",
  ].join("\n");
  const done = spawnSync(pythonCommand(), ["-c", script, paths.cert, paths.key, paths.ca, paths.otherCa], { encoding: "utf8" });
  if (done.status !== 0) throw new Error(`cannot make test certificates: ${done.stderr}`);
  return paths;
}
