// The public surface against fake servers: validation before connecting,
// withLock, run's retries, and a process that exits on its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { afterEach, beforeEach, test } from 'node:test';

import { BusyError, Client, InvalidArgumentError, LockLostError, ServerError, UnavailableError } from 'monolock';
import { WAITING, FakeServer, aborted, acquired, errorFrame, packageDir } from './helpers.js';

let server: FakeServer;
beforeEach(async () => {
  server = await FakeServer.start();
});
afterEach(async () => {
  await server.close();
});

test('invalid names and leases are refused before connecting', async () => {
  const client = new Client({ address: server.address });
  const bad: [string, number, string][] = [
    ['', 1000, 'name'],
    ['a'.repeat(256), 1000, 'name'],
    ['日'.repeat(86), 1000, 'name'], // 258 bytes in UTF-8
    ['\uD800', 1000, 'name'], // a lone surrogate has no UTF-8 form
    ['ok\uDC00', 1000, 'name'],
    ['job', 0, 'leaseMs'],
    ['job', 0.5, 'leaseMs'],
    ['job', -1, 'leaseMs'],
    ['job', NaN, 'leaseMs'],
    ['job', 2 ** 32, 'leaseMs'],
    ['job', 2 ** 32 - 0.5, 'leaseMs'], // rounds up past the u32
  ];
  for (const [name, leaseMs, field] of bad) {
    await assert.rejects(client.acquire(name, { leaseMs }), (e: unknown) => e instanceof InvalidArgumentError && e.field === field, `${JSON.stringify(name)} ${leaseMs}`);
  }
  await assert.rejects(client.acquire('job', { leaseMs: 1000, wait: -1 }), InvalidArgumentError);
  assert.throws(() => new Client({ address: 'no-port' }), InvalidArgumentError);
  assert.throws(() => new Client({ address: '[::1]:70000' }), InvalidArgumentError);
  assert.throws(() => new Client({ connectTimeoutMs: 0 }), InvalidArgumentError);
  assert.equal(server.connections, 0);
});

test('the longest name, a multi-byte name and a fractional lease reach the wire as the protocol says', async () => {
  const client = new Client({ address: server.address });
  for (const [name, leaseMs, wire] of [
    ['日'.repeat(85), 1.5, 2],
    ['a'.repeat(255), 2 ** 32 - 1, 2 ** 32 - 1],
  ] as const) {
    // A 2 ms lease may well give up before the answer: only the bytes matter here.
    const pending = client.acquire(name, { leaseMs }).then((lock) => lock.release(), () => {});
    const conn = await server.accept();
    const a = await conn.readAcquire();
    assert.equal(a.leaseMs, wire);
    assert.equal(a.name.toString('utf8'), name);
    conn.write(acquired(1n));
    await pending;
  }
});

test('withLock passes token and signal, returns the result and releases', async () => {
  const client = new Client({ address: server.address });
  const result = client.withLock('job', { leaseMs: 60_000 }, async (lock) => {
    assert.equal(lock.token, 2n ** 63n + 5n);
    assert.equal(lock.valid(), true);
    assert.equal(lock.signal.aborted, false);
    return 'done';
  });
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(2n ** 63n + 5n));
  assert.equal(await result, 'done');
  await conn.closed;
});

test('withLock: a loss rejects with LockLostError even when the callback resolves, and carries the work error', async () => {
  const client = new Client({ address: server.address });
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  const result = client.withLock('job', { leaseMs: 60_000 }, async (lock) => {
    started();
    await aborted(lock.signal);
    throw new Error('work interrupted');
  });
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(1n));
  await running; // lost while the callback runs
  conn.write(errorFrame(0x02, 'closed by administrator'));
  await assert.rejects(result, (e: unknown) => e instanceof LockLostError && e.why === 'server' && (e.workError as Error).message === 'work interrupted');
});

test('withLock: a callback error is returned as is and the lock released', async () => {
  const client = new Client({ address: server.address });
  const result = client.withLock('job', { leaseMs: 60_000 }, () => {
    throw new Error('boom');
  });
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(1n));
  await assert.rejects(result, /boom/);
  await conn.closed;
});

test('acquire with wait: false against a held lock is BusyError', async () => {
  const client = new Client({ address: server.address });
  const pending = client.acquire('job', { leaseMs: 2000, wait: false });
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(WAITING);
  await assert.rejects(pending, BusyError);
  await conn.closed;
});

