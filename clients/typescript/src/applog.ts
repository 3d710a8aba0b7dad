/**
 * Log messages an app sends to agents (wire protocol v2, protocol.md §12), within the bounds.
 *
 * Theory of operation
 * -------------------
 * `app.log(...)` (app-wide) and `ctx.log(...)` (tied to one call: only the agent request that
 * made it hears it) build a `log` message with {@link logMessage}: the level must be one of
 * MCP's eight (a `RangeError` otherwise: a programming error), `data` is any value JSON can
 * hold (`undefined`, functions and the like become their `String`), data over the protocol's
 * 64 KiB is cut (a string) or replaced by a short note (anything else), so the daemon never has
 * to drop it, and a logger name is cut to 128 characters. The session then sends it without
 * ever waiting; a {@link LogBucket} keeps the app within the daemon's rate (100 at once, then
 * 20 per second), so a chatty app does not spend its link on messages the daemon would drop.
 * As Python's `app_client.applog`; nothing here logs the data itself.
 */
import { LOG_LEVELS, MAX_LOG_DATA_BYTES, type Json, type JsonObject } from "./wire.js";

/** What the daemon forwards per app connection (protocol.md §12): a burst ... */
export const LOG_BURST = 100;
/** ... then this many per second. */
export const LOG_RATE = 20;
const LOGGER_CHARS = 128;

function encodeData(data: unknown): string {
  try {
    const text = JSON.stringify(data, (_key, value: unknown) =>
      (typeof value === "bigint" || typeof value === "function" || typeof value === "symbol" ? String(value) : value));
    return text === undefined ? JSON.stringify(String(data)) : text;
  } catch {
    return JSON.stringify(String(data)); // a cycle, say: its text
  }
}

function bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * A `log` message within the protocol's bounds (see the module doc). Throws RangeError for a
 * level that is not one of `debug`, `info`, `notice`, `warning`, `error`, `critical`, `alert`,
 * `emergency`.
 */
export function logMessage(level: string, data: unknown, logger?: string, correlationId?: number): JsonObject {
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new RangeError(`log level ${JSON.stringify(level)} is not one of ${LOG_LEVELS.join(", ")} (MCP's levels)`);
  }
  let encoded = encodeData(data);
  const size = bytes(encoded);
  if (size > MAX_LOG_DATA_BYTES) {
    const note = ` [... cut: the log data was ${size} bytes, over the ${MAX_LOG_DATA_BYTES}-byte limit]`;
    if (typeof data === "string") {
      let keep = MAX_LOG_DATA_BYTES / 2;
      // Escapes can make the JSON several times the characters: shrink until it fits.
      do {
        encoded = JSON.stringify(data.slice(0, keep) + note);
        keep = Math.floor(keep / 2);
      } while (bytes(encoded) > MAX_LOG_DATA_BYTES);
    } else {
      encoded = JSON.stringify(`[log data of ${size} bytes omitted: over the ${MAX_LOG_DATA_BYTES}-byte limit]`);
    }
  }
  const message: JsonObject = { type: "log", level, data: JSON.parse(encoded) as Json };
  if (typeof logger === "string" && logger.length > 0) message.logger = logger.slice(0, LOGGER_CHARS);
  if (correlationId !== undefined) message.correlationId = correlationId;
  return message;
}

/** The daemon's flood bound, applied before sending (`burst` at once, `rate` per second). */
export class LogBucket {
  private tokens: number;
  private stamp: number | undefined;
  /** Messages this side dropped (over the rate). */
  dropped = 0;

  constructor(readonly burst: number = LOG_BURST, readonly rate: number = LOG_RATE, private readonly now: () => number = Date.now) {
    this.tokens = burst;
  }

  /** Whether one more message may go now. */
  take(): boolean {
    const now = this.now();
    if (this.stamp !== undefined) this.tokens = Math.min(this.burst, this.tokens + ((now - this.stamp) / 1000) * this.rate);
    this.stamp = now;
    if (this.tokens < 1) {
      this.dropped += 1;
      return false;
    }
    this.tokens -= 1;
    return true;
  }
}
