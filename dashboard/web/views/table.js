// A sortable data table: header buttons (click, Enter or Space) cycle ascending/descending,
// aria-sort tells assistive technology the current order. Rows re-render on setRows().

import { h, replaceContent } from '../dom.js';
import { sortRows, nextSort } from '../model.js';

/**
 * `columns`: [{key, label, title?, numeric?, value(row) (sorting), render?(row) (cell)}].
 * `rowAttrs(row)`: attributes of the <tr> (class, dataset). `caption`: the table's name.
 */
export function createTable({ testid, caption, columns, rowAttrs = () => ({}), initialSort = null, empty = 'Nothing to show.' }) {
  let sort = initialSort;
  let rows = [];
  const thead = h('thead');
  const tbody = h('tbody');
  const captionEl = h('caption', {}, caption);
  const table = h('table', { class: 'data', dataset: { testid } }, captionEl, thead, tbody);
  const wrap = h('div', { class: 'table-wrap', role: 'region', tabindex: '0', 'aria-label': caption }, table);

  function header() {
    replaceContent(thead, h('tr', {}, columns.map((c) => {
      const active = sort && sort.key === c.key;
      const dir = active ? sort.dir : 'none';
      return h('th', {
        scope: 'col',
        'aria-sort': dir,
        class: c.numeric ? 'num' : '',
        dataset: { col: c.key },
      }, h('button', {
        type: 'button',
        class: 'sort',
        title: c.title || null,
        dataset: { focusKey: `${testid}:sort:${c.key}`, testid: `${testid}-sort-${c.key}` },
        onclick: () => {
          sort = nextSort(sort, c.key);
          header();
          body();
        },
      }, c.label, h('span', { class: 'sort-icon', 'aria-hidden': 'true' },
        dir === 'ascending' ? ' ▲' : dir === 'descending' ? ' ▼' : ' ⇅')));
    })));
  }

  function body() {
    const col = sort && columns.find((c) => c.key === sort.key);
    const ordered = col ? sortRows(rows, col, sort.dir) : rows;
    if (!ordered.length) {
      replaceContent(tbody, h('tr', {}, h('td', { colspan: columns.length, class: 'empty' }, empty)));
      return;
    }
    replaceContent(tbody, ordered.map((r) => h('tr', rowAttrs(r), columns.map((c, i) => {
      const content = c.render ? c.render(r) : c.value(r);
      const attrs = { class: c.numeric ? 'num' : '', dataset: { col: c.key } };
      // The first column names the row: a row header for screen readers.
      return i === 0 ? h('th', { scope: 'row', ...attrs }, content) : h('td', attrs, content);
    }))));
  }

  header();
  body();
  return {
    el: wrap,
    setRows(next) {
      rows = next;
      body();
    },
    setCaption(text) {
      captionEl.textContent = text;
    },
  };
}
