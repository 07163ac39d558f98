import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  severityRank, worstSeverity, health, severityLabel, sortInterfaces, mtuStatus, compareValues,
  sortRows, nextSort, filterRows, ccSummary, interfaceRetransRatio, lossyInterfaces, isLossyCubic,
  sortFindings, findingCounts, parseRoute, routeHash, isBrowserNotice,
} from '../web/model.js';

const tunnelFacts = (over = {}) => ({
  tunnel: {
    present: true, kind: 'wireguard', family: 'ipv4', overhead_expected: 60, overhead_measured: -1,
    underlay_iface: 'eth0', underlay_mtu: 1500, path_mtu: 1500, effective_underlay_mtu: 1500, max_mtu: 1440, ...over,
  },
  traffic: { tcp_retrans_ratio: 0 },
  peers: [],
});

test('severity ranks and the worst of a list', () => {
  assert.ok(severityRank('critical') > severityRank('warning'));
  assert.ok(severityRank('warning') > severityRank('info'));
  assert.equal(severityRank(null), 0);
  assert.equal(worstSeverity([{ severity: 'info' }, { severity: 'critical' }, { severity: 'warning' }]), 'critical');
  assert.equal(worstSeverity([]), null);
  assert.equal(worstSeverity(undefined), null);
});

test('health: colour level always comes with a text label', () => {
  assert.deepEqual(health({ watched: true, worst_severity: 'critical', facts: {} }).level, 'critical');
  assert.equal(health({ watched: true, worst_severity: 'warning', facts: {} }).label, 'warning');
  assert.equal(health({ watched: true, worst_severity: null, facts: {} }).level, 'ok');
  assert.equal(health({ watched: true, worst_severity: null, facts: null }).level, 'pending');
  assert.equal(health({ watched: false, worst_severity: null, facts: null }).level, 'unwatched');
  for (const i of [{ watched: true, worst_severity: 'info', facts: {} }, { watched: false }]) {
    const hl = health(i);
    assert.ok(hl.label.length > 0 && hl.symbol.length > 0);
  }
  assert.equal(severityLabel('bogus').level, 'unknown');
});

test('interfaces sort watched and worst first, then by name naturally', () => {
  const list = [
    { name: 'lo', watched: false },
    { name: 'wg10', watched: true, worst_severity: null, facts: {} },
    { name: 'wg2', watched: true, worst_severity: null, facts: {} },
    { name: 'eth0', watched: true, worst_severity: 'warning', facts: {} },
    { name: 'wg0', watched: true, worst_severity: 'critical', facts: {} },
  ];
  assert.deepEqual(sortInterfaces(list).map((i) => i.name), ['wg0', 'eth0', 'wg2', 'wg10', 'lo']);
});

test('MTU status: exceeding, fitting, unknown underlay, not a tunnel', () => {
  const over = mtuStatus({ mtu: 1480, facts: tunnelFacts() });
  assert.equal(over.fits, false);
  assert.equal(over.excess, 40);
  assert.equal(over.maxMtu, 1440);
  assert.equal(over.underlayMtu, 1500);
  const ok = mtuStatus({ mtu: 1420, facts: tunnelFacts() });
  assert.equal(ok.fits, true);
  assert.equal(ok.excess, -20);
  const unknown = mtuStatus({ mtu: 1420, facts: tunnelFacts({ max_mtu: -1 }) });
  assert.equal(unknown.fits, null);
  const phys = mtuStatus({ mtu: 1500, facts: { tunnel: { present: false } } });
  assert.equal(phys.tunnel, false);
  assert.equal(phys.fits, null);
  assert.equal(mtuStatus({ mtu: 1500, facts: null }).tunnel, false);
});

test('compareValues: numbers, natural strings, missing last', () => {
  assert.ok(compareValues(2, 10) < 0);
  assert.ok(compareValues('wg2', 'wg10') < 0);
  assert.ok(compareValues('A', 'a') === 0);
  assert.ok(compareValues(null, 1) > 0);
  assert.ok(compareValues(-1, 5) > 0, '-1 means unknown');
  assert.ok(compareValues(false, true) < 0);
});

