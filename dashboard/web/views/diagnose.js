// "Diagnose now": POST /api/v1/diagnose/{iface} (5-10 s), progress while it runs, 429 when
// the agent is already diagnosing, and the report: findings with evidence and fix, notes.

import { h, badge, replaceContent, errorBox, relTime } from '../dom.js';
import { formatMtu, formatPercent, formatDuration, known, shortKey, formatHandshakeAge } from '../format.js';
import { worstSeverity, severityLabel, mtuStatus } from '../model.js';
import { renderFinding } from './finding.js';
import { peerPath } from '../peers.js';

/** The facts lines the CLI prints above the findings, for the report's header. */
function factLines(report) {
  const f = report.facts || {};
  const lines = [];
  const iface = f.iface || {};
  lines.push(`${report.interface} (${report.kind || iface.kind || 'unknown'}), MTU ${known(iface.mtu) ? iface.mtu : 'n/a'}, observed ${formatDuration(report.duration_s)}`);
  const m = mtuStatus({ mtu: iface.mtu, facts: f });
  if (m.tunnel) {
    lines.push(`tunnel: ${m.kind} over ${m.family || 'ip'}, underlay ${m.underlayIface || 'unknown'} (route MTU ${formatMtu(m.underlayMtu)}, ${known(m.pathMtu) && m.pathMtu > 0 ? `probed path MTU ${formatMtu(m.pathMtu)}` : 'path MTU not probed'})`);
    lines.push(`overhead: expected ${formatMtu(m.overheadExpected)}, measured ${known(m.overheadMeasured) ? formatMtu(m.overheadMeasured) : 'n/a'}; largest MTU that fits: ${known(m.maxMtu) ? m.maxMtu : 'n/a'}`);
  }
  for (const p of (f.peers || []).slice(0, 8)) {
    const host = p.host ? ` (${p.host})` : '';
    const path = peerPath(p);
    const via = path && path.path !== 'direct' ? `, ${path.text}` : '';
    lines.push(`peer ${shortKey(p.name)}${host} ${p.endpoint ? `= ${p.endpoint}` : ''}${via}${known(p.handshake_age_s) || p.handshake_age_s === -1 ? `, handshake ${formatHandshakeAge(p.handshake_age_s)}` : ''}`);
  }
  const t = f.traffic;
  if (t) {
    lines.push(`traffic: ${t.rx_segments ?? 'n/a'} segments in, ${t.tx_segments ?? 'n/a'} out; TCP retransmitted ${formatPercent(t.tcp_retrans_ratio)}; drops ${f.drops ? f.drops.total : 'n/a'}`);
  }
  if (f.probe && f.probe.ran) {
    lines.push(`probe: ${f.probe.target || 'target'}: path MTU ${formatMtu(f.probe.path_mtu)}${f.probe.blackhole ? ', BLACKHOLE (larger packets vanish without ICMP too-big)' : ''}${f.probe.lossy ? ' (lossy, not used)' : ''}`);
  }
  return lines;
}

function renderReport(iface, report, doneMs, onClose) {
  const worst = worstSeverity(report.findings);
  const sev = worst ? severityLabel(worst) : { level: 'ok', label: 'no findings', symbol: '✔' };
  const findings = report.findings || [];
  const notes = report.notes || [];
  return [
    h('div', { class: 'report-head' },
      h('h2', { id: 'diagnose-title', tabindex: '-1' }, `Diagnosis of ${iface}`),
      badge(sev.level, worst ? `worst: ${sev.label}` : sev.label, sev.symbol, { dataset: { testid: 'diagnose-worst' } }),
      relTime(doneMs, 'finished '),
      h('button', { type: 'button', class: 'btn btn-small', onclick: onClose, dataset: { testid: 'diagnose-close' } }, 'Close report')),
    h('pre', { class: 'facts-lines' }, factLines(report).join('\n')),
    h('h3', {}, findings.length ? `Findings (${findings.length})` : 'Findings'),
    findings.length
      ? h('div', { class: 'finding-list', dataset: { testid: 'diagnose-findings' } },
        findings.map((f) => renderFinding({ ...f, interface: report.interface }, { level: 4, key: `diag:${f.id}:${f.subject || ''}` })))
      : h('p', { class: 'ok-text', dataset: { testid: 'diagnose-findings' } }, '✔ Nothing above info: no rule fired.'),
    notes.length
      ? [h('h3', {}, 'Notes'), h('ul', { class: 'notes', dataset: { testid: 'diagnose-notes' } }, notes.map((n) => h('li', {}, n)))]
      : null,
    h('details', { class: 'raw' }, h('summary', {}, 'Raw JSON report'), h('pre', {}, JSON.stringify(report, null, 2))),
  ];
}

