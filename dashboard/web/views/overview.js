// Overview: one card per interface or tunnel (GET /api/v1/interfaces), with local sockets
// per congestion control (GET /api/v1/sockets) and active findings (GET /api/v1/findings).

import { h, badge, relTime, replaceContent, errorBox } from '../dom.js';
import {
  formatBitRate, formatPacketRate, formatPercent, formatMtu, formatHandshakeAge,
  formatBytes, known, NA,
} from '../format.js';
import { hasPaths, peerLabel, peerPath, offlineNote } from '../peers.js';
import {
  health, mtuStatus, sortInterfaces, ccSummary, interfaceRetransRatio, findingCounts,
  LOSS_BASED_CC, LOSSY_RATIO, routeHash,
} from '../model.js';

/** Handshakes older than this are stale (WireGuard re-keys every 120 s; the rule says 180). */
const STALE_HANDSHAKE_S = 180;
/** Peers listed before the rest fold into "N more". */
const PEERS_SHOWN = 8;

function kv(label, ...value) {
  return h('div', { class: 'kv-row' }, h('dt', {}, label), h('dd', {}, ...value));
}

function mtuRows(i) {
  const m = mtuStatus(i);
  const rows = [kv('MTU',
    h('span', { class: 'num mtu', dataset: { testid: `mtu-${i.name}` } }, known(i.mtu) ? String(i.mtu) : NA),
    ' bytes')];
  if (!m.tunnel) return rows;
  const underlay = [m.underlayIface || 'underlay unknown', `, route MTU ${formatMtu(m.underlayMtu)}`];
  underlay.push(known(m.pathMtu) && m.pathMtu > 0 ? `, probed path MTU ${formatMtu(m.pathMtu)}` : ', path MTU not probed');
  rows.push(kv('Underlay', `${m.kind || 'tunnel'} over ${m.family || 'ip'}: `, ...underlay));
  let verdict = null;
  if (m.fits === false) {
    verdict = badge('critical', `exceeds it by ${m.excess} B`, '✖', { dataset: { testid: `mtu-verdict-${i.name}` } });
  } else if (m.fits === true) {
    verdict = badge('ok', m.excess < 0 ? `fits (${-m.excess} B spare)` : 'fits exactly', '✔', { dataset: { testid: `mtu-verdict-${i.name}` } });
  }
  rows.push(kv('Largest MTU that fits',
    h('span', { class: 'num', dataset: { testid: `max-mtu-${i.name}` } }, known(m.maxMtu) ? String(m.maxMtu) : NA),
    known(m.maxMtu) ? ' bytes ' : ' ', verdict));
  const measured = known(m.overheadMeasured) ? formatMtu(m.overheadMeasured) : 'n/a (no full-size traffic seen)';
  let mismatch = null;
  if (known(m.overheadMeasured) && known(m.overheadExpected) && m.overheadMeasured !== m.overheadExpected) {
    mismatch = h('span', { class: 'note' }, ` (differs by ${m.overheadMeasured - m.overheadExpected} B)`);
  }
  rows.push(kv('Overhead', `expected ${formatMtu(m.overheadExpected)}, measured ${measured}`, mismatch));
  return rows;
}

function throughputRow(i) {
  const r = i.rates || {};
  return kv('Throughput',
    h('span', { class: 'nowrap' }, `↓ ${formatBitRate(r.rx_bps)}`), ' · ',
    h('span', { class: 'nowrap' }, `↑ ${formatBitRate(r.tx_bps)}`), ' ',
    h('span', { class: 'muted nowrap' }, `(${formatPacketRate(r.rx_pps)} in, ${formatPacketRate(r.tx_pps)} out)`));
}

function retransRow(i, summary) {
  const t = i.facts && i.facts.traffic;
  const passive = t && known(t.tcp_retrans_ratio) ? t.tcp_retrans_ratio : -1;
  const byCc = summary.get(i.name);
  const parts = [];
  parts.push(h('span', { class: 'nowrap', dataset: { testid: `retrans-${i.name}` } },
    `${formatPercent(passive)} of TCP segments`));
  const ratio = interfaceRetransRatio(i, summary);
  const lossy = ratio >= LOSSY_RATIO;
  if (lossy) parts.push(' ', badge('warning', 'lossy', '▲'));
  if (byCc && byCc.size) {
    const items = [...byCc.values()].sort((a, b) => a.cc.localeCompare(b.cc)).map((a) =>
      h('li', { dataset: { cc: a.cc } },
        h('code', {}, a.cc), `: ${formatPercent(a.ratio)} over ${a.sockets} socket${a.sockets === 1 ? '' : 's'}`,
        lossy && LOSS_BASED_CC.has(a.cc) ? h('span', { class: 'warn-text' }, ' (loss-based on a lossy path)') : null));
    parts.push(h('ul', { class: 'cc-list', 'aria-label': 'retransmit ratio per congestion control' }, items));
  }
  return kv('Retransmits', ...parts);
}

