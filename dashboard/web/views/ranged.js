// A view that lists what the API returns over a chosen time range (findings, configuration
// changes): the range and interface selectors, the location hash kept in step with the
// interface, the fetch with its error box, and a render only when the answer changed.

import { h, replaceContent, errorBox, selectValue, fillInterfaceOptions } from '../dom.js';
import { routeHash } from '../model.js';

/** Time ranges offered, in ms (0: all). */
const RANGES = { '1h': 3600e3, '24h': 86400e3, '7d': 7 * 86400e3, all: 0 };

/**
 * The view object for app.js and a `render()` for the view's own controls.
 * `spec`: {name, ctx, section, rangeSel, ifaceSel, fetch(since) → page {items, total},
 * render(items, total, list), notLoaded (text while nothing could be fetched), onItems(items)?}.
 */
export function rangedList(spec) {
  const { name, ctx, section, rangeSel, ifaceSel } = spec;
  const status = section.querySelector('[data-role="status"]');
  const list = section.querySelector('[data-role="list"]');
  let items = null;
  let total = 0;
  let lastSig = '';

  const render = () => {
    if (items) spec.render(items, total, list);
  };
  const syncHash = () => {
    const hash = routeHash(name, { interface: ifaceSel.value || undefined });
    if (location.hash !== hash) history.replaceState(null, '', hash);
  };
  ifaceSel.addEventListener('change', () => { syncHash(); render(); });
  rangeSel.addEventListener('change', () => { lastSig = ''; ctx.refreshNow(); });

  const view = {
    name,
    section,
    show(params) {
      if (selectValue(ifaceSel, params.interface)) render();
    },
    async refresh() {
      const range = RANGES[rangeSel.value] ?? RANGES['24h'];
      let page;
      try {
        page = await spec.fetch(range ? Date.now() - range : undefined);
      } catch (err) {
        if (ctx.onError(err)) return false;
        replaceContent(status, errorBox(err.message, items ? '(showing the last answer)' : ''));
        if (!items) replaceContent(list, h('p', { class: 'empty' }, spec.notLoaded));
        return false;
      }
      replaceContent(status);
      items = page.items || [];
      total = page.total || items.length;
      if (spec.onItems) spec.onItems(items);
      fillInterfaceOptions(ifaceSel, [...new Set(items.map((x) => x.interface).filter(Boolean))].sort());
      const sig = JSON.stringify(items);
      if (sig !== lastSig) {
        lastSig = sig;
        render();
      }
      return true;
    },
  };
  return { view, render };
}
