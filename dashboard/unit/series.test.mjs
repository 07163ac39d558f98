// Chart series from samples (web/series.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  orderSamples, throughputSeries, retransSeries, dropsSeries, pmtuSeries, bucketBound, mtuMarkerX,
  sizeHistogram, SIZE_BUCKETS,
} from '../web/series.js';

const sample = (ts, over = {}) => ({
  ts_ms: ts, interface: 'wg0', window_s: 10, rx_bps: 1e6, tx_bps: 2e6, rx_pps: 1, tx_pps: 2, mtu: 1420,
  size_buckets: Object.fromEntries(SIZE_BUCKETS.map((b) => [b, 0])), retrans_by_cc: {}, tcp_retrans_ratio: 0,
  drops_by_reason: {}, overhead_expected: 60, overhead_measured: -1, path_mtu: -1, probe_blackhole: false, active_findings: 0, ...over,
});

test('samples are ordered by time and deduplicated', () => {
  const s = orderSamples([sample(3000), sample(1000), sample(2000), sample(1000)]);
  assert.deepEqual(s.map((x) => x.ts_ms), [1000, 2000, 3000]);
});

test('throughput series: seconds on x, rates on y', () => {
  const t = throughputSeries([sample(2000, { rx_bps: 5 }), sample(1000, { rx_bps: -1 })]);
  assert.deepEqual(t.labels, ['receive', 'transmit']);
  assert.deepEqual(t.data, [[1, 2], [null, 5], [2e6, 2e6]]);
});

test('retransmit series: one per cc (gaps where absent) plus the passive ratio', () => {
  const r = retransSeries([
    sample(1000, { retrans_by_cc: { cubic: { segments: 100, retransmits: 3, ratio: 0.03 } }, tcp_retrans_ratio: 0.02 }),
    sample(2000, { retrans_by_cc: { bbr: { segments: 100, retransmits: 1, ratio: 0.01 }, cubic: { segments: 10, retransmits: 0, ratio: 0 } } }),
  ]);
  assert.deepEqual(r.labels, ['bbr', 'cubic', 'all TCP (passive)']);
  assert.deepEqual(r.data, [[1, 2], [null, 0.01], [0.03, 0], [0.02, 0]]);
});

test('drops series: a reason missing from a window counts 0', () => {
  const d = dropsSeries([sample(1000, { drops_by_reason: { IP_RPFILTER: 4 } }), sample(2000, { drops_by_reason: { NETFILTER_DROP: 1 } })]);
  assert.deepEqual(d.labels, ['IP_RPFILTER', 'NETFILTER_DROP']);
  assert.deepEqual(d.data, [[1, 2], [4, 0], [0, 1]]);
  assert.deepEqual(dropsSeries([]).labels, []);
});

test('path MTU series: unprobed windows are gaps, blackholes marked', () => {
  const p = pmtuSeries([
    sample(1000, { path_mtu: -1 }),
    sample(2000, { path_mtu: 1500 }),
    sample(3000, { path_mtu: 1400, probe_blackhole: true }),
    sample(4000, { path_mtu: -1, probe_blackhole: true, overhead_expected: -1 }),
  ]);
  assert.deepEqual(p.data[1], [null, 1500, 1400, null]);
  assert.deepEqual(p.data[2], [1420, 1420, 1420, 1420]);
  assert.deepEqual(p.data[3], [1480, 1480, 1480, null]);
  assert.deepEqual(p.data[4], [null, null, 1400, 1420]);
});

test('bucket bounds and the MTU marker position', () => {
  assert.equal(bucketBound('<=1420'), 1420);
  assert.equal(bucketBound('>9000'), Infinity);
  assert.ok(Number.isNaN(bucketBound('bogus')));
  // Bars are centred on their index; an MTU equal to a bound sits on that bar's right edge.
  assert.equal(mtuMarkerX(SIZE_BUCKETS, 1420), 3.5);
  assert.equal(mtuMarkerX(SIZE_BUCKETS, 1500), 7.5);
  assert.equal(mtuMarkerX(SIZE_BUCKETS, 576), 0.5);
  // Between bounds: interpolated inside the bucket (1400 lies in <=1420, from 1380).
  assert.equal(mtuMarkerX(SIZE_BUCKETS, 1400), 2.5 + 20 / 40);
  assert.equal(mtuMarkerX(SIZE_BUCKETS, 65536), 8.5);
  assert.equal(mtuMarkerX(SIZE_BUCKETS, -1), null);
});

test('size histogram sums windows, keeps bucket order, counts segments above the MTU', () => {
  const b = (o) => ({ ...Object.fromEntries(SIZE_BUCKETS.map((k) => [k, 0])), ...o });
  const h = sizeHistogram([
    sample(2000, { mtu: 1420, size_buckets: b({ '<=576': 5, '<=1420': 10, '<=1480': 2 }) }),
    sample(1000, { mtu: 1480, size_buckets: b({ '<=576': 1, '<=1500': 3 }) }),
  ]);
  assert.deepEqual(h.labels, SIZE_BUCKETS);
  assert.deepEqual(h.counts, [6, 0, 0, 10, 0, 0, 2, 3, 0, 0]);
  assert.equal(h.mtu, 1420, 'the latest window decides the MTU');
  assert.equal(h.markerX, 3.5);
  assert.equal(h.total, 21);
  assert.equal(h.aboveMtu, 5, 'buckets <=1480 and <=1500 lie wholly above 1420');
  const empty = sizeHistogram([]);
  assert.equal(empty.total, 0);
  assert.equal(empty.markerX, null);
  assert.equal(empty.labels.length, SIZE_BUCKETS.length);
});
