import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { FrameDecoder, HEARTBEAT, encodeAcquire, type ServerFrame } from '../dist/frames.js';
import { codeText, errorForCode, ServerError, UnavailableError } from '../dist/errors.js';
import { hex, repoRoot } from './helpers.js';

/** The vectors of protocol/testdata/golden.txt, by name. */
function golden(): Map<string, Buffer> {
  const text = readFileSync(path.join(repoRoot, 'protocol', 'testdata', 'golden.txt'), 'utf8');
  const out = new Map<string, Buffer>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const [name, bytes] = line.split('\t');
    out.set(name!, hex(bytes!));
  }
  return out;
}

const vectors = golden();
const vector = (name: string): Buffer => {
  const v = vectors.get(name);
  assert.ok(v, `golden vector ${name} missing`);
  return v;
};

test('golden: every client frame encodes to its bytes', () => {
  assert.deepEqual(encodeAcquire(2000, Buffer.from('nightly-import')), vector('acquire'));
  assert.deepEqual(encodeAcquire(2000, Buffer.from('a'.repeat(255))), vector('acquire-name-255'));
  assert.deepEqual(encodeAcquire(30000, Buffer.from('straße/日本/🔒')), vector('acquire-name-utf8'));
  assert.deepEqual(encodeAcquire(4294967295, Buffer.from('x')), vector('acquire-lease-max'));
  assert.deepEqual(Buffer.from(HEARTBEAT), vector('heartbeat'));
});

const serverFrames: [string, ServerFrame][] = [
  ['waiting', { type: 'waiting' }],
  ['acquired', { type: 'acquired', token: 0x0000000100000002n }],
  ['acquired-token-max', { type: 'acquired', token: 0xffffffffffffffffn }],
  ['error-01-shutting-down', { type: 'error', code: 0x01, reason: 'server shutting down' }],
  ['error-02-closed-by-admin', { type: 'error', code: 0x02, reason: 'closed by administrator' }],
  ['error-10-unsupported-version', { type: 'error', code: 0x10, reason: 'unsupported protocol version' }],
  ['error-11-first-message-not-acquire', { type: 'error', code: 0x11, reason: 'first message must be ACQUIRE' }],
  ['error-12-duplicate-acquire', { type: 'error', code: 0x12, reason: 'duplicate ACQUIRE' }],
  ['error-13-unknown-message-type', { type: 'error', code: 0x13, reason: 'unknown message type' }],
  ['error-14-empty-name', { type: 'error', code: 0x14, reason: 'empty lock name' }],
  ['error-15-name-too-long', { type: 'error', code: 0x15, reason: 'lock name too long' }],
  ['error-16-invalid-utf8', { type: 'error', code: 0x16, reason: 'lock name is not valid UTF-8' }],
  ['error-17-invalid-lease', { type: 'error', code: 0x17, reason: 'lease must be positive' }],
  ['error-18-not-authorized', { type: 'error', code: 0x18, reason: 'not authorized for lock' }],
  ['error-13-with-detail', { type: 'error', code: 0x13, reason: 'unknown message type: 0x7f' }],
  ['error-empty-reason', { type: 'error', code: 0x01, reason: '' }],
  ['error-reason-truncated', { type: 'error', code: 0x01, reason: 'x'.repeat(254) }],
];

test('golden: every server frame decodes to its fields, whole, byte by byte, and all in one chunk', () => {
  for (const [name, want] of serverFrames) {
    assert.deepEqual(new FrameDecoder().push(vector(name)), [want], name);
    const d = new FrameDecoder();
    const got: ServerFrame[] = [];
    for (const byte of vector(name)) got.push(...d.push(Buffer.of(byte)));
    assert.deepEqual(got, [want], `${name}, one byte at a time`);
    assert.equal(d.pendingBytes, 0);
  }
  const all = Buffer.concat(serverFrames.map(([name]) => vector(name)));
  assert.deepEqual(new FrameDecoder().push(all), serverFrames.map(([, f]) => f));
});

test('decoder: frames split at every point of a two-frame stream', () => {
  const stream = Buffer.concat([vector('acquired'), vector('error-13-with-detail')]);
  for (let cut = 1; cut < stream.length; cut++) {
    const d = new FrameDecoder();
    const got = [...d.push(stream.subarray(0, cut)), ...d.push(stream.subarray(cut))];
    assert.equal(got.length, 2, `cut at ${cut}`);
  }
});

test('decoder: an unknown type is reported at once and ends decoding', () => {
  const d = new FrameDecoder();
  assert.deepEqual(d.push(Buffer.of(0x11, 0x7f, 0x11)), [{ type: 'waiting' }, { type: 'unknown', byte: 0x7f }]);
  assert.deepEqual(d.push(vector('waiting')), []);
});

test('errors: codes classify by range, unknown codes too', () => {
  for (const code of [0x01, 0x02, 0x05, 0x0f]) {
    const e = errorForCode(code, '');
    assert.ok(e instanceof UnavailableError, `0x${code.toString(16)}`);
    assert.equal(e.code, code);
    assert.equal(e.retryable, true);
  }
  for (const code of [0x10, 0x17, 0x18, 0x7f, 0xff]) {
    const e = errorForCode(code, 'why');
    assert.ok(e instanceof ServerError, `0x${code.toString(16)}`);
    assert.equal(e.code, code);
    assert.equal(e.reason, 'why');
  }
  assert.match(errorForCode(0x14, '').message, /0x14: empty lock name/);
  assert.equal(codeText(0x7f), 'unknown error code 0x7f');
});
