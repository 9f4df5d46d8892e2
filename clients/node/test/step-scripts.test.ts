// The step scripts of protocol/testdata/step (docs/protocol.md, "The client
// step") run against the Node.js Session on an injected clock and a fake
// socket: each command is one event, the actions printed in the spec's words
// and compared byte for byte with the script's. The Session is its own
// driver (it arms its timers and writes to its socket), so the runner reads
// the actions off what it did: the bytes written, the close or the reset, the
// earliest timer (the wake), the token, the loss and the abort reason. A
// session the Node step does not pass is listed with its reason in
// step-known-failures.txt beside this file (FILE:LINE of the session's start
// or dial): it must still differ, and the test fails when it passes, until
// the entry is removed.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { shutdownJitterMs } from '../dist/backoff.js';
import { BusyError, InvalidArgumentError, LockLostError, ProtocolError, ServerError, UnavailableError } from '../dist/errors.js';
import { FrameDecoder, TYPE_ACQUIRE, TYPE_ACQUIRED, TYPE_ERROR, TYPE_HEARTBEAT, TYPE_RELEASE, TYPE_WAITING, type ServerFrame } from '../dist/frames.js';
import { SessionRules } from '../dist/rules.js';
import { HeartbeatSchedule } from '../dist/schedule.js';
import { Session, type Clock } from '../dist/session.js';
import { leaseToWire } from '../dist/validate.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// dist-test/ → clients/node → the repository.
const scripts = path.resolve(here, '..', '..', '..', 'protocol', 'testdata', 'step');
const knownFile = path.resolve(here, '..', 'test', 'step-known-failures.txt');

// --- the datadriven format ---------------------------------------------------

interface Case {
  line: number;
  cmd: string;
  args: Map<string, string[]>;
  expected: string;
}

export function parseScript(text: string, file: string): Case[] {
  const lines = text.split('\n');
  const cases: Case[] = [];
  for (let i = 0; i < lines.length; ) {
    const cmdLine = lines[i]!.trim();
    if (cmdLine === '' || cmdLine.startsWith('#')) {
      i++;
      continue;
    }
    const line = i + 1;
    if (lines[i + 1] !== '----') throw new Error(`${file}:${line}: ${JSON.stringify(cmdLine)} is not followed by ----`);
    i += 2;
    let expected = '';
    for (; i < lines.length && lines[i] !== ''; i++) expected += `${lines[i]}\n`;
    const space = cmdLine.indexOf(' ');
    const cmd = space < 0 ? cmdLine : cmdLine.slice(0, space);
    const args = new Map<string, string[]>();
    for (const m of (space < 0 ? '' : cmdLine.slice(space)).matchAll(/(\w[\w-]*)(?:=(\([^)]*\)|\S+))?/g)) {
      const v = m[2] ?? '';
      args.set(m[1]!, v.startsWith('(') ? v.slice(1, -1).split(',').map((s) => s.trim()).filter((s) => s !== '') : v === '' ? [] : [v]);
    }
    cases.push({ line, cmd, args, expected });
  }
  return cases;
}

const units: Record<string, bigint> = { ns: 1n, us: 1000n, µs: 1000n, μs: 1000n, ms: 1_000_000n, s: 1_000_000_000n, m: 60_000_000_000n, h: 3_600_000_000_000n };

/** A Go time.Duration string to whole nanoseconds, exactly. */
export function parseDuration(text: string): bigint {
  if (text === '0') return 0n;
  const sign = text.startsWith('-') ? -1n : 1n;
  const body = text.replace(/^[-+]/, '');
  let total = 0n;
  let pos = 0;
  for (const m of body.matchAll(/(\d+)(?:\.(\d+))?(ns|us|µs|μs|ms|s|m|h)/g)) {
    if (m.index !== pos) break;
    const unit = units[m[3]!]!;
    const frac = m[2] ?? '';
    total += BigInt(m[1]!) * unit + (BigInt(frac || '0') * unit) / 10n ** BigInt(frac.length);
    pos = m.index + m[0].length;
  }
  if (pos !== body.length || body === '') throw new Error(`${JSON.stringify(text)} is not a duration such as 1.5s, 248ms or 1m0s`);
  return sign * total;
}

