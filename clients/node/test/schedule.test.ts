import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Backoff, MAX_BACKOFF_MS, MIN_BACKOFF_MS, shutdownJitterMs } from '../dist/backoff.js';
import { HeartbeatSchedule, clientTimeoutMs } from '../dist/schedule.js';
import { parseAddress } from '../dist/validate.js';

test('schedule: lease/4 without RTT, shortened by twice the smoothed RTT, clamped to the floor', () => {
  const s = new HeartbeatSchedule(2000);
  assert.equal(s.intervalMs(), 500);
  assert.equal(s.floorMs, 100);
  s.observe(50); // the first sample seeds the average
  assert.equal(s.smoothedRttMs, 50);
  assert.equal(s.intervalMs(), 400);
  s.observe(100); // alpha 0.2: 50 + 0.2 × 50
  assert.equal(s.smoothedRttMs, 60);
  assert.equal(s.intervalMs(), 380);
  s.observe(10_000);
  assert.equal(s.intervalMs(), 100);
  assert.equal(clientTimeoutMs(2000), 1600);
});

test('schedule: a short lease floors at lease/4, and RTT never lengthens the interval', () => {
  const s = new HeartbeatSchedule(40);
  assert.equal(s.floorMs, 10);
  s.observe(1000);
  assert.equal(s.intervalMs(), 10);
  const t = new HeartbeatSchedule(400);
  t.observe(-5);
  assert.equal(t.intervalMs(), 100);
});

test('backoff: equal jitter from 100 ms doubling to 5 s', () => {
  const low = new Backoff(() => 0);
  const high = new Backoff(() => 1);
  const lows = Array.from({ length: 10 }, () => low.next());
  const highs = Array.from({ length: 10 }, () => high.next());
  assert.deepEqual(lows.slice(0, 4), [MIN_BACKOFF_MS / 2, 100, 200, 400]);
  assert.deepEqual(highs.slice(0, 4), [MIN_BACKOFF_MS, 200, 400, 800]);
  assert.equal(highs.at(-1), MAX_BACKOFF_MS);
  assert.equal(lows.at(-1), MAX_BACKOFF_MS / 2);
});

test('after 0x01: a random wait in [0, min(1 s, lease/4)]', () => {
  assert.equal(shutdownJitterMs(2000, () => 0), 0);
  assert.equal(shutdownJitterMs(2000, () => 1), 500); // a quarter of the lease
  assert.equal(shutdownJitterMs(60_000, () => 1), 1000); // capped at 1 s
  for (let i = 0; i < 100; i++) {
    const w = shutdownJitterMs(400);
    assert.ok(w >= 0 && w <= 100, `${w} outside [0, 100]`);
  }
});

test('real clock: a timer beyond setTimeout\'s 2^31 − 1 ms limit does not fire early', async () => {
  const { realClock } = await import('../dist/session.js');
  const alive = setInterval(() => {}, 1000); // the client's timers are unref'ed: something must keep this test running
  let fired = 0;
  const long = realClock.setTimer(() => fired++, 0.8 * 0xffff_ffff); // the give-up of the longest lease
  const short = new Promise<void>((resolve) => realClock.setTimer(resolve, 20));
  await short;
  await new Promise((r) => setTimeout(r, 20));
  realClock.clearTimer(long);
  clearInterval(alive);
  assert.equal(fired, 0);
});

test('addresses: host:port, [v6]:port, a name', () => {
  assert.deepEqual(parseAddress('127.0.0.1:7070'), { host: '127.0.0.1', port: 7070 });
  assert.deepEqual(parseAddress('[::1]:7070'), { host: '::1', port: 7070 });
  assert.deepEqual(parseAddress('locks.internal:7443'), { host: 'locks.internal', port: 7443 });
  for (const bad of ['7070', '::1:7070', 'host:0', 'host:65536', 'host:']) assert.throws(() => parseAddress(bad), /is not host:port/, bad);
});
