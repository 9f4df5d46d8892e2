import tls from 'node:tls';

import { AddressBook } from './addresses.js';
import { Backoff, shutdownJitterMs, sleep } from './backoff.js';
import { InvalidArgumentError, UnavailableError } from './errors.js';
import { CODE_SHUTTING_DOWN } from './frames.js';
import { Lock } from './lock.js';
import { Session } from './session.js';
import { TlsSessionCache } from './tlssession.js';
import { encodeName, leaseToWire, parseAddress, waitToMs } from './validate.js';

/** The server address used when ClientOptions.address is not given. */
export const DEFAULT_ADDRESS = '127.0.0.1:7070';

export interface ClientOptions {
  /** The server's host:port ("[::1]:7070" for IPv6); DEFAULT_ADDRESS when omitted. A name that resolves to several addresses makes each one a candidate. */
  address?: string | undefined;
  /**
   * Several servers' host:port (a primary and its standbys), instead of
   * address: each attempt starts from the one that worked last and tries
   * the others in order when one refuses or fails, within one connect
   * timeout; the retry rules of run apply between attempts.
   */
  addresses?: readonly string[] | undefined;
  /**
   * Connect with TLS: options for tls.connect (ca, cert and key for mutual
   * TLS, servername, …), or true for the system's trusted CAs. The Client
   * keeps the TLS session of its latest connection and offers it on the next
   * one (lock.tlsResumed says whether the server resumed it).
   */
  tls?: tls.ConnectionOptions | boolean | undefined;
  /** How long a connection attempt may take; 10000 ms when omitted. */
  connectTimeoutMs?: number | undefined;
}

export interface AcquireOptions {
  /**
   * The lease in milliseconds: how long the server keeps the lock without
   * hearing from this client. A failure detector, not a hold limit; the client
   * heartbeats every quarter lease. At least 1; a fraction rounds up.
   */
  leaseMs: number;
  /** true (the default): wait in the queue until granted; false: BusyError at once if held; a number: wait that many ms at most. */
  wait?: boolean | number | undefined;
  /** Aborting it while connecting or queued leaves the queue and rejects with its reason. It does not end a held lock. */
  signal?: AbortSignal | undefined;
}

/**
 * Acquires locks from one monolock server. It holds no connection itself
 * (every lock is its own connection), so one Client serves a whole process and
 * needs no closing.
 */
export class Client {
  /** The first address, and every one given. */
  readonly address: string;
  readonly addresses: readonly string[];
  readonly #book: AddressBook;
  readonly #host: string;
  readonly #port: number;
  readonly #tls: tls.ConnectionOptions | undefined;
  readonly #tlsSessions = new TlsSessionCache();
  readonly #connectTimeoutMs: number;

