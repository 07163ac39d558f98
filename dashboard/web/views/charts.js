// Charts of one interface from GET /api/v1/samples?interface=X (one sample per window):
// throughput, retransmit ratio by congestion control, drops by reason, packet sizes with
// the MTU marked, path MTU over time. Drawn with uPlot (web/vendor/, a global `uPlot`).
// Configuration changes (GET /api/v1/events) of the interface and the host are marked on
// every time chart and listed above them.

import { h, replaceContent, errorBox, selectValue } from '../dom.js';
import { formatBitRate, formatPercent, formatCount, formatMtu, formatTimestamp, known } from '../format.js';
import { routeHash } from '../model.js';
import {
  throughputSeries, retransSeries, dropsSeries, pmtuSeries, sizeHistogram, orderSamples,
} from '../series.js';
import { timeAxisIncrs, timeAxisLabels } from '../timeaxis.js';
import { eventsFor } from '../events.js';
import { eventMarkersHook } from './markers.js';

const RANGES = { '15m': 900e3, '1h': 3600e3, '6h': 6 * 3600e3 };
/** Pages of 1000 samples fetched at most (6 h of 10 s windows is 2160 samples). */
const MAX_PAGES = 5;

/** Colours from the stylesheet (they follow prefers-color-scheme). */
function palette() {
  const cs = getComputedStyle(document.documentElement);
  const v = (name, fallback) => cs.getPropertyValue(name).trim() || fallback;
  return {
    fg: v('--fg-muted', '#555'),
    grid: v('--grid', 'rgba(128,128,128,0.2)'),
    crit: v('--crit', '#c00'),
    warn: v('--warn', '#b60'),
    series: [1, 2, 3, 4, 5, 6].map((i) => v(`--chart-${i}`, '#36c')),
  };
}

function axisStyle(p) {
  return {
    stroke: p.fg,
    grid: { stroke: p.grid, width: 1 },
    ticks: { stroke: p.grid, width: 1 },
    font: '11px system-ui, sans-serif',
  };
}

/** Axis labels: 1200 -> "1.2k", 350000 -> "350k", 1500000 -> "1.5M". */
function shortCount(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return String(+v.toFixed(2));
}

function shortBits(v) {
  return formatBitRate(v).replace('bit/s', 'b/s');
}

/** A chart figure: caption, plot area, text summary (canvas is not readable by everyone). */
function figure(testid, title, description) {
  const plot = h('div', { class: 'chart-plot', dataset: { testid: `${testid}-plot` } });
  const summary = h('p', { class: 'chart-summary muted', dataset: { testid: `${testid}-summary` } });
  const el = h('figure', { class: 'chart', dataset: { testid } },
    h('figcaption', {}, h('h2', {}, title), h('p', { class: 'muted' }, description)),
    plot, summary);
  return { el, plot, summary, u: null, key: '' };
}

/** Creates or updates the uPlot instance of a figure; a changed series set re-creates it. */
function draw(fig, key, makeOpts, data) {
  const width = Math.max(fig.plot.clientWidth, 200);
  if (fig.u && fig.key === key) {
    fig.u.setData(data);
    return;
  }
  if (fig.u) fig.u.destroy();
  fig.key = key;
  const opts = makeOpts(width);
  if (fig.marks) {
    const hooks = opts.hooks || {};
    opts.hooks = { ...hooks, draw: [...(hooks.draw || []), fig.marks] };
  }
  fig.u = new globalThis.uPlot(opts, data, fig.plot);
}

function lineSeries(label, stroke, value, extra = {}) {
  return { label, stroke, width: 2, value: (u, v) => (v === null || v === undefined ? '–' : value(v)), spanGaps: false, ...extra };
}

/** The x axis of the time charts: whole-second ticks and labels a person reads (timeaxis.js). */
function timeAxis(p) {
  return {
    ...axisStyle(p),
    incrs: (u, axisIdx, min, max) => timeAxisIncrs(max - min),
    values: (u, splits) => timeAxisLabels(splits, u.scales.x.max - u.scales.x.min),
  };
}

