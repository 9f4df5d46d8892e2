// The judge of monolock/verrou: @verrou/core's own registerStoreTestSuite,
// run unchanged by its runner, japa, against a real server. Not a node:test
// file: `npm run verrou-suite` runs it, after node --test in `npm test`.
import { assert } from '@japa/assert';
import { configure, processCLIArgs, run } from '@japa/runner';
import { spec } from '@japa/runner/reporters';

processCLIArgs(process.argv.splice(2));
configure({
  files: [new URL('./verrou.spec.js', import.meta.url).pathname],
  plugins: [assert()],
  reporters: {
    activated: ['spec', 'counts'],
    list: [
      spec(),
      {
        // One line with every count, for people and scripts alike.
        name: 'counts',
        handler: (runner, emitter) => {
          emitter.on('runner:end', () => {
            const { aggregates: a } = runner.getSummary();
            console.log(`verrou suite (@verrou/core test_suite): ${a.passed} passed, ${a.skipped} skipped, ${a.failed} failed, ${a.todo} todo`);
          });
        },
      },
    ],
  },
  // The suite's longest test sleeps 1.5 s; japa's default of 2 s per test leaves a loaded machine no room.
  timeout: 10_000,
});
await run();
