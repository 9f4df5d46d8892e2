// monolock/verrou against the real server over real sockets: what crosses the
// wire beyond @verrou/core's own suite (verrou.spec.ts): another store's
// force-release through the admin API reaches the holder, the fencing token
// is the grant's, close() hands locks on.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';

import { Verrou } from '@verrou/core';
import { Client, type Lock } from 'monolock';
import { MonolockStore } from 'monolock/verrou';

import { RealServer, packageDir, repoRoot } from './helpers.js';

let server: RealServer;
before(async () => {
  server = await RealServer.start(['-admin-listen', '127.0.0.1:0']);
});
after(async () => {
  await server.stop();
});

/** A store whose grants the test can watch (their closed promise). */
function watchedStore(): { store: MonolockStore; locks: Lock[] } {
  const client = new Client({ address: server.address });
  const locks: Lock[] = [];
  const store = new MonolockStore({
    admin: server.adminAddress!,
    client: {
      acquire: async (name, options) => {
        const lock = await client.acquire(name, options);
        locks.push(lock);
        return lock;
      },
    },
  });
  return { store, locks };
}

test("another store's forceDelete releases the holder through the admin API; the holder's store forgets the lock", async () => {
  const a = watchedStore();
  const b = new MonolockStore({ address: server.address, admin: server.adminAddress! });
  try {
    assert.equal(await a.store.save('verrou-real-force', 'alice', null), true);
    assert.equal(await b.exists('verrou-real-force'), true, 'held by a: b asks the admin API');
    assert.equal(await b.save('verrou-real-force', 'bob', null), false);
    await b.forceDelete('verrou-real-force');
    await a.locks[0]!.closed;
    assert.equal(a.locks[0]!.lostError?.why, 'server');
    await assert.rejects(a.store.delete('verrou-real-force', 'alice'), /not acquired by you/);
    assert.equal(await a.store.exists('verrou-real-force'), false);
    assert.equal(await b.save('verrou-real-force', 'bob', null), true);
    await b.forceDelete('verrou-idle-lock'); // idle: nothing to do, no error
  } finally {
    await Promise.all([a.store.close(), b.close()]);
  }
});

test('a Verrou lock on this store: the task reads the fencing token of its grant; close() hands the lock on', async () => {
  const { store, locks } = watchedStore();
  const other = new MonolockStore({ address: server.address, admin: server.adminAddress! });
  try {
    const verrou = new Verrou({ default: 'monolock', stores: { monolock: { driver: { factory: () => store } } } });
    const lock = verrou.createLock('verrou-real-token', null);
    const [ran, token] = await lock.run(async () => store.token('verrou-real-token', lock.getOwner()));
    assert.equal(ran, true);
    assert.equal(token, locks[0]!.token);
    assert.ok(typeof token === 'bigint' && token > 0n);
    assert.equal(store.token('verrou-real-token', lock.getOwner()), undefined, 'released after run');

    assert.equal(await lock.acquire(), true);
    assert.equal(await other.save('verrou-real-token', 'bob', null), false);
    await store.close();
    await locks[1]!.closed;
    // The server may read the close after this save's ACQUIRE: wait in its queue.
    const next = await new Client({ address: server.address }).acquire('verrou-real-token', { leaseMs: 2000, wait: 5000 });
    assert.ok(next.token > locks[1]!.token, 'the next holder gets a larger token');
    await next.release();
  } finally {
    await Promise.all([store.close(), other.close()]);
  }
});

test("docs/integrations.md's Verrou example runs as written against the server", async () => {
  const doc = readFileSync(path.join(repoRoot, 'docs', 'integrations.md'), 'utf8');
  const block = /<!-- verrou-example[^>]*-->\n```ts\n([\s\S]*?)\n```/.exec(doc)?.[1];
  assert.ok(block, 'the example block (marked verrou-example) is missing from docs/integrations.md');
  const code = block.replaceAll('127.0.0.1:7070', server.address).replaceAll('127.0.0.1:7071', server.adminAddress!);
  // Inside the package, so that 'monolock/verrou' and '@verrou/core' resolve as in a project that installed them.
  const file = path.join(packageDir, 'dist-test', `verrou-example-${process.pid}.mjs`);
  writeFileSync(file, code);
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [file], { timeout: 30_000 });
    assert.match(stdout, /^step 0 written with token [1-9]\d*n\nstep 1 written with token [1-9]\d*n\nstep 2 written with token [1-9]\d*n\ndone\nlocked after run: false\n$/);
  } finally {
    rmSync(file, { force: true });
  }
});
