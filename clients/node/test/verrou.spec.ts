// registerStoreTestSuite from @verrou/core/test_suite, unchanged, on
// MonolockStore imported by its package name (the "./verrou" export), against
// a real monolock server with its admin API, both on 127.0.0.1 port 0.
import { test } from '@japa/runner';
import { registerStoreTestSuite } from '@verrou/core/test_suite';
import { MonolockStore } from 'monolock/verrou';

import { RealServer } from './helpers.js';

test.group('MonolockStore: @verrou/core test_suite', (group) => {
  let server: RealServer | undefined;
  const stores: MonolockStore[] = [];
  group.setup(async () => {
    server = await RealServer.start(['-admin-listen', '127.0.0.1:0']);
    return () => server!.stop();
  });
  // Every test uses the lock "foo" and some end holding it: each test's
  // stores release what they hold before the next test starts.
  group.each.teardown(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });
  registerStoreTestSuite({
    test,
    createStore: () => {
      const store = new MonolockStore({ address: server!.address, admin: server!.adminAddress!, leaseMs: 2000 });
      stores.push(store);
      return store;
    },
  });
});
