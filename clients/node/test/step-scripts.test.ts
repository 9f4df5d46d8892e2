// The step scripts of protocol/testdata/step (docs/protocol.md, "The client
// step") run against the Node.js step (src/step.ts), the pure function the
// Session drives: each command is one event, the actions it returns printed
// in the spec's words and compared byte for byte with the script's. A
// session the Node step does not pass is listed with its reason in
// step-known-failures.txt beside this file (FILE:LINE of the session's start
// or dial): it must still differ, and the test fails when it passes, until
// the entry is removed.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { shutdownJitterMs } from '../dist/backoff.js';
import { InvalidArgumentError } from '../dist/errors.js';
import { FrameDecoder, TYPE_ACQUIRED, TYPE_ERROR, TYPE_WAITING } from '../dist/frames.js';
import { Step, retryOf, type Action } from '../dist/step.js';
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

// --- the adapter -------------------------------------------------------------

/** One script's current session: each command is one event of the step, its actions printed in the spec's words. */
class Runner {
  step: Step | undefined;
  leaseMs = 0;
  wireLeaseMs = 0;

  run(c: Case): string {
    const arg = (k: string): string => {
      const v = c.args.get(k)?.[0];
      if (v === undefined) throw new Error(`line ${c.line}: ${c.cmd} needs ${k}=`);
      return v;
    };
    if (c.cmd === 'dial' || (c.cmd === 'start' && c.args.has('lease'))) return this.#begin(c, arg);
    const step = this.step;
    if (step === undefined || step.done) return `error: ${c.cmd} after the close: the session takes no more events\n`;
    const now = ms(parseDuration(arg('at')));
    switch (c.cmd) {
      case 'start':
        return this.#print(step.start(now));
      case 'frame':
        return this.#print(step.frames(new FrameDecoder().push(frameBytes(c.args)), now));
      case 'written': {
        const err = c.args.get('err')?.[0];
        return this.#print(step.written(now, err === 'broken' || err === 'deadline' ? err : undefined));
      }
      case 'closed': {
        const err = arg('err');
        if (err !== 'eof' && err !== 'broken' && err !== 'tls') throw new Error(`line ${c.line}: closed err=${err}: want eof, broken or tls`);
        return this.#print(step.closed(now, err));
      }
      case 'stop':
        return this.#print(step.stop(now));
      case 'timer':
        return this.#print(step.timer(now));
      case 'expired':
        return this.#print(step.expired(now));
      default:
        throw new Error(`line ${c.line}: unknown event ${c.cmd}: docs/protocol.md, The client step, lists the events`);
    }
  }

  #begin(c: Case, arg: (k: string) => string): string {
    this.step = undefined;
    const leaseNs = parseDuration(arg('lease'));
    try {
      this.wireLeaseMs = leaseToWire(ms(leaseNs));
    } catch (err) {
      if (err instanceof InvalidArgumentError) return 'failed invalid-input retry=no\n';
      throw err;
    }
    this.leaseMs = ms(leaseNs);
    const wait = c.args.get('wait')?.[0];
    const connect = c.args.get('connect-timeout')?.[0];
    const at = c.args.get('at')?.[0];
    const now = at === undefined ? 0 : ms(parseDuration(at));
    this.step = new Step({
      leaseMs: this.leaseMs,
      waitMs: wait === undefined ? Infinity : ms(parseDuration(wait)),
      connectTimeoutMs: connect === undefined ? 10_000 : ms(parseDuration(connect)),
    });
    return this.#print(c.cmd === 'dial' ? this.step.dial(now) : this.step.start(now));
  }

  #print(actions: readonly Action[]): string {
    let out = '';
    for (const a of actions) {
      switch (a.kind) {
        case 'waiting':
        case 'close':
        case 'abort':
          out += `${a.kind}\n`;
          break;
        case 'granted':
          out += `granted token=${a.token}\n`;
          break;
        case 'valid-until':
          out += `valid-until ${printMs(a.at)}\n`;
          break;
        case 'ack':
          out += `ack rtt=${printMs(a.rttMs)} srtt=${printMs(a.srttMs)} interval=${printMs(a.intervalMs)}\n`;
          break;
        case 'failed':
        case 'lost': {
          const why = a.reason === 'server' ? `server code=0x${(a.code ?? 0).toString(16).padStart(2, '0')}` : a.reason;
          const retry = retryOf(a);
          const max = retry === 'random-wait' ? ` max=${printMs(shutdownJitterMs(this.leaseMs, () => 1))}` : '';
          out += a.kind === 'lost' ? `lost ${why}\n` : `failed ${why} retry=${retry}${max}\n`;
          break;
        }
        case 'send':
          out += a.frame === 'ACQUIRE' ? `send ACQUIRE lease-ms=${this.wireLeaseMs}\n` : `send ${a.frame}\n`;
          break;
        case 'wake':
          out += `wake ${a.at === undefined ? 'off' : printMs(a.at)}\n`;
          break;
      }
    }
    return out;
  }
}

function frameBytes(args: Map<string, string[]>): Buffer {
  const tokens = [...(args.get('token') ?? [])];
  const codes = [...(args.get('code') ?? [])];
  const parts: Buffer[] = [];
  for (const typ of args.get('type') ?? []) {
    if (typ === 'WAITING') parts.push(Buffer.of(TYPE_WAITING));
    else if (typ === 'ACQUIRED') {
      const b = Buffer.alloc(9);
      b[0] = TYPE_ACQUIRED;
      b.writeBigUInt64BE(BigInt(tokens.shift()!), 1);
      parts.push(b);
    } else if (typ === 'ERROR') parts.push(Buffer.of(TYPE_ERROR, Number.parseInt(codes.shift()!, 16), 0));
    else parts.push(Buffer.of(Number.parseInt(typ, 16)));
  }
  return Buffer.concat(parts);
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
