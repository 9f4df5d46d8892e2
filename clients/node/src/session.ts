import net from 'node:net';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';

import { BusyError, LockLostError, ProtocolError, UnavailableError, errorForCode, type LossKind } from './errors.js';
import { FrameDecoder, HEARTBEAT, RELEASE, encodeAcquire, type ServerFrame } from './frames.js';
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
  /** The lease as the caller asked it (a fraction of a millisecond kept), which the client's own timings use; leaseMs when not given. */
  readonly leaseAskedMs?: number;
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
 * Who ended a session, which says how its connection closes: `client` (the
 * caller left the queue: RELEASE, then the server's close), `server` (an
 * ERROR or end of stream: closed at once), `failed` (a read or write failed:
 * reset), `gave-up` (silence or a broken frame: reset, once the work stops
 * if it runs).
 */
type Ending = 'client' | 'server' | 'failed' | 'gave-up';

/**
 * One connection's claim on one lock: it sends ACQUIRE, keeps a reader on the
 * socket for the whole connection (a promotion arrives unasked), heartbeats on
 * the schedule, and decides when ownership is lost. Node runs it on one
 * thread, so every method runs to completion without locks.
 */
export class Session {
  readonly config: SessionConfig;
  readonly #clock: Clock;
  /** The TLS socket, or the TCP one without TLS: what the session reads and writes. */
  readonly #socket: net.Socket;
  /** The TCP socket under it, for the reset: resetAndDestroy takes a TCP handle, not TLS's. */
  readonly #tcp: net.Socket;
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
  /** RELEASE is written: the session waits for the server's close, at most the release bound. */
  #releasing = false;
  /** Whether the connection, once ended, closes by a reset (SO_LINGER {on, 0}) rather than a plain close. */
  #resetOnClose = false;

  /** The rules' timer: the next heartbeat or the give-up deadline. */
  #rulesTimer: unknown;
  #connectTimer: unknown;
  #waitTimer: unknown;
  #closeTimer: unknown;

  /** The connect deadline and the wait's, on the session's clock (Infinity: none). */
  #connectBy = Infinity;
  #waitBy = Infinity;

  #resolve: ((token: bigint) => void) | undefined;
  #reject: ((err: unknown) => void) | undefined;
  readonly #onAbort = (): void => this.#fail(this.config.signal?.reason, 'closed', 'client');

  /** Settles with the token once granted, or with why not. */
  readonly granted: Promise<bigint>;