  constructor(options: ClientOptions = {}) {
    if (options.addresses !== undefined && (!Array.isArray(options.addresses) || options.addresses.length === 0 || options.address !== undefined)) {
      throw new InvalidArgumentError('address', 'monolock: addresses must be a non-empty list of "host:port", given instead of address (not with it)');
    }
    this.addresses = options.addresses ? [...options.addresses] : [options.address ?? DEFAULT_ADDRESS];
    this.address = this.addresses[0]!;
    this.#book = new AddressBook(this.addresses);
    ({ host: this.#host, port: this.#port } = parseAddress(this.address));
    this.#tls = secureOptions(options.tls === true ? {} : options.tls || undefined);
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    if (typeof this.#connectTimeoutMs !== 'number' || !(this.#connectTimeoutMs > 0)) {
      throw new InvalidArgumentError('connectTimeoutMs', `monolock: connectTimeoutMs must be a positive number of milliseconds, got ${String(options.connectTimeoutMs)}`);
    }
  }

  /**
   * Connects, asks for the lock and resolves once it is held. Rejects with
   * BusyError (wait: false, or the wait ran out while queued),
   * UnavailableError (cannot connect, connection lost or silent while queued,
   * server codes below 0x10), ServerError (codes 0x10 and above),
   * ProtocolError, InvalidArgumentError (before connecting), the signal's
   * reason, or LockLostError when the lock was lost before this resolved. The caller must release() the lock.
   */
  async acquire(name: string, options: AcquireOptions): Promise<Lock> {
    const session = this.#start(name, options);
    await session.granted;
    // Frames read in the same chunk as the grant may have ended it already.
    // No work ever ran and the caller gets no lock to release: close now
    // rather than let the connection linger until the lease has passed.
    if (session.lost !== undefined) {
      await session.release();
      throw session.lost;
    }
    return new Lock(session);
  }

  /**
   * Acquires the lock, runs fn while holding it and releases it when fn
   * settles. lock.signal aborts and lock.valid() turns false the moment
   * ownership is lost; withLock then rejects with the LockLostError even if fn
   * resolved (fn's own error is its workError). The connection of a lost lock
   * stays open until fn settles, or until the server would expire it anyway.
   */
  async withLock<T>(name: string, options: AcquireOptions, fn: (lock: Lock) => T | Promise<T>): Promise<T> {
    return runHeld(await this.acquire(name, options), fn);
  }

  /**
   * withLock that retries what may succeed on a new connection before fn
   * starts: failed connections, connections lost or silent while queued, and
   * server codes below 0x10. It waits between attempts with exponential backoff
   * and jitter (100 ms doubling up to 5 s), but reconnects after a short random
   * wait, uniform in [0, min(1 s, leaseMs/4)], after "server shutting down"
   * (0x01): another server, or the restarted one, may be there already, and the
   * wait keeps a fleet told at once from arriving in the same millisecond. Every attempt queues anew at the back. fn runs at most once;
   * anything after it started is returned, never retried. Abort options.signal
   * to stop retrying.
   */
  async run<T>(name: string, options: AcquireOptions, fn: (lock: Lock) => T | Promise<T>): Promise<T> {
    const backoff = new Backoff();
    for (;;) {
      let lock: Lock;
      try {
        lock = await this.acquire(name, options);
      } catch (err) {
        if (!(err instanceof UnavailableError) || !err.retryable) throw err;
        const wait = backoff.next();
        await sleep(err.code === CODE_SHUTTING_DOWN ? shutdownJitterMs(options.leaseMs) : wait, options.signal);
        continue;
      }
      return runHeld(lock, fn);
    }
  }

  #start(name: string, options: AcquireOptions): Session {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('monolock: options are required: { leaseMs, wait?, signal? }');
    }
    const nameBytes = encodeName(name);
    const leaseMs = leaseToWire(options.leaseMs);
    const waitMs = waitToMs(options.wait);
    options.signal?.throwIfAborted();
    return new Session({
      host: this.#host,
      port: this.#port,
      address: this.address,
      tls: this.#tls,
      tlsSessions: this.#tlsSessions,
      connectTimeoutMs: this.#connectTimeoutMs,
      book: this.#book,
      name,
      nameBytes,
      leaseMs,
      leaseAskedMs: options.leaseMs,
      waitMs,
      signal: options.signal,
    });
  }
}

/** Runs fn under the held lock and releases it once fn settles (withLock and run). */
export async function runHeld<T>(lock: Lock, fn: (lock: Lock) => T | Promise<T>): Promise<T> {
  let result: T;
  try {
    result = await fn(lock);
  } catch (err) {
    await lock.release();
    const lost = lock.lostError;
    if (lost !== undefined) {
      lost.workError = err;
      throw lost;
    }
    throw err;
  }
  await lock.release();
  const lost = lock.lostError;
  if (lost !== undefined) throw lost;
  return result;
}

/**
 * The Client's TLS options with one secure context for all its connections:
 * tls.connect would otherwise build one per connection from the options (the
 * certificates parsed, the CA store built: over a millisecond each, and memory
 * that grows with the connection count). A secureContext the caller gives is
 * kept as it is.
 */
function secureOptions(options: tls.ConnectionOptions | undefined): tls.ConnectionOptions | undefined {
  if (options === undefined || options.secureContext !== undefined) return options;
  let secureContext: tls.SecureContext;
  try {
    secureContext = tls.createSecureContext(options);
  } catch (err) {
    throw new InvalidArgumentError(
      'tls',
      `monolock: the tls options do not make a TLS context (${(err as Error).message}): check that ca, cert and key are PEM and that the key matches the certificate`,
    );
  }
  return { ...options, secureContext };
}
