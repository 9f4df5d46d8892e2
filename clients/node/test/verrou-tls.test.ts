// monolock/verrou with the admin API over HTTPS with mutual TLS, against the
// real server: an operator certificate with the roles each call needs, one
// with read only, and one from a CA the server does not trust. The
// certificates come from a throwaway CA made by openssl.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { MonolockStore } from 'monolock/verrou';
import { RealServer } from './helpers.js';

let openssl = true;
try {
  execFileSync('openssl', ['version'], { stdio: 'ignore' });
} catch {
  openssl = false;
}
const skip = openssl ? false : 'openssl is not installed (apt-get install -y openssl)';
let dir: string;
let server: RealServer;
const file = (name: string): string => path.join(dir, name);

/** A self-signed CA, then a key and certificate per [name, subject, extensions] signed by it. */
function pki(ca: string, leaves: [string, string, string[]][]): void {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'];
  openssl('req', '-x509', '-new', ...ec, '-keyout', `${ca}-key.pem`, '-out', `${ca}.pem`, '-days', '1', '-subj', `/CN=${ca}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  for (const [name, subject, ext] of leaves) {
    openssl('req', '-new', ...ec, '-keyout', `${name}-key.pem`, '-out', `${name}.csr`, '-subj', subject);
    writeFileSync(file(`${name}.ext`), ext.join('\n') + '\n');
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}-key.pem`, '-CAcreateserial', '-days', '1', '-extfile', `${name}.ext`, '-out', `${name}.pem`);
  }
}

before(async () => {
  if (skip) return;
  dir = mkdtempSync(path.join(tmpdir(), 'monolock-verrou-tls-'));
  const client = ['extendedKeyUsage = clientAuth', 'keyUsage = critical, digitalSignature'];
  pki('ca', [
    ['server', '/CN=localhost', ['subjectAltName = DNS:localhost, IP:127.0.0.1', 'extendedKeyUsage = serverAuth', 'keyUsage = critical, digitalSignature', 'basicConstraints = CA:FALSE']],
    ['oncall', '/CN=oncall', client],
    ['dashboard', '/CN=dashboard', client],
  ]);
  pki('other-ca', [['stranger', '/CN=oncall', client]]);
  writeFileSync(file('admin-acl.json'), JSON.stringify({ rules: [{ identity: 'oncall', roles: ['read', 'release'] }, { identity: 'dashboard', roles: ['read'] }] }));
  server = await RealServer.start(['-admin-listen', '127.0.0.1:0', '-admin-tls-cert', file('server.pem'), '-admin-tls-key', file('server-key.pem'), '-admin-tls-client-ca', file('ca.pem'), '-admin-acl-file', file('admin-acl.json')]);
});

after(async () => {
  if (skip) return;
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const operator = (name: string, ca = 'ca') => ({ ca: readFileSync(file(`${ca}.pem`)), cert: readFileSync(file(`${name}.pem`)), key: readFileSync(file(`${name}-key.pem`)) });

test('mutual TLS on the admin port: exists needs read, forceDelete needs release; the certificate is checked against the admin host name', { skip }, async () => {
  const holder = new MonolockStore({ address: server.address });
  const port = server.adminAddress!.split(':')[1];
  const oncall = new MonolockStore({ address: server.address, admin: `localhost:${port}`, adminTls: operator('oncall') });
  const dashboard = new MonolockStore({ address: server.address, admin: server.adminAddress!, adminTls: operator('dashboard') });
  try {
    assert.equal(await holder.save('verrou-tls', 'alice', null), true);
    assert.equal(await dashboard.exists('verrou-tls'), true);
    await assert.rejects(dashboard.forceDelete('verrou-tls'), /POST https:\/\/127\.0\.0\.1:\d+\/api\/locks\/verrou-tls\/release answered 403 \(forceDelete needs the admin role release\): .*release/);
    assert.equal(await oncall.exists('verrou-tls'), true);
    await oncall.forceDelete('verrou-tls');
    assert.equal(await oncall.exists('verrou-tls'), false, 'force-released: the server answers before the call returns');
  } finally {
    await Promise.all([holder.close(), oncall.close(), dashboard.close()]);
  }
});

test('refusals of the TLS handshake say what to check: an untrusted operator, no operator certificate, an untrusted server', { skip }, async () => {
  const check = /; check that the admin option names the server's -admin-listen address and that adminTls holds the CA of its certificate and an operator certificate it trusts$/;
  const stranger = new MonolockStore({ address: server.address, admin: server.adminAddress!, adminTls: operator('stranger') });
  await assert.rejects(stranger.exists('verrou-tls'), (err: Error) => /GET https:\/\/127\.0\.0\.1:\d+\/api\/locks\/verrou-tls failed: .*alert (unknown ca|bad certificate)/.test(err.message) && check.test(err.message));
  const anonymous = new MonolockStore({ address: server.address, admin: server.adminAddress!, adminTls: { ca: readFileSync(file('ca.pem')) } });
  await assert.rejects(anonymous.exists('verrou-tls'), (err: Error) => /failed: .*alert certificate required/.test(err.message) && check.test(err.message));
  const misled = new MonolockStore({ address: server.address, admin: server.adminAddress!, adminTls: operator('oncall', 'other-ca') });
  await assert.rejects(misled.forceDelete('verrou-tls'), (err: Error) => /POST https:.* failed: .*(unable to verify|self.signed|unable to get local issuer)/i.test(err.message) && check.test(err.message));
});