test('sortRows: both directions, missing values stay last, stable', () => {
  const rows = [{ n: 'a', v: 3 }, { n: 'b', v: null }, { n: 'c', v: 1 }, { n: 'd', v: 3 }, { n: 'e', v: -1 }];
  const col = { key: 'v', value: (r) => r.v };
  assert.deepEqual(sortRows(rows, col, 'ascending').map((r) => r.n), ['c', 'a', 'd', 'b', 'e']);
  assert.deepEqual(sortRows(rows, col, 'descending').map((r) => r.n), ['a', 'd', 'c', 'b', 'e']);
  assert.deepEqual(sortRows(rows, 'v').map((r) => r.n), ['c', 'a', 'd', 'b', 'e']);
  assert.deepEqual(rows.map((r) => r.n), ['a', 'b', 'c', 'd', 'e'], 'input untouched');
});

test('nextSort cycles a column and restarts on a new one', () => {
  let s = nextSort(null, 'cc');
  assert.deepEqual(s, { key: 'cc', dir: 'ascending' });
  s = nextSort(s, 'cc');
  assert.deepEqual(s, { key: 'cc', dir: 'descending' });
  s = nextSort(s, 'cc');
  assert.equal(s.dir, 'ascending');
  assert.deepEqual(nextSort(s, 'mss'), { key: 'mss', dir: 'ascending' });
});

test('filterRows: all terms, case-insensitive, interface', () => {
  const rows = [
    { interface: 'wg0', cc: 'cubic', remote: '10.0.0.2:5201' },
    { interface: 'wg0', cc: 'bbr', remote: '10.0.0.2:5202' },
    { interface: 'eth0', cc: 'cubic', remote: '192.0.2.1:22' },
  ];
  const texts = (r) => [r.interface, r.cc, r.remote];
  assert.equal(filterRows(rows, '', texts).length, 3);
  assert.equal(filterRows(rows, 'CUBIC', texts).length, 2);
  assert.equal(filterRows(rows, 'cubic 5201', texts).length, 1);
  assert.equal(filterRows(rows, '', texts, 'wg0').length, 2);
  assert.equal(filterRows(rows, 'cubic', texts, 'eth0')[0].remote, '192.0.2.1:22');
  assert.equal(filterRows(rows, 'nothing', texts).length, 0);
});

const sockets = [
  { interface: 'wg0', cc: 'cubic', data_segs_sent: 1000, retransmits: 30, throughput_bps: 1e6 },
  { interface: 'wg0', cc: 'cubic', data_segs_sent: 1000, retransmits: 10, throughput_bps: 2e6 },
  { interface: 'wg0', cc: 'bbr', data_segs_sent: 1000, retransmits: 0, throughput_bps: 9e6 },
  { interface: 'eth0', cc: 'cubic', data_segs_sent: 500, retransmits: 0, throughput_bps: 1e5 },
  { interface: 'eth0', cc: 'reno', data_segs_sent: 0, retransmits: 0, throughput_bps: 0 },
];

test('ccSummary sums sockets per interface and algorithm', () => {
  const s = ccSummary(sockets);
  const cubic = s.get('wg0').get('cubic');
  assert.equal(cubic.sockets, 2);
  assert.equal(cubic.data_segs_sent, 2000);
  assert.equal(cubic.retransmits, 40);
  assert.equal(cubic.ratio, 0.02);
  assert.equal(cubic.throughput_bps, 3e6);
  assert.equal(s.get('eth0').get('reno').ratio, 0, 'nothing sent: ratio 0, not NaN');
});

test('interface retransmit ratio: larger of passive and local sockets', () => {
  const s = ccSummary(sockets);
  assert.ok(Math.abs(interfaceRetransRatio({ name: 'wg0', facts: { traffic: { tcp_retrans_ratio: 0.001 } } }, s) - 40 / 3000) < 1e-12);
  assert.equal(interfaceRetransRatio({ name: 'eth0', facts: { traffic: { tcp_retrans_ratio: 0.05 } } }, s), 0.05);
  assert.equal(interfaceRetransRatio({ name: 'x', facts: null }, s), -1);
});

