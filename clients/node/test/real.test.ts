// The client against the real server binary (bin/monolock) on loopback.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

import { BusyError, Client, LockLostError, ServerError, UnavailableError, type Lock } from 'monolock';
import { Session } from '../dist/session.js';
import { FrameDecoder, encodeAcquire, type ServerFrame } from '../dist/frames.js';
import net from 'node:net';
import { RealServer, aborted, portOf, timeWaitFrom } from './helpers.js';

let server: RealServer;
let client: Client;

before(async () => {
  server = await RealServer.start(['-admin-listen', '127.0.0.1:0']);
  client = new Client({ address: server.address });
});
after(async () => {
  await server.stop();
});

/** The number of waiters the admin API shows for name (0 when the lock is idle). */
async function waiters(name: string): Promise<number> {
  const res = await fetch(`http://${server.adminAddress}/api/locks/${encodeURIComponent(name)}`);
  if (res.status === 404) return 0;
  const body = (await res.json()) as { waiters?: unknown[] };
  return body.waiters?.length ?? 0;
}

/** Waits until the admin API shows n waiters on name. */
async function queued(name: string, n: number): Promise<void> {
  while ((await waiters(name)) < n) await sleep(10);
}

test('a free lock is granted, and heartbeats keep it past several leases', async () => {
  const lock = await client.acquire('real-free', { leaseMs: 1000 });
  assert.ok(lock.token > 1n << 32n, 'the high bits of a token are the grant second');
  assert.equal(lock.tlsResumed, undefined, 'plain TCP has no TLS session');
  await lock.release();

  // Three leases: without heartbeats the server would have expired the lock.
  // Held until the server has answered a heartbeat sent three leases after
  // the grant (the give-up deadline counts from that send).
  const [host, port] = server.address.split(':');
  const leaseMs = 1000;
  const s = new Session({ host: host!, port: Number(port), address: server.address, tls: undefined, connectTimeoutMs: 10_000, name: 'real-free', nameBytes: Buffer.from('real-free'), leaseMs, waitMs: Infinity, signal: undefined });
  await s.granted;
  const until = performance.now() + 3 * leaseMs + 0.8 * leaseMs;
  while (s.confirmedUntil < until && !s.signal.aborted) await sleep(10);
  assert.equal(s.valid(), true);
  assert.equal(s.signal.aborted, false, String(s.lost));
  await s.release();
});

test('release: the server closes first, no TIME_WAIT on the client\'s port; the next waiter is promoted; one that leaves the queue releases too', async () => {
  const serverPort = Number(server.address.slice(server.address.lastIndexOf(':') + 1));
  const [holder, port] = await portOf(serverPort, () => client.acquire('real-release', { leaseMs: 10_000 }));
  const waiter = client.acquire('real-release', { leaseMs: 10_000 });
  await queued('real-release', 1);
  await holder.release();
  assert.equal(holder.lostError, undefined);
  const next = await waiter;
  assert.ok(next.token > holder.token);
  assert.deepEqual(timeWaitFrom(port, serverPort), [], 'the client closed first');
  await assert.rejects(client.acquire('real-release', { leaseMs: 10_000, wait: 100 }), BusyError);
  assert.equal(await waiters('real-release'), 0);
  await next.release();
});

test('the longest lease, 2^32 − 1 ms, is held', async () => {
  const lock = await client.acquire('real-long', { leaseMs: 0xffff_ffff });
  assert.equal(lock.leaseMs, 0xffff_ffff);
  assert.equal(lock.valid(), true);
  await lock.release();
  assert.equal(lock.lostError, undefined);
});

test('busy: wait false is BusyError; a waiter is promoted without asking when the holder releases, with a larger token', async () => {
  const first = await client.acquire('real-busy', { leaseMs: 2000 });
  await assert.rejects(client.acquire('real-busy', { leaseMs: 2000, wait: false }), BusyError);
  await assert.rejects(client.acquire('real-busy', { leaseMs: 2000, wait: 50 }), BusyError);
  const second = client.acquire('real-busy', { leaseMs: 2000 });
  await queued('real-busy', 1);
  await first.release();
  const lock = await second;
  assert.ok(lock.token > first.token);
  await lock.release();
});

test('FIFO: three waiters, the middle one leaves, the others are promoted in order with increasing tokens', async () => {
  const holder = await client.acquire('real-fifo', { leaseMs: 2000 });
  const order: string[] = [];
  const a = client.acquire('real-fifo', { leaseMs: 2000 }).then((l) => (order.push('a'), l));
  await queued('real-fifo', 1);
  const leave = new AbortController();
  const b = client.acquire('real-fifo', { leaseMs: 2000, signal: leave.signal });
  await queued('real-fifo', 2);
  const c = client.acquire('real-fifo', { leaseMs: 2000 }).then((l) => (order.push('c'), l));
  await queued('real-fifo', 3);
  leave.abort();
  await assert.rejects(b, { name: 'AbortError' });
  await holder.release();
  const la = await a;
  assert.deepEqual(order, ['a']);
  await la.release();
  const lc = await c;
  assert.deepEqual(order, ['a', 'c']);
  assert.ok(holder.token < la.token && la.token < lc.token);
  await lc.release();
});

