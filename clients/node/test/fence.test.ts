// fence.admit against fake clients of both shapes: the statement sent, the
// token as decimal text, and the ROLLBACK on every refusal.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { FenceTableMissingError, InvalidArgumentError, StaleTokenError, fence } from 'monolock';

/** A node-postgres-shaped client answering the admit with rows. */
class FakePg {
  sent: { text: string; values: string[] }[] = [];
  constructor(
    private rows: unknown[],
    private fail?: Error,
  ) {}
  async query(text: string, values: string[]): Promise<{ rows: unknown[] }> {
    this.sent.push({ text, values });
    if (text === 'ROLLBACK') return { rows: [] };
    if (this.fail) throw this.fail;
    return { rows: this.rows };
  }
}

/** A mysql2-shaped client answering the admit with an insert id. */
class FakeMysql {
  sent: string[] = [];
  constructor(private insertId: number) {}
  async execute(sql: string, _values: string[]): Promise<[unknown, unknown]> {
    this.sent.push(sql);
    return [{ insertId: this.insertId, affectedRows: 1 }, undefined];
  }
}

test('admitted: one statement, the token as decimal text', async () => {
  const pg = new FakePg([{ '?column?': 1 }]);
  await fence.admit(pg, 'r', (1n << 64n) - 1n);
  assert.equal(pg.sent.length, 1);
  assert.match(pg.sent[0]!.text, /ON CONFLICT \(resource\) DO UPDATE/);
  assert.deepEqual(pg.sent[0]!.values, ['r', '18446744073709551615']);
});

test('stale: ROLLBACK, then StaleTokenError', async () => {
  const pg = new FakePg([]);
  await assert.rejects(fence.admit(pg, 'r', 1n << 63n), (err: unknown) => {
    assert.ok(err instanceof StaleTokenError);
    assert.equal(err.token, 1n << 63n);
    assert.match(err.message, /stale token 9223372036854775808 for "r"/);
    return true;
  });
  assert.deepEqual(pg.sent.map((s) => s.text).slice(1), ['ROLLBACK']);
});

test('mysql: the insert id says admitted (1) or stale (0)', async () => {
  const ok = new FakeMysql(1);
  await fence.admit(ok, 'r', 5n, { dialect: 'mysql' });
  assert.match(ok.sent[0]!, /LAST_INSERT_ID/);
  const stale = new FakeMysql(0);
  await assert.rejects(fence.admit(stale, 'r', 5n, { dialect: 'mysql' }), StaleTokenError);
  assert.deepEqual(stale.sent.slice(1), ['ROLLBACK']);
});

test('token 0 is never admitted and sends only the ROLLBACK', async () => {
  const pg = new FakePg([{}]);
  await assert.rejects(fence.admit(pg, 'r', 0n), /token 0 for "r" is never issued/);
  assert.deepEqual(pg.sent.map((s) => s.text), ['ROLLBACK']);
});

test('bad input is refused before anything is sent', async () => {
  const pg = new FakePg([{}]);
  for (const token of [-1n, 1n << 64n, 5 as unknown as bigint]) {
    await assert.rejects(fence.admit(pg, 'r', token), InvalidArgumentError);
  }
  await assert.rejects(fence.admit(pg, 'r', 1n, { dialect: 'sqlite' as fence.Dialect }), InvalidArgumentError);
  await assert.rejects(fence.admit(new FakeMysql(1) as unknown as fence.QueryClient, 'r', 1n), /node-postgres/);
  assert.deepEqual(pg.sent, []);
});

test('a missing table says what to run; other errors propagate; both after ROLLBACK', async () => {
  const missing = new FakePg([], new Error('relation "monolock_fence" does not exist'));
  await assert.rejects(fence.admit(missing, 'r', 1n), (err: unknown) => {
    assert.ok(err instanceof FenceTableMissingError);
    assert.match(err.message, /fence\.schema\('postgresql'\)/);
    assert.ok(err.cause instanceof Error);
    return true;
  });
  assert.equal(missing.sent.at(-1)!.text, 'ROLLBACK');
  const gone = new FakePg([], new Error('connection terminated'));
  await assert.rejects(fence.admit(gone, 'r', 1n), /connection terminated/);
  assert.equal(gone.sent.at(-1)!.text, 'ROLLBACK');
});

test('schema: the unsigned 64-bit column types', () => {
  assert.match(fence.schema('postgresql'), /numeric\(20,0\)/);
  assert.match(fence.schema('mysql'), /BIGINT UNSIGNED/);
  assert.throws(() => fence.schema('oracle' as fence.Dialect), InvalidArgumentError);
});
