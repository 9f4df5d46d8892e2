// Several server addresses: a list, and a name resolving to several. Each
// attempt starts from the address that worked last and passes to the next on
// a refusal, within the one connect deadline of the step.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, afterEach, beforeEach, test } from 'node:test';

import { Client, InvalidArgumentError, UnavailableError } from 'monolock';
import { AddressBook, type Candidate } from '../dist/addresses.js';
import { Session } from '../dist/session.js';
import { FakeClock, FakeServer, RealServer, acquired, errorFrame, ticks } from './helpers.js';

/** An address on loopback where nothing listens: a connect is refused. */
async function closedPort(): Promise<string> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `127.0.0.1:${port}`;
}

// The order each attempt dials in, as the book gives it.
const orders: string[][] = [];
const originalCandidates = AddressBook.prototype.candidates;
AddressBook.prototype.candidates = async function (this: AddressBook) {
  const got = await originalCandidates.call(this);
  orders.push(got.candidates.map((c: Candidate) => `${c.host}:${c.port}`));
  return got;
};
after(() => {
  AddressBook.prototype.candidates = originalCandidates;
});

let server: FakeServer;
let closed: string;
beforeEach(async () => {
  server = await FakeServer.start();
  closed = await closedPort();
  orders.length = 0;
});
afterEach(async () => {
  await server.close();
});

test('a name resolving to several gives one candidate each, from the last that worked', async () => {
  const table: Record<string, string[]> = { 'locks.test': ['10.0.0.1', '10.0.0.2'] };
  const book = new AddressBook(['locks.test:7070', '10.0.0.9:7070', 'nowhere.test:7070'], async (host) => {
    const ips = table[host];
    if (ips === undefined) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
    return ips;
  });
  let got = await book.candidates();
  assert.deepEqual(orders.at(-1), ['10.0.0.1:7070', '10.0.0.2:7070', '10.0.0.9:7070']);
  assert.deepEqual(
    got.candidates.map((c) => [c.address, c.servername]),
    [
      ['locks.test:7070', 'locks.test'],
      ['locks.test:7070', 'locks.test'],
      ['10.0.0.9:7070', '10.0.0.9'],
    ],
  );
  assert.equal(got.failed.length, 1);
  assert.match(got.failed[0]!, /nowhere\.test:7070/);
  book.worked(got.candidates[1]!);
  got = await book.candidates();
  assert.deepEqual(orders.at(-1), ['10.0.0.2:7070', '10.0.0.9:7070', '10.0.0.1:7070']);
});

test('addresses are checked before any connect', () => {
  assert.throws(() => new Client({ addresses: [] }), InvalidArgumentError);
  assert.throws(() => new Client({ addresses: ['127.0.0.1:1', 'nope'] }), InvalidArgumentError);
  assert.throws(() => new Client({ address: '127.0.0.1:1', addresses: ['127.0.0.1:2'] }), InvalidArgumentError);
  assert.equal(server.connections, 0);
});

test('refused, then granted by the next; after ERROR 0x01 the next attempt starts from the one that worked', async () => {
  const client = new Client({ addresses: [closed, server.address], connectTimeoutMs: 5000 });
  const first = client.acquire('job', { leaseMs: 10_000 });
  let conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(5n));
  const lock = await first;
  assert.equal(lock.token, 5n);
  conn.write(errorFrame(0x01, 'server shutting down'));
  conn.socket.end();
  await new Promise((resolve) => lock.signal.addEventListener('abort', resolve, { once: true }));
  await lock.release();
  const second = client.acquire('job', { leaseMs: 10_000 });
  conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(6n));
  await (await second).release();
  assert.deepEqual(orders, [
    [closed, server.address],
    [server.address, closed],
  ]);
});

test('a name with several addresses: the refused one, then the next', async () => {
  const port = Number(server.address.split(':')[1]);
  // 127.0.0.2 is loopback too, and nothing listens there on that port.
  const book = new AddressBook([`locks.test:${port}`], async () => ['127.0.0.2', '127.0.0.1']);
  const s = new Session({
    host: 'locks.test',
    port,
    address: `locks.test:${port}`,
    tls: undefined,
    connectTimeoutMs: 5000,
    book,
    name: 'job',
    nameBytes: Buffer.from('job'),
    leaseMs: 10_000,
    waitMs: Infinity,
    signal: undefined,
  });
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(8n));
  assert.equal(await s.granted, 8n);
  await s.release();
  assert.deepEqual(orders, [[`127.0.0.2:${port}`, `127.0.0.1:${port}`]]);
});

test('a stuck TLS handshake takes the whole connect deadline: the attempt fails then, aborted, the next address untried', async () => {
  // A listener that accepts the TCP connection and never answers the ClientHello.
  const held: net.Socket[] = [];
  const resets: Promise<string | undefined>[] = [];
  const stuck = net.createServer((sock) => {
    held.push(sock);
    resets.push(new Promise((resolve) => sock.once('error', (e: NodeJS.ErrnoException) => resolve(e.code))));
  });
  await new Promise<void>((resolve) => stuck.listen(0, '127.0.0.1', resolve));
  const stuckAddress = `127.0.0.1:${(stuck.address() as net.AddressInfo).port}`;
  try {
    const clock = new FakeClock();
    const accepted = new Promise((resolve) => stuck.once('connection', resolve));
    const s = new Session({
      host: '127.0.0.1',
      port: (stuck.address() as net.AddressInfo).port,
      address: stuckAddress,
      tls: {},
      connectTimeoutMs: 3000,
      book: new AddressBook([stuckAddress, server.address]),
      name: 'job',
      nameBytes: Buffer.from('job'),
      leaseMs: 10_000,
      waitMs: Infinity,
      signal: undefined,
      clock,
    });
    const got: { why?: unknown } = {};
    s.granted.catch((e: unknown) => (got.why = e));
    await accepted;
    clock.advance(2999);
    await ticks();
    assert.equal(got.why, undefined, 'failed before the connect deadline');
    clock.advance(1);
    await s.closed;
    assert.equal(await resets[0], 'ECONNRESET', 'the half-made connection is aborted (an RST)');
    const why = got.why as unknown; // set by the rejection, after the assertion above narrowed it
    assert.ok(why instanceof UnavailableError && why.retryable, String(why));
    assert.match(why.message, /connect timeout \(3000 ms\)/);
    assert.equal(server.connections, 0, 'the next address was tried after the deadline');
  } finally {
    for (const sock of held) sock.destroy();
    await new Promise<void>((resolve) => stuck.close(() => resolve()));
  }
});

test('every address refused is one failed connect naming them all', async () => {
  const other = await closedPort();
  const client = new Client({ addresses: [closed, other], connectTimeoutMs: 5000 });
  await assert.rejects(client.acquire('job', { leaseMs: 1000 }), (e: unknown) => {
    assert.ok(e instanceof UnavailableError && e.retryable);
    assert.match(e.message, new RegExp(`${closed}.*${other}`));
    return true;
  });
});

test('the real server behind a closed port', async () => {
  const real = await RealServer.start([]);
  try {
    const client = new Client({ addresses: [closed, real.address], connectTimeoutMs: 5000 });
    const lock = await client.acquire('several', { leaseMs: 2000 });
    assert.ok(lock.token > 0n);
    assert.equal(lock.valid(), true);
    await lock.release();
  } finally {
    await real.stop();
  }
});