function peersBlock(i) {
  const peers = (i.facts && i.facts.peers) || [];
  if (!peers.length) return null;
  const isWg = i.kind === 'wireguard' || (i.facts.tunnel && i.facts.tunnel.kind === 'wireguard');
  // Other tunnels name a peer by its endpoint: one column is enough then.
  const named = peers.some((p) => p.name && p.name !== p.endpoint);
  // Tailscale reports how traffic reaches each peer (direct, DERP relay, peer relay).
  const paths = hasPaths(peers);
  const row = (p) => {
    const stale = isWg && (p.handshake_age_s === -1 || p.handshake_age_s > STALE_HANDSHAKE_S);
    const label = peerLabel(p, isWg);
    const path = peerPath(p);
    return h('tr', {
      class: stale ? 'row-warn' : '',
      dataset: { testid: 'peer-row', peer: p.name || '', host: p.host || '', path: (path && path.path) || '' },
    },
    h('th', { scope: 'row' }, named ? h('code', { title: label.title }, label.text) : (p.endpoint || p.name || NA),
      offlineNote(p) ? h('span', { class: 'muted' }, offlineNote(p)) : null),
    named && !paths ? h('td', {}, p.endpoint || NA) : null,
    // The path names the endpoint when direct: it replaces the endpoint column.
    paths ? h('td', {}, path ? (path.level === 'ok' ? path.text : badge(path.level, path.text, path.level === 'warning' ? '▲' : 'ℹ')) : NA) : null,
    isWg ? h('td', {}, formatHandshakeAge(p.handshake_age_s), stale ? h('span', { class: 'warn-text' }, ' (stale)') : null) : null,
    h('td', { class: 'num' }, `${formatBytes(p.rx_bytes_delta)} / ${formatBytes(p.tx_bytes_delta)}`));
  };
  const head = h('thead', {}, h('tr', {},
    h('th', { scope: 'col' }, named ? 'peer' : 'endpoint'),
    named && !paths ? h('th', { scope: 'col' }, 'endpoint') : null,
    paths ? h('th', { scope: 'col' }, 'path') : null,
    isWg ? h('th', { scope: 'col' }, 'handshake') : null,
    h('th', { scope: 'col', class: 'num' }, 'rx / tx in window')));
  const shown = peers.slice(0, PEERS_SHOWN);
  const rest = peers.slice(PEERS_SHOWN);
  const daemon = i.facts.tunnel && i.facts.tunnel.daemon === 'tailscaled' ? ' (Tailscale)' : '';
  return h('div', { class: 'peers' },
    h('h3', {}, `${isWg ? `WireGuard peers${daemon}` : 'Endpoints'} (${peers.length})`),
    h('div', { class: 'table-wrap', role: 'region', tabindex: '0', 'aria-label': `${i.name} peers` },
      h('table', { class: 'compact', dataset: { testid: `peers-${i.name}` } }, head,
        h('tbody', {}, shown.map(row)))),
    rest.length
      ? h('details', {}, h('summary', {}, `${rest.length} more`),
        h('div', { class: 'table-wrap' }, h('table', { class: 'compact' }, h('tbody', {}, rest.map(row)))))
      : null);
}

function findingsRow(i, counts) {
  const c = counts.get(i.name);
  if (!c || !c.total) return kv('Findings', 'none active');
  const parts = ['critical', 'warning', 'info'].filter((s) => c[s]).map((s) => `${c[s]} ${s}`);
  return kv('Findings', h('a', { href: routeHash('findings', { interface: i.name }) },
    `${c.total} active (${parts.join(', ')})`));
}

