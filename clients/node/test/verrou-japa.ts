// The judge of monolock/verrou: @verrou/core's own registerStoreTestSuite,
// run unchanged by its runner, japa, against a real server. Not a node:test
// file: `npm run verrou-suite` runs it (make node-test does).
import { assert } from '@japa/assert';
import { configure, processCLIArgs, run } from '@japa/runner';

processCLIArgs(process.argv.splice(2));
configure({
  files: [new URL('./verrou.spec.js', import.meta.url).pathname],
  plugins: [assert()],
  // The suite's longest test sleeps 1.5 s; japa's default of 2 s leaves a loaded machine no room.
  timeout: 10_000,
});
await run();
