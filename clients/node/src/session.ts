import net from 'node:net';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';

import { BusyError, LockLostError, ProtocolError, UnavailableError, errorForCode, type LossKind } from './errors.js';
import { FrameDecoder, HEARTBEAT, encodeAcquire, type ServerFrame } from './frames.js';
import { SessionRules } from './rules.js';
import type { TlsSessionCache } from './tlssession.js';

/** Everything one session needs to know; validated by the Client before a session exists. */
export interface SessionConfig {
  readonly host: string;
  readonly port: number;
  readonly address: string;
  readonly tls: tls.ConnectionOptions | undefined;
  /** The Client's TLS session, offered on connect and replaced by the server's newest ticket. */
  readonly tlsSessions?: TlsSessionCache | undefined;
  readonly connectTimeoutMs: number;
  readonly name: string;
  readonly nameBytes: Buffer;
  /** The lease as sent on the wire, in whole milliseconds. */
  readonly leaseMs: number;
  /** 0: do not wait in the queue; Infinity: wait until granted; else the longest wait in ms. */
  readonly waitMs: number;
  readonly signal: AbortSignal | undefined;
  /** Time and timers; tests pass a fake one to check the rules deterministically. */
  readonly clock?: Clock;
}

/** The monotonic clock (milliseconds) and the timers a session uses. */
export interface Clock {
  now(): number;
  /** Runs fn after ms without keeping the process alive. */
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** setTimeout's longest delay; a longer one would fire after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * performance.now is monotonic. A timer never fires before its time on that
 * clock (setTimeout's own clock may run a millisecond apart) nor early for
 * delays beyond setTimeout's limit, as a 49-day lease needs: it re-arms until
 * the time has come. Timers are unref'ed: the socket keeps the process alive
 * while a lock is held or awaited, nothing else does.
 */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimer: (fn, ms) => {
    const handle: { timeout?: NodeJS.Timeout } = {};
    const at = performance.now() + ms;
    const arm = (): void => {
      const left = at - performance.now();
      if (left <= 0) {
        fn();
        return;
      }
      handle.timeout = setTimeout(arm, Math.min(Math.ceil(left), MAX_TIMER_MS)).unref();
    };
    handle.timeout = setTimeout(arm, Math.min(Math.max(0, Math.ceil(ms)), MAX_TIMER_MS)).unref();
    return handle;
  },
  clearTimer: (handle) => clearTimeout((handle as { timeout?: NodeJS.Timeout } | undefined)?.timeout),
};

type State = 'connecting' | 'sent' | 'waiting' | 'held' | 'ended';

/**
 * One connection's claim on one lock: it sends ACQUIRE, keeps a reader on the
 * socket for the whole connection (a promotion arrives unasked), heartbeats on
 * the schedule, and decides when ownership is lost. Node runs it on one
 * thread, so every method runs to completion without locks.
 */
export class Session {
  readonly config: SessionConfig;
  readonly #clock: Clock;
  readonly #socket: net.Socket;
  readonly #decoder = new FrameDecoder();
  /** The schedule and the give-up, pure; this class arms its one timer and does the I/O. */
  readonly #rules: SessionRules;
  readonly #controller = new AbortController();
  readonly #closed: Promise<void>;

  #state: State = 'connecting';
  #token = 0n;
  /** The guarded work has stopped (release was called): a lost lock may close at once. */
  #workStopped = false;
  #lost: LockLostError | undefined;
  /** Whether the TLS handshake resumed a session; undefined before it and without TLS. */
  #tlsResumed: boolean | undefined;

  /** The rules' timer: the next heartbeat or the give-up deadline. */
  #rulesTimer: unknown;
  #connectTimer: unknown;
  #waitTimer: unknown;
  #closeTimer: unknown;

  #resolve: ((token: bigint) => void) | undefined;
  #reject: ((err: unknown) => void) | undefined;
  readonly #onAbort = (): void => this.#fail(this.config.signal?.reason, 'closed', true);

  /** Settles with the token once granted, or with why not. */
  readonly granted: Promise<bigint>;

