// fence's statements against fence/testdata/sql.txt, the fencing SQL every
// monolock client sends, byte for byte (the file's header says the format).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { fence } from 'monolock';

import { repoRoot } from './helpers.js';

/** The sections of the vectors file by "DIALECT NAME". */
function readVectors(): Map<string, string> {
  const text = readFileSync(path.join(repoRoot, 'fence', 'testdata', 'sql.txt'), 'utf8');
  const vectors = new Map<string, string>();
  let name: string | undefined;
  let body: string[] = [];
  const flush = () => {
    if (name !== undefined) vectors.set(name, body.join('\n').replace(/\n$/, ''));
  };
  for (const line of text.split('\n')) {
    if (line.startsWith('-- ') && line.endsWith(' --')) {
      flush();
      name = line.slice(3, -3);
      body = [];
    } else if (name !== undefined) {
      body.push(line);
    }
  }
  flush();
  return vectors;
}

test('the fence statements are the vectors of fence/testdata/sql.txt', () => {
  const v = readVectors();
  for (const d of ['postgresql', 'mysql'] as const) {
    assert.equal(fence.schema(d), v.get(`${d} schema`), `schema('${d}')`);
    assert.equal(fence.admitStatement(d), v.get(`${d} admit`), `admitStatement('${d}')`);
  }
});