test('acquire that rejects a bad grant closes the connection at once: the caller has nothing to release', async () => {
  for (const [what, bad] of [
    ['a changed token', acquired(8n)],
    ['WAITING after ACQUIRED', WAITING],
    ['an unknown frame', Buffer.of(0x7e)],
  ] as const) {
    const client = new Client({ address: server.address });
    // A lease of 60 s: a connection left to linger until the last send + lease would outlive this test.
    const pending = client.acquire('job', { leaseMs: 60_000 });
    const conn = await server.accept();
    await conn.readAcquire();
    conn.write(Buffer.concat([acquired(7n), bad])); // the grant and the bad frame in one chunk
    await assert.rejects(pending, LockLostError, what);
    const open = await Promise.race([conn.closed.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 5000).unref())]);
    assert.equal(open, false, `${what}: the connection is still open 5 s after acquire rejected`);
  }
});

test('run reconnects at once after 0x01, with backoff after other codes below 0x10, and calls fn once', async () => {
  const client = new Client({ address: server.address });
  let calls = 0;
  const result = client.run('job', { leaseMs: 60_000 }, (lock) => {
    calls++;
    return lock.token;
  });
  for (const code of [0x01, 0x05]) {
    const conn = await server.accept();
    await conn.readAcquire();
    conn.write(WAITING);
    conn.write(errorFrame(code, ''));
  }
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(42n));
  assert.equal(await result, 42n);
  assert.equal(calls, 1);
  assert.equal(server.connections, 3);
});

test('run does not retry a server error (0x10 and above) or a loss after fn started', async () => {
  const client = new Client({ address: server.address });
  const refused = client.run('job', { leaseMs: 2000 }, () => assert.fail('fn must not run'));
  const c1 = await server.accept();
  await c1.readAcquire();
  c1.write(errorFrame(0x7f, 'a later code'));
  await assert.rejects(refused, (e: unknown) => e instanceof ServerError && e.code === 0x7f);

  let calls = 0;
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  const lost = client.run('job', { leaseMs: 60_000 }, async (lock) => {
    calls++;
    started();
    await aborted(lock.signal);
  });
  const c2 = await server.accept();
  await c2.readAcquire();
  c2.write(acquired(1n));
  await running;
  c2.write(errorFrame(0x01, 'server shutting down'));
  await assert.rejects(lost, LockLostError);
  assert.equal(calls, 1);
  assert.equal(server.connections, 2);
});

test('run stops retrying when its signal aborts', async () => {
  const address = server.address;
  await server.close();
  const client = new Client({ address }); // nothing listens there any more
  const ac = new AbortController();
  const result = client.run('job', { leaseMs: 2000, signal: ac.signal }, () => assert.fail('fn must not run'));
  setTimeout(() => ac.abort(new Error('enough')), 300);
  await assert.rejects(result, /enough/);
  server = await FakeServer.start();
});

test('a refused connection is UnavailableError', async () => {
  const address = server.address;
  await server.close();
  await assert.rejects(new Client({ address }).acquire('job', { leaseMs: 1000 }), (e: unknown) => e instanceof UnavailableError && e.retryable && /ECONNREFUSED/.test(e.message));
  server = await FakeServer.start();
});

/** Runs a script in a child process; it must exit by itself (a leftover timer or socket would keep it alive). */
function runChild(script: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: packageDir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

test('a released or lost lock leaves nothing that keeps the process alive', async () => {
  const script = `
    import { Client } from 'monolock';
    const client = new Client({ address: process.env.ADDR });
    const lock = await client.acquire('job', { leaseMs: 400 });
    if (!lock.signal.aborted) await new Promise((r) => lock.signal.addEventListener('abort', r));
    console.log(lock.lostError ? 'lost ' + lock.lostError.why : 'released');
  `;
  // Lost by silence: the lingering connection must not hold the process either.
  const child = runChild(script, { ADDR: server.address });
  const conn = await server.accept();
  await conn.readAcquire();
  conn.write(acquired(1n)); // then never answer a heartbeat
  const { code, out } = await child;
  assert.equal(code, 0);
  assert.equal(out.trim(), 'lost timeout');

  const released = runChild(
    `import { Client } from 'monolock';
     const lock = await new Client({ address: process.env.ADDR }).acquire('job', { leaseMs: 400 });
     await lock.release();
     console.log('released', process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'PipeWrap').join(','));`,
    { ADDR: server.address },
  );
  const conn2 = await server.accept();
  await conn2.readAcquire();
  conn2.write(acquired(1n));
  const r = await released;
  assert.equal(r.code, 0);
  assert.equal(r.out.trim(), 'released');
});
