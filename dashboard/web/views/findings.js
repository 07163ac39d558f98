// Findings: active and recent (GET /api/v1/findings?state=all&since=…), most important first.

import { h, replaceContent, errorBox, selectValue, fillInterfaceOptions } from '../dom.js';
import { sortFindings, findingKey, filterRows, routeHash } from '../model.js';
import { renderFinding } from './finding.js';

/** Time ranges offered, in ms. */
const RANGES = { '1h': 3600e3, '24h': 86400e3, '7d': 7 * 86400e3, all: 0 };

/** The findings section. `ctx`: {api, onError, setFindingCount}. */
export function createFindings(ctx) {
  const section = document.getElementById('view-findings');
  const status = section.querySelector('[data-role="status"]');
  const list = section.querySelector('[data-role="list"]');
  const counts = section.querySelector('[data-role="counts"]');
  const stateSel = section.querySelector('#findings-state');
  const rangeSel = section.querySelector('#findings-range');
  const ifaceSel = section.querySelector('#findings-interface');
  const filter = section.querySelector('#findings-filter');
  let items = null;
  let total = 0;
  let lastSig = '';

  function render() {
    if (!items) return;
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
  }

  const syncHash = () => {
    const hash = routeHash('findings', { interface: ifaceSel.value || undefined });
    if (location.hash !== hash) history.replaceState(null, '', hash);
  };
  stateSel.addEventListener('change', render);
  filter.addEventListener('input', render);
  ifaceSel.addEventListener('change', () => { syncHash(); render(); });
  rangeSel.addEventListener('change', () => { lastSig = ''; ctx.refreshNow(); });

  return {
    name: 'findings',
    section,
    show(params) {
      if (selectValue(ifaceSel, params.interface)) render();
    },
    async refresh() {
      const range = RANGES[rangeSel.value] ?? RANGES['24h'];
      let page;
      try {
        page = await ctx.api.findings({ state: 'all', since: range ? Date.now() - range : undefined });
      } catch (err) {
        if (ctx.onError(err)) return false;
        replaceContent(status, errorBox(err.message, items ? '(showing the last answer)' : ''));
        if (!items) replaceContent(list, h('p', { class: 'empty' }, 'No findings loaded.'));
        return false;
      }
      replaceContent(status);
      items = page.items || [];
      total = page.total || items.length;
      ctx.setFindingCount(items.filter((f) => f.state === 'active').length, null);
      fillInterfaceOptions(ifaceSel, [...new Set(items.map((f) => f.interface).filter(Boolean))].sort());
      const sig = JSON.stringify(items);
      if (sig !== lastSig) {
        lastSig = sig;
        render();
      }
      return true;
    },
  };
}
