// Connections: local TCP sockets (GET /api/v1/sockets) and packet flows (GET /api/v1/flows),
// sortable and filterable; cubic/reno sockets on lossy interfaces are highlighted.

import {
  h,
  replaceContent,
  errorBox,
  relTime,
  selectValue,
  fillInterfaceOptions,
} from '../dom.js';
import {
  formatMicros, formatBytes, formatBitRate, formatPercent, formatCount, formatEndpoint,
  protocolName, NA,
} from '../format.js';
import { filterRows, lossyInterfaces, isLossyCubic, routeHash } from '../model.js';
import { LIMITS, limitText, limitTitle } from '../limits.js';
import { createTable } from './table.js';

const num = (v) => (typeof v === 'number' ? v : null);

const SOCKET_COLUMNS = [
  { key: 'conn', label: 'connection', value: (s) => `${s.local} → ${s.remote}`,
    render: (s) => h('span', { class: 'conn' }, h('span', {}, s.local), ' → ', h('span', {}, s.remote)) },
  { key: 'interface', label: 'interface', value: (s) => s.interface },
  { key: 'state', label: 'state', value: (s) => (s.closed ? `closed (${s.closed_from || s.state})` : s.state) },
  { key: 'cc', label: 'cc', title: 'congestion control algorithm', value: (s) => s.cc,
    render: (s) => [h('code', {}, s.cc || NA), s.lossyCubic ? h('span', { class: 'warn-text', title: 'loss-based congestion control on a lossy path: bbr would keep its throughput', dataset: { testid: 'lossy-cubic' } }, ' ▲ lossy') : null] },
  { key: 'srtt', label: 'srtt', numeric: true, title: 'smoothed round-trip time', value: (s) => num(s.srtt_us), render: (s) => formatMicros(s.srtt_us) },
  { key: 'cwnd', label: 'cwnd', numeric: true, title: 'congestion window, segments', value: (s) => num(s.cwnd), render: (s) => formatCount(s.cwnd) },
  { key: 'retransmits', label: 'retrans', numeric: true, title: 'segments retransmitted in the last window (ratio to data segments sent)', value: (s) => num(s.retransmits),
    render: (s) => `${formatCount(s.retransmits)} (${formatPercent(s.retrans_ratio)})` },
  { key: 'total_retrans', label: 'total retr', numeric: true, title: "segments retransmitted over the connection's life", value: (s) => num(s.total_retrans), render: (s) => formatCount(s.total_retrans) },
  { key: 'pmtu', label: 'pmtu', numeric: true, title: 'path MTU the socket uses', value: (s) => num(s.pmtu), render: (s) => formatCount(s.pmtu) },
  { key: 'mss', label: 'mss', numeric: true, value: (s) => num(s.mss), render: (s) => formatCount(s.mss) },
  { key: 'limit', label: 'limited by', title: 'what held the connection back most of the last window, and for how much of it (hover a value for why; the legend below explains each)',
    value: (s) => limitText(s),
    render: (s) => h('span', { title: limitTitle(s), dataset: { testid: 'limit', limit: s.limit || null } }, limitText(s) || NA) },
  { key: 'throughput', label: 'throughput', numeric: true, title: 'acknowledged throughput in the last window', value: (s) => num(s.throughput_bps), render: (s) => formatBitRate(s.throughput_bps) },
  { key: 'bytes', label: 'bytes ↑/↓', numeric: true, title: 'bytes sent (acknowledged by the peer) / received; sorts by bytes sent',
    value: (s) => num(s.bytes_acked), render: (s) => `${formatBytes(s.bytes_acked)} / ${formatBytes(s.bytes_received)}` },
];

/** Ports only mean something for TCP, UDP and SCTP. */
const hasPorts = (f) => f.protocol === 6 || f.protocol === 17 || f.protocol === 132;
const src = (f) => formatEndpoint(f.src, hasPorts(f) ? f.src_port : null);
const dst = (f) => formatEndpoint(f.dst, hasPorts(f) ? f.dst_port : null);

const FLOW_COLUMNS = [
  { key: 'flow', label: 'flow', value: (f) => `${src(f)} → ${dst(f)}`,
    render: (f) => h('span', { class: 'conn' }, h('span', {}, src(f)), ' → ', h('span', {}, dst(f))) },
  { key: 'interface', label: 'interface', value: (f) => f.interface },
  { key: 'direction', label: 'dir', value: (f) => f.direction },
  { key: 'protocol', label: 'proto', value: (f) => protocolName(f.protocol) },
  { key: 'encap', label: 'encap', value: (f) => f.encap },
  { key: 'packets', label: 'packets', numeric: true, value: (f) => num(f.packets), render: (f) => formatCount(f.packets) },
  { key: 'segments', label: 'segments', numeric: true, value: (f) => num(f.segments), render: (f) => formatCount(f.segments) },
  { key: 'bytes', label: 'bytes', numeric: true, value: (f) => num(f.bytes), render: (f) => formatBytes(f.bytes) },
  { key: 'max_segment', label: 'max seg', numeric: true, title: 'largest IP length of one segment', value: (f) => num(f.max_segment), render: (f) => formatCount(f.max_segment) },
  { key: 'syn_mss', label: 'syn mss', numeric: true, value: (f) => (f.syn_mss ? f.syn_mss : null), render: (f) => (f.syn_mss ? String(f.syn_mss) : '–') },
  { key: 'retransmits', label: 'retrans', numeric: true, value: (f) => num(f.retransmits), render: (f) => formatCount(f.retransmits) },
  { key: 'last_seen', label: 'last seen', numeric: true, value: (f) => num(f.last_seen_ms), render: (f) => relTime(f.last_seen_ms) },
];

