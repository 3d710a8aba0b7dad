/**
 * Reconnect delays: capped exponential backoff with full jitter (as `app_client.backoff`).
 *
 * Attempt n (counting from 0 since the last successful registration) waits a uniformly random
 * time between 0 and `min(capMs, initialMs * factor ** n)`, so many apps that lost the same
 * daemon do not reconnect in lock-step. `reset()` starts over after a registration.
 */
export interface BackoffOptions {
  initialMs?: number;
  capMs?: number;
  factor?: number;
  /** A source of numbers in [0, 1); tests pin it. */
  random?: () => number;
}

export class Backoff {
  readonly initialMs: number;
  readonly capMs: number;
  readonly factor: number;
  private readonly random: () => number;
  private attempt = 0;

  constructor(options: BackoffOptions = {}) {
    this.initialMs = options.initialMs ?? 100;
    this.capMs = options.capMs ?? 5000;
    this.factor = options.factor ?? 2;
    this.random = options.random ?? Math.random;
  }

  /** The largest delay the next attempt may draw. */
  ceiling(): number {
    return Math.min(this.capMs, this.initialMs * this.factor ** Math.min(this.attempt, 64));
  }

  /** Draw the delay (ms) before the next attempt and count the attempt. */
  nextDelay(): number {
    const delay = this.random() * this.ceiling();
    this.attempt += 1;
    return delay;
  }

  reset(): void {
    this.attempt = 0;
  }
}
