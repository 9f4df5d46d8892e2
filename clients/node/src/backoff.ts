/** The retry delays of Client.run: exponential from MIN_BACKOFF_MS, capped at MAX_BACKOFF_MS. */
export const MIN_BACKOFF_MS = 100;
export const MAX_BACKOFF_MS = 5000;

/**
 * Each wait is uniform in [step/2, step] (equal jitter: clients that failed
 * together do not retry together, and no wait drops to zero); the step doubles
 * from MIN_BACKOFF_MS up to MAX_BACKOFF_MS.
 */
export class Backoff {
  #step = 0;
  readonly #random: () => number;

  constructor(random: () => number = Math.random) {
    this.#random = random;
  }

  next(): number {
    const step = this.#step === 0 ? MIN_BACKOFF_MS : this.#step;
    this.#step = Math.min(2 * step, MAX_BACKOFF_MS);
    const half = step / 2;
    return half + this.#random() * (step - half);
  }
}

/**
 * The wait before reconnecting after "server shutting down" (0x01): uniform in
 * [0, min(1000, leaseMs/4)] ms, so that a fleet told at once does not reach the
 * restarted server or the standby in the same millisecond.
 */
export function shutdownJitterMs(leaseMs: number, random: () => number = Math.random): number {
  return random() * Math.min(1000, leaseMs / 4);
}

/** Resolves after ms, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