function timeOpts(p, width, series, yValues, ySize = 60, extra = {}) {
  return {
    width,
    height: 200,
    series: [{ label: 'time', value: (u, v) => (v ? formatTimestamp(v * 1000) : '–') }, ...series],
    axes: [
      timeAxis(p),
      { ...axisStyle(p), size: ySize, values: (u, vals) => vals.map(yValues) },
    ],
    scales: { x: { time: true } },
    cursor: { drag: { x: true, y: false } },
    ...extra,
  };
}

/** Draws the MTU marker on the histogram (a uPlot draw hook). */
function mtuMarkerHook(getMarker, color) {
  return (u) => {
    const m = getMarker();
    if (m.x === null || m.x === undefined) return;
    const ctx = u.ctx;
    const x = Math.round(u.valToPos(m.x, 'x', true));
    const top = u.bbox.top;
    const bottom = u.bbox.top + u.bbox.height;
    ctx.save();
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 2 * devicePixelRatio;
    ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, bottom);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.font = `${12 * devicePixelRatio}px system-ui, sans-serif`;
    const label = `MTU ${m.mtu}`;
    const w = ctx.measureText(label).width;
    const tx = x + 4 * devicePixelRatio + w > u.bbox.left + u.bbox.width ? x - 4 * devicePixelRatio - w : x + 4 * devicePixelRatio;
    const pad = 3 * devicePixelRatio;
    ctx.fillStyle = getComputedStyle(document.documentElement).getPropertyValue('--bg-panel').trim() || '#fff';
    ctx.fillRect(tx - pad, top + 2 * devicePixelRatio, w + 2 * pad, 16 * devicePixelRatio);
    ctx.fillStyle = color;
    ctx.fillText(label, tx, top + 14 * devicePixelRatio);
    ctx.restore();
  };
}