function fraction(v: bigint, digits: number): string {
  const p = 10n ** BigInt(digits);
  const tail = (v % p).toString().padStart(digits, '0').replace(/0+$/, '');
  return tail ? `${v / p}.${tail}` : `${v / p}`;
}

/** Whole nanoseconds as Go's time.Duration prints them. */
export function formatDuration(ns: bigint): string {
  const sign = ns < 0n ? '-' : '';
  const u = ns < 0n ? -ns : ns;
  if (u === 0n) return '0s';
  if (u < 1000n) return `${sign}${u}ns`;
  if (u < 1_000_000n) return `${sign}${fraction(u, 3)}µs`;
  if (u < 1_000_000_000n) return `${sign}${fraction(u, 6)}ms`;
  const h = u / 3_600_000_000_000n;
  const m = (u % 3_600_000_000_000n) / 60_000_000_000n;
  const s = u % 60_000_000_000n;
  return `${sign}${h ? `${h}h` : ''}${h || m ? `${m}m` : ''}${fraction(s, 9)}s`;
}

const ms = (ns: bigint): number => Number(ns) / 1e6;
const nanos = (t: number): bigint => BigInt(Math.round(t * 1e6));
const printMs = (t: number): string => formatDuration(nanos(t));

// --- the driver's fakes ------------------------------------------------------

/** The session's clock: time set by the script, timers fired by its timer events. */
class StepClock implements Clock {
  t = 0;
  #seq = 0;
  readonly timers = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  setTimer(fn: () => void, delay: number): unknown {
    this.timers.set(++this.#seq, { at: this.t + Math.max(0, delay), fn });
    return this.#seq;
  }
  clearTimer(handle: unknown): void {
    if (typeof handle === 'number') this.timers.delete(handle);
  }
  next(): number | undefined {
    let at: number | undefined;
    for (const t of this.timers.values()) if (at === undefined || t.at < at) at = t.at;
    return at;
  }
  /** Fires every timer due at now, earliest first. */
  fire(): void {
    for (;;) {
      let due: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= this.t && (due === undefined || e[1].at < due[1].at)) due = e;
      if (due === undefined) return;
      this.timers.delete(due[0]);
      due[1].fn();
    }
  }
}

/** The socket the Session writes to and closes; the script's events are emitted on it. */
class FakeSocket extends EventEmitter {
  connecting = true;
  destroyed = false;
  writes: Buffer[] = [];
  ending: 'close' | 'abort' | undefined;
  setNoDelay(): this {
    return this;
  }
  unref(): this {
    return this;
  }
  write(data: Uint8Array): boolean {
    this.writes.push(Buffer.from(data));
    return true;
  }
  destroy(): this {
    return this.#end('close');
  }
  resetAndDestroy(): this {
    return this.#end('abort');
  }
  #end(how: 'close' | 'abort'): this {
    if (!this.destroyed) {
      this.ending ??= how;
      this.destroyed = true;
      this.emit('close');
    }
    return this;
  }
}

// What the rules did, for the ack line: the RTT each answer fed the
// schedule, the interval it gave, and the answers taken.
const seen = { rtt: 0, srtt: 0, interval: 0, acks: 0 };
let socket = new FakeSocket();
let frameReport: (() => void) | undefined;
const originals = {
  connect: net.connect,
  observe: HeartbeatSchedule.prototype.observe,
  interval: HeartbeatSchedule.prototype.intervalMs,
  answered: SessionRules.prototype.answered,
  push: FrameDecoder.prototype.push,
};