test('withLock runs the work under the lock and releases it', async () => {
  const token = await client.withLock('real-with', { leaseMs: 1000 }, async (lock: Lock) => {
    assert.equal(lock.valid(), true);
    return lock.token;
  });
  const next = await client.acquire('real-with', { leaseMs: 1000, wait: false });
  assert.ok(next.token > token);
  await next.release();
});

test('force-release through the admin API: the holder loses with code 0x02; a new attempt gets a larger token', async () => {
  const lock = await client.acquire('real-force', { leaseMs: 2000 });
  const res = await fetch(`http://${server.adminAddress}/api/locks/real-force/release`, { method: 'POST' });
  assert.equal(res.status, 200);
  const reason = await aborted(lock.signal);
  assert.ok(reason instanceof LockLostError && reason.why === 'server');
  assert.ok(reason.cause instanceof UnavailableError && reason.cause.code === 0x02);
  await lock.release();
  const again = await client.acquire('real-force', { leaseMs: 2000 });
  assert.ok(again.token > lock.token);
  await again.release();
});

test('the mistakes the client refuses, sent raw, get ERROR 0x14, 0x15, 0x16 and 0x17', async () => {
  const [host, port] = server.address.split(':');
  const raw: [Buffer, number, number][] = [
    [Buffer.alloc(0), 1000, 0x14],
    [Buffer.alloc(256, 'a'), 1000, 0x15],
    [Buffer.of(0x66, 0xff, 0x66), 1000, 0x16],
    [Buffer.from('ok'), 0, 0x17],
  ];
  for (const [nameBytes, leaseMs, code] of raw) {
    if (leaseMs === 0) {
      // A session with a lease of 0 gives up 0.8 × 0 ms after its ACQUIRE,
      // which may be before the server's answer is read: send this one on a
      // bare socket.
      const answer = await rawAnswer(host!, Number(port), encodeAcquire(leaseMs, nameBytes));
      assert.ok(answer.type === 'error' && answer.code === code && answer.reason.length > 0, `code 0x${code.toString(16)}`);
      continue;
    }
    const s = new Session({ host: host!, port: Number(port), address: server.address, tls: undefined, connectTimeoutMs: 10_000, name: 'raw', nameBytes, leaseMs, waitMs: Infinity, signal: undefined });
    await assert.rejects(s.granted, (e: unknown) => e instanceof ServerError && e.code === code && e.reason.length > 0, `code 0x${code.toString(16)}`);
    await s.closed;
  }
});

/** Sends bytes on a new connection and returns the server's first frame. */
function rawAnswer(host: string, port: number, bytes: Buffer): Promise<ServerFrame> {
  return new Promise((resolve, reject) => {
    const decoder = new FrameDecoder();
    const sock = net.connect({ host, port }, () => sock.write(bytes));
    sock.setTimeout(10_000, () => sock.destroy(new Error('no answer within 10 s')));
    sock.on('data', (chunk: Buffer) => {
      const [frame] = decoder.push(chunk);
      if (frame !== undefined) {
        sock.destroy();
        resolve(frame);
      }
    });
    sock.on('error', reject);
    sock.on('close', () => reject(new Error('closed before an answer')));
  });
}

test('SIGTERM: the holder loses with 0x01, a waiter gets 0x01; run reconnects to the restarted server and gets a larger token', async () => {
  const holder = await client.acquire('real-term', { leaseMs: 2000 });
  const waiter = client.acquire('real-term', { leaseMs: 2000 });
  const waiterFailed = assert.rejects(waiter, (e: unknown) => e instanceof UnavailableError && e.code === 0x01 && e.retryable);
  await queued('real-term', 1);
  // Another holder makes the run() attempt queue until the shutdown.
  const blocker = await client.acquire('real-term-2', { leaseMs: 2000 });
  let retryToken = 0n;
  const retrying = client.run('real-term-2', { leaseMs: 2000 }, (lock) => {
    retryToken = lock.token;
  });
  await queued('real-term-2', 1);
  const port = server.address.split(':')[1]!;
  await server.stop();
  const reason = await aborted(holder.signal);
  assert.ok(reason instanceof LockLostError && (reason.cause as UnavailableError).code === 0x01);
  await waiterFailed;
  server = await RealServer.start(['-listen', `127.0.0.1:${port}`, '-admin-listen', '127.0.0.1:0']);
  await retrying;
  assert.ok(retryToken > holder.token, `${retryToken} > ${holder.token}`);
  await holder.release();
  await blocker.release();
});
