// Configuration changes marked on the time charts: a dotted vertical line at each change
// in the chart's range, numbered; the numbers match the list under the charts
// (views/charts.js). A uPlot draw hook.

import { markersIn } from '../events.js';

/**
 * A draw hook marking `getEvents()` (events oldest first) on a time chart, in `color`.
 * Sets `data-markers` on `el` to the number of markers drawn (what the browser test reads).
 */
export function eventMarkersHook(getEvents, color, el) {
  return (u) => {
    const events = getEvents();
    const marks = markersIn(events, u.scales.x.min, u.scales.x.max);
    el.dataset.markers = String(marks.length);
    if (!marks.length) return;
    const numbers = new Map(events.map((e, i) => [e.text, i + 1]));
    const dpr = devicePixelRatio;
    const ctx = u.ctx;
    const top = u.bbox.top;
    const bottom = u.bbox.top + u.bbox.height;
    ctx.save();
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 1.5 * dpr;
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    for (const m of marks) {
      const x = Math.round(u.valToPos(m.x, 'x', true));
      ctx.setLineDash([2 * dpr, 3 * dpr]);
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, bottom);
      ctx.stroke();
      ctx.setLineDash([]);
      const n = numbers.get(m.label.split('; ')[0]);
      if (n) ctx.fillText(`◆${n}`, x + 3 * dpr, top + 12 * dpr);
    }
    ctx.restore();
  };
}
