import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  timeAxisIncrs, timeAxisLabels, SUBSECOND_RANGE_S, SECONDS_RANGE_S, DAYS_RANGE_S,
} from '../web/timeaxis.js';

// Local times, so the expectations hold in every time zone (labels are local time).
const at = (y, mo, d, h = 0, mi = 0, s = 0, ms = 0) => new Date(y, mo - 1, d, h, mi, s, ms).getTime() / 1000;

test('a 10 s range (two windows) labels whole seconds, never :10.000 :10.500', () => {
  const t0 = at(2026, 11, 27, 9, 52, 10);
  const splits = [0, 2, 4, 6, 8, 10].map((k) => t0 + k);
  assert.deepEqual(timeAxisLabels(splits, 10),
    ['09:52:10', '09:52:12', '09:52:14', '09:52:16', '09:52:18', '09:52:20']);
  assert.ok(!timeAxisIncrs(10).some((i) => i < 1), 'no sub-second ticks over 10 s');
  assert.equal(timeAxisIncrs(10)[0], 1);
});

test('a minute-scale range labels HH:MM:SS', () => {
  const t0 = at(2026, 11, 27, 9, 52, 0);
  assert.deepEqual(timeAxisLabels([t0, t0 + 30, t0 + 60, t0 + 90], 120),
    ['09:52:00', '09:52:30', '09:53:00', '09:53:30']);
});

test('ranges of 15 min to hours label HH:MM', () => {
  const t0 = at(2026, 11, 27, 9, 50);
  assert.deepEqual(timeAxisLabels([t0, t0 + 120, t0 + 240], 900), ['09:50', '09:52', '09:54']);
  assert.deepEqual(timeAxisLabels([t0, t0 + 600, t0 + 1200], 3600), ['09:50', '10:00', '10:10']);
  assert.deepEqual(timeAxisLabels([at(2026, 11, 27, 6), at(2026, 11, 27, 12)], 6 * 3600), ['06:00', '12:00']);
});

test('from 5 min up, minute ticks drop the seconds; below, seconds stay', () => {
  const t0 = at(2026, 11, 27, 9, 50);
  assert.deepEqual(timeAxisLabels([t0, t0 + 60, t0 + 120], SECONDS_RANGE_S), ['09:50', '09:51', '09:52']);
  assert.deepEqual(timeAxisLabels([t0, t0 + 60, t0 + 120], SECONDS_RANGE_S - 1), ['09:50:00', '09:51:00', '09:52:00']);
});

test('a tick between minutes keeps its seconds even over an hour', () => {
  const t0 = at(2026, 11, 27, 9, 50, 30);
  assert.deepEqual(timeAxisLabels([t0, t0 + 600], 3600), ['09:50:30', '10:00:30']);
});

test('a time-of-day axis that crosses midnight dates the first tick of the new day', () => {
  const splits = [at(2026, 11, 27, 22), at(2026, 11, 28, 0), at(2026, 11, 28, 2)];
  assert.deepEqual(timeAxisLabels(splits, 6 * 3600), ['22:00', 'Nov 28 00:00', '02:00']);
});

test('ranges of days label dates, with the time only off midnight', () => {
  const days = [at(2026, 11, 27), at(2026, 11, 28), at(2026, 11, 29)];
  assert.deepEqual(timeAxisLabels(days, 3 * 86400), ['Nov 27', 'Nov 28', 'Nov 29']);
  const halves = [at(2026, 11, 27), at(2026, 11, 27, 12), at(2026, 11, 28)];
  assert.deepEqual(timeAxisLabels(halves, DAYS_RANGE_S), ['Nov 27', 'Nov 27 12:00', 'Nov 28']);
});

test('milliseconds only under a few seconds, and only where a tick needs them', () => {
  const t0 = at(2026, 11, 27, 9, 52, 10);
  assert.deepEqual(timeAxisLabels([t0, t0 + 0.5, t0 + 1], 2),
    ['09:52:10.000', '09:52:10.500', '09:52:11.000']);
  assert.deepEqual(timeAxisLabels([t0, t0 + 1, t0 + 2], 3), ['09:52:10', '09:52:11', '09:52:12']);
  assert.ok(timeAxisIncrs(2).includes(0.5));
  assert.ok(!timeAxisIncrs(SUBSECOND_RANGE_S).includes(0.5));
});

test('no label over any range shows milliseconds for whole-second ticks', () => {
  const t0 = at(2026, 11, 27, 9, 0);
  for (const range of [1, 10, 60, SECONDS_RANGE_S - 1, SECONDS_RANGE_S, 3600, DAYS_RANGE_S, 30 * 86400]) {
    const incr = timeAxisIncrs(range).find((i) => i >= 1 && range / i <= 10) ?? 1;
    const labels = timeAxisLabels([0, 1, 2, 3].map((k) => t0 + k * incr), range);
    for (const l of labels) assert.ok(!/\.\d{3}$/.test(l) && !l.startsWith(':'), `range ${range}: ${l}`);
  }
});

test('spacings are increasing whole units; unknown ticks get an empty label', () => {
  for (const r of [1, 100, 1e6]) {
    const incrs = timeAxisIncrs(r);
    assert.deepEqual([...incrs].sort((a, b) => a - b), incrs);
  }
  assert.deepEqual(timeAxisLabels([null, NaN], 60), ['', '']);
  assert.deepEqual(timeAxisLabels([], 60), []);
});

test('every time chart uses these ticks and labels on its x axis', () => {
  const src = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'web', 'views', 'charts.js'), 'utf8');
  assert.match(src, /import \{ timeAxisIncrs, timeAxisLabels \} from '\.\.\/timeaxis\.js'/);
  assert.match(src, /incrs: \(u, axisIdx, min, max\) => timeAxisIncrs\(max - min\)/);
  assert.match(src, /values: \(u, splits\) => timeAxisLabels\(splits, u\.scales\.x\.max - u\.scales\.x\.min\)/);
  // timeOpts builds the x axis of every time chart (throughput, retransmits, drops, path MTU).
  assert.match(src, /axes: \[\s*timeAxis\(p\),/);
});
