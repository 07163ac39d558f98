// Evidence values in the units a person reads, as the text report of `netdoctor diagnose`
// prints them: this mirrors the agent's rules/units (agent/src/rules/units/mod.rs), the unit
// chosen from the evidence name's convention. A golden file both sides are tested against
// (unit/units.golden.json: every built-in rule's evidence name, its unit and sample values)
// keeps the two the same. Pure functions, no DOM.

/** Printed for a value the agent could not read (-1, "", null). */
export const NA = 'n/a';

/** Names (of evidence and of the fields of evidence objects) whose suffix says nothing. */
const NAMED = {
  bytes: 'Bytes',
  needed_tcp_rmem_max: 'Bytes',
  needed_tcp_wmem_max: 'Bytes',
  dropped: 'Count',
  expected: 'Count',
  received: 'Count',
  lost: 'Count',
  packets: 'Count',
  flows: 'Count',
  retransmits: 'Count',
  threads_that_ran: 'Count',
  flows_over_limit: 'Count',
  mtu: 'Plain',
  overhead_expected: 'Plain',
  overhead_measured: 'Plain',
  largest_segment: 'Plain',
  largest_syn_mss: 'Plain',
  mss_limit: 'Plain',
  pid: 'Plain',
  uid: 'Plain',
  tailscale_port: 'Plain',
  derp_region: 'Plain',
  weight: 'Plain',
  ip_forward: 'Plain',
  rp_filter: 'Plain',
  rp_filter_all: 'Plain',
  rp_filter_iface: 'Plain',
  reordering_metric: 'Plain',
};

/** Evidence whose values are text, flags or lists of text. */
const TEXT = new Set([
  'bond', 'bond_members', 'bond_mode', 'bridge', 'broken_direction', 'busiest',
  'busiest_member', 'cc', 'clamping_rule_covering', 'clamping_rule_present', 'daemon',
  'default_cc', 'ecmp_route', 'derp_servers', 'endpoint', 'hash_policy', 'host', 'iface',
  'leaked_source', 'limited_by', 'masquerade_rule', 'measured', 'members', 'mode', 'name',
  'nexthops', 'path', 'peer', 'ports', 'probe_blackhole', 'probe_family', 'probe_target',
  'receiver', 'route', 'tunnel_sources', 'underlay_bond_mode', 'uplink', 'uplinks',
  'xmit_hash_policy',
]);

/** Suffixes of counts: leaked_packets, oversize_drops, initiations_sent ... */
const COUNT_SUFFIXES = [
  '_packets', '_flows', '_segments', '_drops', '_fragments', '_connections', '_retransmits',
  '_sent', '_received', '_unanswered', '_unconfirmed', '_answered', '_evictions', '_events',
  '_capacity',
];

/** The unit class of the evidence called `name` (the Rust enum's variant name), or null. */
export function unitOf(name) {
  if (Object.hasOwn(NAMED, name)) return NAMED[name];
  if (TEXT.has(name)) return 'Text';
  const has = (s) => name.endsWith(s);
  if (has('_bytes')) return 'Bytes';
  if (has('_kib')) return 'Kib';
  if (has('_ratio') || has('_share')) return 'Ratio';
  if (name.split('_').includes('percent')) return 'Percent';
  if (has('_per_s')) return 'PerSecond';
  if (has('_ms')) return 'Millis';
  if (has('_s')) return 'Seconds';
  if (has('_mbps')) return 'MbitRate';
  if (has('_bps')) return 'BitRate';
  if (has('_mtu')) return 'Plain';
  if (COUNT_SUFFIXES.some(has)) return 'Count';
  return null;
}

/** A number as it is, without a trailing ".0": 1420 -> "1420", 0.5 -> "0.5". */
function plain(x) {
  return Number.isInteger(x) ? x.toFixed(0) : String(x);
}

/** Three significant digits at most: 1.23, 12.3, 123. */
function compact(x) {
  const a = Math.abs(x);
  if (a >= 99.95) return x.toFixed(0);
  if (a >= 9.995) return x.toFixed(1);
  return x.toFixed(2);
}

