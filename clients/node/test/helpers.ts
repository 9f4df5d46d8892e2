// Shared test support: a scriptable fake server, a fake clock and the real
// server binary.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Clock } from '../dist/session.js';

/** clients/node, whichever of test/ or dist-test/ this file runs from. */
export const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = path.resolve(packageDir, '..', '..');

export function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

export function acquired(token: bigint): Buffer {
  const b = Buffer.alloc(9);
  b[0] = 0x12;
  b.writeBigUInt64BE(token, 1);
  return b;
}

export function errorFrame(code: number, reason: string): Buffer {
  const r = Buffer.from(reason, 'utf8');
  return Buffer.concat([Buffer.of(0x13, code, r.length), r]);
}

export const WAITING = Buffer.of(0x11);

/** One connection accepted by a FakeServer, read frame by frame. */
export class FakeConn {
  readonly socket: net.Socket;
  #buf = Buffer.alloc(0);
  #wake: (() => void) | undefined;
  #ended = false;
  /** Resolves when the client closes (FIN or reset), or the fake closes after RELEASE. */
  readonly closed: Promise<void>;
  /** How the client's side ended: 'eof' (a FIN), 'reset' (an RST), or undefined while open. */
  clientEnd: 'eof' | 'reset' | undefined;
  /** The client sent RELEASE; with closeOnRelease the fake then closed first, as the server does. */
  released = false;
  /** Client frames scanned so far (ACQUIRE, HEARTBEAT, RELEASE), to find RELEASE at a frame boundary. */
  #scanned = 0;
  readonly #all: Buffer[] = [];
  readonly #closeOnRelease: boolean;