/**
 * The diagnosis controller and its report panel (`#diagnose-panel`). `ctx`: {api, onError}.
 * Views call start(iface), running() and onChange(fn).
 */
export function createDiagnoser(ctx) {
  const panel = document.getElementById('diagnose-panel');
  const listeners = [];
  let running = null;
  let timer = null;

  const changed = () => listeners.forEach((fn) => fn());

  function show(state, iface, ...content) {
    panel.hidden = false;
    panel.dataset.state = state;
    panel.dataset.interface = iface;
    panel.setAttribute('aria-busy', state === 'running' ? 'true' : 'false');
    replaceContent(panel, ...content);
  }

  function close() {
    panel.hidden = true;
    panel.dataset.state = 'closed';
    replaceContent(panel);
    const btn = document.querySelector(`[data-testid="diagnose-${CSS.escape(panel.dataset.interface || '')}"]`);
    if (btn) btn.focus();
  }

  async function start(iface) {
    if (running) return;
    running = iface;
    const t0 = Date.now();
    const line = h('span', { id: 'diagnose-status-line' }, `Diagnosing ${iface}: observing traffic for 5 s and probing the path MTU…`);
    const elapsed = h('span', { class: 'muted' }, ' 0 s');
    show('running', iface,
      h('div', { class: 'running', role: 'status' },
        h('span', { class: 'spinner', 'aria-hidden': 'true' }), ' ', line, elapsed),
      h('progress', { 'aria-label': `diagnosis of ${iface} in progress` }));
    timer = setInterval(() => { elapsed.textContent = ` ${Math.round((Date.now() - t0) / 1000)} s`; }, 1000);
    changed();
    try {
      const report = await ctx.api.diagnose(iface);
      show('done', iface, renderReport(iface, report, Date.now(), close));
      const title = panel.querySelector('#diagnose-title');
      if (title) {
        title.focus({ preventScroll: true });
        panel.scrollIntoView({ block: 'start', behavior: 'smooth' });
      }
    } catch (err) {
      if (ctx.onError(err)) {
        show('error', iface, errorBox('the diagnosis needs the API token.', '', 'diagnose-error'));
      } else if (err.busy) {
        show('busy', iface,
          h('div', { class: 'error warn', role: 'alert', dataset: { testid: 'diagnose-busy' } },
            h('strong', {}, 'Busy: '), 'the agent is already running a diagnosis (only one runs at a time). Try again in a few seconds. '),
          h('button', { type: 'button', class: 'btn', onclick: () => start(iface) }, `Try ${iface} again`),
          ' ', h('button', { type: 'button', class: 'btn', onclick: close }, 'Dismiss'));
      } else {
        const hint = err.code === 'unknown_interface' ? '(the interface disappeared?)' : '';
        show('error', iface, errorBox(`diagnosing ${iface} failed: ${err.message}`, hint, 'diagnose-error'),
          h('button', { type: 'button', class: 'btn', onclick: () => start(iface) }, 'Try again'),
          ' ', h('button', { type: 'button', class: 'btn', onclick: close }, 'Dismiss'));
      }
    } finally {
      clearInterval(timer);
      running = null;
      changed();
    }
  }

  return {
    start,
    running: () => running,
    onChange: (fn) => listeners.push(fn),
  };
}