  constructor(config: SessionConfig) {
    this.config = config;
    this.#clock = config.clock ?? realClock;
    this.#rules = new SessionRules(config.leaseMs);
    this.granted = new Promise<bigint>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    let closed!: () => void;
    this.#closed = new Promise<void>((resolve) => (closed = resolve));

    const { host, port } = config;
    let socket: net.Socket;
    if (config.tls) {
      const cache = config.tlsSessions;
      const saved = cache?.latest;
      const tlsSocket = tls.connect({ ...config.tls, host, port, ...(saved ? { session: saved } : {}) });
      // Listening turns on node:tls's session callbacks; add it before the handshake runs.
      if (cache) tlsSocket.on('session', (session: Buffer) => cache.save(session));
      tlsSocket.once('secureConnect', () => {
        this.#tlsResumed = tlsSocket.isSessionReused();
        this.#connected();
      });
      socket = tlsSocket;
    } else {
      socket = net.connect({ host, port });
      socket.once('connect', () => this.#connected());
    }
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('end', () => this.#onEnd());
    socket.on('error', (err) => this.#onError(err));
    socket.on('close', () => {
      this.#clock.clearTimer(this.#closeTimer);
      this.#closeTimer = undefined;
      closed();
    });

    this.#connectTimer = this.#clock.setTimer(() => {
      this.#fail(
        new UnavailableError(`monolock: cannot connect to ${config.address} within ${config.connectTimeoutMs} ms; is the server running there?`),
        'closed',
        true,
      );
    }, config.connectTimeoutMs);
    if (Number.isFinite(config.waitMs) && config.waitMs > 0) {
      this.#waitTimer = this.#clock.setTimer(() => this.#waitExpired(), config.waitMs);
    }
    config.signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  get name(): string {
    return this.config.name;
  }
  get token(): bigint {
    return this.#token;
  }
  get signal(): AbortSignal {
    return this.#controller.signal;
  }
  get lost(): LockLostError | undefined {
    return this.#lost;
  }
  get closed(): Promise<void> {
    return this.#closed;
  }
  get tlsResumed(): boolean | undefined {
    return this.#tlsResumed;
  }
  /** The give-up deadline: the send of the newest answered request + 0.8 × lease, on the session's clock (for tests). */
  get confirmedUntil(): number {
    return this.#rules.deadline;
  }

  /**
   * Ownership is confirmed now: granted, not ended, and the give-up deadline
   * not reached. It reads the clock itself, so work that resumes after a stall
   * of the event loop sees the loss at its first check, before the give-up
   * timer had its turn; that check gives the lock up at once, so once false it
   * never turns true again, whatever answer arrives next.
   */
  valid(): boolean {
    if (this.#state !== 'held') return false;
    if (this.#rules.confirmed(this.#clock.now())) return true;
    this.#giveUp();
    return false;
  }

  /** Ends the session (the work has stopped) and resolves once the connection is closed. */
  release(): Promise<void> {
    this.#workStopped = true;
    if (this.#state !== 'ended') {
      this.#end();
      this.#controller.abort(new DOMException(`monolock: lock ${JSON.stringify(this.config.name)} released`, 'AbortError'));
    }
    this.#close();
    return this.#closed;
  }

  #connected(): void {
    this.#clock.clearTimer(this.#connectTimer);
    this.#connectTimer = undefined;
    if (this.#state !== 'connecting') return;
    this.#state = 'sent';
    // The give-up clock runs from the ACQUIRE on.
    this.#send(encodeAcquire(this.config.leaseMs, this.config.nameBytes));
  }

  #send(frame: Uint8Array): void {
    this.#rules.sent(this.#clock.now());
    // A failed write surfaces as the socket's 'error' event.
    this.#socket.write(frame);
    this.#armRulesTimer();
  }

  #onRulesTimer = (): void => {
    this.#rulesTimer = undefined;
    this.#runDue();
  };

  /** Does what the rules say is due now, or waits for the next thing due. */
  #runDue(): void {
    if (this.#state === 'ended') return;
    switch (this.#rules.due(this.#clock.now())) {
      case 'give-up':
        this.#giveUp();
        return;
      case 'heartbeat':
        this.#send(HEARTBEAT);
        return;
      case undefined:
        this.#armRulesTimer();
    }
  }

  #armRulesTimer(): void {
    this.#clock.clearTimer(this.#rulesTimer);
    this.#rulesTimer = undefined;
    if (this.#state === 'ended') return;
    this.#rulesTimer = this.#clock.setTimer(this.#onRulesTimer, this.#rules.nextWakeup() - this.#clock.now());
  }

  #onData(chunk: Buffer): void {
    if (this.#state === 'ended') return; // gave up: nothing the server says now changes that
    const at = this.#clock.now();
    for (const frame of this.#decoder.push(chunk)) {
      this.#receive(frame, at);
      if ((this.#state as State) === 'ended') return; // a frame may end the session
    }
  }

  /**
   * Applies one frame (rule 4): each WAITING or ACQUIRED answers the request in
   * flight, except the one ACQUIRED the server pushes on promotion. Anything
   * else breaks the protocol (rule 7).
   */
  #receive(frame: ServerFrame, at: number): void {
    switch (frame.type) {
      case 'error':
        this.#fail(errorForCode(frame.code, frame.reason), 'server', true);
        return;
      case 'unknown':
        this.#violation(`unknown frame type 0x${frame.byte.toString(16).padStart(2, '0')} from the server`);
        return;
      case 'waiting':
        if ((this.#state === 'sent' || this.#state === 'waiting') && this.#rules.inFlight) {
          const first = this.#state === 'sent';
          this.#state = 'waiting';
          if (!this.#acknowledged(at)) return;
          if (first && this.config.waitMs === 0) {
            this.#fail(new BusyError(this.config.name, `monolock: lock ${JSON.stringify(this.config.name)} is busy: another client holds it (wait: false)`), 'closed', true);
          }
          return;
        }
        this.#violation(this.#state === 'held' ? 'WAITING after ACQUIRED' : 'WAITING with no request in flight');
        return;
      case 'acquired':
        if (this.#state === 'sent') {
          if (this.#acknowledged(at)) this.#grant(frame.token);
        } else if (this.#state === 'waiting') {
          // The promotion push answers no request: a heartbeat in flight gets its own answer.
          this.#grant(frame.token);
        } else if (this.#state === 'held' && this.#rules.inFlight && frame.token === this.#token) {
          this.#acknowledged(at);
        } else if (this.#state === 'held' && frame.token !== this.#token) {
          this.#violation(`token changed from ${this.#token} to ${frame.token}`);
        } else {
          this.#violation('ACQUIRED with no request in flight');
        }
        return;
    }
  }

  /**
   * The server has seen the request in flight (the rules move the deadline and
   * the next heartbeat), and the next heartbeat goes out at once when this
   * answer came later than its time (rule 3). An answer at the deadline or
   * later gives the lock up instead; false then.
   */
  #acknowledged(at: number): boolean {
    if (!this.#rules.answered(at)) {
      this.#giveUp();
      return false;
    }
    this.#runDue();
    return true;
  }

  #grant(token: bigint): void {
    this.#state = 'held';
    this.#token = token;
    this.#clock.clearTimer(this.#waitTimer);
    this.#waitTimer = undefined;
    this.config.signal?.removeEventListener('abort', this.#onAbort);
    this.#resolve?.(token);
  }

  /** No answer within 0.8 × lease of the newest answered send (rule 8). */
  #giveUp(): void {
    const detail = `no answer from the server within 0.8 × lease (${this.#rules.timeoutMs} ms) of the newest answered request`;
    this.#fail(new UnavailableError(`monolock: ${detail} to ${this.config.address}`), 'timeout', false, detail);
  }

  #waitExpired(): void {
    this.#waitTimer = undefined;
    const name = JSON.stringify(this.config.name);
    if (this.#state === 'waiting') {
      this.#fail(new BusyError(this.config.name, `monolock: lock ${name} is still busy after waiting ${this.config.waitMs} ms`), 'closed', true);
    } else if (this.#state === 'connecting' || this.#state === 'sent') {
      this.#fail(new UnavailableError(`monolock: no answer from ${this.config.address} for lock ${name} within the wait of ${this.config.waitMs} ms`), 'closed', true);
    }
  }

  #violation(detail: string): void {
    this.#fail(new ProtocolError(`monolock: protocol violation by the server at ${this.config.address}: ${detail}`), 'protocol', false, detail);
  }

  #onEnd(): void {
    // EOF: the server has released the lock (or the queue place) already.
    if (this.#state === 'ended') {
      this.#close();
      return;
    }
    const detail = 'the server closed the connection';
    this.#fail(new UnavailableError(`monolock: ${detail} (${this.config.address})`), 'closed', true, detail);
  }

