// The dashboard prints evidence as the agent's text report does: units.golden.json is
// written by the agent's test (rules::units::tests::the_dashboard_golden_file_is_what_the_agent_prints)
// from its own unit classes and formatting; web/units.js must give the same for every
// built-in evidence name and sample value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { evidenceValue, unitOf } from '../web/units.js';
import { formatEvidenceValue } from '../web/format.js';

const golden = JSON.parse(readFileSync(new URL('./units.golden.json', import.meta.url), 'utf8'));

test('every built-in evidence name has the unit class the agent gives it', () => {
  const names = Object.keys(golden.units);
  assert.ok(names.length > 100, `only ${names.length} names in the golden file`);
  for (const name of names) {
    assert.equal(unitOf(name), golden.units[name], name);
  }
});

test('every sample value prints as the agent prints it', () => {
  assert.ok(golden.values.length > 500);
  for (const [name, value, text] of golden.values) {
    assert.equal(evidenceValue(name, value), text, `${name}=${JSON.stringify(value)}`);
    assert.equal(formatEvidenceValue(name, value), text, `${name}=${JSON.stringify(value)}`);
  }
});

test('the Tailscale report reads in units (issue 35)', () => {
  assert.equal(formatEvidenceValue('derp_tcp_bytes', 21450376), '20.5 MiB');
  assert.equal(formatEvidenceValue('udp_wireguard_bytes', 15848054), '15.1 MiB');
  assert.equal(formatEvidenceValue('udp_wireguard_bytes', -1), 'n/a');
  assert.equal(formatEvidenceValue('tcp_retrans_ratio', 0.042), '4.2 %');
  assert.equal(formatEvidenceValue('srtt_ms', 12.34), '12.3 ms');
  assert.equal(formatEvidenceValue('throughput_bps', 81234567), '81.2 Mbit/s');
  assert.equal(formatEvidenceValue('underlay_fragments', 138866), '138,866');
  assert.equal(
    formatEvidenceValue('udp_wireguard_bytes', -1, 'no known address of the peer'),
    'n/a (no known address of the peer)',
  );
  assert.equal(formatEvidenceValue('udp_wireguard_bytes', 5, 'no known address of the peer'), '5 B');
});
