// The client rules on a fake clock against fake servers over real loopback
// sockets: heartbeat schedule, give-up, closing, errors, pushed promotion.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, test } from 'node:test';

import { runHeld } from '../dist/client.js';
import { BusyError, LockLostError, ProtocolError, ServerError, UnavailableError } from '../dist/errors.js';
import { Lock } from '../dist/lock.js';
import { Session } from '../dist/session.js';
import { WAITING, FakeClock, FakeServer, acquired, aborted, errorFrame, ticks, timeWaitFrom, type FakeConn } from './helpers.js';

let server: FakeServer;
let clock: FakeClock;
const sessions: Session[] = [];

beforeEach(async () => {
  server = await FakeServer.start();
  clock = new FakeClock();
});

afterEach(async () => {
  for (const s of sessions.splice(0)) await s.release();
  await server.close();
});

function session(leaseMs: number, opts: { waitMs?: number; name?: string; signal?: AbortSignal } = {}): Session {
  const name = opts.name ?? 'job';
  const [host, port] = server.address.split(':');
  const s = new Session({
    host: host!,
    port: Number(port),
    address: server.address,
    tls: undefined,
    connectTimeoutMs: 10_000,
    name,
    nameBytes: Buffer.from(name),
    leaseMs,
    waitMs: opts.waitMs ?? Infinity,
    signal: opts.signal,
    clock,
  });
  sessions.push(s);
  s.granted.catch(() => {});
  return s;
}

/** A session whose ACQUIRE the fake server has read and answered with ACQUIRED(token). */
async function held(leaseMs: number, token = 7n): Promise<{ s: Session; conn: FakeConn }> {
  const s = session(leaseMs);
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(token));
  assert.equal(await s.granted, token);
  return { s, conn };
}

test('ACQUIRE carries the lease and the name; the grant resolves with the token', async () => {
  const s = session(2000, { name: 'nightly-import' });
  const conn = await server.accept();
  const a = await conn.readAcquire();
  assert.deepEqual([a.version, a.leaseMs, a.name.toString()], [1, 2000, 'nightly-import']);
  conn.write(acquired(0xffff_ffff_ffff_ffffn));
  assert.equal(await s.granted, 0xffff_ffff_ffff_ffffn, 'a token ≥ 2^63 stays exact');
  assert.equal(s.valid(), true);
});

test('a promotion pushed while waiting grants without any request from the client', async () => {
  const s = session(4000);
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(WAITING);
  await ticks();
  conn.write(acquired(9n));
  assert.equal(await s.granted, 9n);
  assert.equal(conn.unread, 0, 'nothing sent for the push');
});

test('frames split byte by byte, and several in one segment, decode the same', async () => {
  const s = session(4000);
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(WAITING);
  for (const b of acquired(0x1_0000_0002n)) {
    conn.write(Buffer.of(b));
    await ticks(2);
  }
  assert.equal(await s.granted, 0x1_0000_0002n);

  const t = session(4000);
  const conn2 = await server.accept();
  await conn2.readAcquire();
  conn2.write(Buffer.concat([WAITING, acquired(11n)])); // the answer and the push in one segment
  assert.equal(await t.granted, 11n);
});

test('heartbeats: one interval after the send, one in flight, the next at once after a late answer', async () => {
  const { s, conn } = await held(400);
  clock.advance(99);
  await ticks();
  assert.equal(conn.unread, 0, 'no heartbeat before lease/4');
  clock.advance(1);
  await conn.readHeartbeat();
  clock.advance(200); // the answer is late: 200 ms > the 100 ms interval (and < the 320 ms give-up)
  await ticks();
  assert.equal(conn.unread, 0, 'never two heartbeats in flight');
  conn.write(acquired(7n));
  await conn.readHeartbeat(); // right after the late answer, without the clock moving
  assert.equal(s.valid(), true);
});

test('heartbeats: the smoothed RTT shortens the interval (lease/4 − 2·srtt)', async () => {
  const s = session(4000);
  const conn = await server.accept();
  await conn.readAcquire();
  clock.advance(300); // RTT of the ACQUIRE: 300 ms, so the next send is 1000 − 600 = 400 ms after it
  conn.write(acquired(7n));
  await s.granted;
  clock.advance(99);
  await ticks();
  assert.equal(conn.unread, 0);
  clock.advance(1);
  await conn.readHeartbeat();
});

