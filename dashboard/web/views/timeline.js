// The configuration timeline (GET /api/v1/events): what changed on the host and when,
// newest first, with the old and new values; filtered by interface and time.

import { h, replaceContent, errorBox, relTime, selectValue, fillInterfaceOptions } from '../dom.js';
import { formatTimestamp } from '../format.js';
import { kindLabel } from '../events.js';
import { routeHash } from '../model.js';

/** Time ranges offered, in ms. */
const RANGES = { '1h': 3600e3, '24h': 86400e3, '7d': 7 * 86400e3, all: 0 };

/** One event as a list item. */
function renderEvent(e) {
  return h('li', {
    class: `event change-${e.change}`,
    dataset: { testid: 'event', kind: e.kind, interface: e.interface || '', change: e.change },
  },
  h('span', { class: 'event-time', title: formatTimestamp(e.ts_ms) }, relTime(e.ts_ms)),
  h('span', { class: 'tag' }, kindLabel(e.kind)),
  e.interface ? h('span', { class: 'tag' }, e.interface) : h('span', { class: 'tag muted' }, 'host'),
  h('span', { class: 'event-text', dataset: { testid: 'event-text' } }, e.text));
}

/** The timeline section. `ctx`: {api, onError}. */
export function createTimeline(ctx) {
  const section = document.getElementById('view-timeline');
  const status = section.querySelector('[data-role="status"]');
  const list = section.querySelector('[data-role="list"]');
  const counts = section.querySelector('[data-role="counts"]');
  const rangeSel = section.querySelector('#timeline-range');
  const ifaceSel = section.querySelector('#timeline-interface');
  let items = null;
  let total = 0;
  let lastSig = '';

  function render() {
    if (!items) return;
    const iface = ifaceSel.value;
    const shown = items.filter((e) => !iface || e.interface === iface || !e.interface);
    replaceContent(counts, `${shown.length} change${shown.length === 1 ? '' : 's'} shown`,
      total > items.length ? ` (${total} in the range, the latest ${items.length} fetched)` : '', '.');
    replaceContent(list, shown.length
      ? h('ol', { class: 'events' }, shown.map(renderEvent))
      : h('p', { class: 'empty ok-text' }, 'No configuration change in this range.'));
    section.dataset.eventCount = String(shown.length);
    section.dataset.state = 'ready';
  }

  const syncHash = () => {
    const hash = routeHash('timeline', { interface: ifaceSel.value || undefined });
    if (location.hash !== hash) history.replaceState(null, '', hash);
  };
  ifaceSel.addEventListener('change', () => { syncHash(); render(); });
  rangeSel.addEventListener('change', () => { lastSig = ''; ctx.refreshNow(); });

  return {
    name: 'timeline',
    section,
    show(params) {
      if (selectValue(ifaceSel, params.interface)) render();
    },
    async refresh() {
      const range = RANGES[rangeSel.value] ?? RANGES['24h'];
      let page;
      try {
        page = await ctx.api.events({ since: range ? Date.now() - range : undefined });
      } catch (err) {
        if (ctx.onError(err)) return false;
        replaceContent(status, errorBox(err.message, items ? '(showing the last answer)' : ''));
        if (!items) replaceContent(list, h('p', { class: 'empty' }, 'No changes loaded.'));
        return false;
      }
      replaceContent(status);
      items = page.items || [];
      total = page.total || items.length;
      fillInterfaceOptions(ifaceSel, [...new Set(items.map((e) => e.interface).filter(Boolean))].sort());
      const sig = JSON.stringify(items);
      if (sig !== lastSig) {
        lastSig = sig;
        render();
      }
      return true;
    },
  };
}
