// Samples -> chart series, in uPlot's columnar format ([xs, ys1, ys2, ...], x in seconds
// since the UNIX epoch): throughput, retransmit ratio per algorithm, drops per reason, path
// MTU, and the packet-size histogram with the MTU marked.
// Pure functions, no DOM: Node imports this module in the unit tests (unit/series.test.mjs).

import { known } from './format.js';
import { num } from './model.js';


/** Samples ordered by time, duplicates (same ts and interface) dropped. */
export function orderSamples(samples) {
  const seen = new Set();
  const out = [];
  for (const s of [...(samples || [])].sort((a, b) => a.ts_ms - b.ts_ms)) {
    const k = `${s.ts_ms}/${s.interface}`;
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(s);
  }
  return out;
}

function xs(samples) {
  return samples.map((s) => s.ts_ms / 1000);
}

function valueOrNull(v) {
  return known(v) ? v : null;
}

/** Throughput: receive and transmit, bit/s. */
export function throughputSeries(samples) {
  const ss = orderSamples(samples);
  return {
    labels: ['receive', 'transmit'],
    data: [xs(ss), ss.map((s) => valueOrNull(s.rx_bps)), ss.map((s) => valueOrNull(s.tx_bps))],
  };
}

/** Sorted union of the keys of `pick(sample)` objects over the samples. */
function keysOf(samples, pick) {
  const keys = new Set();
  for (const s of samples) for (const k of Object.keys(pick(s) || {})) keys.add(k);
  return [...keys].sort();
}

/**
 * Retransmit ratio (0..1) per congestion control algorithm, plus the passive ratio of
 * all TCP on the interface ("all TCP (passive)"). A window without that algorithm is a gap.
 */
export function retransSeries(samples) {
  const ss = orderSamples(samples);
  const ccs = keysOf(ss, (s) => s.retrans_by_cc);
  const data = [xs(ss)];
  for (const cc of ccs) {
    data.push(ss.map((s) => {
      const r = s.retrans_by_cc && s.retrans_by_cc[cc];
      return r ? valueOrNull(r.ratio) : null;
    }));
  }
  data.push(ss.map((s) => valueOrNull(s.tcp_retrans_ratio)));
  return { labels: [...ccs, 'all TCP (passive)'], data };
}

/** Kernel drops per reason per window. A window without that reason counts 0. */
export function dropsSeries(samples) {
  const ss = orderSamples(samples);
  const reasons = keysOf(ss, (s) => s.drops_by_reason);
  const data = [xs(ss)];
  for (const r of reasons) data.push(ss.map((s) => num((s.drops_by_reason || {})[r])));
  return { labels: reasons, data };
}

/**
 * Path MTU over time: the probed path MTU (gaps where not probed), the interface MTU, the
 * MTU plus the expected encapsulation overhead (what the tunnel needs from the underlay)
 * and the path MTU again at windows where the probe found a blackhole.
 */
export function pmtuSeries(samples) {
  const ss = orderSamples(samples);
  return {
    labels: ['path MTU (probed)', 'interface MTU', 'MTU + overhead', 'blackhole'],
    data: [
      xs(ss),
      ss.map((s) => (known(s.path_mtu) && s.path_mtu > 0 ? s.path_mtu : null)),
      ss.map((s) => valueOrNull(s.mtu)),
      ss.map((s) => (known(s.mtu) && known(s.overhead_expected) && s.overhead_expected > 0 ? s.mtu + s.overhead_expected : null)),
      ss.map((s) => (s.probe_blackhole ? (known(s.path_mtu) && s.path_mtu > 0 ? s.path_mtu : valueOrNull(s.mtu)) : null)),
    ],
  };
}

/** Upper bound of a size bucket label: "<=1420" -> 1420, ">9000" -> Infinity. */
export function bucketBound(label) {
  const m = /^\s*(<=|>)\s*(\d+)\s*$/.exec(String(label));
  if (!m) return NaN;
  return m[1] === '>' ? Infinity : Number(m[2]);
}

/** The buckets of `netdoctor flows` in their order, for documents that omit some. */
export const SIZE_BUCKETS = ['<=576', '<=1280', '<=1380', '<=1420', '<=1440', '<=1450', '<=1480', '<=1500', '<=9000', '>9000'];

/**
 * Position of `mtu` on a bar chart whose bar i is centred on x = i: the right edge of the
 * bucket whose bound equals the MTU, else interpolated inside the bucket holding it.
 */
export function mtuMarkerX(labels, mtu) {
  if (!known(mtu) || mtu <= 0) return null;
  let lower = 0;
  for (let i = 0; i < labels.length; i++) {
    const upper = bucketBound(labels[i]);
    if (upper === Infinity) return i - 0.5;
    if (mtu <= upper) {
      const frac = upper > lower ? (mtu - lower) / (upper - lower) : 1;
      return i - 0.5 + Math.min(Math.max(frac, 0), 1);
    }
    lower = upper;
  }
  return labels.length - 0.5;
}

/**
 * Packet size histogram over the samples (each sample's `size_buckets` counts one window):
 * bucket labels in size order, summed counts, the latest MTU and where to mark it.
 */
export function sizeHistogram(samples) {
  const ss = orderSamples(samples);
  const present = keysOf(ss, (s) => s.size_buckets);
  const labels = [...SIZE_BUCKETS, ...present.filter((b) => !SIZE_BUCKETS.includes(b) && !Number.isNaN(bucketBound(b)))]
    .sort((a, b) => bucketBound(a) - bucketBound(b));
  const counts = labels.map((b) => ss.reduce((acc, s) => acc + num((s.size_buckets || {})[b]), 0));
  let mtu = -1;
  for (const s of ss) if (known(s.mtu)) mtu = s.mtu;
  const total = counts.reduce((a, b) => a + b, 0);
  let above = 0;
  if (known(mtu)) {
    labels.forEach((b, i) => {
      // A bucket lies wholly above the MTU when its lower bound (the previous bound) >= MTU.
      const lowerBound = i === 0 ? 0 : bucketBound(labels[i - 1]);
      if (lowerBound >= mtu) above += counts[i];
    });
  }
  return { labels, counts, mtu, markerX: mtuMarkerX(labels, mtu), total, aboveMtu: above };
}