test('give-up: 0.8 × lease after the newest answered send the work stops; the connection closes at last send + lease', async () => {
  const { s, conn } = await held(1000); // ACQUIRE sent at t0 and answered
  const lock = new Lock(s);
  clock.advance(250);
  await conn.readHeartbeat(); // sent at t0+250, never answered
  clock.advance(549); // t0+799
  assert.equal(lock.valid(), true);
  assert.equal(lock.signal.aborted, false);
  clock.advance(1); // t0+800
  assert.equal(lock.valid(), false);
  const reason = await aborted(lock.signal);
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.why, 'timeout');
  assert.equal(lock.lostError, reason);
  await ticks();
  assert.equal(conn.isClosed, false, 'the server, not the client, hands the lock on while the work may run');
  assert.equal(conn.unread, 0, 'no heartbeat after giving up');
  clock.advance(449); // t0+1249
  await ticks();
  assert.equal(conn.isClosed, false);
  clock.advance(1); // t0+250 (last send) + 1000 (lease)
  await conn.closed;
  await lock.closed;
  assert.equal(clock.pending, 0, 'no timer left');
});

test('give-up: once the work has stopped the connection closes at once', async () => {
  const { s, conn } = await held(1000);
  const lock = new Lock(s);
  let workEnded!: () => void;
  const result = runHeld(lock, async (l) => {
    await aborted(l.signal);
    await new Promise<void>((r) => (workEnded = r));
    return 'done';
  });
  clock.advance(800);
  await ticks();
  assert.equal(conn.isClosed, false, 'open while the callback runs');
  workEnded();
  await assert.rejects(result, (err: unknown) => err instanceof LockLostError && err.why === 'timeout');
  await conn.closed;
  assert.equal(clock.pending, 0);
});

test('give-up also while the answer to ACQUIRE is missing', async () => {
  const s = session(1000);
  const conn = await server.accept();
  await conn.readAcquire();
  clock.advance(799);
  await ticks();
  assert.equal(conn.isClosed, false);
  clock.advance(1);
  await assert.rejects(s.granted, UnavailableError);
  await conn.closed;
  assert.equal(clock.pending, 0);
});

test('ERROR while waiting: below 0x10 unavailable (retryable), 0x10 and above a server error; empty and 255-byte reasons', async () => {
  const cases: [number, string, (e: unknown) => boolean][] = [
    [0x05, '', (e) => e instanceof UnavailableError && e.code === 0x05 && e.retryable && e.reason === ''],
    [0x7f, 'r'.repeat(255), (e) => e instanceof ServerError && e.code === 0x7f && e.reason === 'r'.repeat(255)],
    [0x16, '', (e) => e instanceof ServerError && /not valid UTF-8/.test(e.message)],
  ];
  for (const [code, reason, check] of cases) {
    const s = session(2000);
    const conn = await server.accept();
    await conn.readAcquire();
    conn.write(WAITING);
    conn.write(errorFrame(code, reason));
    await assert.rejects(s.granted, check);
    await conn.closed;
  }
});

test('ERROR while holding: lost at once, connection closed at once', async () => {
  const { s, conn } = await held(2000);
  const lock = new Lock(s);
  conn.write(errorFrame(0x02, 'closed by administrator'));
  const reason = await aborted(lock.signal);
  assert.ok(reason instanceof LockLostError && reason.why === 'server');
  assert.ok(reason.cause instanceof UnavailableError && reason.cause.code === 0x02);
  assert.equal(lock.valid(), false);
  await conn.closed;
  assert.equal(clock.pending, 0);
});

test('EOF while holding: lost at once, connection closed', async () => {
  const { s, conn } = await held(2000);
  const lock = new Lock(s);
  conn.socket.end();
  const reason = await aborted(lock.signal);
  assert.ok(reason instanceof LockLostError && reason.why === 'closed');
  await lock.closed;
  assert.equal(clock.pending, 0);
});

test('unknown frame while holding: lost at once, the connection closes once the work stops', async () => {
  const { s, conn } = await held(2000);
  const lock = new Lock(s);
  conn.write(Buffer.of(0x7f));
  const reason = await aborted(lock.signal);
  assert.ok(reason instanceof LockLostError && reason.why === 'protocol');
  assert.ok(reason.cause instanceof ProtocolError);
  await ticks();
  assert.equal(conn.isClosed, false);
  await lock.release();
  await conn.closed;
  assert.equal(clock.pending, 0);
});

test('protocol violations while holding: WAITING after ACQUIRED, a changed token, an unsolicited answer', async () => {
  for (const frame of [WAITING, acquired(8n)]) {
    const { s, conn } = await held(2000);
    conn.write(frame);
    const reason = await aborted(s.signal);
    assert.ok(reason instanceof LockLostError && reason.why === 'protocol', String(reason));
    await s.release();
  }
  const { s, conn } = await held(2000);
  conn.write(acquired(7n)); // same token, but no heartbeat in flight
  assert.ok((await aborted(s.signal)) instanceof LockLostError);
});