before(() => {
  Object.assign(net, { connect: () => socket });
  HeartbeatSchedule.prototype.observe = function (rtt: number) {
    seen.rtt = rtt;
    originals.observe.call(this, rtt);
  };
  HeartbeatSchedule.prototype.intervalMs = function () {
    return (seen.interval = originals.interval.call(this));
  };
  SessionRules.prototype.answered = function (at: number) {
    const ok = originals.answered.call(this, at);
    if (ok) {
      seen.acks++;
      seen.srtt = this.smoothedRttMs;
    }
    return ok;
  };
  // The frames of one read reach the Session one at a time; when it asks for
  // the next one (or stops), the previous frame's reports are printed.
  FrameDecoder.prototype.push = function (chunk: Buffer): ServerFrame[] {
    const frames = originals.push.call(this, chunk);
    const each = [...frames];
    Object.defineProperty(each, Symbol.iterator, {
      value: function* () {
        for (const f of frames) {
          try {
            yield f;
          } finally {
            frameReport?.();
          }
        }
      },
    });
    return each;
  };
});

after(() => {
  Object.assign(net, { connect: originals.connect });
  Object.assign(HeartbeatSchedule.prototype, { observe: originals.observe, intervalMs: originals.interval });
  Object.assign(SessionRules.prototype, { answered: originals.answered });
  Object.assign(FrameDecoder.prototype, { push: originals.push });
});

// --- the adapter -------------------------------------------------------------

interface Snapshot {
  token: bigint;
  lost: LockLostError | undefined;
  aborted: boolean;
  acks: number;
  writes: number;
}

class Runner {
  s: Session | undefined;
  clock = new StepClock();
  leaseMs = 0;
  closed = true;
  stopped = false;
  /** The answers counted before this session's first. */
  acks0 = 0;

