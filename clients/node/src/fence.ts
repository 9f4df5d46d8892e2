// Fencing tokens checked where the write lands: the SQL contract of
// docs/fencing.md for node-postgres and mysql2 (and any client of the same
// shape). No driver is imported: the caller passes its own client.
import { InvalidArgumentError, MonolockError } from './errors.js';

/** The SQL dialects, named as in every monolock client ('mysql' covers MariaDB). */
export type Dialect = 'postgresql' | 'mysql';

/** The fence table's name. */
export const TABLE = 'monolock_fence';

/** node-postgres's shape: `client.query(text, values)` resolving to `{ rows }`. */
export interface QueryClient {
  query(text: string, values: string[]): Promise<{ rows: unknown[] }>;
}

/**
 * mysql2/promise's shape: `connection.execute(sql, values)` resolving to
 * `[result, fields]`, the result of an INSERT carrying `insertId`.
 */
export interface ExecuteClient {
  execute(sql: string, values: string[]): Promise<[unknown, unknown]>;
}

/** Options of {@link admit}. */
export interface AdmitOptions {
  /** The database's dialect; 'postgresql' when absent. */
  dialect?: Dialect;
}

const MAX_TOKEN = (1n << 64n) - 1n;

/**
 * The token was refused: a newer holder's token was admitted for the
 * resource, so the lock was handed on and the write must not land. The
 * transaction has been rolled back.
 */
export class StaleTokenError extends MonolockError {
  readonly resource: string;
  readonly token: bigint;
  constructor(resource: string, token: bigint) {
    super(
      token === 0n
        ? `fence: token 0 for ${JSON.stringify(resource)} is never issued by a monolock server: pass the token of the lock you hold`
        : `fence: stale token ${token} for ${JSON.stringify(resource)}: a larger token was admitted, so the lock was handed on; stop the work and take the lock again`,
    );
    this.resource = resource;
    this.token = token;
  }
}

/** The fence table does not exist: create it with {@link schema}. The transaction has been rolled back; `cause` is the driver's error. */
export class FenceTableMissingError extends MonolockError {
  readonly dialect: Dialect;
  constructor(dialect: Dialect, cause: unknown) {
    super(`fence: the fence table ${TABLE} does not exist: create it with fence.schema('${dialect}') (${String(cause)})`, { cause });
    this.dialect = dialect;
  }
}

const SCHEMA: Record<Dialect, string> = {
  postgresql: `CREATE TABLE IF NOT EXISTS monolock_fence (
    resource text PRIMARY KEY,
    token    numeric(20,0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615)
)`,
  mysql: `CREATE TABLE IF NOT EXISTS monolock_fence (
    resource VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    token    BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB`,
};

const ADMIT: Record<Dialect, string> = {
  postgresql: `INSERT INTO monolock_fence AS f (resource, token) VALUES ($1, $2::numeric(20,0))
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
RETURNING 1`,
  mysql: `INSERT INTO monolock_fence (resource, token) VALUES (?, IF(LAST_INSERT_ID(1), CAST(? AS UNSIGNED), 0))
ON DUPLICATE KEY UPDATE token = IF(LAST_INSERT_ID(token <= VALUES(token)), VALUES(token), token)`,
};

function checkDialect(dialect: unknown): asserts dialect is Dialect {
  if (dialect !== 'postgresql' && dialect !== 'mysql') {
    throw new InvalidArgumentError('dialect', `fence: unknown dialect ${JSON.stringify(dialect)}: use 'postgresql' or 'mysql'`);
  }
}

/** The statement that creates the fence table for dialect; safe to run again. */
export function schema(dialect: Dialect): string {
  checkDialect(dialect);
  return SCHEMA[dialect];
}

/** The admit statement for dialect ($1/$2 or ?): the resource, then the token as decimal text. */
export function admitStatement(dialect: Dialect): string {
  checkDialect(dialect);
  return ADMIT[dialect];
}

function isQueryClient(c: unknown): c is QueryClient {
  return typeof (c as QueryClient | null)?.query === 'function';
}

function isExecuteClient(c: unknown): c is ExecuteClient {
  return typeof (c as ExecuteClient | null)?.execute === 'function';
}

function missingTable(err: unknown): boolean {
  const msg = String((err as Error | null)?.message ?? err);
  return msg.includes(TABLE) && (msg.includes('does not exist') || msg.includes("doesn't exist"));
}

/**
 * Admits token for resource in the client's open transaction: one
 * statement, which records the token when it is ≥ the stored one and holds
 * the resource's row lock until the transaction ends. Pass the client (or
 * pooled connection) that runs the transaction, never a pool.
 *
 * Throws {@link StaleTokenError} for a stale token (or 0),
 * {@link FenceTableMissingError} when the fence table is missing, and the
 * driver's error otherwise, each time after sending ROLLBACK: nothing of
 * the transaction lands. Throws InvalidArgumentError, before sending
 * anything, for a token outside 1..2^64 − 1 that is not a bigint, an unknown
 * dialect, or a client of neither shape.
 */
export async function admit(client: QueryClient | ExecuteClient, resource: string, token: bigint, options: AdmitOptions = {}): Promise<void> {
  const dialect = options.dialect ?? 'postgresql';
  checkDialect(dialect);
  if (typeof token !== 'bigint' || token < 0n || token > MAX_TOKEN) {
    throw new InvalidArgumentError('token', `fence: token ${String(token)} is not an unsigned 64-bit bigint: pass the lock's token`);
  }
  const rollback = rollbackOf(client, dialect);
  if (token === 0n) {
    await rollback();
    throw new StaleTokenError(resource, token);
  }
  let admitted: boolean;
  try {
    admitted = await run(client, dialect, resource, token.toString());
  } catch (err) {
    await rollback();
    if (missingTable(err)) throw new FenceTableMissingError(dialect, err);
    throw err;
  }
  if (!admitted) {
    await rollback();
    throw new StaleTokenError(resource, token);
  }
}

async function run(client: QueryClient | ExecuteClient, dialect: Dialect, resource: string, token: string): Promise<boolean> {
  if (dialect === 'postgresql') {
    const res = await (client as QueryClient).query(ADMIT.postgresql, [resource, token]);
    return res.rows.length === 1;
  }
  // The MySQL statement sets LAST_INSERT_ID to 1 (admitted) or 0 (stale);
  // the server returns it as the insert id.
  const [result] = await (client as ExecuteClient).execute(ADMIT.mysql, [resource, token]);
  const id = (result as { insertId?: unknown } | null)?.insertId;
  return id === 1 || id === 1n || id === '1';
}

/** The ROLLBACK of a refused admit, for the client's shape; checks the shape first. */
function rollbackOf(client: unknown, dialect: Dialect): () => Promise<void> {
  const send =
    dialect === 'postgresql'
      ? isQueryClient(client) && ((sql: string) => client.query(sql, []))
      : isExecuteClient(client) && ((sql: string) => client.execute(sql, []));
  if (send === false) {
    throw new InvalidArgumentError(
      'client',
      dialect === 'postgresql'
        ? "fence: the client has no query(text, values): pass node-postgres's Client or PoolClient"
        : "fence: the client has no execute(sql, values): pass a mysql2/promise Connection or PoolConnection",
    );
  }
  return async () => {
    await send('ROLLBACK').then(
      () => undefined,
      () => undefined, // the admit's own error says why; a failed ROLLBACK leaves nothing to commit
    );
  };
}
