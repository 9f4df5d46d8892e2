// The schedule and give-up rules, pure, at each boundary to the nanosecond
// (1e-6 ms) with the time passed in: no socket, no timer, no waiting.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SessionRules } from '../dist/rules.js';

/** One nanosecond, in the rules' milliseconds. */
const NS = 1e-6;

/** Lease 1 s: the deadline is 800 ms after the newest answered send; the interval lies in [100, 250] ms. ACQUIRE sent at 0 and answered after rttMs. */
function held(rttMs = 0): SessionRules {
  const r = new SessionRules(1000);
  r.sent(0);
  assert.equal(r.answered(rttMs), true);
  return r;
}

test('rules: give-up at the deadline, 0.8 × lease after the answered send, and not a nanosecond before', () => {
  const r = held();
  assert.equal(r.due(250), 'heartbeat');
  r.sent(250); // never answered
  assert.equal(r.due(800 - NS), undefined);
  assert.equal(r.confirmed(800 - NS), true);
  assert.equal(r.due(800), 'give-up');
  assert.equal(r.confirmed(800), false);
});

test('rules: the give-up clock runs from the ACQUIRE on', () => {
  const r = new SessionRules(2000);
  r.sent(5);
  assert.equal(r.nextWakeup(), 5 + 1600);
  assert.equal(r.due(1605 - NS), undefined);
  assert.equal(r.due(1605), 'give-up');
});

test('rules: the deadline counts from the answered send, not from the answer', () => {
  const r = held();
  r.sent(250);
  assert.equal(r.answered(700), true);
  assert.equal(r.deadline, 250 + 800);
});

test('rules: an answer read at the deadline is too late; a nanosecond before, in time', () => {
  const late = new SessionRules(1000);
  late.sent(0);
  assert.equal(late.answered(800), false);
  const inTime = new SessionRules(1000);
  inTime.sent(0);
  assert.equal(inTime.answered(800 - NS), true);
  assert.equal(inTime.due(800 - NS), 'heartbeat', 'the answer came after the interval: the next heartbeat goes at once');
});

test('rules: interval upper bound lease/4 with no RTT, counted from the send', () => {
  const r = held(0);
  assert.equal(r.nextWakeup(), 250);
  assert.equal(r.due(250 - NS), undefined);
  assert.equal(r.due(250), 'heartbeat');
});

test('rules: the smoothed RTT shortens the interval by twice its value', () => {
  assert.equal(held(1).nextWakeup(), 250 - 2);
  assert.equal(held(74).nextWakeup(), 250 - 148);
});

test('rules: interval lower bound min(100 ms, lease/4)', () => {
  assert.equal(held(75).nextWakeup(), 100, '250 − 150 is the floor itself');
  assert.equal(held(75 + NS).nextWakeup(), 100, 'just past it: clamped');
  assert.ok(held(75 - NS).nextWakeup() > 100, 'just before it: above the floor');
  const short = new SessionRules(200);
  short.sent(0);
  short.answered(40); // 50 − 80 would be negative
  assert.equal(short.nextWakeup(), 50, 'a short lease floors at lease/4');
});

test('rules: one heartbeat in flight — nothing else is due until its answer but the give-up', () => {
  const r = held();
  r.sent(250);
  for (const t of [250, 500, 750, 800 - NS]) assert.equal(r.due(t), undefined, `a second heartbeat due at ${t}`);
  assert.equal(r.nextWakeup(), 800, 'only the deadline');
  assert.equal(r.answered(600), true);
  assert.equal(r.inFlight, false);
});

test('rules: after a give-up the connection may stay until the newest send + lease', () => {
  const r = held();
  r.sent(250);
  assert.equal(r.due(800), 'give-up');
  assert.equal(r.closeBy(), 250 + 1000);
});
