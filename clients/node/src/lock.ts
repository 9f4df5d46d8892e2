import type { LockLostError } from './errors.js';
import type { Session } from './session.js';

/**
 * A held lock: one connection to the server, heartbeating until release() or
 * until ownership is lost. Obtained from Client.acquire (or passed to the
 * callback of withLock and run); release() must be called in every case.
 */
export class Lock {
  readonly #session: Session;

  /** @internal Locks come from Client.acquire, withLock and run. */
  constructor(session: Session) {
    this.#session = session;
  }

  get name(): string {
    return this.#session.name;
  }

  /** The lease in whole milliseconds, as sent to the server. */
  get leaseMs(): number {
    return this.#session.config.leaseMs;
  }

  /**
   * The fencing token of this grant, a u64 (about 2^62: a Number would round
   * it). Pass it to every resource the guarded work changes; the resource keeps
   * the largest token it has seen and refuses smaller ones.
   */
  get token(): bigint {
    return this.#session.token;
  }

  /**
   * Aborted the moment ownership ends: lost (its reason is a LockLostError) or
   * released. Pass it to the guarded work (fetch, streams, timers all take one).
   */
  get signal(): AbortSignal {
    return this.#session.signal;
  }

  /**
   * Whether ownership is confirmed at this instant: a cheap synchronous check
   * of the monotonic clock against the give-up deadline (0.8 × lease after the
   * send of the newest answered request). Call it before each side effect. It
   * reads the clock itself, so after a stall of the event loop it turns false
   * before the give-up timer has run, and gives the lock up there and then:
   * once false, it stays false.
   */
  valid(): boolean {
    return this.#session.valid();
  }

  /** Why the lock was lost, or undefined while it is held or after a plain release. */
  get lostError(): LockLostError | undefined {
    return this.#session.lost;
  }

  /**
   * Whether this lock's TLS connection resumed the session of an earlier
   * connection of the same Client (an abbreviated handshake) rather than a full
   * handshake; undefined without TLS. false on a Client's first connection, and
   * after a server restart or failover unless the servers share
   * -tls-ticket-keys.
   */
  get tlsResumed(): boolean | undefined {
    return this.#session.tlsResumed;
  }

  /** Resolves once the connection is closed (after release, or after a loss once the work has stopped). */
  get closed(): Promise<void> {
    return this.#session.closed;
  }

  /**
   * Releases the lock by closing the connection, and resolves once it is
   * closed. Idempotent; safe after a loss (it then closes the lingering
   * connection at once) and never rejects.
   */
  release(): Promise<void> {
    return this.#session.release();
  }
}
