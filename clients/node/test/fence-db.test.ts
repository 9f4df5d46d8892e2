// fence.admit against real PostgreSQL (node-postgres) and MariaDB (mysql2),
// from MONOLOCK_TEST_POSTGRES and MONOLOCK_TEST_MYSQL, which
// internal/testsupport/testdb/withdb sets (make node-test runs under it);
// without them these tests skip.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import mysql from 'mysql2/promise';
import pg from 'pg';

import { FenceTableMissingError, StaleTokenError, fence } from 'monolock';

/** One connection, the same few calls for both drivers. */
interface Conn {
  /** Runs sql and returns its first column's values as text. */
  col(sql: string, values?: unknown[]): Promise<string[]>;
  client: fence.QueryClient | fence.ExecuteClient;
  close(): Promise<void>;
}

const envOf: Record<fence.Dialect, string> = { postgresql: 'MONOLOCK_TEST_POSTGRES', mysql: 'MONOLOCK_TEST_MYSQL' };

async function connect(dialect: fence.Dialect): Promise<Conn> {
  const url = process.env[envOf[dialect]]!;
  if (dialect === 'postgresql') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    return {
      client: c,
      col: async (sql, values) => (await c.query({ text: sql, values: values ?? [], rowMode: 'array' })).rows.map((r: unknown[]) => String(r[0])),
      close: () => c.end(),
    };
  }
  const c = await mysql.createConnection({ uri: url, supportBigNumbers: true, bigNumberStrings: true });
  return {
    client: c,
    col: async (sql, values) => {
      const [rows] = await c.query({ sql, values: values ?? [], rowsAsArray: true });
      return Array.isArray(rows) ? (rows as unknown[][]).map((r) => String(r[0])) : [];
    },
    close: () => c.end(),
  };
}

