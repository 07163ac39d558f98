import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  known, formatCount, formatBitRate, formatPacketRate, formatBytes, formatPercent, formatMicros,
  formatDuration, formatRelative, formatHandshakeAge, formatMtu, protocolName, formatEndpoint,
  shortKey, formatEvidenceValue, formatTimestamp, NA,
} from '../web/format.js';

test('known: -1, null, NaN and non-numbers are unknown', () => {
  assert.equal(known(0), true);
  assert.equal(known(1420), true);
  assert.equal(known(-1), false);
  assert.equal(known(null), false);
  assert.equal(known(undefined), false);
  assert.equal(known(NaN), false);
  assert.equal(known(Infinity), false);
  assert.equal(known('5'), false);
});

test('counts get thousands separators; unknown is n/a', () => {
  assert.equal(formatCount(0), '0');
  assert.equal(formatCount(999), '999');
  assert.equal(formatCount(70527), '70,527');
  assert.equal(formatCount(1234567.4), '1,234,567');
  assert.equal(formatCount(-1), NA);
});

test('bit rates use SI prefixes', () => {
  assert.equal(formatBitRate(0), '0 bit/s');
  assert.equal(formatBitRate(999), '999 bit/s');
  assert.equal(formatBitRate(1500), '1.50 kbit/s');
  assert.equal(formatBitRate(12.3e6), '12.3 Mbit/s');
  assert.equal(formatBitRate(19.9e9), '19.9 Gbit/s');
  assert.equal(formatBitRate(250e6), '250 Mbit/s');
  assert.equal(formatBitRate(null), NA);
});

test('packet rates and bytes', () => {
  assert.equal(formatPacketRate(410), '410 pps');
  assert.equal(formatPacketRate(7400), '7.40 kpps');
  assert.equal(formatBytes(420), '420 B');
  assert.equal(formatBytes(1536), '1.50 KiB');
  assert.equal(formatBytes(13770000), '13.1 MiB');
  assert.equal(formatBytes(-1), NA);
});

test('percentages from ratios', () => {
  assert.equal(formatPercent(0.004), '0.40 %');
  assert.equal(formatPercent(0), '0.00 %');
  assert.equal(formatPercent(0.0312, 1), '3.1 %');
  assert.equal(formatPercent(-1), NA);
});

test('microseconds become ms above 1 ms', () => {
  assert.equal(formatMicros(850), '850 µs');
  assert.equal(formatMicros(21000), '21.0 ms');
  assert.equal(formatMicros(1234), '1.23 ms');
  assert.equal(formatMicros(250000), '250 ms');
});

test('durations pick two units at most', () => {
  assert.equal(formatDuration(5), '5 s');
  assert.equal(formatDuration(60), '1 min');
  assert.equal(formatDuration(200), '3 min 20 s');
  assert.equal(formatDuration(7500), '2 h 5 min');
  assert.equal(formatDuration(3 * 86400), '3 d');
  assert.equal(formatDuration(90000), '1 d 1 h');
  assert.equal(formatDuration(-5), NA);
});

test('relative times: just now, ago, in; coarse unit only', () => {
  const now = 1_795_000_000_000;
  assert.equal(formatRelative(now, now), 'just now');
  assert.equal(formatRelative(now - 5000, now), '5 s ago');
  assert.equal(formatRelative(now - 200_000, now), '3 min ago');
  assert.equal(formatRelative(now + 120_000, now), 'in 2 min');
  assert.equal(formatRelative(now - 2.5 * 3600e3, now), '2 h ago');
  assert.equal(formatRelative(0, now), NA);
  assert.equal(formatRelative(null, now), NA);
});

test('timestamps are local and zero-padded', () => {
  const d = new Date(2026, 0, 2, 3, 4, 5).getTime();
  assert.equal(formatTimestamp(d), '2026-01-02 03:04:05');
  assert.equal(formatTimestamp(-1), NA);
});

test('handshake ages: never for -1', () => {
  assert.equal(formatHandshakeAge(-1), 'never');
  assert.equal(formatHandshakeAge(5), '5 s ago');
  assert.equal(formatHandshakeAge(312), '5 min 12 s ago');
});

test('MTUs print as plain byte counts', () => {
  assert.equal(formatMtu(1420), '1420 B');
  assert.equal(formatMtu(-1), NA);
});

test('protocols, endpoints and keys', () => {
  assert.equal(protocolName(6), 'TCP');
  assert.equal(protocolName(17), 'UDP');
  assert.equal(protocolName(58), 'ICMPv6');
  assert.equal(protocolName(99), '99');
  assert.equal(formatEndpoint('10.0.0.1', 5201), '10.0.0.1:5201');
  assert.equal(formatEndpoint('2001:db8::1', 443), '[2001:db8::1]:443');
  assert.equal(formatEndpoint('192.0.2.254', null), '192.0.2.254');
  assert.equal(formatEndpoint('', 1), NA);
  assert.equal(shortKey('drP/h71bJzN1lE4Hx0Tq1pLx2mJgD9yq0hG2xJmY0Wk='), 'drP/h71b…');
  assert.equal(shortKey('short'), 'short');
});

test('evidence values: ratios as percent, -1 as n/a, lists joined (as the text report)', () => {
  assert.equal(formatEvidenceValue('tunnel_mtu', 1480), '1480');
  assert.equal(formatEvidenceValue('retrans_ratio', 0.034), '3.4 %');
  assert.equal(formatEvidenceValue('overhead_measured', -1), NA);
  assert.equal(formatEvidenceValue('cc_available', ['reno', 'cubic']), 'reno cubic');
  assert.equal(formatEvidenceValue('bbr_available', true), 'true');
  assert.equal(formatEvidenceValue('x', { a: 1 }), 'a 1');
  assert.equal(formatEvidenceValue('x', null), NA);
});
