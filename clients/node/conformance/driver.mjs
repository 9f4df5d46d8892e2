#!/usr/bin/env node
// The conformance kit's driver for the Node.js client (docs/conformance.md in
// the monolock repository): reads the request line on stdin, calls the public
// API of the built package (`make node-build` first) and prints what it
// reported, one JSON object a line. Not part of the npm package.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

import { BusyError, Client, InvalidArgumentError, LockLostError, ServerError, UnavailableError } from 'monolock';

function emit(event, fields = {}) {
  // stdout on a pipe is synchronous on Linux: the line is out when this returns.
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

/** An attempt that failed before the grant. */
function report(err) {
  if (err instanceof InvalidArgumentError) emit('invalid-input', { reason: err.message });
  else if (err instanceof ServerError) emit('error', { code: err.code, retriable: false, reason: err.reason });
  else if (err instanceof UnavailableError && err.code !== undefined) emit('error', { code: err.code, retriable: err.retryable, reason: err.reason ?? '' });
  else if (err instanceof BusyError) emit('busy');
  else if (err instanceof UnavailableError) emit('unavailable', { reason: err.message });
  else {
    console.error('conformance driver: unexpected error', err);
    emit('unavailable', { reason: String(err) });
  }
}

function emitLost(err) {
  const fields = { reason: err ? err.message : 'lost' };
  const code = err?.cause?.code;
  if (typeof code === 'number') fields.code = code;
  emit('lost', fields);
}

/**
 * The name as the request gives it. JavaScript strings cannot hold invalid
 * UTF-8: each byte of an invalid name becomes a lone low surrogate (as
 * Python's surrogateescape does), which the client must refuse.
 */
function requestName(req) {
  if (typeof req.name === 'string') return req.name;
  const bytes = Buffer.from(req.name_hex, 'hex');
  return Array.from(bytes, (b) => (b < 0x80 ? String.fromCharCode(b) : String.fromCharCode(0xdc00 + b))).join('');
}

/** The request's TLS files as a user would give them: tls.ConnectionOptions, or undefined for plain TCP. */
function tlsOptions(files) {
  if (!files) return undefined;
  const options = { ca: readFileSync(files.ca_file), servername: files.server_name };
  if (files.cert_file) {
    options.cert = readFileSync(files.cert_file);
    options.key = readFileSync(files.key_file);
  }
  return options;
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const queue = [];
let wake;
let ended = false;
let firstRead = false;
lines.on('line', (line) => {
  if (!firstRead) {
    firstRead = true;
    onRequest(line);
    return;
  }
  let cmd;
  try {
    cmd = JSON.parse(line).cmd;
  } catch {
    return;
  }
  queue.push(cmd);
  wake?.();
});
lines.on('close', () => {
  ended = true;
  wake?.();
});

/** The next command, or null at end of input. */
async function nextCommand() {
  for (;;) {
    if (queue.length > 0) return queue.shift();
    if (ended) return null;
    await new Promise((resolve) => (wake = resolve));
    wake = undefined;
  }
}

let pending; // a nextCommand() the loss overtook: its command must not be lost
/** The next command; the one a race left unconsumed comes first. */
async function command() {
  pending ??= nextCommand();
  const cmd = await pending;
  pending = undefined;
  return cmd;
}
/** The next command without taking it: the next command() returns it. */
function peekCommand() {
  pending ??= nextCommand();
  return pending;
}

function lostOf(lock) {
  return new Promise((resolve) => {
    const done = () => (lock.lostError ? resolve() : undefined);
    if (lock.signal.aborted) done();
    else lock.signal.addEventListener('abort', done, { once: true });
  });
}

/** The work: runs until the kit asks for the release (true) or the lock is lost; then takes work_stop_ms to stop (false). */
async function hold(lock, workStopMs) {
  const lost = lostOf(lock).then(() => ({ lost: true }));
  for (;;) {
    const r = await Promise.race([peekCommand().then((cmd) => ({ cmd })), lost]);
    if ('lost' in r) break;
    pending = undefined;
    if (r.cmd === 'release' || r.cmd === null) return r.cmd === 'release';
  }
  emitLost(lock.lostError);
  if (workStopMs < 0) {
    const cmd = await command();
    emit('work-stopped');
    return cmd === 'release';
  }
  await sleep(workStopMs);
  emit('work-stopped');
  return false;
}

async function drain(lock) {
  for (;;) {
    const cmd = await command();
    if (cmd === null) return;
    if (cmd === 'release') {
      await lock?.release();
      emit('released');
    }
  }
}

async function onRequest(line) {
  const req = JSON.parse(line);
  const client = new Client({ ...(req.addresses ? { addresses: req.addresses } : { address: req.address }), tls: tlsOptions(req.tls) });
  const options = {
    leaseMs: req.lease_us / 1000,
    wait: req.wait_ms < 0 ? true : req.wait_ms === 0 ? false : req.wait_ms,
  };
  const name = requestName(req);
  const workStopMs = req.work_stop_ms ?? 0;

  if (req.mode === 'acquire') {
    let lock;
    try {
      lock = await client.acquire(name, options);
    } catch (err) {
      report(err);
      await drain(undefined);
      return;
    }
    emit('acquired', { token: lock.token.toString() });
    const asked = await hold(lock, workStopMs);
    await lock.release();
    if (asked) emit('released');
    await drain(lock);
  } else if (req.mode === 'run') {
    let called = false;
    let released = false;
    try {
      await client.run(name, options, async (lock) => {
        called = true;
        emit('acquired', { token: lock.token.toString() });
        released = await hold(lock, workStopMs);
      });
    } catch (err) {
      if (!(err instanceof LockLostError) && !called) report(err);
    }
    if (released) emit('released');
    await drain(undefined);
  } else {
    console.error(`conformance driver: unknown mode ${JSON.stringify(req.mode)}`);
    process.exitCode = 2;
    lines.close();
  }
}