function scaled(x, base, units) {
  let v = x;
  let i = 0;
  while (Math.abs(v) >= base && i + 1 < units.length) {
    v /= base;
    i += 1;
  }
  return i === 0 ? `${plain(v)} ${units[0]}` : `${compact(v)} ${units[i]}`;
}

/** Bytes, IEC: 15848054 -> "15.1 MiB". */
export function bytes(x) {
  return scaled(x, 1024, ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']);
}

/** Bits per second, SI: 12300000 -> "12.3 Mbit/s". */
export function bitRate(x) {
  return scaled(x, 1000, ['bit/s', 'kbit/s', 'Mbit/s', 'Gbit/s', 'Tbit/s']);
}

/** A percentage: 4.2 -> "4.2 %", 0.25 -> "0.25 %", 0 -> "0 %". */
export function percent(p) {
  if (p === 0) return '0 %';
  return Math.abs(p) >= 1 ? `${p.toFixed(1)} %` : `${p.toFixed(2)} %`;
}

/** Seconds: 5 -> "5 s", 200 -> "3 min 20 s", 7500 -> "2 h 5 min". */
export function seconds(s) {
  if (Math.abs(s) < 60) return Number.isInteger(s) ? `${s} s` : `${compact(s)} s`;
  const t = Math.round(s);
  let parts;
  if (t < 3600) parts = [Math.floor(t / 60), t % 60, 'min', 's'];
  else if (t < 86400) parts = [Math.floor(t / 3600), Math.floor((t % 3600) / 60), 'h', 'min'];
  else parts = [Math.floor(t / 86400), Math.floor((t % 86400) / 3600), 'd', 'h'];
  const [big, small, unitBig, unitSmall] = parts;
  return small === 0 ? `${big} ${unitBig}` : `${big} ${unitBig} ${small} ${unitSmall}`;
}

/** Milliseconds: 12.34 -> "12.3 ms", 0.25 -> "250 µs", 1500 -> "1.50 s". */
export function millis(ms) {
  if (Math.abs(ms) >= 1000) return seconds(ms / 1000);
  if (Math.abs(ms) < 1 && ms !== 0) return `${(ms * 1000).toFixed(0)} µs`;
  return `${compact(ms)} ms`;
}

/** A count with thousands separators: 70527 -> "70,527"; a fraction keeps 3 digits. */
export function count(x) {
  if (!Number.isInteger(x) && Math.abs(x) < 1000) return compact(x);
  const n = Math.sign(x) * Math.round(Math.abs(x));
  const digits = Math.abs(n).toFixed(0).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return n < 0 ? `-${digits}` : digits;
}

/** A known number in `unit`. */
export function number(unit, x) {
  switch (unit) {
    case 'Bytes': return bytes(x);
    case 'Kib': return bytes(x * 1024);
    case 'Ratio': return percent(x * 100);
    case 'Percent': return percent(x);
    case 'Millis': return millis(x);
    case 'Seconds': return seconds(x);
    case 'BitRate': return bitRate(x);
    case 'MbitRate': return bitRate(x * 1e6);
    case 'PerSecond': return `${count(x)}/s`;
    case 'Count': return count(x);
    default: return plain(x);
  }
}

/** One evidence value in its unit; unknowns (-1, "", null) as n/a. */
export function evidenceValue(name, v) {
  if (v === null || v === undefined || v === '') return NA;
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') {
    if (v === -1 || !Number.isFinite(v)) return NA;
    return number(unitOf(name) ?? 'Plain', v);
  }
  if (Array.isArray(v)) {
    if (v.length === 0) return 'none';
    const parts = v.map((i) => evidenceValue(name, i));
    return v.some((i) => i !== null && typeof i === 'object' && !Array.isArray(i))
      ? `[${parts.join('; ')}]`
      : parts.join(' ');
  }
  // An object: its fields in name order (as the agent's JSON maps are), each in its unit.
  return Object.keys(v).sort().map((k) => `${k} ${evidenceValue(k, v[k])}`).join(' ');
}
