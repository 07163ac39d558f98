// The dashboard's logic on API documents: health, sorting, filtering, per-algorithm
// retransmission totals, lossy-cubic highlighting, routes (chart series: series.js).
// Pure functions, no DOM: Node imports this module in the unit tests (unit/model.test.mjs).

import { known } from './format.js';

// ---------------------------------------------------------------------------------------
// Severity and health

export const SEVERITIES = ['critical', 'warning', 'info'];

/** critical 3, warning 2, info 1, anything else 0. */
export function severityRank(s) {
  switch (s) {
    case 'critical': return 3;
    case 'warning': return 2;
    case 'info': return 1;
    default: return 0;
  }
}

/** The worst severity among findings (objects with `severity`), or null. */
export function worstSeverity(findings) {
  let worst = null;
  for (const f of findings || []) {
    if (severityRank(f.severity) > severityRank(worst)) worst = f.severity;
  }
  return worst;
}

/**
 * Health of an interface from `GET /api/v1/interfaces`: the colour class, the text (so
 * colour is never the only signal) and a symbol.
 *   critical/warning/info: its worst active finding; ok: watched, evaluated, nothing found;
 *   pending: watched but no window evaluated yet (facts null); unwatched: not watched.
 */
export function health(iface) {
  if (!iface || iface.watched === false) {
    return { level: 'unwatched', label: 'not watched', symbol: '–' };
  }
  switch (iface.worst_severity) {
    case 'critical': return { level: 'critical', label: 'critical', symbol: '✖' };
    case 'warning': return { level: 'warning', label: 'warning', symbol: '▲' };
    case 'info': return { level: 'info', label: 'info', symbol: 'ℹ' };
    default:
      if (!iface.facts) return { level: 'pending', label: 'waiting for first window', symbol: '…' };
      return { level: 'ok', label: 'healthy', symbol: '✔' };
  }
}

/** Display label and symbol of a finding severity. */
export function severityLabel(s) {
  switch (s) {
    case 'critical': return { level: 'critical', label: 'critical', symbol: '✖' };
    case 'warning': return { level: 'warning', label: 'warning', symbol: '▲' };
    case 'info': return { level: 'info', label: 'info', symbol: 'ℹ' };
    default: return { level: 'unknown', label: String(s || 'unknown'), symbol: '?' };
  }
}

/** Interfaces for the overview: watched first, then worst health first, then by name. */
export function sortInterfaces(list) {
  const order = { critical: 0, warning: 1, info: 2, pending: 3, ok: 4, unwatched: 5 };
  return [...(list || [])].sort((a, b) => {
    const ha = order[health(a).level];
    const hb = order[health(b).level];
    if (ha !== hb) return ha - hb;
    return compareValues(a.name, b.name);
  });
}

// ---------------------------------------------------------------------------------------
// MTU and tunnel figures

/**
 * The MTU picture of an interface from its facts: what it is, what fits the underlay,
 * and whether it fits. `fits` is null when the underlay limit is unknown.
 */
export function mtuStatus(iface) {
  const facts = iface && iface.facts;
  const t = facts && facts.tunnel;
  const mtu = iface ? iface.mtu : -1;
  const tunnel = Boolean(t && t.present);
  const maxMtu = tunnel && known(t.max_mtu) && t.max_mtu > 0 ? t.max_mtu : -1;
  return {
    mtu,
    tunnel,
    kind: tunnel ? t.kind : '',
    family: tunnel ? t.family : '',
    underlayIface: tunnel ? t.underlay_iface : '',
    underlayMtu: tunnel ? t.underlay_mtu : -1,
    pathMtu: tunnel ? t.path_mtu : -1,
    maxMtu,
    overheadExpected: tunnel ? t.overhead_expected : -1,
    overheadMeasured: tunnel ? t.overhead_measured : -1,
    fits: maxMtu > 0 && known(mtu) ? mtu <= maxMtu : null,
    excess: maxMtu > 0 && known(mtu) ? mtu - maxMtu : 0,
  };
}

// ---------------------------------------------------------------------------------------
// Sorting and filtering

