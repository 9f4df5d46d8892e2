import { CODE_TEXT, FIRST_CLIENT_ERROR_CODE } from './frames.js';

/** The base class of every error this package throws, for a single `instanceof` check. */
export class MonolockError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A name, lease, wait or address the protocol cannot carry; thrown before connecting. */
export class InvalidArgumentError extends MonolockError {
  /** Which option was wrong: 'name', 'leaseMs', 'wait', 'address', 'connectTimeoutMs' or 'tls'. */
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

/** The lock is held by someone else and the caller chose not to wait (wait: false), or not that long (wait: ms). */
export class BusyError extends MonolockError {
  readonly lockName: string;
  constructor(lockName: string, message: string) {
    super(message);
    this.lockName = lockName;
  }
}

/**
 * The server could not be reached or could not serve the request now: the
 * connection failed, was lost or went silent before the lock was granted, or
 * the server sent an ERROR with a code below 0x10 (a server condition such as
 * shutting down, or an administrator closing the session). A new attempt may
 * succeed; `client.run` makes one.
 */
export class UnavailableError extends MonolockError {
  /** The ERROR code (below 0x10) when the server sent one. */
  readonly code: number | undefined;
  /** The ERROR's reason text when the server sent one; for people, never parse it. */
  readonly reason: string | undefined;
  /** False when another attempt would meet the same failure (a TLS certificate the client rejects, say). */
  readonly retryable: boolean;
  constructor(message: string, opts: { code?: number; reason?: string; retryable?: boolean; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = opts.code;
    this.reason = opts.reason;
    this.retryable = opts.retryable ?? true;
  }
}

/**
 * An ERROR from the server with a code of 0x10 or above: the request itself is
 * wrong (or not allowed, 0x18) and asking again gets the same answer.
 */
export class ServerError extends MonolockError {
  readonly code: number;
  /** Text for people; branch on `code`, never on this. */
  readonly reason: string;
  constructor(code: number, reason: string) {
    super(`monolock: server error 0x${hex(code)}: ${reason || codeText(code)}`);
    this.code = code;
    this.reason = reason;
  }
}

/** The server sent something the protocol does not allow at that point; the client trusts nothing after it. */
export class ProtocolError extends MonolockError {}

/** Why a held lock was lost: one of these is a LockLostError's `why`. */
export type LossKind = 'timeout' | 'closed' | 'server' | 'protocol';

/**
 * Ownership of a held lock ended without a release: no answer from the server
 * within 0.8 × lease, the connection closed or failed, an ERROR from the
 * server, or a frame that breaks the protocol. The work must stop; the lock may
 * already belong to someone else. `cause` has the detail.
 */
export class LockLostError extends MonolockError {
  readonly lockName: string;
  readonly why: LossKind;
  /** The error the guarded work ended with, when withLock's callback rejected after the loss. */
  workError?: unknown;
  constructor(lockName: string, why: LossKind, message: string, cause?: unknown) {
    super(`monolock: lock ${JSON.stringify(lockName)} lost: ${message}`, cause === undefined ? undefined : { cause });
    this.lockName = lockName;
    this.why = why;
  }
}

/** The error for an ERROR frame: unavailable below 0x10, a server error from 0x10 on (unknown codes by the same ranges). */
export function errorForCode(code: number, reason: string): UnavailableError | ServerError {
  if (code < FIRST_CLIENT_ERROR_CODE) {
    return new UnavailableError(`monolock: server condition 0x${hex(code)}: ${reason || codeText(code)}; a new connection may succeed`, {
      code,
      reason,
    });
  }
  return new ServerError(code, reason);
}

export function codeText(code: number): string {
  return CODE_TEXT.get(code) ?? `unknown error code 0x${hex(code)}`;
}

function hex(code: number): string {
  return code.toString(16).padStart(2, '0');
}
