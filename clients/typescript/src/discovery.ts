/**
 * Finding the running daemon: host, port, token, Unix socket and TLS (as `app_client.discovery`).
 *
 * Theory of operation
 * -------------------
 * The daemon keeps two files in its home directory: `token` (one line) and `runtime.json`
 * (`{"pid", "host", "port", "httpPort", "version", "startedAt"}`, plus `"socket"` where it
 * listens on a Unix domain socket and `"tls": true, "tlsCert"` where its app port speaks TLS).
 *
 * {@link findDaemon} resolves each of host, port and token on its own, from the first source
 * that has it: the options, then the environment (`TOOLBRIDGE_HOST`, `TOOLBRIDGE_PORT`,
 * `TOOLBRIDGE_TOKEN`), then the home directory's files. The home is the `home` option, else
 * `TOOLBRIDGE_HOME`, else the platform's per-user data directory (Linux
 * `~/.local/share/toolbridge` or `$XDG_DATA_HOME/toolbridge`, macOS
 * `~/Library/Application Support/toolbridge`, Windows `%LOCALAPPDATA%\toolbridge`). Files
 * are read again on every call, so an app that calls it before each attempt follows a daemon
 * restarted on another port and a rotated token. Nothing falls back to a default port: with
 * no runtime.json and no port given, the daemon is "not found" (the token is never sent to a
 * port nobody named).
 *
 * Unix socket: when host and port both came from runtime.json and no TLS was asked for, the
 * address carries the socket runtime.json names; the app tries it before TCP.
 *
 * TLS: runtime.json's `"tls": true` pins the daemon's own certificate (`tlsCert`; the host name
 * is then not checked). `tlsCa` / `TOOLBRIDGE_TLS_CA` (a CA file, which may be the daemon's own
 * self-signed certificate) or `TOOLBRIDGE_TLS=1` (the system's trust store) ask for TLS with
 * normal verification, for a daemon on another machine.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { DaemonNotFound } from "./errors.js";

export const ENV_HOME = "TOOLBRIDGE_HOME";
export const ENV_HOST = "TOOLBRIDGE_HOST";
export const ENV_PORT = "TOOLBRIDGE_PORT";
export const ENV_TOKEN = "TOOLBRIDGE_TOKEN";
export const ENV_TLS_CA = "TOOLBRIDGE_TLS_CA";
export const ENV_TLS = "TOOLBRIDGE_TLS";
export const TOKEN_FILE = "token";
export const RUNTIME_FILE = "runtime.json";
export const DEFAULT_HOST = "127.0.0.1";
const START_HINT = "start it with `toolbridge serve`";

export interface DiscoveryOptions {
  home?: string;
  host?: string;
  port?: number;
  token?: string;
  tlsCa?: string;
  /** Defaults to `process.env`; tests pass their own. */
  env?: Record<string, string | undefined>;
}

/** Where the daemon listens and the token to present (`token` is not enumerable: never logged). */
export interface DaemonAddress {
  host: string;
  port: number;
  readonly token: string;
  /** The runtime.json the port came from (undefined when given by option or environment). */
  runtimeFile?: string;
  tls: boolean;
  tlsCa?: string;
  tlsPin?: string;
  socket?: string;
}

/** The per-user data directory toolbridge uses when nothing else is configured. */
export function defaultHome(env: Record<string, string | undefined> = process.env): string {
  if (process.platform === "win32") {
    const base = env.LOCALAPPDATA || join(homedir(), "AppData", "Local");
    return join(base, "toolbridge");
  }
  if (process.platform === "darwin") return join(homedir(), "Library", "Application Support", "toolbridge");
  const xdg = env.XDG_DATA_HOME;
  return join(xdg && xdg.startsWith("/") ? xdg : join(homedir(), ".local", "share"), "toolbridge");
}

export function resolveHome(home?: string, env: Record<string, string | undefined> = process.env): string {
  if (home) return home;
  return env[ENV_HOME] || defaultHome(env);
}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

