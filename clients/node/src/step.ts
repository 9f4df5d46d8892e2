// The client step of docs/protocol.md ("The client step"): one event in,
// stamped with the monotonic time (milliseconds) at which the driver saw it,
// the actions the driver carries out, in order, out. It reads no clock,
// touches no socket and arms no timer: the Session (session.ts) owns the
// connection, the one timer and the caller, and is the only one to call it.
// Every rule of a session lives here once: the connect deadline, the frames
// (rules 1-8), the give-up, a try-lock's and a wait's end, the release and
// how the connection closes. The scripts of protocol/testdata/step check it
// to the nanosecond (test/step-scripts.test.ts).

import { CODE_SHUTTING_DOWN, FIRST_CLIENT_ERROR_CODE, type ServerFrame } from './frames.js';
import { SessionRules } from './rules.js';

/** Why a session ended (docs/protocol.md, "Why a session ends"). */
export type Reason = 'busy' | 'timeout' | 'closed' | 'connect' | 'server' | 'protocol' | 'tls';

/** Why the attempt or the lock ended, for the driver's error. */
export interface Ending {
  readonly reason: Reason;
  /** What happened, for the error's message. */
  readonly detail: string;
  /** The ERROR's code and text, for `server`. */
  readonly code?: number;
  readonly serverReason?: string;
}

export type Action =
  | { readonly kind: 'waiting' }
  | { readonly kind: 'granted'; readonly token: bigint }
  | { readonly kind: 'valid-until'; readonly at: number }
  | { readonly kind: 'ack'; readonly rttMs: number; readonly srttMs: number; readonly intervalMs: number }
  | ({ readonly kind: 'failed' } & Ending)
  | ({ readonly kind: 'lost' } & Ending)
  | { readonly kind: 'send'; readonly frame: 'ACQUIRE' | 'HEARTBEAT' | 'RELEASE' }
  | { readonly kind: 'close' }
  | { readonly kind: 'abort' }
  /** at undefined: no timer (wake off). */
  | { readonly kind: 'wake'; readonly at: number | undefined };

/** Whether a new attempt follows a failed one (retried by run before the work started). */
export type Retry = 'no' | 'backoff' | 'random-wait';

/** The retry rule of a failure before the grant (rule 6): after 0x01 a random wait, after the other server conditions and lost connections backoff, never after a client error, busy, a violation or a refused certificate. */
export function retryOf(e: Ending): Retry {
  switch (e.reason) {
    case 'timeout':
    case 'closed':
    case 'connect':
      return 'backoff';
    case 'server':
      if (e.code === CODE_SHUTTING_DOWN) return 'random-wait';
      return e.code !== undefined && e.code < FIRST_CLIENT_ERROR_CODE ? 'backoff' : 'no';
    default:
      return 'no';
  }
}

export interface StepConfig {
  /** The lease as the caller asked it, a fraction of a millisecond kept: the client's own timings use it. */
  readonly leaseMs: number;
  /** 0: a try-lock (the ACQUIRE's WAITING is busy); Infinity: wait until granted; else the longest wait from the attempt's first event. */
  readonly waitMs: number;
  readonly connectTimeoutMs: number;
}

type Phase = 'new' | 'connecting' | 'live' | 'releasing' | 'lingering' | 'closed';
type Claim = 'sent' | 'waiting' | 'held';

export class Step {
  readonly config: StepConfig;
  /** The heartbeat schedule and the give-up deadline, pure. */
  readonly rules: SessionRules;
  #phase: Phase = 'new';
  #claim: Claim = 'sent';
  #token = 0n;
  #began = false;
  #connectBy = Infinity;
  #waitBy = Infinity;
  /** Releasing: the release bound; lingering: the last request's write + lease. */
  #closeBy = Infinity;
  /** The caller's work has stopped: a lock lost by a give-up closes at once. */
  #workStopped = false;
  #out: Action[] = [];

  constructor(config: StepConfig) {
    this.config = config;
    this.rules = new SessionRules(config.leaseMs);
  }