  constructor(socket: net.Socket, closeOnRelease: boolean) {
    this.socket = socket;
    this.#closeOnRelease = closeOnRelease;
    socket.on('data', (d: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, d]);
      this.#all.push(d);
      this.#scan();
      this.#wake?.();
    });
    this.closed = new Promise((resolve) => {
      const done = (): void => {
        this.#ended = true;
        this.#wake?.();
        resolve();
      };
      socket.on('end', () => {
        this.clientEnd ??= 'eof';
        done();
      });
      socket.on('close', done);
      socket.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ECONNRESET') this.clientEnd ??= 'reset';
      });
    });
  }

  /** Looks for RELEASE among the client's frames; on it, closes first when asked to. */
  #scan(): void {
    const bytes = Buffer.concat(this.#all);
    while (this.#scanned < bytes.length && !this.released) {
      const at = this.#scanned;
      if (bytes[at] === 0x01) {
        if (bytes.length < at + 8) return;
        const end = at + 8 + bytes.readUInt16BE(at + 6);
        if (bytes.length < end) return;
        this.#scanned = end;
      } else {
        this.#scanned = at + 1;
        if (bytes[at] === 0x03) {
          this.released = true;
          if (this.#closeOnRelease) this.socket.end();
        }
      }
    }
  }

  get isClosed(): boolean {
    return this.#ended;
  }

  /** Resolves with the next n bytes; rejects if the client closes first. */
  async read(n: number): Promise<Buffer> {
    while (this.#buf.length < n) {
      if (this.#ended) throw new Error(`fake server: the client closed with ${this.#buf.length} of ${n} bytes read`);
      await new Promise<void>((r) => (this.#wake = r));
      this.#wake = undefined;
    }
    const out = this.#buf.subarray(0, n);
    this.#buf = this.#buf.subarray(n);
    return out;
  }

  /** Reads one ACQUIRE and returns its fields. */
  async readAcquire(): Promise<{ version: number; leaseMs: number; name: Buffer }> {
    const h = await this.read(8);
    if (h[0] !== 0x01) throw new Error(`fake server: expected ACQUIRE, got 0x${h[0]!.toString(16)}`);
    const name = await this.read(h.readUInt16BE(6));
    return { version: h[1]!, leaseMs: h.readUInt32BE(2), name };
  }

  async readHeartbeat(): Promise<void> {
    const b = await this.read(1);
    if (b[0] !== 0x02) throw new Error(`fake server: expected HEARTBEAT, got 0x${b[0]!.toString(16)}`);
  }

  /** Bytes received and not read yet. */
  get unread(): number {
    return this.#buf.length;
  }

  write(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }
}

/** A node:net server on 127.0.0.1:0 whose connections a test scripts byte by byte. */
export class FakeServer {
  readonly server: net.Server;
  #queue: FakeConn[] = [];
  readonly #all: FakeConn[] = [];
  #waiters: ((c: FakeConn) => void)[] = [];
  connections = 0;
  /** Whether new connections close first on RELEASE, as the server does; false: a server that never closes. */
  closeOnRelease = true;

  private constructor(server: net.Server) {
    this.server = server;
    server.on('connection', (s) => {
      this.connections++;
      s.setNoDelay(true);
      const c = new FakeConn(s, this.closeOnRelease);
      this.#all.push(c);
      const w = this.#waiters.shift();
      if (w) w(c);
      else this.#queue.push(c);
    });
  }

  static async start(): Promise<FakeServer> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new FakeServer(server);
  }

  get address(): string {
    const a = this.server.address() as net.AddressInfo;
    return `127.0.0.1:${a.port}`;
  }

  accept(): Promise<FakeConn> {
    const c = this.#queue.shift();
    if (c) return Promise.resolve(c);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  async close(): Promise<void> {
    for (const c of this.#all) c.socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A clock that moves only when the test says so; timers fire in deadline order. */
export class FakeClock implements Clock {
  #now = 1000;
  #seq = 0;
  #timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, ms: number): unknown {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), fn });
    return id;
  }

  clearTimer(handle: unknown): void {
    if (typeof handle === 'number') this.#timers.delete(handle);
  }

  get pending(): number {
    return this.#timers.size;
  }

  /** The time of the earliest timer, or undefined. */
  get next(): number | undefined {
    let at: number | undefined;
    for (const t of this.#timers.values()) if (at === undefined || t.at < at) at = t.at;
    return at;
  }

  /** Moves time forward by ms without firing any timer: an event loop that stalled. */
  jump(ms: number): void {
    this.#now += ms;
  }

  /** Moves time forward by ms, firing every timer that falls due, in order. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      let id: number | undefined;
      let due: { at: number; fn: () => void } | undefined;
      for (const [k, t] of this.#timers) if (t.at <= end && (due === undefined || t.at < due.at)) [id, due] = [k, t];
      if (due === undefined || id === undefined) break;
      this.#timers.delete(id);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = end;
  }
}

/** The path of bin/monolock, built by `make build` or `go build -o bin/ ./cmd/...`. */
export function serverBinary(): string {
  const bin = process.env.MONOLOCK_BIN ?? path.join(repoRoot, 'bin', 'monolock');
  if (!existsSync(bin)) throw new Error(`${bin} not found: build it first with \`make build\` in ${repoRoot}`);
  return bin;
}

/** A real monolock server on free loopback ports, stopped by stop() (SIGTERM, then SIGKILL). */
export class RealServer {
  readonly proc: ChildProcess;
  readonly address: string;
  readonly adminAddress: string | undefined;
  stderr = '';
  readonly exited: Promise<number | null>;

  private constructor(proc: ChildProcess, address: string, admin: string | undefined, stderr: string, exited: Promise<number | null>) {
    this.proc = proc;
    this.address = address;
    this.adminAddress = admin;
    this.stderr = stderr;
    this.exited = exited;
  }

  static async start(args: string[] = []): Promise<RealServer> {
    const proc = spawn(serverBinary(), ['-listen', '127.0.0.1:0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    let stderr = '';
    const started = await new Promise<string>((resolve, reject) => {
      proc.stderr!.setEncoding('utf8');
      proc.stderr!.on('data', (d: string) => {
        stderr += d;
        const line = stderr.split('\n').find((l) => l.includes('monolock started'));
        if (line) resolve(line);
      });
      proc.once('exit', (code) => reject(new Error(`monolock exited with ${code} before starting:\n${stderr}`)));
    });
    const listen = /\blisten=(\S+)/.exec(started)![1]!;
    const admin = /\badmin_listen=(\S+)/.exec(started)?.[1];
    const s = new RealServer(proc, listen, admin || undefined, stderr, exited);
    proc.stderr!.on('data', (d: string) => (s.stderr += d));
    return s;
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
  }
}

/** The states of /proc/net/tcp a side passes through when it sent the first FIN. */
const ACTIVE_CLOSE_STATES = new Map([
  ['04', 'FIN_WAIT1'],
  ['05', 'FIN_WAIT2'],
  ['06', 'TIME_WAIT'],
  ['0B', 'CLOSING'],
]);

/** One line of /proc/net/tcp or tcp6: the ports and the state (hex, as the kernel writes it). */
export interface TcpEntry {
  readonly localPort: number;
  readonly remotePort: number;
  readonly state: string;
  readonly line: string;
}

/** The TCP connections of this host, from /proc/net/tcp and tcp6 (none where /proc is not there). */
export function tcpEntries(): TcpEntry[] {
  const out: TcpEntry[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 4) continue;
      const port = (a: string): number => parseInt(a.slice(a.lastIndexOf(':') + 1), 16);
      out.push({ localPort: port(f[1]!), remotePort: port(f[2]!), state: f[3]!, line: line.trim() });
    }
  }
  return out;
}

/** The local ports of this host's connections to serverPort, in any state (an old one may still be closing). */
export function portsTo(serverPort: number): Set<number> {
  return new Set(tcpEntries().filter((e) => e.remotePort === serverPort).map((e) => e.localPort));
}

/** The local port of the one connection to serverPort that connect made (fails if it made not exactly one). */
export async function portOf<T>(serverPort: number, connect: () => Promise<T>): Promise<[T, number]> {
  const before = portsTo(serverPort);
  const result = await connect();
  const made = [...portsTo(serverPort)].filter((p) => !before.has(p));
  if (made.length !== 1) throw new Error(`expected one new connection to port ${serverPort}, found ${made.length}`);
  return [result, made[0]!];
}

/**
 * The entries from localPort to remotePort in TIME_WAIT or a state that leads
 * to it: what the connection leaves on the client's host when the client sent
 * the first FIN. (The remote port is compared too: the kernel may reuse a
 * local port towards another address while an older connection waits.)
 */
export function timeWaitFrom(localPort: number, remotePort: number): string[] {
  return tcpEntries()
    .filter((e) => e.localPort === localPort && e.remotePort === remotePort && ACTIVE_CLOSE_STATES.has(e.state))
    .map((e) => `${ACTIVE_CLOSE_STATES.get(e.state)}: ${e.line}`);
}

/** Resolves when signal aborts. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
}

/** Lets pending I/O callbacks run: a few turns of the event loop. */
export async function ticks(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}