test('unknown frame while waiting: the acquire fails with a protocol error', async () => {
  const s = session(2000);
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(Buffer.of(0x42));
  await assert.rejects(s.granted, ProtocolError);
  await conn.closed;
});

test('wait: 0 closes on WAITING with BusyError; the wait timer runs out while queued with BusyError', async () => {
  const s = session(2000, { waitMs: 0 });
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(WAITING);
  await assert.rejects(s.granted, BusyError);
  await conn.closed;

  const t = session(2000, { waitMs: 300 });
  const conn2 = await server.accept();
  await conn2.readAcquire();
  conn2.write(WAITING);
  await ticks();
  clock.advance(299);
  await ticks();
  assert.equal(conn2.isClosed, false);
  clock.advance(1);
  await assert.rejects(t.granted, BusyError);
  await conn2.closed;
  assert.equal(clock.pending, 0);
});

test('abort while queued leaves the queue and rejects with the reason; after the grant it no longer matters', async () => {
  const ac = new AbortController();
  const s = session(2000, { signal: ac.signal });
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(WAITING);
  await ticks();
  ac.abort(new Error('caller gave up'));
  await assert.rejects(s.granted, /caller gave up/);
  await conn.closed;

  const ac2 = new AbortController();
  const t = session(2000, { signal: ac2.signal });
  const conn2 = await server.accept();
  await conn2.readAcquire();
  conn2.write(acquired(3n));
  await t.granted;
  ac2.abort();
  await ticks();
  assert.equal(t.valid(), true);
  assert.equal(conn2.isClosed, false);
});

test('release is idempotent, closes the connection and leaves no timer', async () => {
  const { s, conn } = await held(2000);
  const lock = new Lock(s);
  await Promise.all([lock.release(), lock.release()]);
  await lock.release();
  await conn.closed;
  assert.equal(lock.signal.aborted, true);
  assert.equal(lock.lostError, undefined);
  assert.equal(lock.valid(), false);
  assert.equal(clock.pending, 0);
});

test('valid() after a stall past the deadline gives the lock up at once; a late answer does not revive it', async () => {
  const { s, conn } = await held(1000);
  const lock = new Lock(s);
  clock.advance(250);
  await conn.readHeartbeat();
  clock.jump(600); // t0+850: past the deadline, and the give-up timer has not run
  assert.equal(lock.valid(), false);
  assert.ok(lock.signal.aborted && lock.lostError?.why === 'timeout');
  conn.write(acquired(7n)); // the late answer to the heartbeat
  await ticks();
  assert.equal(lock.valid(), false);
  assert.equal(conn.unread, 0, 'no heartbeat after giving up');
  await lock.release();
  await conn.closed;
  assert.equal(clock.pending, 0);
});

test('release: RELEASE, then the server closes first; the client closes after it, with no error', async () => {
  const { s, conn } = await held(10_000);
  const lock = new Lock(s);
  const ports = [conn.socket.remotePort!, conn.socket.localPort!] as const;
  const released = lock.release();
  await conn.closed;
  await released;
  assert.equal(conn.released, true);
  assert.equal(conn.clientEnd, 'eof', 'a plain close, after the server');
  assert.deepEqual(timeWaitFrom(...ports), [], 'the client closed first');
  assert.equal(lock.lostError, undefined);
  assert.equal(lock.valid(), false);
  assert.equal(clock.pending, 0);
});

test('release: a server that never closes is reset at min(lease, 2 s)', async () => {
  server.closeOnRelease = false;
  for (const [leaseMs, boundMs] of [
    [10_000, 2000],
    [800, 800],
  ] as const) {
    const { s, conn } = await held(leaseMs);
    const released = s.release();
    await conn.read(1).then((b) => assert.equal(b[0], 0x03));
    clock.advance(boundMs - 1);
    await ticks();
    assert.equal(conn.isClosed, false, 'closed before the bound');
    clock.advance(1);
    await released;
    await conn.closed;
    assert.equal(conn.clientEnd, 'reset');
    assert.equal(s.lost, undefined);
    assert.equal(clock.pending, 0);
  }
});

test('release: an old server answers RELEASE with ERROR 0x13 and closes: no error surfaced', async () => {
  server.closeOnRelease = false;
  const { s, conn } = await held(10_000);
  const lock = new Lock(s);
  const result = runHeld(lock, () => 'done');
  assert.equal((await conn.read(1))[0], 0x03);
  conn.write(errorFrame(0x13, 'unknown message type: 0x03'));
  conn.socket.end();
  assert.equal(await result, 'done');
  assert.equal(lock.lostError, undefined);
  assert.equal(clock.pending, 0);
});

