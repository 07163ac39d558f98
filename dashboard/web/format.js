// Formatting of the API's numbers for people. Pure functions, no DOM: Node imports this
// module in the unit tests (unit/format.test.mjs).
//
// Conventions of the API (docs/api.md, docs/rules.md): unknown numbers are -1 (or null),
// times are milliseconds since the UNIX epoch, rates are per second.

import { evidenceValue } from './units.js';

/** Shown for values the agent does not know. */
export const NA = 'n/a';

/** True when `v` is a usable number (not null, not NaN, not the API's -1 "unknown"). */
export function known(v) {
  return typeof v === 'number' && Number.isFinite(v) && v !== -1;
}

/** Significant-ish digits: 3 above 10, otherwise 2 decimals at most. */
function compact(v) {
  const a = Math.abs(v);
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/** Integer with thousands separators: 1234567 -> "1,234,567". */
export function formatCount(n) {
  if (!known(n)) return NA;
  return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Scales `v` by powers of `base` with the given unit prefixes. */
function scaled(v, base, units) {
  let i = 0;
  let x = v;
  while (Math.abs(x) >= base && i < units.length - 1) {
    x /= base;
    i += 1;
  }
  return i === 0 ? `${Math.round(x)} ${units[0]}` : `${compact(x)} ${units[i]}`;
}

/** Bit rate (SI): 12_300_000 -> "12.3 Mbit/s". */
export function formatBitRate(bps) {
  if (!known(bps)) return NA;
  return scaled(bps, 1000, ['bit/s', 'kbit/s', 'Mbit/s', 'Gbit/s', 'Tbit/s']);
}

/** Packet rate: 1500 -> "1.50 kpps". */
export function formatPacketRate(pps) {
  if (!known(pps)) return NA;
  return scaled(pps, 1000, ['pps', 'kpps', 'Mpps', 'Gpps']);
}

/** Byte count (IEC): 1536 -> "1.50 KiB". */
export function formatBytes(n) {
  if (!known(n)) return NA;
  return scaled(n, 1024, ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']);
}

/** Ratio as a percentage: 0.004 -> "0.40 %". */
export function formatPercent(ratio, digits = 2) {
  if (!known(ratio)) return NA;
  return `${(ratio * 100).toFixed(digits)} %`;
}

/** Microseconds as milliseconds: 12345 -> "12.3 ms"; below 1 ms in µs. */
export function formatMicros(us) {
  if (!known(us)) return NA;
  if (us < 1000) return `${Math.round(us)} µs`;
  return `${compact(us / 1000)} ms`;
}

/** A duration in seconds: 5 -> "5 s", 200 -> "3 min 20 s", 7500 -> "2 h 5 min", 3 days -> "3 d". */
export function formatDuration(seconds) {
  if (!known(seconds) || seconds < 0) return NA;
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) {
    const m = Math.floor(s / 60);
    const r = s % 60;
    return r ? `${m} min ${r} s` : `${m} min`;
  }
  if (s < 86400) {
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  return h ? `${d} d ${h} h` : `${d} d`;
}

/** A time relative to `now` (both ms since the epoch): "just now", "5 s ago", "in 2 min". */
export function formatRelative(tsMs, nowMs = Date.now()) {
  if (!known(tsMs) || tsMs <= 0) return NA;
  const diff = (nowMs - tsMs) / 1000;
  if (Math.abs(diff) < 1.5) return 'just now';
  const text = formatDuration(Math.abs(diff));
  // Only the largest unit reads well in a relative time: "3 min ago", not "3 min 20 s ago".
  const coarse = text.split(' ').slice(0, 2).join(' ');
  return diff > 0 ? `${coarse} ago` : `in ${coarse}`;
}

/** Absolute local time, "2026-11-21 09:52:03", for tooltips and <time> titles. */
export function formatTimestamp(tsMs) {
  if (!known(tsMs) || tsMs <= 0) return NA;
  const d = new Date(tsMs);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** A WireGuard handshake age in seconds (-1: never). */
export function formatHandshakeAge(ageS) {
  if (ageS === -1) return 'never';
  if (!known(ageS)) return NA;
  return `${formatDuration(ageS)} ago`;
}

/** Bytes as an MTU or overhead figure: 1420 -> "1420 B" (no separators, as `ip link` prints). */
export function formatMtu(n) {
  if (!known(n)) return NA;
  return `${Math.round(n)} B`;
}

/** IP protocol number to name. */
export function protocolName(p) {
  switch (p) {
    case 1: return 'ICMP';
    case 6: return 'TCP';
    case 17: return 'UDP';
    case 47: return 'GRE';
    case 50: return 'ESP';
    case 58: return 'ICMPv6';
    case 132: return 'SCTP';
    default: return known(p) ? String(p) : NA;
  }
}

/** "address:port", with brackets for IPv6 addresses. */
export function formatEndpoint(addr, port) {
  if (!addr) return NA;
  const a = addr.includes(':') ? `[${addr}]` : addr;
  return port || port === 0 ? `${a}:${port}` : a;
}

/** A WireGuard public key shortened for display: "drP/h71b…=" keeps the start. */
export function shortKey(key, keep = 8) {
  if (!key) return NA;
  return key.length > keep + 2 ? `${key.slice(0, keep)}…` : key;
}

/**
 * An evidence value in its unit, as the text report prints it (units.js); an unknown one
 * with `reason` (the finding's `unknown[name]`, from a diagnosis) as "n/a (reason)".
 */
export function formatEvidenceValue(name, v, reason) {
  const text = evidenceValue(name, v);
  return text === NA && reason ? `${NA} (${reason})` : text;
}
