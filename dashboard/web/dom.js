// DOM helpers. Text always goes in through textContent (never innerHTML), so nothing the
// agent reports (interface names, rule summaries, evidence) can inject markup.

import { formatRelative, formatTimestamp } from './format.js';

/**
 * Creates an element: h('button', {class: 'x', dataset: {testid: 'y'}, onclick: fn}, 'text', child).
 * Attributes: `class`, `dataset` (object), `on<event>` (listener), booleans (set when true),
 * anything else with setAttribute. Children: strings, numbers, nodes, arrays, null/false (skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') for (const [dk, dv] of Object.entries(v)) { if (dv !== undefined && dv !== null) el.dataset[dk] = String(dv); }
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/**
 * Replaces the children of `container`, keeping keyboard focus: if the focused element
 * carries `data-focus-key`, the element with the same key in the new content gets focus.
 */
export function replaceContent(container, ...children) {
  const active = document.activeElement;
  const key = active && container.contains(active) && active.dataset ? active.dataset.focusKey : null;
  container.replaceChildren();
  append(container, children);
  if (key) {
    const again = container.querySelector(`[data-focus-key="${cssEscape(key)}"]`);
    if (again) again.focus({ preventScroll: true });
  }
}

function cssEscape(s) {
  return window.CSS && CSS.escape ? CSS.escape(s) : String(s).replace(/["\\]/g, '\\$&');
}

/** A <time> showing a relative time, kept fresh by refreshTimes(); absolute time in the title. */
export function relTime(tsMs, prefix = '') {
  if (!tsMs || tsMs <= 0) return h('span', {}, prefix ? `${prefix}n/a` : 'n/a');
  return h('time', {
    datetime: new Date(tsMs).toISOString(),
    title: formatTimestamp(tsMs),
    dataset: { ts: tsMs, prefix },
  }, prefix + formatRelative(tsMs));
}

/** Updates every relative <time> in the document (called every second). */
export function refreshTimes(root = document) {
  const now = Date.now();
  for (const t of root.querySelectorAll('time[data-ts]')) {
    const text = (t.dataset.prefix || '') + formatRelative(Number(t.dataset.ts), now);
    if (t.textContent !== text) t.textContent = text;
  }
}

/** An inline error box (role=alert) with the message and an optional hint. */
export function errorBox(message, hint = '', testid = 'error') {
  return h('div', { class: 'error', role: 'alert', dataset: { testid } },
    h('strong', {}, 'Error: '), message, hint ? h('span', { class: 'hint' }, ` ${hint}`) : null);
}

/** A severity badge: symbol + text + colour (colour is never the only signal). */
export function badge(level, label, symbol, extra = {}) {
  return h('span', { class: `badge sev-${level}`, ...extra },
    h('span', { class: 'badge-symbol', 'aria-hidden': 'true' }, symbol), ' ', label);
}

/** Copies `text` to the clipboard; falls back to selecting `el`'s text (insecure contexts). */
export async function copyText(text, el) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the selection fallback
  }
  if (el) {
    const range = document.createRange();
    range.selectNodeContents(el);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    try {
      return document.execCommand('copy');
    } catch {
      return false;
    }
  }
  return false;
}

/** Selects `value` in `select`, adding it as an option when the list lacks it (an
 * interface named in a link before its data arrived). Returns true when the choice changed. */
export function selectValue(select, value) {
  if (value === undefined || value === select.value) return false;
  if (![...select.options].some((o) => o.value === value)) {
    select.append(h('option', { value }, value));
  }
  select.value = value;
  return true;
}

/** Sets the options of an interface filter to "all interfaces" plus `names`, rebuilding
 * them only when the list changed, and keeps the current choice if it is still offered. */
export function fillInterfaceOptions(select, names) {
  const current = select.value;
  const want = ['', ...names];
  const have = [...select.options].map((o) => o.value);
  if (JSON.stringify(want) !== JSON.stringify(have)) {
    replaceContent(select, want.map((n) => h('option', { value: n }, n || 'all interfaces')));
  }
  select.value = want.includes(current) ? current : '';
}
