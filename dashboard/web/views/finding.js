// One finding (a stored finding from /api/v1/findings or one of a diagnosis report):
// severity as text and colour, summary, evidence, the exact fix (monospace, copyable), times.

import { h, badge, relTime, copyText } from '../dom.js';
import { formatEvidenceValue } from '../format.js';
import { severityLabel } from '../model.js';

let copySeq = 0;

/** A "Copy" button for the fix in `code`; a polite status line says when it worked. */
function copyButton(text, code, key) {
  const id = `copy-status-${++copySeq}`;
  const status = h('span', { class: 'copy-status', id, role: 'status', 'aria-live': 'polite' });
  const btn = h('button', {
    type: 'button',
    class: 'btn btn-small',
    'aria-describedby': id,
    dataset: { testid: 'copy-fix', focusKey: `copy:${key}` },
    onclick: async () => {
      const ok = await copyText(text, code);
      status.textContent = ok ? 'Copied.' : 'Selected: press Ctrl+C to copy.';
      setTimeout(() => { status.textContent = ''; }, 4000);
    },
  }, 'Copy fix');
  return [btn, status];
}

/**
 * Renders a finding. `level` is the heading level of its title (3 in lists under an h2).
 * Stored findings (with `state`) also show their lifecycle times.
 */
export function renderFinding(f, { level = 3, key = '' } = {}) {
  const sev = severityLabel(f.severity);
  const stored = 'state' in f;
  const k = key || `${f.id}|${f.interface || ''}|${f.subject || ''}`;
  const evidence = Object.entries(f.evidence || {});
  const code = h('code', { dataset: { testid: 'finding-fix' } }, f.fix || '');
  return h('article', {
    class: `finding sev-border-${sev.level}${stored && f.state !== 'active' ? ' resolved' : ''}`,
    dataset: {
      testid: 'finding',
      findingId: f.id,
      interface: f.interface || '',
      severity: f.severity,
      state: f.state || 'reported',
    },
  },
  h('header', { class: 'finding-head' },
    badge(sev.level, sev.label.toUpperCase(), sev.symbol, { dataset: { testid: 'finding-severity' } }),
    h(`h${level}`, { class: 'finding-title' }, h('code', {}, f.id)),
    f.interface ? h('span', { class: 'tag' }, f.interface) : null,
    stored ? h('span', { class: `tag state-${f.state}` }, f.state === 'active' ? 'active' : 'resolved') : null),
  f.subject ? h('p', { class: 'subject' }, 'About: ', h('code', {}, f.subject)) : null,
  h('p', { class: 'summary', dataset: { testid: 'finding-summary' } }, f.summary || ''),
  f.cause ? h('p', { class: 'cause', dataset: { testid: 'finding-cause' } }, h('span', { class: 'fix-label' }, 'What changed'), ' ', f.cause) : null,
  evidence.length
    ? h('details', { class: 'evidence' },
      h('summary', {}, `Evidence (${evidence.length})`),
      h('dl', {}, evidence.map(([name, v]) => [h('dt', {}, name), h('dd', {}, formatEvidenceValue(name, v, f.unknown?.[name]))])))
    : null,
  f.fix
    ? h('div', { class: 'fix' },
      h('span', { class: 'fix-label' }, 'Fix'),
      h('pre', {}, code),
      copyButton(f.fix, code, k))
    : null,
  stored
    ? h('p', { class: 'times' },
      relTime(f.opened_ms, 'opened '),
      ' · ', relTime(f.last_seen_ms, 'last seen '),
      f.resolved_ms ? [' · ', relTime(f.resolved_ms, 'resolved ')] : null,
      typeof f.evaluations === 'number' ? ` · ${f.evaluations} evaluation${f.evaluations === 1 ? '' : 's'}` : null)
    : null,
  f.reference ? h('p', { class: 'reference' }, h('a', { href: f.reference, rel: 'noopener noreferrer', target: '_blank' }, 'Read more')) : null);
}
