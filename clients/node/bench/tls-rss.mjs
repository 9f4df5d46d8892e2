#!/usr/bin/env node
// The Node.js client's memory over many mutual-TLS locks: one Client takes and
// releases LOCKS locks (default 6000) one after another against the real
// server (bin/monolock) with a throwaway CA, and prints its resident set size
// every STEP locks. A client that builds a TLS secure context per connection
// grows here (the contexts and their CA stores outlive the sockets); one that
// shares a context per Client stays flat after warm-up.
//
//   make node-tls-rss, or node clients/node/bench/tls-rss.mjs [LOCKS] [STEP] after make build node-build
//
// Not part of the test suite: it takes tens of seconds.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { Client } from '../dist/index.js';
import { RealServer } from '../dist-test/helpers.js';

const locks = Number(process.argv[2] ?? 6000);
const step = Number(process.argv[3] ?? 1000);

const dir = mkdtempSync(path.join(tmpdir(), 'monolock-node-rss-'));
const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
openssl('req', '-x509', '-new', ...ec, '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=rss CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
for (const [name, ext] of [
  ['server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'],
  ['client', 'extendedKeyUsage=clientAuth\n'],
]) {
  openssl('req', '-new', ...ec, '-keyout', `${name}-key.pem`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  writeFileSync(path.join(dir, `${name}.ext`), ext);
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', '1', '-extfile', `${name}.ext`, '-out', `${name}.pem`);
}
const file = (name) => path.join(dir, name);
const server = await RealServer.start(['-tls-cert', file('server.pem'), '-tls-key', file('server-key.pem'), '-tls-client-ca', file('ca.pem')]);
try {
  const client = new Client({
    address: server.address,
    tls: { ca: readFileSync(file('ca.pem')), cert: readFileSync(file('client.pem')), key: readFileSync(file('client-key.pem')) },
  });
  const mib = (n) => (n / 2 ** 20).toFixed(1);
  const row = (i) => {
    const m = process.memoryUsage();
    console.log(`${i}\t${mib(m.rss)}\t${mib(m.heapUsed)}\t${mib(m.external)}`);
  };
  console.log(`node ${process.version}: ${locks} mutual-TLS locks, one Client`);
  console.log('locks\trss_mib\theap_used_mib\texternal_mib');
  row(0);
  const start = performance.now();
  for (let i = 1; i <= locks; i++) {
    const lock = await client.acquire('rss', { leaseMs: 2000 });
    await lock.release();
    if (i % step === 0) row(i);
  }
  console.log(`${((performance.now() - start) / locks).toFixed(3)} ms per lock`);
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