/**
 * Compares two cell values: null/undefined/NaN and the API's -1 sort last (ascending),
 * numbers numerically, booleans false < true, strings naturally ("wg2" < "wg10").
 */
export function compareValues(a, b) {
  const missA = isMissing(a);
  const missB = isMissing(b);
  if (missA || missB) return missA === missB ? 0 : missA ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  return String(a).localeCompare(String(b), 'en', { numeric: true, sensitivity: 'base' });
}

/**
 * Rows sorted by the column `key` (a column object with `value(row)`, or a property name).
 * `dir` is 'ascending' or 'descending'; missing values stay last either way. Stable.
 */
export function sortRows(rows, column, dir = 'ascending') {
  const value = typeof column === 'function' ? column
    : column && typeof column.value === 'function' ? column.value
      : (r) => r[column];
  const sign = dir === 'descending' ? -1 : 1;
  return rows
    .map((row, i) => ({ row, i, v: value(row) }))
    .sort((x, y) => {
      const c = compareValues(x.v, y.v);
      if (c === 0) return x.i - y.i;
      // Missing values last in both directions.
      const xm = isMissing(x.v);
      const ym = isMissing(y.v);
      if (xm || ym) return xm ? 1 : -1;
      return sign * c;
    })
    .map((e) => e.row);
}

function isMissing(v) {
  return v === null || v === undefined || v === '' || (typeof v === 'number' && (!Number.isFinite(v) || v === -1));
}

/** Next sort direction when a header is activated: a new column starts ascending. */
export function nextSort(current, key) {
  if (!current || current.key !== key) return { key, dir: 'ascending' };
  return { key, dir: current.dir === 'ascending' ? 'descending' : 'ascending' };
}

/**
 * Rows whose text matches every whitespace-separated term of `query` (case-insensitive
 * substring of any of the row's `texts(row)`), and whose `interface` is `iface` when given.
 */
export function filterRows(rows, query, texts, iface = '') {
  const terms = String(query || '').toLowerCase().split(/\s+/).filter(Boolean);
  return rows.filter((row) => {
    if (iface && row.interface !== iface) return false;
    if (!terms.length) return true;
    const hay = texts(row).map((t) => String(t ?? '').toLowerCase()).join('\u0000');
    return terms.every((term) => hay.includes(term));
  });
}

// ---------------------------------------------------------------------------------------
// Congestion control and lossy paths

/** Algorithms that back off on loss (the `tcp.cubic_on_lossy_path` rule's set). */
export const LOSS_BASED_CC = new Set(['cubic', 'reno']);

/** Retransmit ratio from which a path counts as lossy (the rule's 1 %). */
export const LOSSY_RATIO = 0.01;

/**
 * Sockets summed per interface and congestion control algorithm:
 * Map iface -> Map cc -> {sockets, data_segs_sent, retransmits, ratio, throughput_bps}.
 */
export function ccSummary(sockets) {
  const out = new Map();
  for (const s of sockets || []) {
    const ifname = s.interface || '';
    if (!out.has(ifname)) out.set(ifname, new Map());
    const byCc = out.get(ifname);
    const cc = s.cc || 'unknown';
    if (!byCc.has(cc)) byCc.set(cc, { cc, sockets: 0, data_segs_sent: 0, retransmits: 0, ratio: 0, throughput_bps: 0 });
    const a = byCc.get(cc);
    a.sockets += 1;
    a.data_segs_sent += num(s.data_segs_sent);
    a.retransmits += num(s.retransmits);
    a.throughput_bps += num(s.throughput_bps);
  }
  for (const byCc of out.values()) {
    for (const a of byCc.values()) a.ratio = a.data_segs_sent > 0 ? a.retransmits / a.data_segs_sent : 0;
  }
  return out;
}

export function num(v) {
  return known(v) ? v : 0;
}

/**
 * The retransmit ratio of an interface: the larger of the passively measured ratio
 * (`facts.traffic.tcp_retrans_ratio`, forwarded traffic too) and the local sockets' total.
 */
