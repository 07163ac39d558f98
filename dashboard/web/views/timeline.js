// The configuration timeline (GET /api/v1/events): what changed on the host and when,
// newest first, with the old and new values; filtered by interface and time.

import { h, replaceContent, relTime } from '../dom.js';
import { formatTimestamp } from '../format.js';
import { kindLabel } from '../events.js';
import { rangedList } from './ranged.js';

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

/** The timeline section. `ctx`: {api, onError, refreshNow}. */
export function createTimeline(ctx) {
  const section = document.getElementById('view-timeline');
  const counts = section.querySelector('[data-role="counts"]');
  const ifaceSel = section.querySelector('#timeline-interface');

  return rangedList({
    name: 'timeline',
    ctx,
    section,
    rangeSel: section.querySelector('#timeline-range'),
    ifaceSel,
    notLoaded: 'No changes loaded.',
    fetch: (since) => ctx.api.events({ since }),
    render(items, total, list) {
      const iface = ifaceSel.value;
      const shown = items.filter((e) => !iface || e.interface === iface || !e.interface);
      replaceContent(counts, `${shown.length} change${shown.length === 1 ? '' : 's'} shown`,
        total > items.length ? ` (${total} in the range, the latest ${items.length} fetched)` : '', '.');
      replaceContent(list, shown.length
        ? h('ol', { class: 'events' }, shown.map(renderEvent))
        : h('p', { class: 'empty ok-text' }, 'No configuration change in this range.'));
      section.dataset.eventCount = String(shown.length);
      section.dataset.state = 'ready';
    },
  }).view;
}
