import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

import { packageDir } from './helpers.js';

test('npm pack ships only the built code, its declarations, the README and the licence', () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: packageDir, encoding: 'utf8' });
  const [pack] = JSON.parse(out) as { name: string; files: { path: string }[] }[];
  assert.equal(pack!.name, 'monolock');
  const files = pack!.files.map((f) => f.path).sort();
  const unexpected = files.filter((f) => !/^dist\/[a-z]+\.(js|d\.ts)$/.test(f) && !['README.md', 'LICENSE', 'package.json'].includes(f));
  assert.deepEqual(unexpected, []);
  for (const f of ['README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts', 'dist/session.js', 'dist/verrou.js', 'dist/verrou.d.ts']) assert.ok(files.includes(f), `${f} missing from ${files.join(' ')}`);
});