  #onError(err: Error): void {
    if (this.#state === 'ended') {
      this.#close();
      return;
    }
    const connecting = this.#state === 'connecting';
    const refusal = tlsRefusal(err);
    const detail = refusal
      ? `TLS with ${this.config.address} refused: ${refusal}: ${err.message.trim()}`
      : connecting
        ? `cannot connect to ${this.config.address}: ${err.message}`
        : `connection to ${this.config.address} failed: ${err.message}`;
    this.#fail(new UnavailableError(`monolock: ${detail}`, { cause: err, retryable: refusal === undefined }), 'closed', true, detail);
  }

  /**
   * Ends the session because of err. Before the grant, the acquire rejects with
   * err and the connection closes at once. After it, the work is stopped at
   * once (signal aborted, valid() false) and the lock counts as lost; the
   * connection closes at once when closeNow (the server has ended the session
   * already) or the work has stopped, otherwise once the work stops or at the
   * last request's send + lease, whichever comes first: the server's expiry,
   * not this close, must hand the lock on while the old work may still run.
   */
  #fail(err: unknown, kind: LossKind, closeNow: boolean, detail?: string): void {
    if (this.#state === 'ended') return;
    const held = this.#state === 'held';
    this.#end();
    if (!held) {
      this.#controller.abort(err);
      this.#reject?.(err);
      this.#close();
      return;
    }
    this.#lost = new LockLostError(this.config.name, kind, detail ?? (err instanceof Error ? err.message : String(err)), err);
    this.#controller.abort(this.#lost);
    if (closeNow || this.#workStopped) {
      this.#close();
      return;
    }
    // The lingering socket must not keep the process alive on its own.
    this.#socket.unref();
    this.#closeTimer = this.#clock.setTimer(() => this.#close(), this.#rules.closeBy() - this.#clock.now());
  }