function card(i, summary, counts, diag) {
  const hl = health(i);
  const running = diag.running();
  const mine = running === i.name;
  const diagBtn = h('button', {
    type: 'button',
    class: 'btn btn-primary',
    'aria-disabled': running ? 'true' : null,
    'aria-describedby': running && !mine ? 'diagnose-status-line' : null,
    dataset: { testid: `diagnose-${i.name}`, focusKey: `diagnose:${i.name}` },
    onclick: () => { if (!diag.running()) diag.start(i.name); },
  }, mine ? [h('span', { class: 'spinner', 'aria-hidden': 'true' }), ' Diagnosing…'] : 'Diagnose now');
  return h('article', {
    class: `card sev-border-${hl.level}`,
    'aria-labelledby': `card-title-${i.name}`,
    dataset: { testid: `card-${i.name}`, interface: i.name, health: hl.level, watched: String(Boolean(i.watched)) },
  },
  h('header', { class: 'card-head' },
    h('h2', { id: `card-title-${i.name}` }, i.name),
    h('span', { class: 'tag' }, i.kind || 'unknown'),
    i.up === false ? h('span', { class: 'tag tag-down' }, 'down') : null,
    badge(hl.level, hl.label, hl.symbol, { dataset: { testid: `health-${i.name}` } })),
  h('dl', { class: 'kv' },
    mtuRows(i),
    i.watched ? throughputRow(i) : null,
    i.watched && i.facts ? retransRow(i, summary) : null,
    i.watched ? findingsRow(i, counts) : null),
  i.watched && i.facts ? peersBlock(i) : null,
  h('div', { class: 'card-actions' },
    diagBtn,
    i.watched ? h('a', { class: 'btn', href: routeHash('charts', { interface: i.name }) }, 'Charts') : null,
    i.watched ? h('a', { class: 'btn', href: routeHash('traffic', { interface: i.name }) }, 'Connections') : null),
  i.updated_ms ? h('p', { class: 'updated muted' }, relTime(i.updated_ms, 'updated ')) : null);
}

/**
 * The overview section. `ctx`: {api, diagnoser, onError(err) -> bool handled, setFindingCount}.
 */
export function createOverview(ctx) {
  const section = document.getElementById('view-overview');
  const status = section.querySelector('[data-role="status"]');
  const cards = section.querySelector('[data-role="cards"]');
  const showAll = section.querySelector('[data-role="show-unwatched"]');
  const last = { interfaces: null, sockets: [], findings: [] };
  let lastSig = '';

  function render() {
    if (!last.interfaces) return;
    const summary = ccSummary(last.sockets);
    const counts = findingCounts(last.findings);
    const all = sortInterfaces(last.interfaces);
    const list = showAll.checked ? all : all.filter((i) => i.watched);
    const hidden = all.length - list.length;
    if (!all.length) {
      replaceContent(cards, h('p', { class: 'empty' }, 'The agent reports no interfaces yet.'));
    } else {
      replaceContent(cards,
        list.length ? list.map((i) => card(i, summary, counts, ctx.diagnoser)) : null,
        hidden ? h('p', { class: 'muted hidden-note' }, `${hidden} interface${hidden === 1 ? ' is' : 's are'} not watched (tick “Show unwatched” to list ${hidden === 1 ? 'it' : 'them'}).`) : null);
    }
    cards.dataset.state = 'ready';
  }

  // The choice survives reloads (hosts with many container veths want them hidden).
  const SHOW_KEY = 'netdoctor.showUnwatched';
  try {
    showAll.checked = localStorage.getItem(SHOW_KEY) === '1';
  } catch {
    // storage disabled: default (hidden)
  }
  showAll.addEventListener('change', () => {
    try {
      localStorage.setItem(SHOW_KEY, showAll.checked ? '1' : '0');
    } catch {
      // storage disabled: the choice lasts for this page
    }
    render();
  });
  ctx.diagnoser.onChange(() => render());

  return {
    name: 'overview',
    section,
    async refresh() {
      const [ifs, socks, finds] = await Promise.allSettled([
        ctx.api.interfaces(),
        ctx.api.sockets(),
        ctx.api.findings({ state: 'active' }),
      ]);
      const problems = [];
      for (const r of [ifs, socks, finds]) if (r.status === 'rejected') problems.push(r.reason);
      if (problems.some((e) => ctx.onError(e))) {
        if (!last.interfaces) replaceContent(cards, h('p', { class: 'empty' }, 'Waiting for the API token (above).'));
        return false;
      }
      if (ifs.status === 'fulfilled') last.interfaces = ifs.value.interfaces || [];
      if (socks.status === 'fulfilled') last.sockets = socks.value.items || [];
      if (finds.status === 'fulfilled') {
        last.findings = finds.value.items || [];
        ctx.setFindingCount(finds.value.total ?? last.findings.length, last.findings);
      }
      const messages = [...new Set(problems.map((e) => e.message))];
      replaceContent(status, messages.map((m) => errorBox(m, last.interfaces ? '(showing the last answer)' : '')));
      const sig = JSON.stringify([last, showAll.checked]);
      if (sig !== lastSig) {
        lastSig = sig;
        render();
      }
      if (!last.interfaces) {
        replaceContent(cards, h('p', { class: 'empty' }, 'No interface data yet.'));
        cards.dataset.state = 'error';
      }
      return problems.length === 0;
    },
  };
}
