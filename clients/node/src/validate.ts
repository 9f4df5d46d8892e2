import { InvalidArgumentError } from './errors.js';

/** The protocol's limit on a lock name, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 255;

/** The largest lease the wire can carry (u32 milliseconds, about 49.7 days). */
export const MAX_LEASE_MS = 0xffff_ffff;

/**
 * Checks a lock name and returns its UTF-8 bytes. A JavaScript string with a
 * lone surrogate has no UTF-8 form (Buffer.from would silently put U+FFFD in
 * its place and lock a different name), so it is refused.
 */
export function encodeName(name: unknown): Buffer {
  if (typeof name !== 'string') {
    throw new InvalidArgumentError('name', `monolock: the lock name must be a string, got ${typeof name}`);
  }
  if (name.length === 0) {
    throw new InvalidArgumentError('name', 'monolock: empty lock name: give the lock a name of 1 to 255 bytes');
  }
  if (!name.isWellFormed()) {
    throw new InvalidArgumentError(
      'name',
      'monolock: lock name is not valid UTF-8: it contains a lone surrogate (a broken UTF-16 pair); fix the string before using it as a name',
    );
  }
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length > MAX_NAME_BYTES) {
    throw new InvalidArgumentError(
      'name',
      `monolock: lock name too long: ${bytes.length} bytes in UTF-8, the limit is ${MAX_NAME_BYTES}; shorten it or hash the long part`,
    );
  }
  return bytes;
}

/**
 * Converts a lease to the wire's whole milliseconds: at least 1 ms, and a
 * fraction rounds up so the server never drops a session earlier than asked.
 */
export function leaseToWire(leaseMs: unknown): number {
  if (typeof leaseMs !== 'number' || Number.isNaN(leaseMs)) {
    throw new InvalidArgumentError('leaseMs', `monolock: leaseMs must be a number of milliseconds, got ${String(leaseMs)}`);
  }
  if (leaseMs < 1) {
    throw new InvalidArgumentError('leaseMs', `monolock: lease must be positive: ${leaseMs} ms is shorter than 1 ms`);
  }
  const wire = Math.ceil(leaseMs);
  if (wire > MAX_LEASE_MS) {
    throw new InvalidArgumentError(
      'leaseMs',
      `monolock: lease ${leaseMs} ms is longer than the wire maximum ${MAX_LEASE_MS} ms (about 49.7 days)`,
    );
  }
  return wire;
}

/** What `wait` means: 0 for "do not wait", Infinity for "as long as it takes", else milliseconds. */
export function waitToMs(wait: unknown): number {
  if (wait === undefined || wait === true) return Infinity;
  if (wait === false) return 0;
  if (typeof wait !== 'number' || Number.isNaN(wait) || wait < 0) {
    throw new InvalidArgumentError('wait', `monolock: wait must be true, false or a number of milliseconds ≥ 0, got ${String(wait)}`);
  }
  return wait;
}

/** Splits "host:port" or "[v6]:port". */
export function parseAddress(address: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 1 || port > 65535) {
    throw new InvalidArgumentError('address', `monolock: address ${JSON.stringify(address)} is not host:port (for example 127.0.0.1:7070 or [::1]:7070)`);
  }
  return { host: m[1] ?? (m[2] || 'localhost'), port };
}
