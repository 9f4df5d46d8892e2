// The heartbeat schedule (client rule 3 of docs/protocol.md). Pure: no clock,
// no timers, so the rule can be tested on its own.

/** The shortest interval never goes below this, so a slow link does not turn heartbeats into a flood. */
const MAX_FLOOR_MS = 100;
/** The weight of a new RTT sample in the average. */
const ALPHA = 0.2;

/** 0.8 × lease: how long the client goes without an answer before it gives the lock up. */
export function clientTimeoutMs(leaseMs: number): number {
  // To the nanosecond, rounded down (docs/protocol.md, "The client step"), so
  // that every client gives up at the same instant.
  return Math.floor(Math.round(leaseMs * 1e6) * 0.8) / 1e6;
}

export class HeartbeatSchedule {
  readonly baseMs: number;
  readonly floorMs: number;
  #srtt = 0;
  #sampled = false;

  constructor(leaseMs: number) {
    this.baseMs = leaseMs / 4;
    this.floorMs = Math.min(MAX_FLOOR_MS, this.baseMs);
  }

  /** Feeds one round-trip time. The first sample seeds the average, as TCP's SRTT does. */
  observe(rttMs: number): void {
    const rtt = Math.max(rttMs, 0);
    if (!this.#sampled) {
      this.#srtt = rtt;
      this.#sampled = true;
      return;
    }
    this.#srtt += ALPHA * (rtt - this.#srtt);
  }

  get smoothedRttMs(): number {
    return this.#srtt;
  }

  /** Time from one heartbeat send to the next: base − 2 × smoothed RTT, within [floor, base]. RTT only ever shortens it. */
  intervalMs(): number {
    return Math.min(Math.max(this.baseMs - 2 * this.#srtt, this.floorMs), this.baseMs);
  }
}
