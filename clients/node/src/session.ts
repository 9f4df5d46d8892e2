import net from 'node:net';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';

import type { AddressBook, Candidate } from './addresses.js';
import { BusyError, LockLostError, ProtocolError, UnavailableError, errorForCode, type LossKind } from './errors.js';
import { FrameDecoder, HEARTBEAT, RELEASE, encodeAcquire } from './frames.js';
import { Step, type Action, type Ending, type Reason } from './step.js';
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
  /** The Client's addresses, tried from the one that worked last; without it, host and port alone. */
  readonly book?: AddressBook | undefined;
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

/**
 * One connection's claim on one lock, the driver of its step (step.ts): it
 * owns the socket, the one timer and the caller, turns what happens on them
 * into the step's events, and carries out the actions the step returns. The
 * rules themselves (the connect deadline, the frames, the give-up, the wait,
 * the release and how the connection closes) are the step's. Node runs it on
 * one thread, so every method runs to completion without locks.
 */
export class Session {
  readonly config: SessionConfig;
  readonly #clock: Clock;
  readonly #step: Step;
  readonly #decoder = new FrameDecoder();
  readonly #controller = new AbortController();
  readonly #closed: Promise<void>;
  #closedResolve!: () => void;

  /** The TLS socket, or the TCP one without TLS: what the session reads and writes. */
  #socket: net.Socket | undefined;
  /** The TCP socket under it, for the reset: resetAndDestroy takes a TCP handle, not TLS's. */
  #tcp: net.Socket | undefined;
  #held = false;
  #token = 0n;
  /** The give-up deadline the step published with the grant and each answer (-Infinity: not held). */
  #validUntil = -Infinity;
  /** The caller released (or left the queue): valid() is false from then on. */
  #stopped = false;
  #lost: LockLostError | undefined;
  /** The OS or TLS error behind the step's next failure, for its cause. */
  #cause: Error | undefined;
  /** Whether the TLS handshake resumed a session; undefined before it and without TLS. */
  #tlsResumed: boolean | undefined;
  #timer: unknown;