  /** Stops every timer of the live session; the close timer is the caller's. */
  #end(): void {
    this.#state = 'ended';
    for (const t of [this.#rulesTimer, this.#connectTimer, this.#waitTimer]) this.#clock.clearTimer(t);
    this.#rulesTimer = this.#connectTimer = this.#waitTimer = undefined;
    this.config.signal?.removeEventListener('abort', this.#onAbort);
  }

  #close(): void {
    this.#clock.clearTimer(this.#closeTimer);
    this.#closeTimer = undefined;
    this.#socket.destroy();
  }
}

/**
 * A TLS failure that another attempt would meet again (a certificate or
 * handshake the two sides disagree on), as what to check; undefined for
 * anything else. Under TLS 1.3 the server checks the client's certificate
 * after the client's handshake has completed, so its refusal is an alert on
 * the first read (ERR_SSL_TLSV1_ALERT_UNKNOWN_CA, …_CERTIFICATE_REQUIRED).
 */
function tlsRefusal(err: Error): string | undefined {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  if (/ALERT/.test(code)) {
    return 'the server refused the TLS connection (is the client certificate expired, signed by a CA the server does not trust, or missing?)';
  }
  if (/CERT|SELF_SIGNED|UNABLE_TO|HOSTNAME|ALTNAME/.test(code)) {
    return "the server's certificate did not verify (check the ca option and the server name)";
  }
  if (/SSL|TLS/.test(code)) return 'the TLS handshake failed (protocol versions or ciphers the two sides do not share?)';
  return undefined;
}
