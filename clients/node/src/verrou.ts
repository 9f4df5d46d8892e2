// A Verrou LockStore (`monolock/verrou`): Verrou's locks held as monolock
// locks. @verrou/core is an optional peer dependency: only a program that
// imports this entry point loads it. Built on the client's public API only.
import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type tls from 'node:tls';

import { E_LOCK_NOT_OWNED } from '@verrou/core';
import type { LockStore } from '@verrou/core/types';

import { BusyError, Client, type ClientOptions, type Lock } from './index.js';

/** The lease of every lock when `leaseMs` is not given (the server's failure detector, not a hold limit). */
export const DEFAULT_STORE_LEASE_MS = 2000;
/** How long one admin API call may take, connect to last byte. */
export const DEFAULT_ADMIN_TIMEOUT_MS = 10_000;
/** The largest admin answer read (one lock with its whole queue); a larger one is an error. */
const MAX_ADMIN_BODY_BYTES = 16 << 20;
/** The longest single timer Node.js runs as asked (a longer one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** How many of this store's own released grants `exists` remembers, oldest forgotten first. */
const RELEASED_MEMORY = 1024;

/**
 * The time and timers of a store's TTLs: the real ones by default, a fake
 * clock in tests (the same shape as the client's own).
 */
export interface StoreClock {
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** What the store needs of a Client: its `acquire`. A shared Client (TLS, its session cache) fits. */
export interface LockSource {
  acquire(name: string, options: { leaseMs: number; wait: false }): Promise<HeldLock>;
}

/** What the store needs of a granted lock. */
export type HeldLock = Pick<Lock, 'token' | 'release' | 'closed'>;

export interface MonolockStoreOptions {
  /** The lock port, `host:port` (the client's default, 127.0.0.1:7070, when omitted). */
  address?: string;
  /**
   * The admin API's `host:port` (the server's `-admin-listen`): `exists` and
   * `forceDelete` of a lock this store does not hold ask it. Without it they
   * throw. The host name is resolved and the request carries that IP and port
   * as its Host header, which the admin port accepts.
   */
  admin?: string;
  /** The lease of every lock in ms (2000): how long the server keeps a lock without hearing from this process. */
  leaseMs?: number;
  /** TLS for the lock port, as the Client's `tls`. */
  tls?: ClientOptions['tls'];
  /** As the Client's `connectTimeoutMs`. */
  connectTimeoutMs?: number;
  /** A Client to take locks from instead of a new one (address, tls and connectTimeoutMs are then ignored). */
  client?: LockSource;
  /**
   * HTTPS for the admin API, and mutual TLS with an operator certificate
   * (`ca`, `cert`, `key`) where the admin port asks for one: `exists` needs
   * the admin role `read`, `forceDelete` the role `release`. `true` is HTTPS
   * with the system's CAs. The certificate is checked against the host name
   * given in `admin` (`servername` here overrides it).
   */
  adminTls?: tls.ConnectionOptions | true;
  /** How long one admin API call may take (10 s). */
  adminTimeoutMs?: number;
  /** The TTL timers' clock; the real one unless a test gives a fake. */
  clock?: StoreClock;
}

const realClock: StoreClock = {
  now: () => performance.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref(); // the held lock's socket is what keeps a process alive, not its TTL
    return t;
  },
  clearTimer(handle) {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

/** One hold of this store: a Verrou owner's monolock lock and its TTL. */
interface Hold {
  readonly key: string;
  readonly owner: string;
  readonly lock: HeldLock;
  /** When the TTL ends (clock time), or null for no TTL. */
  expiresAt: number | null;
  timer: unknown;
}

/**
 * A Verrou LockStore on monolock. Each saved lock is one connection to the
 * server, heartbeating until `delete`, its TTL, `forceDelete` or `close()`.
 * A TTL is a timer in this process that closes the connection; `null` holds
 * until `delete`; `extend` moves the timer. The owner string is checked here,
 * against the holds of this store: share one store in a process.
 */
export class MonolockStore implements LockStore {
  readonly #source: LockSource;
  readonly #leaseMs: number;
  readonly #admin: string | undefined;
  readonly #adminTls: tls.ConnectionOptions | undefined;
  readonly #adminTimeoutMs: number;
  readonly #clock: StoreClock;
  readonly #holds = new Map<string, Hold>();
  /** key → the token of this store's latest released grant, until the server is seen past it. */
  readonly #released = new Map<string, bigint>();
  #closed = false;

  constructor(options: MonolockStoreOptions = {}) {
    this.#leaseMs = options.leaseMs ?? DEFAULT_STORE_LEASE_MS;
    this.#admin = options.admin;
    this.#adminTls = options.adminTls === true ? {} : options.adminTls;
    this.#adminTimeoutMs = options.adminTimeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS;
    this.#clock = options.clock ?? realClock;
    if (options.client) this.#source = options.client;
    else {
      const clientOptions: ClientOptions = {};
      if (options.address !== undefined) clientOptions.address = options.address;
      if (options.tls !== undefined) clientOptions.tls = options.tls;
      if (options.connectTimeoutMs !== undefined) clientOptions.connectTimeoutMs = options.connectTimeoutMs;
      this.#source = new Client(clientOptions);
    }
  }

  /**
   * Takes the lock without waiting: true when granted, false when it is held
   * (by anyone, this store included). ttl in ms, or null for no TTL.
   */
  async save(key: string, owner: string, ttl: number | null): Promise<boolean> {
    this.#checkOpen('save');
    if (ttl !== null && !(ttl > 0)) {
      throw new RangeError(`monolock/verrou: the TTL of ${JSON.stringify(key)} is ${ttl}: give a number of milliseconds above 0, or null to hold until release`);
    }
    if (this.#holds.has(key)) return false;
    let lock: HeldLock;
    try {
      lock = await this.#source.acquire(key, { leaseMs: this.#leaseMs, wait: false });
    } catch (err) {
      if (err instanceof BusyError) return false;
      throw err;
    }
    if (this.#closed) {
      await lock.release();
      this.#checkOpen('save');
    }
    const hold: Hold = { key, owner, lock, expiresAt: null, timer: undefined };
    this.#holds.set(key, hold);
    this.#released.delete(key);
    if (ttl !== null) this.#expireIn(hold, ttl);
    // A lock lost meanwhile (an administrator's force-release, a silent
    // server) is no longer held: forget it so that exists asks the server.
    void lock.closed.then(() => {
      if (this.#holds.get(key) === hold) this.#forget(hold);
    });
    return true;
  }

  /** Releases the lock when owner holds it through this store; E_LOCK_NOT_OWNED otherwise. */
  async delete(key: string, owner: string): Promise<void> {
    const hold = this.#owned(key, owner);
    await this.#release(hold);
  }

  /**
   * Releases the lock whoever holds it: this store's own hold directly,
   * another's through the admin API's force-release (role `release`); a lock
   * nobody holds is left as it is.
   */
  async forceDelete(key: string): Promise<void> {
    const hold = this.#holds.get(key);
    if (hold) return this.#release(hold);
    await this.#adminCall('POST', key, '/release', 'forceDelete');
  }

  /**
   * Whether the lock is held: this store's own holds without I/O, any other
   * through the admin API (role `read`).
   */
  async exists(key: string): Promise<boolean> {
    if (this.#holds.has(key)) return true;
    const body = await this.#adminCall('GET', key, '', 'exists');
    if (body === undefined) {
      this.#released.delete(key);
      return false;
    }
    // The token is near 2^62: read its digits, not a rounded Number.
    const token = /"holder"\s*:\s*\{[^}]*"token"\s*:\s*(\d+)/.exec(body)?.[1];
    const released = this.#released.get(key);
    // A grant this store released whose close the server has not processed yet is over.
    if (released !== undefined && token !== undefined && BigInt(token) === released) return false;
    this.#released.delete(key);
    return true;
  }

  /** Moves the TTL to duration ms from now when owner holds the lock through this store; E_LOCK_NOT_OWNED otherwise. */
  async extend(key: string, owner: string, duration: number): Promise<void> {
    const hold = this.#owned(key, owner);
    if (!(duration > 0)) {
      throw new RangeError(`monolock/verrou: cannot extend ${JSON.stringify(key)} by ${duration} ms: give a number of milliseconds above 0`);
    }
    this.#expireIn(hold, duration);
  }

  /** The fencing token of the lock owner holds through this store, or undefined when it holds none. */
  token(key: string, owner: string): bigint | undefined {
    const hold = this.#holds.get(key);
    return hold && hold.owner === owner ? hold.lock.token : undefined;
  }

  /** Releases every lock this store holds and refuses new ones; resolves once their connections are closed. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#holds.values()].map((h) => this.#release(h)));
  }

  #checkOpen(what: string): void {
    if (this.#closed) throw new Error(`monolock/verrou: ${what} after close(): create a new MonolockStore`);
  }

  #owned(key: string, owner: string): Hold {
    const hold = this.#holds.get(key);
    if (!hold || hold.owner !== owner) throw new E_LOCK_NOT_OWNED();
    return hold;
  }

  #expireIn(hold: Hold, ms: number): void {
    hold.expiresAt = this.#clock.now() + ms;
    this.#arm(hold);
  }

  /** Sets the TTL timer, in steps Node.js can run, for a TTL beyond 24.8 days. */
  #arm(hold: Hold): void {
    this.#clock.clearTimer(hold.timer);
    hold.timer = undefined;
    if (hold.expiresAt === null) return;
    const left = hold.expiresAt - this.#clock.now();
    if (left <= 0) {
      void this.#release(hold);
      return;
    }
    // The last step's timer ends the TTL when it fires, without reading the
    // clock again: Node.js dates a timer from the event loop's cached time,
    // so it may fire a little before Date.now() says the TTL is over, and a
    // re-armed remainder would then run after timers set later for later.
    const last = left <= MAX_TIMER_MS;
    hold.timer = this.#clock.setTimer(() => (last ? void this.#release(hold) : this.#arm(hold)), Math.min(left, MAX_TIMER_MS));
  }

  #forget(hold: Hold): void {
    this.#clock.clearTimer(hold.timer);
    hold.timer = undefined;
    if (this.#holds.get(hold.key) === hold) this.#holds.delete(hold.key);
  }

  async #release(hold: Hold): Promise<void> {
    if (this.#holds.get(hold.key) === hold) {
      this.#forget(hold);
      this.#released.delete(hold.key);
      this.#released.set(hold.key, hold.lock.token);
      if (this.#released.size > RELEASED_MEMORY) this.#released.delete(this.#released.keys().next().value!);
    }
    await hold.lock.release();
  }

  /**
   * One admin API call about a lock: its body on 200, undefined on 404 (the
   * lock is idle), an error saying what was wrong otherwise.
   */
  async #adminCall(method: 'GET' | 'POST', key: string, suffix: string, what: string): Promise<string | undefined> {
    if (this.#admin === undefined) {
      throw new Error(`monolock/verrou: ${what}(${JSON.stringify(key)}) asks the admin API about a lock this store does not hold: give the server's -admin-listen address as the store's admin option`);
    }
    const { host, port } = splitHostPort(this.#admin);
    const ip = net.isIP(host) ? { address: host, family: net.isIP(host) } : await withDeadline(lookup(host), this.#adminTimeoutMs, `resolving ${host}`);
    const hostHeader = ip.family === 6 ? `[${ip.address}]:${port}` : `${ip.address}:${port}`;
    const path = `/api/locks/${encodeName(key)}${suffix}`;
    const where = `${method} ${this.#adminTls ? 'https' : 'http'}://${hostHeader}${path}`;
    const options: https.RequestOptions = { host: ip.address, family: ip.family, port, method, path, headers: { Host: hostHeader }, timeout: this.#adminTimeoutMs, agent: false };
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const onResponse = (res: http.IncomingMessage): void => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ADMIN_BODY_BYTES) req.destroy(new Error(`the answer is larger than ${MAX_ADMIN_BODY_BYTES} bytes`));
          else chunks.push(c);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      };
      const req = this.#adminTls
        ? https.request({ ...options, ...(net.isIP(host) ? {} : { servername: host }), ...this.#adminTls }, onResponse)
        : http.request(options, onResponse);
      const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${this.#adminTimeoutMs} ms`)), this.#adminTimeoutMs);
      deadline.unref();
      req.on('close', () => clearTimeout(deadline));
      req.on('timeout', () => req.destroy(new Error(`the connection was silent for ${this.#adminTimeoutMs} ms`)));
      req.on('error', reject);
      req.end();
    }).catch((err: unknown) => {
      throw new Error(`monolock/verrou: ${what}(${JSON.stringify(key)}): ${where} failed: ${(err as Error).message.trim()}; check that the admin option names the server's -admin-listen address${this.#adminTls ? ' and that adminTls holds the CA of its certificate and an operator certificate it trusts' : ''}`, { cause: err });
    });
    if (status === 200) return body;
    if (status === 404) return undefined;
    let reason = body.trim();
    try {
      reason = (JSON.parse(body) as { error?: string }).error ?? reason;
    } catch {
      // not JSON: the text as it came
    }
    const hint = status === 403 ? ` (${method === 'GET' ? 'exists needs the admin role read' : 'forceDelete needs the admin role release'})` : '';
    throw new Error(`monolock/verrou: ${what}(${JSON.stringify(key)}): ${where} answered ${status}${hint}: ${reason}`);
  }
}

/** p, or a rejection once ms have passed: for what has no timeout of its own (a name's resolution). */
function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`monolock/verrou: ${what} took longer than ${ms} ms: check the admin option and the resolver`)), ms);
    timer.unref();
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** "host:port" or "[v6]:port" → its parts; an error saying what to write otherwise. */
function splitHostPort(address: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
  const port = Number(m?.[3]);
  if (!m || port < 1 || port > 65535) {
    throw new Error(`monolock/verrou: admin ${JSON.stringify(address)} is not host:port: write it as 127.0.0.1:7071 (or [::1]:7071)`);
  }
  return { host: (m[1] ?? m[2])!, port };
}

/** A lock name as one path segment of the admin API (`.` and `..` spelled %2E so no one drops them). */
export function encodeName(name: string): string {
  const e = encodeURIComponent(name);
  return e === '.' || e === '..' ? e.replaceAll('.', '%2E') : e;
}