export function readToken(home?: string, env: Record<string, string | undefined> = process.env): string {
  const path = join(resolveHome(home, env), TOKEN_FILE);
  let token: string;
  try {
    token = readFileSync(path, "utf8").trim();
  } catch (err) {
    if (errno(err) === "ENOENT") {
      throw new DaemonNotFound(`no toolbridge token file at ${path}: the daemon has never run with this home `
        + `directory; ${START_HINT} (or set ${ENV_TOKEN})`);
    }
    throw new DaemonNotFound(`cannot read the toolbridge token file ${path}: ${(err as Error).message}`);
  }
  if (!token) throw new DaemonNotFound(`the toolbridge token file ${path} is empty; ${START_HINT}`);
  return token;
}

export interface RuntimeInfo {
  pid: number;
  host: string;
  port: number;
  httpPort?: number | null;
  version?: string;
  tls?: boolean;
  tlsCert?: string | null;
  socket?: string | null;
}

export function readRuntime(home?: string, env: Record<string, string | undefined> = process.env): RuntimeInfo {
  const path = join(resolveHome(home, env), RUNTIME_FILE);
  let raw: string;
  try {
    raw = readFileSync(path, "utf8");
  } catch (err) {
    if (errno(err) === "ENOENT") throw new DaemonNotFound(`the toolbridge daemon is not running (no ${path}); ${START_HINT}`);
    throw new DaemonNotFound(`cannot read ${path}: ${(err as Error).message}`);
  }
  let info: unknown;
  try {
    info = JSON.parse(raw);
  } catch (err) {
    throw new DaemonNotFound(`${path} is not a valid toolbridge runtime file (${(err as Error).message}); ${START_HINT}`);
  }
  const record = info as Record<string, unknown>;
  if (typeof info !== "object" || info === null || typeof record.port !== "number" || typeof record.host !== "string") {
    throw new DaemonNotFound(`${path} is not a valid toolbridge runtime file (no host or port); ${START_HINT}`);
  }
  return record as unknown as RuntimeInfo;
}

function parsePort(value: string | number, source: string): number {
  const port = typeof value === "number" ? value : /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(port) || port <= 0 || port >= 65536) {
    throw new DaemonNotFound(`${source}=${JSON.stringify(value)} is not a port number (1-65535)`);
  }
  return port;
}

/** Resolve the daemon's address and token (options > environment > home directory); see the module doc. */
export function findDaemon(options: DiscoveryOptions = {}): DaemonAddress {
  const env = options.env ?? process.env;
  const home = options.home;
  let runtime: RuntimeInfo | undefined;
  let runtimeFile: string | undefined;
  const runtimeInfo = (): RuntimeInfo => {
    if (runtime === undefined) {
      runtime = readRuntime(home, env);
      runtimeFile = join(resolveHome(home, env), RUNTIME_FILE);
    }
    return runtime;
  };
  let port: number;
  if (options.port !== undefined) port = parsePort(options.port, "port");
  else if (env[ENV_PORT]) port = parsePort(env[ENV_PORT]!, ENV_PORT);
  else port = parsePort(runtimeInfo().port, join(resolveHome(home, env), RUNTIME_FILE));

  const chosenHost = options.host || env[ENV_HOST] || "";
  const host = chosenHost || (runtime !== undefined && runtime.host) || DEFAULT_HOST;
  const token = options.token || env[ENV_TOKEN] || readToken(home, env);
  const address: DaemonAddress = { host, port, token, tls: false };
  Object.defineProperty(address, "token", { value: token, enumerable: false });
  if (runtimeFile !== undefined) address.runtimeFile = runtimeFile;
  const ca = options.tlsCa || env[ENV_TLS_CA];
  if (ca) {
    address.tls = true;
    address.tlsCa = ca;
    return address;
  }
  if (["1", "true", "yes", "on"].includes((env[ENV_TLS] ?? "").trim().toLowerCase())) {
    address.tls = true;
    return address;
  }
  // The whole address came from runtime.json: its Unix socket, which other users cannot reach, comes first.
  if (runtime !== undefined && runtime.socket && !chosenHost) address.socket = runtime.socket;
  if (runtime !== undefined && runtime.tls) {
    address.tls = true;
    if (runtime.tlsCert) address.tlsPin = runtime.tlsCert;
  }
  return address;
}
