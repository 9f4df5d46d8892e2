// The heartbeat schedule and the give-up of one session (client rules 3 and 8
// of docs/protocol.md), pure: every method takes the time from its caller (a
// monotonic clock in milliseconds) and none reads a clock, arms a timer or
// touches the socket. The Session drives it with one timer, and the tests
// check each boundary to the nanosecond without waiting.

import { HeartbeatSchedule, clientTimeoutMs } from './schedule.js';

/** The longest wait for the server's close after RELEASE; the release bound is min(lease, this). */
export const MAX_RELEASE_WAIT_MS = 2000;

/** What is due at a given time: the give-up, a heartbeat, or nothing yet. */
export type Due = 'give-up' | 'heartbeat' | undefined;

export class SessionRules {
  readonly leaseMs: number;
  /** 0.8 × lease: how long a request may go unanswered. */
  readonly timeoutMs: number;
  readonly #schedule: HeartbeatSchedule;

  /** A request awaits its answer; at most one (rule 3). */
  #inFlight = false;
  /** When the newest request was handed to the socket. */
  #lastSend = 0;
  /** When the newest completed write returned. */
  #lastWritten = 0;
  /** Send of the newest answered request + 0.8 × lease (Infinity before the first send); ownership is confirmed until then. */
  #deadline = Infinity;
  /** When the next heartbeat goes out once no request is in flight; undefined before the first answer. */
  #heartbeatDue: number | undefined;

  constructor(leaseMs: number) {
    this.leaseMs = leaseMs;
    this.timeoutMs = clientTimeoutMs(leaseMs);
    this.#schedule = new HeartbeatSchedule(leaseMs);
  }

  get inFlight(): boolean {
    return this.#inFlight;
  }
  get deadline(): number {
    return this.#deadline;
  }
  get smoothedRttMs(): number {
    return this.#schedule.smoothedRttMs;
  }
  get lastSend(): number {
    return this.#lastSend;
  }
  /** The heartbeat interval the newest answer gave. */
  get intervalMs(): number {
    return this.#schedule.intervalMs();
  }

  /** A request (ACQUIRE or a heartbeat) is written at now. The first starts the give-up clock: a server that never answers loses the lock, too. */
  sent(now: number): void {
    if (this.#deadline === Infinity) this.#deadline = now + this.timeoutMs;
    this.#lastSend = now;
    this.#inFlight = true;
  }

  /** A write returned complete at now. */
  written(now: number): void {
    this.#lastWritten = now;
  }

  /**
   * The answer to the request in flight, read at `at` (rule 4). Ownership is
   * confirmed until that request's send + 0.8 × lease, and the next heartbeat
   * is due one interval after that send. False when the answer came at the
   * deadline or later: the lock was given up then (rule 8), and is to be now.
   */
  answered(at: number): boolean {
    if (at >= this.#deadline) return false;
    this.#schedule.observe(at - this.#lastSend);
    this.#inFlight = false;
    this.#deadline = this.#lastSend + this.timeoutMs;
    this.#heartbeatDue = this.#lastSend + this.#schedule.intervalMs();
    return true;
  }

  /** Ownership is confirmed at now: the deadline has not come. */
  confirmed(now: number): boolean {
    return now < this.#deadline;
  }

  /** What is due at now: the give-up once the deadline has come; a heartbeat once its time has come and no request is in flight. */
  due(now: number): Due {
    if (now >= this.#deadline) return 'give-up';
    if (this.#heartbeatDue !== undefined && !this.#inFlight && now >= this.#heartbeatDue) return 'heartbeat';
    return undefined;
  }

  /** When due() next says something: the next heartbeat or the deadline, whichever is first. */
  nextWakeup(): number {
    if (this.#heartbeatDue !== undefined && !this.#inFlight) return Math.min(this.#heartbeatDue, this.#deadline);
    return this.#deadline;
  }

  /**
   * How long a release waits for the server to close the connection first
   * after RELEASE, min(lease, 2 s): past it the client resets the connection.
   */
  get releaseBoundMs(): number {
    return Math.min(this.leaseMs, MAX_RELEASE_WAIT_MS);
  }

  /**
   * After a give-up while the work may still run: the connection closes at
   * the latest then, the last request's write (its send while that write
   * has not returned) + lease, when the server drops the session anyway.
   */
  closeBy(): number {
    return Math.max(this.#lastWritten, this.#lastSend) + this.leaseMs;
  }
}