  constructor(config: SessionConfig) {
    this.config = config;
    this.#clock = config.clock ?? realClock;
    // The server gets the longer, whole-millisecond lease; the client times
    // itself on the lease as asked (docs/protocol.md, "The client step").
    this.#rules = new SessionRules(config.leaseAskedMs ?? config.leaseMs);
    this.granted = new Promise<bigint>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    let closed!: () => void;
    this.#closed = new Promise<void>((resolve) => (closed = resolve));

    const { host, port } = config;
    // allowHalfOpen: the session closes its side itself, once the server has
    // closed first; node:net would answer the server's end of stream (or
    // TLS's close_notify) with its own at once.
    const tcp = net.connect({ host, port, allowHalfOpen: true });
    let socket: net.Socket;
    if (config.tls) {
      const cache = config.tlsSessions;
      const saved = cache?.latest;
      // node:tls takes allowHalfOpen as net.connect does; @types/node leaves it out.
      const options: tls.ConnectionOptions & { allowHalfOpen: boolean } = { ...config.tls, host, port, socket: tcp, allowHalfOpen: true, ...(saved ? { session: saved } : {}) };
      const tlsSocket = tls.connect(options);
      tcp.on('error', () => {}); // node:tls reports the same error on the TLS socket
      // Listening turns on node:tls's session callbacks; add it before the handshake runs.
      if (cache) tlsSocket.on('session', (session: Buffer) => cache.save(session));
      tlsSocket.once('secureConnect', () => {
        this.#tlsResumed = tlsSocket.isSessionReused();
        this.#connected();
      });
      socket = tlsSocket;
    } else {
      socket = tcp;
      socket.once('connect', () => this.#connected());
    }
    this.#socket = socket;
    this.#tcp = tcp;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('end', () => this.#onEnd());
    socket.on('error', (err) => this.#onError(err));
    socket.on('close', () => {
      this.#clock.clearTimer(this.#closeTimer);
      this.#closeTimer = undefined;
      closed();
    });

    const start = this.#clock.now();
    this.#connectBy = start + config.connectTimeoutMs;
    this.#connectTimer = this.#clock.setTimer(() => this.#connectTimedOut(), config.connectTimeoutMs);
    if (Number.isFinite(config.waitMs) && config.waitMs > 0) {
      this.#waitBy = start + config.waitMs;
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

  /**
   * Ends the session (the work has stopped) and resolves once the connection
   * is closed. A live session sends RELEASE and waits for the server to close
   * first, at most the release bound, so the connection's TIME_WAIT stays on
   * the server (docs/protocol.md, RELEASE); one the client gave up on closes
   * now by a reset; one the server ended, now.
   */
  release(): Promise<void> {
    this.#workStopped = true;
    if (this.#state !== 'ended') {
      const connecting = this.#state === 'connecting';
      this.#end();
      this.#controller.abort(new DOMException(`monolock: lock ${JSON.stringify(this.config.name)} released`, 'AbortError'));
      if (connecting) this.#close(true);
      else this.#sendRelease();
    } else if (!this.#releasing) {
      this.#close(this.#resetOnClose);
    }
    return this.#closed;
  }

  #connected(): void {
    this.#clock.clearTimer(this.#connectTimer);
    this.#connectTimer = undefined;
    if (this.#takeDeadlines('gave-up')) return;
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

  /**
   * The frames of one read were all sent before the server could see a
   * heartbeat this read makes due, so that heartbeat goes out only once the
   * whole read is applied: a second answer to one request in the same read is
   * a violation, not the answer to a heartbeat not yet sent.
   */
  #onData(chunk: Buffer): void {
    const at = this.#clock.now();
    const frames = this.#decoder.push(chunk);
    // A deadline passed at this read's time comes first; an ERROR read with
    // it still closes the connection normally (the server closed first).
    if (this.#takeDeadlines(frames.some((f) => f.type === 'error') ? 'server' : 'gave-up')) {
      this.#linger(frames);
      return;
    }
    for (const frame of frames) {
      this.#receive(frame, at);
      if ((this.#state as State) === 'ended') return; // a frame may end the session
    }
    this.#runDue();
  }

  /**
   * Applies one frame (rule 4): each WAITING or ACQUIRED answers the request in
   * flight, except the one ACQUIRED the server pushes on promotion. Anything
   * else breaks the protocol (rule 7).
   */
  #receive(frame: ServerFrame, at: number): void {
    switch (frame.type) {
      case 'error':
        this.#fail(errorForCode(frame.code, frame.reason), 'server', 'server');
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
            this.#fail(new BusyError(this.config.name, `monolock: lock ${JSON.stringify(this.config.name)} is busy: another client holds it (wait: false)`), 'closed', 'client');
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
   * the next heartbeat; when this answer came later than its time, the next
   * heartbeat goes out at the end of the read, rule 3). An answer at the
   * deadline or later gives the lock up instead; false then.
   */
  #acknowledged(at: number): boolean {
    if (!this.#rules.answered(at)) {
      this.#giveUp();
      return false;
    }
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
  #giveUp(ending: Ending = 'gave-up'): void {
    const detail = `no answer from the server within 0.8 × lease (${this.#rules.timeoutMs} ms) of the newest answered request`;
    this.#fail(new UnavailableError(`monolock: ${detail} to ${this.config.address}`), 'timeout', ending, detail);
  }

  #connectTimedOut(): void {
    this.#clock.clearTimer(this.#connectTimer);
    this.#connectTimer = undefined;
    const { address, connectTimeoutMs } = this.config;
    this.#fail(new UnavailableError(`monolock: cannot connect to ${address} within ${connectTimeoutMs} ms; is the server running there?`), 'closed', 'client');
  }

  /**
   * At each event the deadlines that have passed at its time are taken
   * first, as if their timer had fired just before (docs/protocol.md, "The
   * order of simultaneous things"): the connect deadline, then the give-up,
   * then the wait. So a frame or the end of the stream read at the give-up
   * deadline or later comes too late: the lock (or the attempt) is lost by
   * silence, and what was read only decides how the connection ends
   * (`ending`). True when the session has ended (now or before).
   */
  #takeDeadlines(ending: Ending): boolean {
    const now = this.#clock.now();
    if (this.#state === 'connecting' && now >= this.#connectBy) this.#connectTimedOut();
    if ((this.#state === 'sent' || this.#state === 'waiting' || this.#state === 'held') && this.#rules.due(now) === 'give-up') this.#giveUp(ending);
    if ((this.#state === 'sent' || this.#state === 'waiting') && now >= this.#waitBy) this.#waitExpired();
    return this.#state === 'ended';
  }

  /**
   * Frames read after the session ended. While releasing they are discarded
   * (the release bound or the server's close ends it). While lingering after
   * a give-up, nothing revives the lock, but an ERROR means the server has
   * let go: the connection closes now, normally.
   */
  #linger(frames: readonly ServerFrame[]): void {
    if (this.#releasing || this.#closeTimer === undefined) return;
    if (frames.some((f) => f.type === 'error')) this.#close(this.#tls);
  }

  #waitExpired(): void {
    this.#clock.clearTimer(this.#waitTimer);
    this.#waitTimer = undefined;
    const name = JSON.stringify(this.config.name);
    if (this.#state === 'waiting') {
      this.#fail(new BusyError(this.config.name, `monolock: lock ${name} is still busy after waiting ${this.config.waitMs} ms`), 'closed', 'client');
    } else if (this.#state === 'connecting' || this.#state === 'sent') {
      this.#fail(new UnavailableError(`monolock: no answer from ${this.config.address} for lock ${name} within the wait of ${this.config.waitMs} ms`), 'closed', 'client');
    }
  }

  #violation(detail: string): void {
    this.#fail(new ProtocolError(`monolock: protocol violation by the server at ${this.config.address}: ${detail}`), 'protocol', 'gave-up', detail);
  }

  /**
   * EOF: the server has released the lock (or the queue place) already, or
   * closed after RELEASE as asked. Over TLS it is the server's close_notify,
   * which comes before its FIN: a plain close then could send the client's
   * FIN first and leave the TIME_WAIT here, so the connection is reset.
   */
  #onEnd(): void {
    // The server closed first: after RELEASE, while lingering after a
    // give-up, or at a deadline taken first, the close is a normal one.
    if (this.#takeDeadlines('server')) {
      this.#close(this.#tls);
      return;
    }
    const detail = 'the server closed the connection';
    this.#fail(new UnavailableError(`monolock: ${detail} (${this.config.address})`), 'closed', 'server', detail);
  }

  #onError(err: Error): void {
    if (this.#takeDeadlines('failed')) {
      this.#close(true);
      return;
    }
    const connecting = this.#state === 'connecting';
    const refusal = tlsRefusal(err);
    const detail = refusal
      ? `TLS with ${this.config.address} refused: ${refusal}: ${err.message.trim()}`
      : connecting
        ? `cannot connect to ${this.config.address}: ${err.message}`
        : `connection to ${this.config.address} failed: ${err.message}`;
    this.#fail(new UnavailableError(`monolock: ${detail}`, { cause: err, retryable: refusal === undefined }), 'closed', 'failed', detail);
  }

  /**
   * Ends the session because of err. Before the grant, the acquire rejects with
   * err, and the connection is released (the caller left the queue) or closed
   * at once. After it, the work is stopped at once (signal aborted, valid()
   * false) and the lock counts as lost; the connection closes at once unless
   * the client gave up while the work runs: then once the work stops or at the
   * last request's send + lease, whichever comes first, so that the server's
   * expiry, not this close, hands the lock on while the old work may still
   * run. A connection the client gave up on, or whose read or write failed,
   * closes by a reset: no TIME_WAIT, and the server may be unreachable.
   */
  #fail(err: unknown, kind: LossKind, ending: Ending, detail?: string): void {
    if (this.#state === 'ended') return;
    const held = this.#state === 'held';
    const connecting = this.#state === 'connecting';
    this.#end();
    this.#resetOnClose = ending === 'failed' || ending === 'gave-up' || (ending === 'server' && this.#tls);
    if (!held) {
      this.#controller.abort(err);
      this.#reject?.(err);
      if (ending === 'client' && !connecting) this.#sendRelease();
      else this.#close(this.#resetOnClose || ending === 'client');
      return;
    }
    this.#lost = new LockLostError(this.config.name, kind, detail ?? (err instanceof Error ? err.message : String(err)), err);
    this.#controller.abort(this.#lost);
    if (ending !== 'gave-up' || this.#workStopped) {
      this.#close(this.#resetOnClose);
      return;
    }
    // The lingering socket must not keep the process alive on its own.
    this.#socket.unref();
    this.#closeTimer = this.#clock.setTimer(() => this.#close(true), this.#rules.closeBy() - this.#clock.now());
  }

  /**
   * RELEASE, then the server's close (#onEnd), or a reset once the release
   * bound, min(lease, 2 s), has passed. What the server sends meanwhile is
   * discarded: an answer in flight, or an older server's ERROR 0x13 (unknown
   * message type), which also closes.
   */
  #sendRelease(): void {
    this.#releasing = true;
    this.#resetOnClose = false;
    // A failed write surfaces as the socket's 'error' event: a reset.
    this.#socket.write(RELEASE);
    this.#closeTimer = this.#clock.setTimer(() => this.#close(true), this.#rules.releaseBoundMs);
  }

  get #tls(): boolean {
    return this.#socket !== this.#tcp;
  }

  /** Stops every timer of the live session; the close timer is the caller's. */
  #end(): void {
    this.#state = 'ended';
    for (const t of [this.#rulesTimer, this.#connectTimer, this.#waitTimer]) this.#clock.clearTimer(t);
    this.#rulesTimer = this.#connectTimer = this.#waitTimer = undefined;
    this.config.signal?.removeEventListener('abort', this.#onAbort);
  }

  /**
   * Closes the connection: a plain close, or a reset (an RST instead of a
   * FIN, which leaves no TIME_WAIT). A socket still connecting has no
   * connection to reset and is destroyed.
   */
  #close(reset: boolean): void {
    this.#clock.clearTimer(this.#closeTimer);
    this.#closeTimer = undefined;
    if (reset && !this.#tcp.connecting && !this.#tcp.destroyed) {
      this.#tcp.resetAndDestroy();
    } else {
      this.#socket.destroy();
    }
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
