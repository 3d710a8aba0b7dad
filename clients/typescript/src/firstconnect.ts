/**
 * Bounding `connect()`'s wait for the first registration (`timeoutMs`, `signal`).
 *
 * {@link boundedWait} races the first registration against a timer and an AbortSignal. When
 * either wins, it first stops the app (the caller's `stop`, i.e. `App.close()`) and only then
 * rejects, so the app is at rest (no loop, state `disconnected`) when the caller sees the error.
 * Exactly one outcome is delivered; the timer and the abort listener are removed either way.
 */
import { ConnectAborted, ConnectTimeout } from "./errors.js";

/** How long {@link App.connect} waits for the first registration (default: until it succeeds). */
export interface ConnectOptions {
  /** Give up after this many milliseconds: the app stops, connect() rejects with ConnectTimeout. */
  timeoutMs?: number;
  /** Give up when this aborts: the app stops, connect() rejects with ConnectAborted (`cause`: the signal's reason). */
  signal?: AbortSignal;
}

/** A RangeError for a `timeoutMs` that is not a positive number of milliseconds, else undefined. */
export function checkConnectOptions(options: ConnectOptions): RangeError | undefined {
  const { timeoutMs } = options;
  if (timeoutMs === undefined || (typeof timeoutMs === "number" && Number.isFinite(timeoutMs) && timeoutMs > 0)) return undefined;
  return new RangeError(`connect(): timeoutMs must be a positive number of milliseconds, not ${String(timeoutMs)}`);
}

/** The error for an aborted wait; `lastError` is why the last attempt failed. */
export function abortedError(app: string, signal: AbortSignal, lastError: string | undefined): ConnectAborted {
  return new ConnectAborted(`${app}: connect() was aborted before the app registered`
    + (lastError ? ` (last attempt: ${lastError})` : ""), { cause: signal.reason });
}

/** `first`, bounded by `options` (see the module doc); `lastError()` is read when giving up. */
export function boundedWait<T>(first: Promise<T>, options: ConnectOptions, app: string, lastError: () => string | undefined,
  stop: () => Promise<void>): Promise<T> {
  const { timeoutMs, signal } = options;
  if (timeoutMs === undefined && signal === undefined) return first;
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      return true;
    };
    const giveUp = (error: Error): void => {
      if (settle()) void stop().finally(() => reject(error));
    };
    const onAbort = (): void => giveUp(abortedError(app, signal!, lastError()));
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => {
        const last = lastError();
        giveUp(new ConnectTimeout(`${app} did not register within ${timeoutMs} ms` + (last ? `: ${last}` : "")));
      }, timeoutMs);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    first.then((value) => {
      if (settle()) resolve(value);
    }, (err: unknown) => {
      if (settle()) reject(err);
    });
  });
}
