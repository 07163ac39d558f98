// Findings: active and recent (GET /api/v1/findings?state=all&since=…), most important first.

import { h, replaceContent } from '../dom.js';
import { sortFindings, findingKey, filterRows } from '../model.js';
import { renderFinding } from './finding.js';
import { rangedList } from './ranged.js';

/** The findings section. `ctx`: {api, onError, refreshNow, setFindingCount}. */
export function createFindings(ctx) {
  const section = document.getElementById('view-findings');
  const counts = section.querySelector('[data-role="counts"]');
  const stateSel = section.querySelector('#findings-state');
  const ifaceSel = section.querySelector('#findings-interface');
  const filter = section.querySelector('#findings-filter');

  const { view, render } = rangedList({
    name: 'findings',
    ctx,
    section,
    rangeSel: section.querySelector('#findings-range'),
    ifaceSel,
    notLoaded: 'No findings loaded.',
    fetch: (since) => ctx.api.findings({ state: 'all', since }),
    onItems: (items) => ctx.setFindingCount(items.filter((f) => f.state === 'active').length, null),
    render(items, total, list) {
      const state = stateSel.value;
      const shown = filterRows(
        items.filter((f) => state === 'all' || f.state === state),
        filter.value,
        (f) => [f.id, f.interface, f.subject, f.severity, f.summary, f.fix],
        ifaceSel.value);
      const active = items.filter((f) => f.state === 'active').length;
      replaceContent(counts, `${shown.length} shown; ${active} active and ${items.length - active} resolved in the range`,
        total > items.length ? ` (${total} in all, the latest ${items.length} fetched)` : '', '.');
      replaceContent(list, shown.length
        ? sortFindings(shown).map((f) => renderFinding(f, { level: 2, key: findingKey(f) }))
        : h('p', { class: 'empty ok-text' }, items.length ? 'No finding matches the filters.' : '✔ No findings in this range.'));
      section.dataset.state = 'ready';
    },
  });
  stateSel.addEventListener('change', render);
  filter.addEventListener('input', render);
  return view;
}
