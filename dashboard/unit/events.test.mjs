import { test } from 'node:test';
import assert from 'node:assert/strict';

import { eventsFor, markersIn, kindLabel } from '../web/events.js';

const ev = (ts_ms, iface, text, kind = 'link.mtu') => ({ ts_ms, interface: iface, kind, text });

test('an interface sees its own changes and the host-wide ones, oldest first', () => {
  const events = [
    ev(3000, 'wg0', 'wg0 route'),
    ev(1000, 'wg0', "wg0's MTU changed 1420 → 1500"),
    ev(2000, '', 'net.ipv4.tcp_congestion_control changed cubic → bbr', 'sysctl'),
    ev(2500, 'eth0', "eth0's MTU changed 1500 → 9000"),
  ];
  assert.deepEqual(eventsFor(events, 'wg0').map((e) => e.ts_ms), [1000, 2000, 3000]);
  assert.deepEqual(eventsFor(events, 'eth0').map((e) => e.ts_ms), [2000, 2500]);
  assert.deepEqual(eventsFor(events, '').map((e) => e.ts_ms), [1000, 2000, 2500, 3000]);
  assert.deepEqual(eventsFor(null, 'wg0'), []);
});

test('markers are the events in the range, one per second naming them all', () => {
  const events = [ev(10_000, 'wg0', 'a'), ev(10_400, 'wg0', 'b'), ev(20_000, 'wg0', 'c'), ev(99_000, 'wg0', 'late')];
  assert.deepEqual(markersIn(events, 5, 30), [{ x: 10, label: 'a; b' }, { x: 20, label: 'c' }]);
  assert.deepEqual(markersIn(events, 100, 200), []);
  assert.deepEqual(markersIn([], 0, 1), []);
});

test('kinds read as words', () => {
  assert.equal(kindLabel('link.mtu'), 'MTU');
  assert.equal(kindLabel('tailscale.path'), 'Tailscale path');
  assert.equal(kindLabel('something.new'), 'something.new');
});