/** The charts section. `ctx`: {api, onError}. */
export function createCharts(ctx) {
  const section = document.getElementById('view-charts');
  const status = section.querySelector('[data-role="status"]');
  const grid = section.querySelector('[data-role="charts"]');
  const note = section.querySelector('[data-role="note"]');
  const ifaceSel = section.querySelector('#charts-interface');
  const rangeSel = section.querySelector('#charts-range');

  const figs = {
    throughput: figure('chart-throughput', 'Throughput', 'Bits per second received and sent, per window.'),
    retrans: figure('chart-retrans', 'Retransmit ratio by congestion control', 'Share of data segments retransmitted per algorithm (local sockets) and of all TCP seen on the interface.'),
    drops: figure('chart-drops', 'Kernel drops by reason', 'Packets the kernel dropped on the interface per window, by drop reason.'),
    sizes: figure('chart-sizes', 'Packet sizes', 'Segments per size bucket over the range; the dashed line marks the interface MTU.'),
    pmtu: figure('chart-pmtu', 'Path MTU probes', 'Probed path MTU toward the tunnel endpoints, the interface MTU, and the MTU plus the encapsulation overhead; big markers are probes that found a blackhole.'),
  };
  grid.append(...Object.values(figs).map((f) => f.el));
  const eventsEl = section.querySelector('[data-role="events"]');
  /** The interface's and the host's configuration changes in the range, oldest first. */
  let chartEvents = [];
  for (const name of ['throughput', 'retrans', 'drops', 'pmtu']) {
    figs[name].marks = eventMarkersHook(() => chartEvents, palette().warn, figs[name].el);
  }

  /** The changes marked on the charts, numbered as their markers. */
  function renderEvents() {
    section.dataset.eventCount = String(chartEvents.length);
    replaceContent(eventsEl, chartEvents.length
      ? [h('h2', {}, 'Configuration changes in the range'),
        h('ol', { class: 'events' }, chartEvents.map((e, i) => h('li', { dataset: { testid: 'chart-event', kind: e.kind } },
          `◆${i + 1} ${formatTimestamp(e.ts_ms)}: ${e.text}`)))]
      : []);
  }

  let samples = [];
  let sampleIface = '';
  let interfaces = [];
  let marker = { x: null, mtu: -1 };
  let lastSig = '';
  let schemeKey = '';

  function chooseInterface(names) {
    if (ifaceSel.value && names.includes(ifaceSel.value)) return ifaceSel.value;
    if (ifaceSel.value && !names.length) return ifaceSel.value;
    const watched = interfaces.filter((i) => i.watched).map((i) => i.name);
    return ifaceSel.value || watched[0] || names[0] || '';
  }

  function fillInterfaces() {
    const names = interfaces.filter((i) => i.watched).map((i) => i.name).sort();
    const current = chooseInterface(names);
    const want = names.includes(current) || !current ? names : [current, ...names];
    const have = [...ifaceSel.options].map((o) => o.value);
    if (JSON.stringify(want) !== JSON.stringify(have)) {
      replaceContent(ifaceSel, want.map((n) => h('option', { value: n }, n)));
    }
    ifaceSel.value = current;
  }

  function render() {
    const p = palette();
    renderEvents();
    const s = orderSamples(samples);
    section.dataset.interface = sampleIface;
    section.dataset.sampleCount = String(s.length);
    replaceContent(note, s.length
      ? `${s.length} window${s.length === 1 ? '' : 's'} of ${sampleIface}, from ${formatTimestamp(s[0].ts_ms)} to ${formatTimestamp(s[s.length - 1].ts_ms)}.`
      : sampleIface ? `No samples of ${sampleIface} in this range yet: the agent records one per window (every 10 s by default).`
        : 'No watched interface to chart.');
    const last = s[s.length - 1];

    // Throughput
    const tp = throughputSeries(s);
    draw(figs.throughput, `tp|${schemeKey}`, (w) => timeOpts(p, w, [
      lineSeries('receive', p.series[0], formatBitRate),
      lineSeries('transmit', p.series[1], formatBitRate),
    ], shortBits, 70), tp.data);
    figs.throughput.summary.textContent = last ? `Latest window: ${formatBitRate(last.rx_bps)} received, ${formatBitRate(last.tx_bps)} sent.` : '';

    // Retransmit ratio by cc
    const rt = retransSeries(s);
    draw(figs.retrans, `rt|${rt.labels.join(',')}|${schemeKey}`, (w) => timeOpts(p, w,
      rt.labels.map((l, i) => lineSeries(l, i === rt.labels.length - 1 ? p.fg : p.series[i % p.series.length], (v) => formatPercent(v),
        i === rt.labels.length - 1 ? { dash: [4, 4] } : {})),
      (v) => formatPercent(v, 1), 60, { scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max || 0, 0.01)] } } }), rt.data);
    if (last) {
      const per = Object.entries(last.retrans_by_cc || {}).map(([cc, r]) => `${cc} ${formatPercent(r.ratio)}`);
      figs.retrans.summary.textContent = `Latest window: ${per.length ? per.join(', ') : 'no local TCP sockets'}; all TCP ${formatPercent(last.tcp_retrans_ratio)}.`;
    } else figs.retrans.summary.textContent = '';

    // Drops by reason
    const dr = dropsSeries(s);
    const drLabels = dr.labels.length ? dr.labels : ['drops'];
    const drData = dr.labels.length ? dr.data : [dr.data[0], dr.data[0].map(() => 0)];
    draw(figs.drops, `dr|${drLabels.join(',')}|${schemeKey}`, (w) => timeOpts(p, w,
      drLabels.map((l, i) => lineSeries(l, p.series[i % p.series.length], formatCount, { paths: globalThis.uPlot.paths.stepped({ align: 1 }) })),
      shortCount, 50, { scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max || 0, 1)] } } }), drData);
    const totals = dr.labels.map((l, i) => [l, dr.data[i + 1].reduce((a, b) => a + b, 0)]).filter(([, n]) => n > 0);
    figs.drops.summary.textContent = s.length ? (totals.length ? `In the range: ${totals.map(([l, n]) => `${l} ${formatCount(n)}`).join(', ')}.` : 'No drops in the range.') : '';

    // Packet size histogram with the MTU marked
    const hist = sizeHistogram(s);
    marker = { x: hist.markerX, mtu: hist.mtu };
    const xsIdx = hist.labels.map((_, i) => i);
    const narrow = () => figs.sizes.plot.clientWidth < 520;
    const short = (l) => l.replace('<=', '').replace('>9000', '>9k');
    draw(figs.sizes, `sz|${hist.labels.join(',')}|${schemeKey}`, (w) => ({
      width: w,
      height: 200,
      legend: { show: false },
      cursor: { show: true, points: { show: false }, drag: { x: false, y: false } },
      scales: { x: { time: false, range: () => [-0.5, hist.labels.length - 0.5] }, y: { range: (u, min, max) => [0, Math.max(max || 0, 1)] } },
      series: [
        { label: 'bucket' },
        { label: 'segments', stroke: p.series[0], fill: p.series[0], width: 1,
          paths: globalThis.uPlot.paths.bars({ size: [0.7, 60], align: 0 }), points: { show: false } },
      ],
      axes: [
        { ...axisStyle(p), splits: () => xsIdx, values: (u, vals) => vals.map((v) => (narrow() && v % 2 === 1 ? '' : (hist.labels[v] !== undefined ? short(hist.labels[v]) : ''))), label: 'segment size ≤ bytes', labelSize: 18, labelFont: '11px system-ui, sans-serif' },
        { ...axisStyle(p), size: 50, values: (u, vals) => vals.map(shortCount) },
      ],
      hooks: { draw: [mtuMarkerHook(() => marker, p.crit)] },
    }), [xsIdx, hist.counts]);
    const pct = (n) => (hist.total ? formatPercent(n / hist.total, 1) : 'n/a');
    figs.sizes.summary.textContent = hist.total
      ? `${formatCount(hist.total)} segments; MTU ${known(hist.mtu) ? hist.mtu : 'n/a'}; ${formatCount(hist.aboveMtu)} (${pct(hist.aboveMtu)}) in buckets wholly above the MTU. ` +
        hist.labels.map((l, i) => `${l}: ${formatCount(hist.counts[i])}`).join(', ')
      : 'No segments counted in the range.';

    // Path MTU over time
    const pm = pmtuSeries(s);
    draw(figs.pmtu, `pm|${schemeKey}`, (w) => timeOpts(p, w, [
      lineSeries(pm.labels[0], p.series[0], formatMtu, { points: { show: true, size: 6 } }),
      lineSeries(pm.labels[1], p.series[1], formatMtu),
      lineSeries(pm.labels[2], p.series[2], formatMtu, { dash: [6, 4] }),
      { label: pm.labels[3], stroke: p.crit, fill: p.crit, width: 0, paths: () => null, points: { show: true, size: 12, stroke: p.crit, fill: p.crit },
        value: (u, v) => (v === null || v === undefined ? 'no' : 'BLACKHOLE') },
    ], (v) => String(v), 50, { scales: { x: { time: true }, y: { range: (u, min, max) => [Math.max(0, (min ?? 1200) - 40), (max ?? 1500) + 40] } } }), pm.data);
    if (last) {
      const probed = [...s].reverse().find((x) => known(x.path_mtu) && x.path_mtu > 0);
      figs.pmtu.summary.textContent = probed
        ? `Last probe: path MTU ${formatMtu(probed.path_mtu)}${probed.probe_blackhole ? ', blackhole' : ''} (${formatTimestamp(probed.ts_ms)}); interface MTU ${formatMtu(last.mtu)}, expected overhead ${formatMtu(last.overhead_expected)}.`
        : `Not probed in this range; interface MTU ${formatMtu(last.mtu)}.`;
    } else figs.pmtu.summary.textContent = '';
    section.dataset.state = 'ready';
  }

  function resize() {
    for (const f of Object.values(figs)) {
      if (!f.u) continue;
      const w = Math.max(f.plot.clientWidth, 200);
      if (Math.abs(f.u.width - w) > 1) f.u.setSize({ width: w, height: 200 });
    }
  }
  // Resizing a chart changes the grid's height, which would notify the observer again in
  // the same frame (the browser's "ResizeObserver loop" notice). So only a new *width*
  // counts, and the charts are resized in the next frame, outside the observer's delivery.
  if (typeof ResizeObserver === 'function') {
    let width = 0;
    let pending = false;
    const ro = new ResizeObserver((entries) => {
      const w = Math.round(entries[entries.length - 1].contentRect.width);
      if (w === width || section.hidden || pending) return;
      width = w;
      pending = true;
      requestAnimationFrame(() => { pending = false; resize(); });
    });
    ro.observe(grid);
  }
  const scheme = window.matchMedia('(prefers-color-scheme: dark)');
  schemeKey = scheme.matches ? 'dark' : 'light';
  scheme.addEventListener('change', () => {
    schemeKey = scheme.matches ? 'dark' : 'light';
    if (!section.hidden) render();
  });

  const syncHash = () => {
    const hash = routeHash('charts', { interface: ifaceSel.value || undefined });
    if (location.hash !== hash) history.replaceState(null, '', hash);
  };
  ifaceSel.addEventListener('change', () => { syncHash(); lastSig = ''; ctx.refreshNow(); });
  rangeSel.addEventListener('change', () => { lastSig = ''; ctx.refreshNow(); });

  /** Where the range starts: it ends at the agent's clock (its last window), not the
   * browser's, so a skewed browser clock does not empty the charts. */
  function rangeStart(iface) {
    const known = interfaces.find((i) => i.name === iface);
    const end = known && known.updated_ms > 0 ? Math.max(known.updated_ms, 0) : Date.now();
    return end - (RANGES[rangeSel.value] || RANGES['1h']);
  }

  async function fetchSamples(iface) {
    const since = rangeStart(iface);
    const out = [];
    for (let page = 0; page < MAX_PAGES; page++) {
      const res = await ctx.api.samples({ interface: iface, since, offset: page * 1000 });
      const items = res.items || [];
      out.push(...items);
      if (items.length === 0 || out.length >= (res.total || 0) || items.length < (res.limit || 1000)) break;
    }
    return out;
  }

  return {
    name: 'charts',
    section,
    show(params) {
      if (params.interface && selectValue(ifaceSel, params.interface)) lastSig = '';
      // uPlot measured its width while hidden: fit the charts now that they are visible.
      requestAnimationFrame(resize);
    },
    async refresh() {
      try {
        interfaces = (await ctx.api.interfaces()).interfaces || [];
        fillInterfaces();
        const iface = ifaceSel.value;
        const got = iface ? await fetchSamples(iface) : [];
        const changes = iface ? (await ctx.api.events({ since: rangeStart(iface) })).items || [] : [];
        replaceContent(status);
        const sig = JSON.stringify([iface, got, rangeSel.value, changes]);
        samples = got;
        chartEvents = eventsFor(changes, iface);
        sampleIface = iface;
        if (sig !== lastSig) {
          lastSig = sig;
          render();
        }
        return true;
      } catch (err) {
        if (ctx.onError(err)) return false;
        replaceContent(status, errorBox(err.message, samples.length ? '(showing the last answer)' : ''));
        if (!lastSig) render();
        return false;
      }
    },
  };
}
