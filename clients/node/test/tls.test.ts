// TLS and mutual TLS against the real server, with a throwaway CA made by openssl.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import tls from 'node:tls';

import { Client, InvalidArgumentError, ServerError, UnavailableError } from 'monolock';
import { RealServer, portOf, timeWaitFrom } from './helpers.js';

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const skip = hasOpenssl() ? false : 'openssl is not installed (apt-get install -y openssl)';
let dir: string;
let server: RealServer;
const pem = (name: string): Buffer => readFileSync(path.join(dir, name));
const serverArgs = (): string[] => ['-tls-cert', path.join(dir, 'server.pem'), '-tls-key', path.join(dir, 'server-key.pem'), '-tls-client-ca', path.join(dir, 'ca.pem'), '-acl-file', path.join(dir, 'acl.json')];
const mtls = (): tls.ConnectionOptions => ({ ca: pem('ca.pem'), cert: pem('client.pem'), key: pem('client-key.pem') });

/** Acquires and releases name, and says whether its TLS handshake resumed a session. */
async function resumed(client: Client, name: string): Promise<boolean | undefined> {
  const lock = await client.acquire(name, { leaseMs: 1000 });
  try {
    return lock.tlsResumed;
  } finally {
    await lock.release();
  }
}

/** The session ticket srv issues to one mutual-TLS handshake (the server sends it after the handshake). */
function ticketFrom(srv: RealServer): Promise<Buffer> {
  const port = Number(srv.address.slice(srv.address.lastIndexOf(':') + 1));
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ ...mtls(), host: '127.0.0.1', port });
    socket.once('session', (session: Buffer) => {
      socket.destroy();
      resolve(session);
    });
    socket.once('error', reject);
  });
}