  get token(): bigint {
    return this.#token;
  }
  /** The connection is closed or to be: the step takes no more events. */
  get done(): boolean {
    return this.#phase === 'closed';
  }
  /** Until when a connect (and TLS handshake) may take: the connect deadline, or the wait's if sooner. */
  get connectBy(): number {
    return Math.min(this.#connectBy, this.#waitBy);
  }

  /** The attempt begins: the connect (and TLS handshake) starts. */
  dial(now: number): Action[] {
    return this.#event(now, () => {
      this.#begin(now);
      this.#phase = 'connecting';
      this.#connectBy = now + this.config.connectTimeoutMs;
    });
  }

  /** The connection is up: ACQUIRE goes out, and the give-up clock runs from it (rule 8). */
  start(now: number): Action[] {
    return this.#event(now, () => {
      this.#begin(now);
      if (this.#phase !== 'new' && this.#phase !== 'connecting') return;
      this.#phase = 'live';
      this.#connectBy = Infinity;
      this.#send('ACQUIRE', now);
    });
  }

  /** The write the step asked for returned: done, failed (`broken`), or still blocked at the give-up deadline (`deadline`). */
  written(now: number, err?: 'broken' | 'deadline'): Action[] {
    return this.#event(now, () => {
      if (this.#phase === 'releasing' && err !== undefined) this.#closeNow('abort');
      if (this.#phase !== 'live') return;
      if (err === undefined) this.rules.written(now);
      else if (err === 'deadline') this.#giveUp(now);
      else this.#end({ reason: 'closed', detail: 'the write to the server failed' }, 'close', now);
    });
  }

  /** The frames of one read, in order, all at now. */
  frames(frames: readonly ServerFrame[], now: number): Action[] {
    return this.#event(now, () => {
      if (this.#phase === 'lingering') {
        // Nothing revives the lock; an ERROR says the server has let go.
        if (frames.some((f) => f.type === 'error')) this.#closeNow('close');
        return;
      }
      if (this.#phase !== 'live') return; // releasing: discarded
      for (const f of frames) {
        this.#receive(f, now);
        if (this.#phase !== 'live') return; // the frame ended it: what follows is not read
      }
      // The heartbeat this read made due goes out after the whole read: a
      // later frame of the same read answers nothing.
      this.#heartbeatIfDue(now);
    });
  }

  /** The connection ended without an ERROR: the end of the stream, a failed read or connect, a TLS alert. */
  closed(now: number, how: 'eof' | 'broken' | 'tls'): Action[] {
    return this.#event(now, () => {
      switch (this.#phase) {
        case 'connecting':
          this.#end(how === 'tls' ? { reason: 'tls', detail: 'the server refused the TLS connection' } : { reason: 'connect', detail: 'the connect failed' }, 'close', now);
          return;
        case 'live':
          this.#end(
            how === 'tls'
              ? { reason: 'tls', detail: 'the server refused the TLS connection' }
              : { reason: 'closed', detail: how === 'eof' ? 'the server closed the connection' : 'the connection failed' },
            'close',
            now,
          );
          return;
        case 'releasing':
          this.#closeNow(how === 'eof' ? 'close' : 'abort');
          return;
        case 'lingering':
          this.#closeNow('close');
      }
    });
  }

  /** The caller released the lock, gave up the attempt, or its work stopped after a loss. */
  stop(now: number): Action[] {
    return this.#event(now, () => {
      this.#workStopped = true;
      if (this.#phase === 'live') this.#release(now);
      else if (this.#phase === 'connecting' || this.#phase === 'lingering') this.#closeNow('abort');
      else if (this.#phase === 'new') this.#phase = 'closed';
    });
  }

  /** The time of the last wake has come (or nearly: the step checks the time itself). */
  timer(now: number): Action[] {
    return this.#event(now, () => {
      if (this.#phase === 'live') this.#heartbeatIfDue(now);
    });
  }

  /** The work's own check of the deadline found it passed: the deadlines, taken first, give the lock up. */
  expired(now: number): Action[] {
    return this.#event(now, () => {});
  }

  // --- the rules ---------------------------------------------------------

  /**
   * One event: the deadlines passed at now first (docs/protocol.md, "The
   * order of simultaneous things"), then the event, then the wake unless
   * the connection closes.
   */
  #event(now: number, apply: () => void): Action[] {
    if (this.done) return [];
    this.#out = [];
    this.#deadlines(now);
    if (!this.done) apply();
    if (this.#phase === 'lingering' && now >= this.#closeBy) this.#closeNow('abort');
    if (!this.done) this.#out.push({ kind: 'wake', at: this.#nextWake() });
    return this.#out;
  }

  #begin(now: number): void {
    if (this.#began) return;
    this.#began = true;
    // A try-lock ends at the ACQUIRE's WAITING, not at a time.
    if (this.config.waitMs > 0 && Number.isFinite(this.config.waitMs)) this.#waitBy = now + this.config.waitMs;
  }

  /** Every deadline passed at now, in time order; at the same time the connect deadline, then the give-up, then the wait. */
  #deadlines(now: number): void {
    if (this.#phase === 'releasing' || this.#phase === 'lingering') {
      if (now >= this.#closeBy) this.#closeNow('abort');
      return;
    }
    const waiting = this.#claim !== 'held' && now >= this.#waitBy;
    const connect = this.#phase === 'connecting' && now >= this.#connectBy;
    const giveUp = this.#phase === 'live' && this.rules.due(now) === 'give-up';
    if (waiting && (!connect || this.#waitBy < this.#connectBy) && (!giveUp || this.#waitBy < this.rules.deadline)) {
      this.#waitOver(now);
    } else if (connect) {
      this.#end({ reason: 'connect', detail: `no connection within the connect timeout (${this.config.connectTimeoutMs} ms)` }, 'give-up', now);
    } else if (giveUp) {
      this.#giveUp(now);
    }
  }

  /** The wait ended before the grant: busy once queued, by silence when nothing answered yet (retried); the place in the queue is released. */
  #waitOver(now: number): void {
    if (this.#phase === 'connecting') {
      this.#end({ reason: 'timeout', detail: `no connection within the wait (${this.config.waitMs} ms)` }, 'give-up', now);
    } else if (this.#claim === 'waiting') {
      this.#out.push({ kind: 'failed', reason: 'busy', detail: `still held by someone else after waiting ${this.config.waitMs} ms` });
      this.#release(now);
    } else {
      this.#out.push({ kind: 'failed', reason: 'timeout', detail: `no answer from the server within the wait (${this.config.waitMs} ms)` });
      this.#release(now);
    }
  }

  /** Applies one frame (rule 4): each WAITING or ACQUIRED answers the request in flight, except the ACQUIRED pushed on promotion; anything else breaks the protocol. */
  #receive(f: ServerFrame, now: number): void {
    switch (f.type) {
      case 'error':
        this.#end({ reason: 'server', detail: `server error 0x${f.code.toString(16).padStart(2, '0')}`, code: f.code, serverReason: f.reason }, 'close', now);
        return;
      case 'unknown':
        this.#violation(`unknown frame type 0x${f.byte.toString(16).padStart(2, '0')} from the server`, now);
        return;
      case 'waiting':
        if (this.#claim !== 'held' && this.rules.inFlight) {
          const first = this.#claim === 'sent';
          this.#claim = 'waiting';
          if (first) this.#out.push({ kind: 'waiting' });
          if (!this.#acknowledged(now)) return;
          if (first && this.config.waitMs === 0) {
            this.#out.push({ kind: 'failed', reason: 'busy', detail: 'held by someone else (a try-lock does not wait)' });
            this.#release(now);
          }
          return;
        }
        this.#violation(this.#claim === 'held' ? 'WAITING after ACQUIRED' : 'WAITING with no request in flight', now);
        return;
      case 'acquired':
        if (this.#claim === 'sent') {
          this.#grant(f.token);
          this.#acknowledged(now);
        } else if (this.#claim === 'waiting') {
          // The promotion push answers no request: a heartbeat in flight gets its own answer.
          this.#grant(f.token);
          this.#out.push({ kind: 'valid-until', at: this.rules.deadline });
        } else if (this.rules.inFlight && f.token === this.#token) {
          this.#acknowledged(now);
        } else if (f.token !== this.#token) {
          this.#violation(`token changed from ${this.#token} to ${f.token}`, now);
        } else {
          this.#violation('ACQUIRED with no request in flight', now);
        }
    }
  }

  #grant(token: bigint): void {
    this.#claim = 'held';
    this.#token = token;
    this.#waitBy = Infinity;
    this.#out.push({ kind: 'granted', token });
  }

  /** The request in flight was answered (rule 3, 4); one read at the deadline or later comes too late (rule 8): false, given up. */
  #acknowledged(now: number): boolean {
    const rtt = now - this.rules.lastSend;
    if (!this.rules.answered(now)) {
      this.#giveUp(now);
      return false;
    }
    if (this.#claim === 'held') this.#out.push({ kind: 'valid-until', at: this.rules.deadline });
    this.#out.push({ kind: 'ack', rttMs: rtt, srttMs: this.rules.smoothedRttMs, intervalMs: this.rules.intervalMs });
    return true;
  }

  #heartbeatIfDue(now: number): void {
    if (this.rules.due(now) === 'heartbeat') this.#send('HEARTBEAT', now);
  }

  #send(frame: 'ACQUIRE' | 'HEARTBEAT', now: number): void {
    this.rules.sent(now);
    this.#out.push({ kind: 'send', frame });
  }

  #giveUp(now: number): void {
    this.#end({ reason: 'timeout', detail: `no answer from the server within 0.8 × lease (${this.rules.timeoutMs} ms) of the newest answered request` }, 'give-up', now);
  }

  #violation(detail: string, now: number): void {
    this.#end({ reason: 'protocol', detail }, 'give-up', now);
  }

  /**
   * Ends the attempt or the lock. `close`: the server let go or the
   * connection is gone, closed at once. `give-up` (silence, a violation, a
   * connect deadline): aborted at once unless the work may still run on a
   * held lock; then the connection stays open until the work stops or the
   * last request's write + lease, so that the server's expiry, not this
   * close, hands the lock on (rule 7).
   */
  #end(e: Ending, how: 'close' | 'give-up', now: number): void {
    this.#out.push(this.#claim === 'held' ? { kind: 'lost', ...e } : { kind: 'failed', ...e });
    if (how === 'close') {
      this.#closeNow('close');
      return;
    }
    // Nothing runs on a lock not granted, or whose work has stopped: the
    // abort is due now, after the event at hand, which may still show that
    // the server closed first (an ERROR or the end of the stream read at the
    // deadline: then a normal close).
    this.#phase = 'lingering';
    this.#closeBy = this.#claim !== 'held' || this.#workStopped ? now : this.rules.closeBy();
  }

  /** RELEASE, then the server's close, at most the release bound, min(lease, 2 s), after now. */
  #release(now: number): void {
    this.#phase = 'releasing';
    this.#closeBy = now + this.rules.releaseBoundMs;
    this.#out.push({ kind: 'send', frame: 'RELEASE' });
  }

  #closeNow(how: 'close' | 'abort'): void {
    this.#phase = 'closed';
    this.#out.push({ kind: how });
  }

  #nextWake(): number | undefined {
    let at = Infinity;
    switch (this.#phase) {
      case 'connecting':
        at = Math.min(this.#connectBy, this.#waitBy);
        break;
      case 'live':
        at = Math.min(this.rules.nextWakeup(), this.#waitBy);
        break;
      case 'releasing':
      case 'lingering':
        at = this.#closeBy;
    }
    return Number.isFinite(at) ? at : undefined;
  }
}