test('release: answers in flight after RELEASE are discarded', async () => {
  server.closeOnRelease = false;
  const { s, conn } = await held(1000);
  clock.advance(250);
  await conn.readHeartbeat();
  const released = s.release();
  assert.equal((await conn.read(1))[0], 0x03);
  conn.write(Buffer.concat([acquired(7n), acquired(7n), WAITING, Buffer.of(0x7f)]));
  await ticks();
  conn.socket.end();
  await released;
  assert.equal(s.lost, undefined);
  assert.equal(conn.unread, 0, 'nothing sent after RELEASE');
});

test('leaving the queue is RELEASE too: wait false, the wait running out, the signal', async () => {
  const busy = session(2000, { waitMs: 0 });
  const c1 = await server.accept();
  await c1.readAcquire();
  c1.write(WAITING);
  await assert.rejects(busy.granted, BusyError);
  await c1.closed;
  assert.equal(c1.released, true);

  const ac = new AbortController();
  const gone = session(2000, { signal: ac.signal });
  const c2 = await server.accept();
  await c2.readAcquire();
  ac.abort(new Error('caller gave up'));
  await assert.rejects(gone.granted, /caller gave up/);
  await c2.closed;
  assert.equal(c2.released, true, 'RELEASE before the answer to ACQUIRE');
});

test('after a give-up the connection is reset, without RELEASE', async () => {
  const { s, conn } = await held(1000);
  clock.advance(250);
  await conn.readHeartbeat();
  clock.advance(550);
  assert.ok(s.lost instanceof LockLostError);
  await s.release();
  await conn.closed;
  assert.equal(conn.released, false);
  assert.equal(conn.clientEnd, 'reset');
  assert.equal(conn.unread, 0);
});

test('the longest lease: on the wire as 2^32 − 1 ms, held, the first heartbeat a quarter lease later', async () => {
  const { s, conn } = await held(0xffff_ffff);
  assert.equal(s.valid(), true);
  assert.equal(s.confirmedUntil, clock.now() + 0.8 * 0xffff_ffff);
  assert.equal(clock.next, clock.now() + 0xffff_ffff / 4);
  clock.advance(0xffff_ffff / 4);
  await conn.readHeartbeat();
  conn.write(acquired(7n));
  await ticks();
  assert.equal(s.valid(), true);
});

/** A session queued with WAITING whose heartbeat (sent at lease/4) is in flight: lease 2000 ms, interval 500 ms. */
async function waitingWithHeartbeat(): Promise<{ s: Session; conn: FakeConn }> {
  const s = session(2000);
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(WAITING);
  await ticks();
  clock.advance(500);
  await conn.readHeartbeat();
  clock.advance(700); // the answer will come 700 ms after its send, later than the 500 ms interval
  return { s, conn };
}

test('one read after a late answer: the push and an ERROR are ordinary frames, nothing is sent after the ERROR', async () => {
  const { s, conn } = await waitingWithHeartbeat();
  conn.write(Buffer.concat([WAITING, acquired(9n), errorFrame(0x02, 'closed by administrator')]));
  assert.equal(await s.granted, 9n);
  const reason = await aborted(s.signal);
  assert.ok(reason instanceof LockLostError && reason.why === 'server', String(reason));
  assert.ok(reason.cause instanceof UnavailableError && reason.cause.code === 0x02);
  await conn.closed;
  assert.equal(conn.unread, 0, 'a heartbeat sent after the session ended');
});

test('one read after a late answer: the push is no violation, and the due heartbeat goes out once', async () => {
  const { s, conn } = await waitingWithHeartbeat();
  conn.write(Buffer.concat([WAITING, acquired(9n)]));
  assert.equal(await s.granted, 9n);
  await conn.readHeartbeat();
  await ticks();
  assert.equal(conn.unread, 0);
  conn.write(acquired(9n)); // that heartbeat's answer
  await ticks();
  assert.equal(s.lost, undefined);
  assert.equal(s.valid(), true);
});

test('one read after a late answer: a second answer to the same request is a violation, and nothing is sent', async () => {
  const { s, conn } = await waitingWithHeartbeat();
  conn.write(Buffer.concat([WAITING, WAITING]));
  await assert.rejects(s.granted, ProtocolError);
  await ticks();
  assert.equal(conn.unread, 0);

  const h = await held(2000);
  clock.advance(500);
  await h.conn.readHeartbeat();
  clock.advance(700);
  h.conn.write(Buffer.concat([acquired(7n), acquired(7n)]));
  const reason = await aborted(h.s.signal);
  assert.ok(reason instanceof LockLostError && reason.why === 'protocol', String(reason));
  await ticks();
  assert.equal(h.conn.unread, 0);
});