/** Makes a key and a certificate NAME signed by the CA, with the extensions given. */
function issue(name: string, subject: string, ext: string[]): void {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  run('req', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-keyout', `${name}-key.pem`, '-out', `${name}.csr`, '-subj', subject);
  writeFileSync(path.join(dir, `${name}.ext`), ext.join('\n') + '\n');
  run('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', '1', '-extfile', `${name}.ext`, '-out', `${name}.pem`);
}

before(async () => {
  if (skip) return;
  dir = mkdtempSync(path.join(tmpdir(), 'monolock-node-tls-'));
  const ca = (name: string, cn: string) =>
    execFileSync('openssl', ['req', '-x509', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-keyout', `${name}-key.pem`, '-out', `${name}.pem`, '-days', '1', '-subj', `/CN=${cn}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], { cwd: dir, stdio: 'pipe' });
  ca('ca', 'test CA');
  ca('other-ca', 'another CA');
  issue('server', '/CN=localhost', ['subjectAltName = DNS:localhost, IP:127.0.0.1', 'extendedKeyUsage = serverAuth', 'keyUsage = critical, digitalSignature', 'basicConstraints = CA:FALSE']);
  issue('client', '/CN=cn-worker', ['extendedKeyUsage = clientAuth', 'keyUsage = critical, digitalSignature']);
  writeFileSync(path.join(dir, 'acl.json'), JSON.stringify({ rules: [{ identity: 'cn-worker', locks: ['cn-*'] }] }));
  server = await RealServer.start(serverArgs());
});

after(async () => {
  if (skip) return;
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('mutual TLS: granted with a client certificate; the ACL refusal is ServerError 0x18', { skip }, async () => {
  const client = new Client({ address: server.address, tls: { ca: pem('ca.pem'), cert: pem('client.pem'), key: pem('client-key.pem') } });
  const token = await client.withLock('cn-job', { leaseMs: 1000 }, (lock) => lock.token);
  assert.ok(token > 0n);
  await assert.rejects(client.acquire('not-mine', { leaseMs: 1000 }), (e: unknown) => e instanceof ServerError && e.code === 0x18);
});

test('TLS failures are unavailable and not worth retrying: an untrusted server, a missing client certificate', { skip }, async () => {
  const untrusted = new Client({ address: server.address, tls: { ca: pem('other-ca.pem'), cert: pem('client.pem'), key: pem('client-key.pem') } });
  await assert.rejects(untrusted.acquire('cn-job', { leaseMs: 1000 }), (e: unknown) => e instanceof UnavailableError && !e.retryable && /certificate/i.test(e.message));
  const anonymous = new Client({ address: server.address, tls: { ca: pem('ca.pem') } });
  await assert.rejects(anonymous.acquire('cn-job', { leaseMs: 1000 }), (e: unknown) => e instanceof UnavailableError && !e.retryable && /certificate/i.test(e.message));
});

test('TLS sessions: the next acquire of a Client resumes its latest session; another Client starts with a full handshake', { skip }, async () => {
  const client = new Client({ address: server.address, tls: mtls() });
  assert.equal(await resumed(client, 'cn-first'), false);
  // Each resumed connection brings a fresh ticket, which the next one offers.
  assert.equal(await resumed(client, 'cn-second'), true);
  assert.equal(await resumed(client, 'cn-third'), true);
  assert.equal(await resumed(new Client({ address: server.address, tls: mtls() }), 'cn-other'), false);
});

test('TLS sessions: a session the server cannot open costs a full handshake, and the next acquire resumes', { skip }, async () => {
  // Another server process seals its tickets with keys of its own, as a
  // restarted server without -tls-ticket-keys does.
  const other = await RealServer.start(serverArgs());
  try {
    const client = new Client({ address: other.address, tls: { ...mtls(), session: await ticketFrom(server) } });
    const lock = await client.acquire('cn-refused', { leaseMs: 1000 });
    assert.equal(lock.tlsResumed, false);
    assert.equal(lock.valid(), true);
    await lock.release();
    assert.equal(await resumed(client, 'cn-then'), true);
  } finally {
    await other.stop();
  }
});

test('TLS sessions: servers that share -tls-ticket-keys resume each other\'s sessions (a restart, a failover pair)', { skip }, async () => {
  const keys = path.join(dir, 'tickets');
  writeFileSync(keys, randomBytes(32).toString('base64') + '\n', { mode: 0o600 });
  const first = await RealServer.start([...serverArgs(), '-tls-ticket-keys', keys]);
  let session: Buffer;
  try {
    session = await ticketFrom(first);
  } finally {
    await first.stop();
  }
  const second = await RealServer.start([...serverArgs(), '-tls-ticket-keys', keys]);
  try {
    const client = new Client({ address: second.address, tls: { ...mtls(), session } });
    assert.equal(await resumed(client, 'cn-failover'), true);
    assert.equal(await resumed(client, 'cn-after'), true); // with the ticket the resumed connection brought
  } finally {
    await second.stop();
  }
});

test('one TLS secure context per Client, not one per connection', { skip }, async () => {
  const original = tls.createSecureContext;
  let created = 0;
  // node:tls's connect calls this export too when no secureContext is given: every context is counted.
  tls.createSecureContext = (options) => {
    created++;
    return original(options);
  };
  try {
    const client = new Client({ address: server.address, tls: mtls() });
    assert.equal(created, 1, 'the Client makes its context up front');
    for (let i = 0; i < 5; i++) await client.withLock('cn-context', { leaseMs: 1000 }, () => undefined);
    assert.equal(created, 1, 'a context made per connection');
    new Client({ address: server.address, tls: mtls() });
    assert.equal(created, 2, 'each Client has its own');
    assert.throws(
      () => new Client({ address: server.address, tls: { ...mtls(), key: pem('ca.pem') } }),
      (e: unknown) => e instanceof InvalidArgumentError && e.field === 'tls' && /key matches/.test(e.message),
    );
  } finally {
    tls.createSecureContext = original;
  }
});

test('release over TLS: the server closes first, no TIME_WAIT on the client\'s port, the next waiter is promoted', { skip }, async () => {
  const client = new Client({ address: server.address, tls: mtls() });
  const serverPort = Number(server.address.slice(server.address.lastIndexOf(':') + 1));
  const [holder, port] = await portOf(serverPort, () => client.acquire('cn-release', { leaseMs: 10_000 }));
  const waiter = client.acquire('cn-release', { leaseMs: 10_000 });
  await holder.release();
  assert.equal(holder.lostError, undefined);
  const next = await waiter;
  assert.ok(next.token > holder.token);
  assert.deepEqual(timeWaitFrom(port, serverPort), [], 'the client closed first');
  await next.release();
});