  run(c: Case): string {
    const arg = (k: string): string => {
      const v = c.args.get(k)?.[0];
      if (v === undefined) throw new Error(`line ${c.line}: ${c.cmd} needs ${k}=`);
      return v;
    };
    if (c.cmd === 'dial' || (c.cmd === 'start' && c.args.has('lease'))) return this.#begin(c, arg);
    if (this.closed || this.s === undefined) return `error: ${c.cmd} after the close: the session takes no more events\n`;
    const s = this.s;
    this.clock.t = ms(parseDuration(arg('at')));
    const before = this.#snapshot();
    switch (c.cmd) {
      case 'start':
        socket.connecting = false;
        socket.emit('connect');
        break;
      case 'frame':
        return this.#read(c, before);
      case 'written': {
        const err = c.args.get('err')?.[0];
        // Node's writes do not block the session; a failed one surfaces as the socket's error.
        if (err === 'broken') socket.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
        break;
      }
      case 'closed': {
        const err = arg('err');
        if (err === 'eof') socket.emit('end');
        else if (err === 'broken') socket.emit('error', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
        else socket.emit('error', Object.assign(new Error('tlsv1 alert unknown ca'), { code: 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA' }));
        break;
      }
      case 'stop':
        this.stopped = true;
        void s.release();
        break;
      case 'timer':
        this.clock.fire();
        break;
      case 'expired':
        s.valid();
        break;
      default:
        throw new Error(`line ${c.line}: unknown event ${c.cmd}: docs/protocol.md, The client step, lists the events`);
    }
    const out = this.#reports(before) + this.#driver(before);
    return c.cmd === 'start' ? out.replace('send ACQUIRE', `send ACQUIRE lease-ms=${leaseToWire(this.leaseMs)}`) : out;
  }

  #begin(c: Case, arg: (k: string) => string): string {
    this.clock = new StepClock();
    socket = new FakeSocket();
    this.closed = true;
    this.stopped = false;
    this.acks0 = seen.acks;
    const leaseNs = parseDuration(arg('lease'));
    let leaseMs: number;
    try {
      leaseMs = leaseToWire(ms(leaseNs));
    } catch (err) {
      if (err instanceof InvalidArgumentError) return 'failed invalid-input retry=no\n';
      throw err;
    }
    this.leaseMs = ms(leaseNs);
    const wait = c.args.get('wait')?.[0];
    const connect = c.args.get('connect-timeout')?.[0];
    const at = c.args.get('at')?.[0];
    this.clock.t = at === undefined ? 0 : ms(parseDuration(at));
    const before = this.#snapshot();
    this.s = new Session({
      host: '127.0.0.1',
      port: 1,
      address: '127.0.0.1:1',
      tls: undefined,
      connectTimeoutMs: connect === undefined ? 10_000 : ms(parseDuration(connect)),
      name: 'x',
      nameBytes: Buffer.from('x'),
      leaseMs,
      leaseAskedMs: ms(leaseNs),
      waitMs: wait === undefined ? Infinity : ms(parseDuration(wait)),
      signal: undefined,
      clock: this.clock,
    });
    this.s.granted.catch(() => {}); // read off the abort reason instead
    this.closed = false;
    if (c.cmd === 'start') {
      socket.connecting = false;
      socket.emit('connect');
    }
    return (this.#reports(before) + this.#driver(before)).replace('send ACQUIRE', `send ACQUIRE lease-ms=${leaseMs}`);
  }

  #read(c: Case, before: Snapshot): string {
    const tokens = [...(c.args.get('token') ?? [])];
    const codes = [...(c.args.get('code') ?? [])];
    const parts: Buffer[] = [];
    for (const typ of c.args.get('type') ?? []) {
      if (typ === 'WAITING') parts.push(Buffer.of(TYPE_WAITING));
      else if (typ === 'ACQUIRED') {
        const b = Buffer.alloc(9);
        b[0] = TYPE_ACQUIRED;
        b.writeBigUInt64BE(BigInt(tokens.shift()!), 1);
        parts.push(b);
      } else if (typ === 'ERROR') parts.push(Buffer.of(TYPE_ERROR, Number.parseInt(codes.shift()!, 16), 0));
      else parts.push(Buffer.of(Number.parseInt(typ, 16)));
    }
    let out = '';
    let last = this.#snapshot();
    frameReport = () => {
      out += this.#reports(last);
      last = this.#snapshot();
    };
    try {
      socket.emit('data', Buffer.concat(parts));
    } finally {
      frameReport = undefined;
    }
    return out + this.#reports(last) + this.#driver(before);
  }

  #snapshot(): Snapshot {
    return { token: this.s?.token ?? 0n, lost: this.s?.lost, aborted: this.s?.signal.aborted ?? false, acks: seen.acks, writes: socket.writes.length };
  }

  /** What the event changed in the session, in the spec's words. */
  #reports(b: Snapshot): string {
    const s = this.s!;
    let out = '';
    const acked = seen.acks > b.acks;
    if (acked && b.acks === this.acks0 && s.token === 0n) out += 'waiting\n';
    if (s.token !== 0n && b.token === 0n) out += `granted token=${s.token}\n`;
    if (s.token !== 0n && (acked || b.token === 0n) && s.lost === undefined) out += `valid-until ${printMs(s.confirmedUntil)}\n`;
    if (acked) out += `ack rtt=${printMs(seen.rtt)} srtt=${printMs(seen.srtt)} interval=${printMs(seen.interval)}\n`;
    if (s.lost !== undefined && b.lost === undefined) out += `lost ${reason(s.lost.cause ?? s.lost)}\n`;
    else if (s.token === 0n && s.signal.aborted && !b.aborted && !this.stopped) {
      const err: unknown = s.signal.reason;
      out += `failed ${reason(err)} retry=${this.#retry(err)}\n`;
    }
    return out;
  }

  /** What the Session did on the socket and the clock: the writes, the close or the wake. */
  #driver(b: Snapshot): string {
    let out = '';
    for (const w of socket.writes.slice(b.writes)) {
      out += `send ${w[0] === TYPE_ACQUIRE ? 'ACQUIRE' : w[0] === TYPE_HEARTBEAT ? 'HEARTBEAT' : w[0] === TYPE_RELEASE ? 'RELEASE' : `0x${w[0]!.toString(16)}`}\n`;
    }
    if (socket.ending !== undefined) {
      this.closed = true;
      return `${out}${socket.ending}\n`;
    }
    const wake = this.clock.next();
    return `${out}wake ${wake === undefined ? 'off' : printMs(wake)}\n`;
  }