/** What each "limited by" value means, in plain words. */
function limitLegend() {
  return h('details', { class: 'legend', dataset: { testid: 'limit-legend' } },
    h('summary', {}, 'What "limited by" means'),
    h('dl', {}, Object.values(LIMITS).flatMap((l) => [h('dt', {}, l.label), h('dd', {}, l.explain)])));
}

function textsOf(columns) {
  return (row) => columns.map((c) => c.value(row));
}

/** The connections section. `ctx`: {api, onError, navigate}. */
export function createTraffic(ctx) {
  const section = document.getElementById('view-traffic');
  const status = section.querySelector('[data-role="status"]');
  const filter = section.querySelector('#traffic-filter');
  const ifaceSel = section.querySelector('#traffic-interface');
  const counts = section.querySelector('[data-role="counts"]');

  const sockets = createTable({
    testid: 'sockets-table',
    caption: 'Local TCP connections (last window)',
    columns: SOCKET_COLUMNS,
    initialSort: { key: 'throughput', dir: 'descending' },
    empty: 'No TCP connections match.',
    rowAttrs: (s) => ({
      class: s.lossyCubic ? 'row-warn' : '',
      dataset: { testid: 'socket-row', cc: s.cc, interface: s.interface, lossyCubic: s.lossyCubic ? 'true' : null },
    }),
  });
  const flows = createTable({
    testid: 'flows-table',
    caption: 'Packet flows (data plane)',
    columns: FLOW_COLUMNS,
    initialSort: { key: 'bytes', dir: 'descending' },
    empty: 'No flows match.',
    rowAttrs: (f) => ({ dataset: { testid: 'flow-row', interface: f.interface } }),
  });
  section.querySelector('[data-role="sockets"]').append(sockets.el, limitLegend());
  section.querySelector('[data-role="flows"]').append(flows.el);

  const data = { sockets: null, flows: null, interfaces: [], socketsTotal: 0, flowsTotal: 0 };
  let lastSig = '';

  function render() {
    const lossy = lossyInterfaces(data.interfaces, data.sockets || []);
    const iface = ifaceSel.value;
    const q = filter.value;
    const socks = filterRows((data.sockets || []).map((s) => ({ ...s, lossyCubic: isLossyCubic(s, lossy) })), q, textsOf(SOCKET_COLUMNS), iface);
    const fl = filterRows(data.flows || [], q, textsOf(FLOW_COLUMNS), iface);
    sockets.setRows(socks);
    flows.setRows(fl);
    const more = (shown, total, noun) => (total > shown ? `${total} ${noun} in all, the first ${shown} fetched` : '');
    const lossyList = [...lossy];
    replaceContent(counts,
      `${socks.length} of ${(data.sockets || []).length} connections, ${fl.length} of ${(data.flows || []).length} flows shown. `,
      more((data.sockets || []).length, data.socketsTotal, 'connections'), ' ',
      more((data.flows || []).length, data.flowsTotal, 'flows'),
      lossyList.length ? h('span', { class: 'warn-text' }, ` ▲ Lossy (≥ 1 % retransmitted): ${lossyList.join(', ')}; cubic/reno connections there are highlighted.`) : null);
    section.dataset.state = 'ready';
  }

  const update = () => {
    const params = { interface: ifaceSel.value || undefined };
    if (location.hash !== routeHash('traffic', params)) history.replaceState(null, '', routeHash('traffic', params));
    render();
  };
  filter.addEventListener('input', render);
  ifaceSel.addEventListener('change', update);

  return {
    name: 'traffic',
    section,
    show(params) {
      if (selectValue(ifaceSel, params.interface)) render();
    },
    async refresh() {
      const [ifs, socks, fls] = await Promise.allSettled([ctx.api.interfaces(), ctx.api.sockets(), ctx.api.flows()]);
      const problems = [ifs, socks, fls].filter((r) => r.status === 'rejected').map((r) => r.reason);
      if (problems.some((e) => ctx.onError(e))) return false;
      if (ifs.status === 'fulfilled') data.interfaces = ifs.value.interfaces || [];
      if (socks.status === 'fulfilled') { data.sockets = socks.value.items || []; data.socketsTotal = socks.value.total || 0; }
      if (fls.status === 'fulfilled') { data.flows = fls.value.items || []; data.flowsTotal = fls.value.total || 0; }
      const names = new Set(data.interfaces.map((i) => i.name));
      for (const r of [...(data.sockets || []), ...(data.flows || [])]) if (r.interface) names.add(r.interface);
      fillInterfaceOptions(ifaceSel, [...names].sort());
      replaceContent(status, [...new Set(problems.map((e) => e.message))].map((m) => errorBox(m, data.sockets ? '(showing the last answer)' : '')));
      const sig = JSON.stringify(data);
      if (sig !== lastSig) {
        lastSig = sig;
        render();
      }
      return problems.length === 0;
    },
  };
}