export function interfaceRetransRatio(iface, summary) {
  const passive = iface && iface.facts && iface.facts.traffic ? iface.facts.traffic.tcp_retrans_ratio : -1;
  let segs = 0;
  let re = 0;
  const byCc = summary && iface ? summary.get(iface.name) : null;
  if (byCc) {
    for (const a of byCc.values()) {
      segs += a.data_segs_sent;
      re += a.retransmits;
    }
  }
  const local = segs > 0 ? re / segs : -1;
  const best = Math.max(known(passive) ? passive : -1, local);
  return best >= 0 ? best : -1;
}

/** Names of the interfaces whose retransmit ratio is at least `threshold`. */
export function lossyInterfaces(interfaces, sockets, threshold = LOSSY_RATIO) {
  const summary = ccSummary(sockets);
  const out = new Set();
  for (const i of interfaces || []) {
    if (interfaceRetransRatio(i, summary) >= threshold) out.add(i.name);
  }
  // Interfaces the agent lists no facts for still count when their sockets are lossy.
  for (const [name, byCc] of summary) {
    let segs = 0;
    let re = 0;
    for (const a of byCc.values()) {
      segs += a.data_segs_sent;
      re += a.retransmits;
    }
    if (name && segs > 0 && re / segs >= threshold) out.add(name);
  }
  return out;
}

/**
 * A cubic/reno socket on a lossy interface, held by its congestion window: the situation bbr
 * would handle better. One its application (or a window) held would not move faster.
 */
export function isLossyCubic(socket, lossy) {
  return Boolean(socket && LOSS_BASED_CC.has(socket.cc) && lossy && lossy.has(socket.interface)
    && (!socket.limit || socket.limit === 'congestion'));
}

// ---------------------------------------------------------------------------------------
// Findings

/** Findings ordered for display: active first, then severity, then most recently seen. */
export function sortFindings(list) {
  return [...(list || [])].sort((a, b) => {
    const sa = a.state === 'active' ? 0 : 1;
    const sb = b.state === 'active' ? 0 : 1;
    if (sa !== sb) return sa - sb;
    const r = severityRank(b.severity) - severityRank(a.severity);
    if (r) return r;
    return (b.last_seen_ms || 0) - (a.last_seen_ms || 0);
  });
}

/** Active findings counted per interface: Map name -> {total, critical, warning, info}. */
export function findingCounts(findings) {
  const out = new Map();
  for (const f of findings || []) {
    if (f.state && f.state !== 'active') continue;
    const k = f.interface || '';
    if (!out.has(k)) out.set(k, { total: 0, critical: 0, warning: 0, info: 0 });
    const c = out.get(k);
    c.total += 1;
    if (f.severity in c) c[f.severity] += 1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Routes: "#/overview", "#/findings", "#/traffic?interface=wg0", "#/charts?interface=wg0"

export const VIEWS = ['overview', 'findings', 'traffic', 'charts', 'timeline'];

/** Parses a location hash into {view, params}; unknown views fall back to the overview. */
export function parseRoute(hash) {
  const h = String(hash || '').replace(/^#\/?/, '');
  const [path, query = ''] = h.split('?');
  const view = VIEWS.includes(path) ? path : 'overview';
  const params = {};
  for (const [k, v] of new URLSearchParams(query)) params[k] = v;
  return { view, params };
}

/** Builds a hash from a view and params (empty params omitted). */
export function routeHash(view, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const qs = q.toString();
  return `#/${view}${qs ? `?${qs}` : ''}`;
}

/** A stable key for a finding (same rule, interface and subject = same finding). */
export function findingKey(f) {
  return `${f.id}|${f.interface || ''}|${f.subject || ''}|${f.opened_ms || ''}`;
}

/**
 * Whether an error event is a browser notice rather than a failure of the dashboard:
 * "ResizeObserver loop completed with undelivered notifications" (or, in older browsers,
 * "ResizeObserver loop limit exceeded": layout settled a frame later), and "Script error."
 * without details (a script of another origin, e.g. an extension).
 */
export function isBrowserNotice(e) {
  const message = String((e && e.message) || '');
  if (/^ResizeObserver loop/.test(message)) return true;
  return message === 'Script error.' && !(e && e.error);
}