  #resolve: ((token: bigint) => void) | undefined;
  #reject: ((err: unknown) => void) | undefined;
  readonly #onAbort = (): void => {
    const reason: unknown = this.config.signal?.reason;
    this.#controller.abort(reason);
    this.#reject?.(reason);
    this.#apply(this.#step.stop(this.#clock.now()));
  };

  /** Settles with the token once granted, or with why not. */
  readonly granted: Promise<bigint>;

  constructor(config: SessionConfig) {
    this.config = config;
    this.#clock = config.clock ?? realClock;
    // The server gets the longer, whole-millisecond lease; the client times
    // itself on the lease as asked (docs/protocol.md, "The client step").
    this.#step = new Step({ leaseMs: config.leaseAskedMs ?? config.leaseMs, waitMs: config.waitMs, connectTimeoutMs: config.connectTimeoutMs });
    this.granted = new Promise<bigint>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.#closed = new Promise<void>((resolve) => (this.#closedResolve = resolve));
    config.signal?.addEventListener('abort', this.#onAbort, { once: true });
    this.#apply(this.#step.dial(this.#clock.now()));
    const book = config.book;
    if (book === undefined) {
      this.#dial([{ host: config.host, port: config.port, address: config.address, servername: config.host }], 0, []);
    } else {
      void book.candidates().then(({ candidates, failed }) => this.#dial(candidates, 0, failed));
    }
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
    return this.#step.rules.deadline;
  }

  /**
   * Ownership is confirmed now: granted, not ended, and the give-up deadline
   * the step published not reached. It reads the clock itself, so work that
   * resumes after a stall of the event loop sees the loss at its first check,
   * before the give-up timer had its turn; that check is the step's
   * `expired` event, which gives the lock up at once, so once false it never
   * turns true again, whatever answer arrives next.
   */
  valid(): boolean {
    if (this.#stopped || this.#lost !== undefined || !this.#held) return false;
    const now = this.#clock.now();
    if (now < this.#validUntil) return true;
    this.#apply(this.#step.expired(now));
    return false;
  }

  /**
   * Ends the session (the work has stopped) and resolves once the connection
   * is closed: the step's stop. A live session sends RELEASE and waits for
   * the server to close first, at most the release bound, so the
   * connection's TIME_WAIT stays on the server (docs/protocol.md, RELEASE);
   * one the client gave up on closes now by a reset; one the server ended
   * has closed already.
   */
  release(): Promise<void> {
    if (!this.#stopped) {
      this.#stopped = true;
      if (!this.#controller.signal.aborted) {
        this.#controller.abort(new DOMException(`monolock: lock ${JSON.stringify(this.config.name)} released`, 'AbortError'));
      }
      this.#apply(this.#step.stop(this.#clock.now()));
    }
    return this.#closed;
  }

  // --- the connect phase -------------------------------------------------

  /**
   * Dials the candidates from i on, one at a time, each in what is left of
   * the step's connect deadline (its timer aborts the one under way); a
   * refused or failed one passes to the next. The first up is the
   * connection; none up is the step's failed connect.
   */
  #dial(list: readonly Candidate[], i: number, tried: string[]): void {
    if (this.#step.done) return;
    const c = list[i];
    if (c === undefined) {
      this.#cause = new Error(tried.join('; ') || 'no address to connect to');
      this.#apply(this.#step.closed(this.#clock.now(), 'broken'));
      return;
    }
    const { config } = this;
    // allowHalfOpen: the session closes its side itself, once the server has
    // closed first; node:net would answer the server's end of stream (or
    // TLS's close_notify) with its own at once.
    const tcp = net.connect({ host: c.host, port: c.port, allowHalfOpen: true });
    let socket: net.Socket = tcp;
    if (config.tls) {
      const cache = config.tlsSessions;
      const saved = cache?.latest;
      // node:tls takes allowHalfOpen as net.connect does; @types/node leaves it out.
      const options: tls.ConnectionOptions & { allowHalfOpen: boolean } = {
        ...config.tls,
        host: c.servername,
        port: c.port,
        socket: tcp,
        allowHalfOpen: true,
        ...(saved ? { session: saved } : {}),
      };
      const tlsSocket = tls.connect(options);
      tcp.on('error', () => {}); // node:tls reports the same error on the TLS socket
      // Listening turns on node:tls's session callbacks; add it before the handshake runs.
      if (cache) tlsSocket.on('session', (session: Buffer) => cache.save(session));
      socket = tlsSocket;
    }
    this.#socket = socket;
    this.#tcp = tcp;
    socket.setNoDelay(true);
    // Either socket's close ends the session once the step has closed:
    // node:tls does not always close the TCP socket under a handshake cut
    // short, so the close below resets or destroys that one too.
    const onClose = (): void => {
      if (socket === this.#socket && this.#step.done) this.#closedResolve();
    };
    socket.on('close', onClose);
    if (tcp !== socket) tcp.on('close', onClose);
    const failed = (err: Error): void => {
      socket.destroy();
      if (this.#step.done) return;
      if (tlsRefusal(err) !== undefined) {
        this.#cause = err;
        this.#apply(this.#step.closed(this.#clock.now(), 'tls'));
        return;
      }
      tried.push(`${c.address}${c.host === c.servername ? '' : ` (${c.host})`}: ${err.message}`);
      this.#dial(list, i + 1, tried);
    };
    socket.once('error', failed);
    socket.once(config.tls ? 'secureConnect' : 'connect', () => {
      socket.off('error', failed);
      if (socket instanceof tls.TLSSocket) this.#tlsResumed = socket.isSessionReused();
      config.book?.worked(c);
      socket.on('data', (chunk: Buffer) => this.#apply(this.#step.frames(this.#decoder.push(chunk), this.#clock.now())));
      socket.on('end', () => this.#apply(this.#step.closed(this.#clock.now(), 'eof')));
      socket.on('error', (err) => this.#onError(err));
      this.#apply(this.#step.start(this.#clock.now()));
    });
  }

  #onError(err: Error): void {
    this.#cause = err;
    this.#apply(this.#step.closed(this.#clock.now(), tlsRefusal(err) !== undefined ? 'tls' : 'broken'));
  }

  // --- the actions -------------------------------------------------------

  /** Carries out the step's actions, in order. */
  #apply(actions: readonly Action[]): void {
    for (const a of actions) {
      switch (a.kind) {
        case 'waiting':
        case 'ack':
          break; // for observers; none yet
        case 'granted':
          this.#held = true;
          this.#token = a.token;
          this.config.signal?.removeEventListener('abort', this.#onAbort);
          this.#resolve?.(a.token);
          break;
        case 'valid-until':
          this.#validUntil = a.at;
          break;
        case 'failed': {
          const err = this.#error(a);
          this.#controller.abort(err);
          this.#reject?.(err);
          break;
        }
        case 'lost':
          this.#validUntil = -Infinity;
        {
          const err = this.#error(a);
          this.#lost = new LockLostError(this.config.name, lossKind(a.reason), a.reason === 'server' ? err.message : a.detail, err);
        }
          this.#controller.abort(this.#lost);
          // A lingering socket must not keep the process alive on its own.
          this.#socket?.unref();
          break;
        case 'send':
          this.#write(a.frame);
          break;
        case 'close':
          this.#close(false);
          break;
        case 'abort':
          this.#close(true);
          break;
        case 'wake':
          this.#clock.clearTimer(this.#timer);
          this.#timer = a.at === undefined ? undefined : this.#clock.setTimer(this.#onTimer, a.at - this.#clock.now());
          break;
      }
    }
  }

  readonly #onTimer = (): void => {
    this.#timer = undefined;
    this.#apply(this.#step.timer(this.#clock.now()));
  };

  #write(frame: 'ACQUIRE' | 'HEARTBEAT' | 'RELEASE'): void {
    const bytes = frame === 'ACQUIRE' ? encodeAcquire(this.config.leaseMs, this.config.nameBytes) : frame === 'HEARTBEAT' ? HEARTBEAT : RELEASE;
    // Writes never block the loop; one that fails says so here (and as the
    // socket's 'error', which then finds the step closed).
    this.#socket?.write(bytes, (err) => {
      if (err) this.#cause = err;
      if (!this.#step.done) this.#apply(this.#step.written(this.#clock.now(), err ? 'broken' : undefined));
    });
  }

  /** The error a failure or a loss carries, for the caller and the work. */
  #error(e: Ending): Error {
    const { address, name } = this.config;
    const cause = this.#cause;
    const quoted = JSON.stringify(name);
    switch (e.reason) {
      case 'busy':
        return new BusyError(name, `monolock: lock ${quoted} is busy: ${e.detail}`);
      case 'server':
        return errorForCode(e.code ?? 0, e.serverReason ?? '');
      case 'protocol':
        return new ProtocolError(`monolock: protocol violation by the server at ${address}: ${e.detail}`);
      case 'tls': {
        const refusal = cause === undefined ? undefined : tlsRefusal(cause);
        return new UnavailableError(`monolock: TLS with ${address} refused: ${refusal ?? e.detail}${cause ? `: ${cause.message.trim()}` : ''}`, { cause, retryable: false });
      }
      case 'connect':
        return new UnavailableError(`monolock: cannot connect to ${this.#addresses()}: ${cause?.message ?? e.detail}; is the server running there?`, { cause });
      case 'timeout':
        return new UnavailableError(`monolock: ${e.detail} to ${address}`);
      case 'closed':
        return new UnavailableError(`monolock: ${e.detail} (${address})${cause ? `: ${cause.message}` : ''}`, { cause });
    }
  }

  #addresses(): string {
    return this.config.book?.addresses.join(', ') ?? this.config.address;
  }

  /**
   * Closes the connection: a plain close, or a reset (an RST instead of a
   * FIN, which leaves no TIME_WAIT). Over TLS the server's close_notify
   * comes before its FIN, so a plain close could send the client's FIN
   * first: the close is a reset there too, as is the abort of a TLS
   * handshake under way. A socket still connecting has no connection to
   * reset and is destroyed.
   */
  #close(abort: boolean): void {
    this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.config.signal?.removeEventListener('abort', this.#onAbort);
    const socket = this.#socket;
    const tcp = this.#tcp;
    if (socket === undefined || socket.destroyed) {
      this.#closedResolve();
      return;
    }
    if ((abort || socket !== tcp) && tcp !== undefined && !tcp.connecting && !tcp.destroyed) {
      tcp.resetAndDestroy();
    } else {
      socket.destroy();
      tcp?.destroy();
    }
  }
}

function lossKind(r: Reason): LossKind {
  return r === 'timeout' || r === 'server' || r === 'protocol' ? r : 'closed';
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