  #retry(err: unknown): string {
    if (!(err instanceof UnavailableError) || !err.retryable) return 'no';
    if (err.code === 0x01) return `random-wait max=${printMs(shutdownJitterMs(this.leaseMs, () => 1))}`;
    return 'backoff';
  }
}

function reason(err: unknown): string {
  if (err instanceof BusyError) return 'busy';
  if ((err instanceof UnavailableError || err instanceof ServerError) && err.code !== undefined) return `server code=0x${err.code.toString(16).padStart(2, '0')}`;
  if (err instanceof ProtocolError) return 'protocol';
  if (err instanceof UnavailableError && !err.retryable) return 'tls';
  if (err instanceof UnavailableError && /no answer/.test(err.message)) return 'timeout';
  if (err instanceof UnavailableError && /cannot connect/.test(err.message)) return 'connect';
  if (err instanceof UnavailableError) return 'closed';
  return `unclassified: ${String(err)}`;
}

// --- the test ----------------------------------------------------------------

function loadKnown(): Map<string, string> {
  const known = new Map<string, string>();
  readFileSync(knownFile, 'utf8')
    .split('\n')
    .forEach((raw, i) => {
      const text = raw.trim();
      if (text === '' || text.startsWith('#')) return;
      const m = /^(\S+\.txt:\d+) (.+)$/.exec(text);
      if (!m) throw new Error(`${knownFile}:${i + 1}: want FILE:LINE and a reason, got ${JSON.stringify(text)}`);
      known.set(m[1]!, m[2]!);
    });
  return known;
}

test('durations parse and print as Go prints them', () => {
  for (const [text, ns] of [
    ['0s', 0n],
    ['1ns', 1n],
    ['800.004µs', 800_004n],
    ['249.999998ms', 249_999_998n],
    ['1.099999999s', 1_099_999_999n],
    ['1m0s', 60_000_000_000n],
    ['954h26m13.836s', 3_435_973_836_000_000n],
  ] as const) {
    assert.equal(parseDuration(text), ns, text);
    assert.equal(formatDuration(ns), text);
  }
});

test('the step scripts', () => {
  const known = loadKnown();
  const files = readdirSync(scripts).filter((f) => f.endsWith('.txt')).sort();
  assert.ok(files.length > 0, `no step scripts in ${scripts}`);
  let total = 0;
  let passed = 0;
  let listed = 0;
  const problems: string[] = [];
  const starts = new Set<string>();
  for (const file of files) {
    const r = new Runner();
    const diffs = new Map<number, string[]>();
    let current = 0;
    for (const c of parseScript(readFileSync(path.join(scripts, file), 'utf8'), file)) {
      if (c.cmd === 'dial' || (c.cmd === 'start' && c.args.has('lease'))) {
        current = c.line;
        diffs.set(current, []);
      }
      const got = r.run(c);
      if (got !== c.expected) diffs.get(current)!.push(`line ${c.line} ${c.cmd}: want\n${c.expected}got\n${got}`);
    }
    for (const [line, d] of diffs) {
      total++;
      const key = `${file}:${line}`;
      starts.add(key);
      if (known.has(key)) {
        listed++;
        if (d.length === 0) problems.push(`${key} is listed in ${knownFile}, but the Node.js step now passes the session: remove the entry`);
      } else if (d.length > 0) problems.push(`${key}: the Node.js step differs from the script:\n${d.join('\n')}`);
      else passed++;
    }
  }
  for (const key of known.keys()) {
    if (!starts.has(key)) problems.push(`${key} is listed in ${knownFile}, but no session starts there (a dial, or a start with lease=)`);
  }
  console.log(`step scripts (Node.js): ${total} sessions, ${files.length} files, ${passed} pass, ${listed} known`);
  assert.deepEqual(problems, []);
});
