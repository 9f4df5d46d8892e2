// monolock/verrou's rules without a server: the TTL as a timer on a fake
// clock, ownership, a lost lock, close(); the admin API calls against a
// scripted HTTP peer (what it is sent, each answer, a stuck and a dead one).
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { test } from 'node:test';

import { E_LOCK_NOT_OWNED } from '@verrou/core';
import { BusyError } from 'monolock';
import { MonolockStore, encodeName, type HeldLock, type LockSource } from 'monolock/verrou';

import { FakeClock } from './helpers.js';

/** A granted lock whose release and loss the test sees and causes. */
class FakeLock implements HeldLock {
  readonly token: bigint;
  releases = 0;
  lost = false;
  #closed!: () => void;
  readonly closed = new Promise<void>((resolve) => (this.#closed = resolve));
  constructor(token: bigint) {
    this.token = token;
  }
  get ended(): boolean {
    return this.releases > 0 || this.lost;
  }
  release(): Promise<void> {
    this.releases++;
    this.#closed();
    return this.closed;
  }
  /** The connection ends without a release: the lock is lost. */
  lose(): void {
    this.lost = true;
    this.#closed();
  }
}

/** Grants a name nobody holds and is busy for a held one, as the server is; records what it was asked. */
class FakeSource implements LockSource {
  readonly granted: FakeLock[] = [];
  readonly asked: { name: string; leaseMs: number; wait: false }[] = [];
  readonly #held = new Map<string, FakeLock>();
  #next = 100n;
  fail: Error | undefined;
  async acquire(name: string, options: { leaseMs: number; wait: false }): Promise<FakeLock> {
    this.asked.push({ name, ...options });
    if (this.fail) throw this.fail;
    if (this.#held.get(name)?.ended === false) throw new BusyError(name, `lock ${name} is held`);
    const lock = new FakeLock(this.#next++);
    this.granted.push(lock);
    this.#held.set(name, lock);
    return lock;
  }
}

function setup(): { clock: FakeClock; source: FakeSource; store: MonolockStore } {
  const clock = new FakeClock();
  const source = new FakeSource();
  return { clock, source, store: new MonolockStore({ client: source, clock, leaseMs: 1500 }) };
}

/** Lets promise callbacks (the store's lock.closed handler) run. */
const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

/** A clock whose now() lags its timers, as Date.now() lags a Node.js timer dated from the loop's cached time. */
class LaggingClock extends FakeClock {
  lag = 0;
  override now(): number {
    return super.now() - this.lag;
  }
}

test('a TTL ends when its timer fires, even when the clock still reads a moment before its end', async () => {
  const clock = new LaggingClock();
  const source = new FakeSource();
  const store = new MonolockStore({ client: source, clock, leaseMs: 1500 });
  assert.equal(await store.save('k', 'alice', 1000), true);
  clock.lag = 1;
  clock.advance(1000);
  assert.equal(source.granted[0]!.releases, 1, 'released by the TTL timer, not re-armed for the last millisecond');
  assert.equal(store.token('k', 'alice'), undefined);
  assert.equal(clock.pending, 0);
});

test('save takes the lock with the store lease and without waiting; a TTL closes it exactly at its end', async () => {
  const { clock, source, store } = setup();
  assert.equal(await store.save('k', 'alice', 1000), true);
  assert.deepEqual(source.asked, [{ name: 'k', leaseMs: 1500, wait: false }]);
  const lock = source.granted[0]!;
  clock.advance(999);
  assert.equal(lock.releases, 0);
  assert.equal(await store.exists('k'), true, 'held by this store: answered without the admin API');
  assert.equal(store.token('k', 'alice'), 100n);
  clock.advance(1);
  assert.equal(lock.releases, 1, 'released at the TTL');
  assert.equal(store.token('k', 'alice'), undefined);
  await assert.rejects(store.delete('k', 'alice'), E_LOCK_NOT_OWNED, 'after the TTL the owner holds nothing');
  assert.equal(clock.pending, 0);
});

test('a null TTL holds until delete: no timer at all', async () => {
  const { clock, source, store } = setup();
  assert.equal(await store.save('k', 'alice', null), true);
  assert.equal(clock.pending, 0);
  clock.advance(10 * 365 * 24 * 3600 * 1000);
  assert.equal(source.granted[0]!.releases, 0);
  await store.delete('k', 'alice');
  assert.equal(source.granted[0]!.releases, 1);
});

test('extend moves the timer to duration from now, not from the save', async () => {
  const { clock, source, store } = setup();
  await store.save('k', 'alice', 1000);
  clock.advance(500);
  await store.extend('k', 'alice', 1000);
  clock.advance(999);
  assert.equal(source.granted[0]!.releases, 0, 'the first TTL would have ended 499 ms ago');
  assert.equal(clock.pending, 1, 'one timer, the old one cleared');
  clock.advance(1);
  assert.equal(source.granted[0]!.releases, 1);
});

test('extend of a lock saved without TTL starts a TTL', async () => {
  const { clock, source, store } = setup();
  await store.save('k', 'alice', null);
  await store.extend('k', 'alice', 300);
  clock.advance(299);
  assert.equal(source.granted[0]!.releases, 0);
  clock.advance(1);
  assert.equal(source.granted[0]!.releases, 1);
});

test('a TTL beyond the 24.8 days one Node.js timer can run ends at its end, in steps', async () => {
  const { clock, source, store } = setup();
  const ttl = 2 ** 32;
  await store.save('k', 'alice', ttl);
  assert.ok(clock.next! - clock.now() <= 2 ** 31 - 1, 'no timer longer than Node.js runs');
  clock.advance(ttl - 1);
  assert.equal(source.granted[0]!.releases, 0);
  clock.advance(1);
  assert.equal(source.granted[0]!.releases, 1);
});

test('an owner other than the saver gets E_LOCK_NOT_OWNED from delete and extend, and the lock stays held', async () => {
  const { clock, source, store } = setup();
  await store.save('k', 'alice', 1000);
  await assert.rejects(store.delete('k', 'bob'), E_LOCK_NOT_OWNED);
  await assert.rejects(store.extend('k', 'bob', 5000), E_LOCK_NOT_OWNED);
  await assert.rejects(store.extend('other', 'alice', 5000), E_LOCK_NOT_OWNED);
  assert.equal(store.token('k', 'bob'), undefined);
  clock.advance(999);
  assert.equal(source.granted[0]!.releases, 0, "bob's extend did not move the timer, nor his delete release it");
  clock.advance(1);
  assert.equal(source.granted[0]!.releases, 1);
});

test('save of a lock this store holds is false without a connection; busy is false; other errors reach the caller', async () => {
  const { source, store } = setup();
  assert.equal(await store.save('k', 'alice', null), true);
  assert.equal(await store.save('k', 'alice', null), false);
  assert.equal(await store.save('k', 'bob', null), false);
  assert.equal(source.asked.length, 1);
  const other = new MonolockStore({ client: source, clock: new FakeClock() });
  assert.equal(await other.save('k', 'carol', null), false, "the server's busy answer");
  source.fail = new Error('connection refused');
  await assert.rejects(store.save('j', 'alice', null), /connection refused/);
  await assert.rejects(store.save('j', 'alice', 0), /TTL .* is 0: give a number of milliseconds above 0/);
});

test('a lock lost meanwhile is forgotten: its TTL timer is cleared and its owner holds nothing', async () => {
  const { clock, source, store } = setup();
  await store.save('k', 'alice', 1000);
  source.granted[0]!.lose();
  await settle();
  assert.equal(clock.pending, 0);
  assert.equal(store.token('k', 'alice'), undefined);
  await assert.rejects(store.extend('k', 'alice', 10), E_LOCK_NOT_OWNED);
  assert.equal(await store.save('k', 'alice', null), true, 'taken again with a new connection');
  assert.equal(store.token('k', 'alice'), 101n);
});

test('close releases every lock the store holds, clears its timers and refuses new saves', async () => {
  const { clock, source, store } = setup();
  await store.save('a', 'alice', 1000);
  await store.save('b', 'bob', null);
  await store.close();
  assert.deepEqual(source.granted.map((l) => l.releases), [1, 1]);
  assert.equal(clock.pending, 0);
  await assert.rejects(store.save('c', 'carol', null), /save after close\(\): create a new MonolockStore/);
  await store.close();
});

test('exists and forceDelete of a lock this store does not hold need the admin option, and say so', async () => {
  const { store } = setup();
  await assert.rejects(store.exists('k'), /give the server's -admin-listen address as the store's admin option/);
  await assert.rejects(store.forceDelete('k'), /admin option/);
});

/** A scripted admin port on 127.0.0.1:0 that records each request. */
async function adminPeer(answer: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<{ address: string; requests: { method: string; url: string; host: string }[]; close(): Promise<void> }> {
  const requests: { method: string; url: string; host: string }[] = [];
  const server = http.createServer((req, res) => {
    requests.push({ method: req.method!, url: req.url!, host: req.headers.host! });
    answer(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

test('the admin API: the Host header is the IP and port connected to; 404 is idle, a holder is held', async () => {
  let holder = true;
  const peer = await adminPeer((_req, res) => {
    if (!holder) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"lock is idle"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"name":"a/b","holder":{"identity":"","remote_addr":"127.0.0.1:1","lease_ms":2000,"token":4611686018427387905},"waiters":[]}');
  });
  try {
    const port = peer.address.split(':')[1];
    const store = new MonolockStore({ client: new FakeSource(), admin: `localhost:${port}` });
    assert.equal(await store.exists('a/b'), true);
    holder = false;
    assert.equal(await store.exists('..'), false);
    await store.forceDelete('a b');
    const ip = peer.requests[0]!.host.split(':')[0];
    assert.ok(ip === '127.0.0.1', `Host ${peer.requests[0]!.host} is not the IP connected to`);
    assert.deepEqual(peer.requests.map((r) => [r.method, r.url, r.host]), [
      ['GET', '/api/locks/a%2Fb', `127.0.0.1:${port}`],
      ['GET', '/api/locks/%2E%2E', `127.0.0.1:${port}`],
      ['POST', '/api/locks/a%20b/release', `127.0.0.1:${port}`],
    ]);
  } finally {
    await peer.close();
  }
});

test("exists: the server still showing this store's just-released grant is not a holder; another token is", async () => {
  let token = '100';
  const peer = await adminPeer((_req, res) => {
    res.writeHead(200).end(`{"name":"k","holder":{"token":${token},"lease_ms":1500},"waiters":[{"position":1}]}`);
  });
  try {
    const source = new FakeSource();
    const store = new MonolockStore({ client: source, clock: new FakeClock(), admin: peer.address });
    await store.save('k', 'alice', null);
    await store.delete('k', 'alice');
    assert.equal(await store.exists('k'), false, 'token 100 is the grant this store closed');
    token = '101';
    assert.equal(await store.exists('k'), true, 'a newer grant is a holder');
    token = '100';
    assert.equal(await store.exists('k'), true, 'once the server was seen past it, the released token is forgotten');
  } finally {
    await peer.close();
  }
});

test("an admin refusal names the status, the role and the server's reason", async () => {
  const peer = await adminPeer((_req, res) => {
    res.writeHead(403).end('{"error":"role release is not granted to spiffe://x"}');
  });
  try {
    const store = new MonolockStore({ client: new FakeSource(), admin: peer.address });
    await assert.rejects(store.forceDelete('k'), /POST http:\/\/127\.0\.0\.1:\d+\/api\/locks\/k\/release answered 403 \(forceDelete needs the admin role release\): role release is not granted/);
    await assert.rejects(store.exists('k'), /answered 403 \(exists needs the admin role read\)/);
  } finally {
    await peer.close();
  }
});

test('a stuck admin port fails the call after adminTimeoutMs; a dead one at once; a bad address says how to write it', async () => {
  const stuck = net.createServer(() => {}); // accepts and never answers
  await new Promise<void>((r) => stuck.listen(0, '127.0.0.1', r));
  const held: net.Socket[] = [];
  stuck.on('connection', (s) => held.push(s));
  try {
    const { port } = stuck.address() as net.AddressInfo;
    const store = new MonolockStore({ client: new FakeSource(), admin: `127.0.0.1:${port}`, adminTimeoutMs: 50 });
    await assert.rejects(store.exists('k'), /exists\("k"\): GET http:\/\/127\.0\.0\.1:\d+\/api\/locks\/k failed: .*50 ms/);
  } finally {
    for (const s of held) s.destroy();
    await new Promise<void>((r) => stuck.close(() => r()));
  }
  const dead = net.createServer();
  await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
  const { port } = dead.address() as net.AddressInfo;
  await new Promise<void>((r) => dead.close(() => r()));
  await assert.rejects(new MonolockStore({ client: new FakeSource(), admin: `127.0.0.1:${port}` }).exists('k'), /ECONNREFUSED.*check that the admin option names the server's -admin-listen address/);
  await assert.rejects(new MonolockStore({ client: new FakeSource(), admin: 'nohost' }).exists('k'), /admin "nohost" is not host:port: write it as 127\.0\.0\.1:7071/);
});

test('encodeName: one path segment for any name', () => {
  assert.equal(encodeName('nightly/import 2024'), 'nightly%2Fimport%202024');
  assert.equal(encodeName('.'), '%2E');
  assert.equal(encodeName('a.b'), 'a.b');
  assert.equal(encodeName('100%?#'), '100%25%3F%23');
});