for (const dialect of ['postgresql', 'mysql'] as const) {
  const skip = process.env[envOf[dialect]] ? false : `${envOf[dialect]} is not set: run under internal/testsupport/testdb/withdb (make node-test does)`;
  const ph = (i: number) => (dialect === 'postgresql' ? `$${i}` : '?');
  const storedSql = dialect === 'postgresql' ? 'SELECT token::text FROM monolock_fence WHERE resource = $1' : 'SELECT CAST(token AS CHAR) FROM monolock_fence WHERE resource = ?';

  describe(`fence on ${dialect}`, { skip }, () => {
    async function withConn<T>(f: (c: Conn) => Promise<T>): Promise<T> {
      const c = await connect(dialect);
      try {
        await c.col(fence.schema(dialect));
        return await f(c);
      } finally {
        await c.close();
      }
    }
    async function admitted(c: Conn, resource: string, token: bigint): Promise<void> {
      await c.col('BEGIN');
      await fence.admit(c.client, resource, token, { dialect });
      await c.col('COMMIT');
    }
    const stored = async (c: Conn, r: string) => (await c.col(storedSql, [r]))[0];

    test('orders tokens as unsigned 64-bit; equal again; never 0', () =>
      withConn(async (c) => {
        const r = `node-${randomUUID()}`;
        const steps: [bigint, boolean][] = [
          [0n, false], [(1n << 63n) - 1n, true], [(1n << 63n) - 1n, true], [1n << 63n, true],
          [(1n << 63n) - 1n, false], [(1n << 64n) - 1n, true], [1n << 63n, false], [(1n << 64n) - 1n, true],
        ];
        let highest: string | undefined;
        for (const [i, [token, ok]] of steps.entries()) {
          if (ok) {
            await admitted(c, r, token);
            highest = token.toString();
          } else {
            await assert.rejects(admitted(c, r, token), StaleTokenError, `step ${i}`);
          }
          assert.equal(await stored(c, r), highest, `step ${i}`);
        }
      }));

    test('a stale admit rolls the write back; a rolled-back admit leaves the fence', () =>
      withConn(async (c) => {
        const r = `node-${randomUUID()}`;
        const table = `node_writes_${dialect}`;
        await c.col(`CREATE TABLE IF NOT EXISTS ${table} (id VARCHAR(64) PRIMARY KEY)`);
        await admitted(c, r, 10n);
        await c.col('BEGIN');
        await c.col(`INSERT INTO ${table} (id) VALUES (${ph(1)})`, [r]);
        await assert.rejects(fence.admit(c.client, r, 9n, { dialect }), StaleTokenError);
        assert.deepEqual(await c.col(`SELECT id FROM ${table} WHERE id = ${ph(1)}`, [r]), []);
        await c.col('BEGIN');
        await fence.admit(c.client, r, (1n << 64n) - 1n, { dialect });
        await c.col('ROLLBACK');
        assert.equal(await stored(c, r), '10');
      }));

    test('a missing table says what to run', () =>
      withConn(async (c) => {
        await c.col(dialect === 'postgresql' ? 'CREATE SCHEMA IF NOT EXISTS monolock_no_fence' : 'CREATE DATABASE IF NOT EXISTS monolock_no_fence');
        await c.col(dialect === 'postgresql' ? 'SET search_path TO monolock_no_fence' : 'USE monolock_no_fence');
        await c.col('BEGIN');
        await assert.rejects(fence.admit(c.client, 'r', 1n, { dialect }), FenceTableMissingError);
      }));

    const levels = dialect === 'postgresql' ? ['READ COMMITTED', 'REPEATABLE READ'] : ['REPEATABLE READ', 'READ COMMITTED'];
    for (const level of levels) {
      for (const newerFirst of [false, true]) {
        test(`racing holders at ${level}, ${newerFirst ? 'newer' : 'older'} first: the lower never commits after the higher`, () =>
          withConn(async (c) => {
            const r = `node-${randomUUID()}`;
            await admitted(c, r, 1n);
            const [older, newer] = [(1n << 63n) - 1n, 1n << 63n];
            const [first, second] = newerFirst ? [newer, older] : [older, newer];
            const c1 = await connect(dialect);
            const c2 = await connect(dialect);
            try {
              const session = (await c2.col(dialect === 'postgresql' ? 'SELECT pg_backend_pid()' : 'SELECT CONNECTION_ID()'))[0]!;
              const begin = dialect === 'postgresql' ? [`BEGIN ISOLATION LEVEL ${level}`] : [`SET TRANSACTION ISOLATION LEVEL ${level}`, 'BEGIN'];
              for (const x of [c1, c2]) for (const sql of begin) await x.col(sql);
              await fence.admit(c1.client, r, first, { dialect });
              let done = false;
              const secondAdmit = fence.admit(c2.client, r, second, { dialect }).then(
                async () => {
                  done = true;
                  await c2.col('COMMIT');
                  return undefined;
                },
                (err: unknown) => {
                  done = true;
                  return err;
                },
              );
              // Seen waiting for the row lock: PostgreSQL's live state every
              // millisecond; InnoDB refreshes INNODB_TRX only when it was read
              // 0.1 s ago or more, so every 0.2 s.
              const waiting = dialect === 'postgresql'
                ? "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'"
                : "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'";
              const deadline = Date.now() + 60_000;
              while ((await c.col(waiting, [session]))[0] === '0') {
                assert.ok(!done, 'the second admit returned without waiting for the row lock');
                assert.ok(Date.now() < deadline, `session ${session} never waited for the row lock`);
                await sleep(dialect === 'postgresql' ? 1 : 200);
              }
              await c1.col('COMMIT');
              const err = await secondAdmit;
              if (dialect === 'postgresql' && level === 'REPEATABLE READ') {
                assert.ok(err !== undefined && !(err instanceof StaleTokenError), `want a serialization failure, got ${String(err)}`);
              } else if (newerFirst) {
                assert.ok(err instanceof StaleTokenError, `want StaleTokenError, got ${String(err)}`);
              } else {
                assert.equal(err, undefined);
              }
              const want = newerFirst || err === undefined ? newer : older;
              assert.equal(await stored(c, r), want.toString());
            } finally {
              await c1.close();
              await c2.close();
            }
          }));
      }
    }
  });
}