test('lossy interfaces and lossy-cubic highlighting', () => {
  const ifs = [
    { name: 'wg0', facts: { traffic: { tcp_retrans_ratio: 0 } } },
    { name: 'eth0', facts: { traffic: { tcp_retrans_ratio: 0.0004 } } },
    { name: 'gw0', facts: { traffic: { tcp_retrans_ratio: 0.03 } } },
  ];
  const lossy = lossyInterfaces(ifs, sockets);
  assert.deepEqual([...lossy].sort(), ['gw0', 'wg0']);
  assert.equal(isLossyCubic({ interface: 'wg0', cc: 'cubic' }, lossy), true);
  assert.equal(isLossyCubic({ interface: 'wg0', cc: 'reno' }, lossy), true);
  assert.equal(isLossyCubic({ interface: 'wg0', cc: 'bbr' }, lossy), false);
  assert.equal(isLossyCubic({ interface: 'eth0', cc: 'cubic' }, lossy), false);
  // Sockets on an interface the agent has no facts for still make it lossy.
  const only = lossyInterfaces([], [{ interface: 'tun9', cc: 'cubic', data_segs_sent: 100, retransmits: 5 }]);
  assert.ok(only.has('tun9'));
  // Below the 1 % threshold: not lossy.
  assert.equal(lossyInterfaces([], [{ interface: 'a', cc: 'cubic', data_segs_sent: 1000, retransmits: 9 }]).size, 0);
});

test('findings: active first, then severity, then recency; counts per interface', () => {
  const list = [
    { id: 'a', interface: 'wg0', severity: 'warning', state: 'active', last_seen_ms: 5 },
    { id: 'b', interface: 'wg0', severity: 'critical', state: 'resolved', last_seen_ms: 9 },
    { id: 'c', interface: 'eth0', severity: 'critical', state: 'active', last_seen_ms: 1 },
    { id: 'd', interface: 'wg0', severity: 'warning', state: 'active', last_seen_ms: 8 },
  ];
  assert.deepEqual(sortFindings(list).map((f) => f.id), ['c', 'd', 'a', 'b']);
  const counts = findingCounts(list);
  assert.deepEqual(counts.get('wg0'), { total: 2, critical: 0, warning: 2, info: 0 });
  assert.equal(counts.get('eth0').critical, 1);
});

test('routes round-trip and unknown views fall back to the overview', () => {
  assert.deepEqual(parseRoute(''), { view: 'overview', params: {} });
  assert.deepEqual(parseRoute('#/charts?interface=wg0'), { view: 'charts', params: { interface: 'wg0' } });
  assert.deepEqual(parseRoute('#/nope'), { view: 'overview', params: {} });
  assert.equal(routeHash('traffic', { interface: 'wg0', empty: '' }), '#/traffic?interface=wg0');
  assert.equal(routeHash('findings'), '#/findings');
  const r = parseRoute(routeHash('charts', { interface: 'wg 0/x' }));
  assert.equal(r.params.interface, 'wg 0/x');
});

test('browser notices are told apart from failures of the dashboard', () => {
  assert.ok(isBrowserNotice({ message: 'ResizeObserver loop completed with undelivered notifications.' }));
  assert.ok(isBrowserNotice({ message: 'ResizeObserver loop limit exceeded' }));
  assert.ok(isBrowserNotice({ message: 'Script error.', error: null }));
  assert.ok(!isBrowserNotice({ message: "TypeError: Cannot read properties of undefined (reading 'x')", error: new TypeError('x') }));
  assert.ok(!isBrowserNotice({ message: 'Script error.', error: new Error('ours') }));
  assert.ok(!isBrowserNotice({ message: 'Uncaught ReferenceError: ResizeObserver loop is not defined' }));
  assert.ok(!isBrowserNotice(null));
});

test('a lossy cubic connection its application paces is not one bbr would speed up', () => {
  const lossy = new Set(['wg0']);
  const cubic = { cc: 'cubic', interface: 'wg0' };
  assert.equal(isLossyCubic({ ...cubic, limit: 'congestion' }, lossy), true);
  assert.equal(isLossyCubic({ ...cubic, limit: 'application' }, lossy), false);
  assert.equal(isLossyCubic({ ...cubic, limit: 'receiver_window' }, lossy), false);
  assert.equal(isLossyCubic(cubic, lossy), true); // an agent without the field
});
