// Time-axis ticks and labels for the charts: times a person reads at every range. Pure
// functions, no DOM: Node imports this module in the unit tests (unit/timeaxis.test.mjs).
//
// The charts' x values are seconds since the UNIX epoch (model.js); labels are local time.
// Seconds show only over short ranges, milliseconds only over ranges of a few seconds, and
// ranges of days label midnights with dates.

/** Below this range (seconds) ticks may fall between seconds and labels show milliseconds. */
export const SUBSECOND_RANGE_S = 5;
/** Below this range (seconds) labels show seconds: HH:MM:SS. */
export const SECONDS_RANGE_S = 5 * 60;
/** Below this range (seconds) labels show the time of day: HH:MM; above it, dates. */
export const DAYS_RANGE_S = 2 * 86400;

const MIN = 60;
const HOUR = 3600;
const DAY = 86400;

/** Tick spacings (seconds) from one second to a year: whole units a person counts in. */
const WHOLE_INCRS = [
  1, 2, 5, 10, 15, 30,
  MIN, 2 * MIN, 5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN,
  HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR, 6 * HOUR, 8 * HOUR, 12 * HOUR,
  DAY, 2 * DAY, 3 * DAY, 7 * DAY, 14 * DAY, 30 * DAY, 91 * DAY, 182 * DAY, 365 * DAY,
];
/** Sub-second spacings, only offered over ranges under SUBSECOND_RANGE_S. */
const SUBSECOND_INCRS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5];

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * The tick spacings uPlot may choose from for an x range of `rangeS` seconds (the axis
 * option `incrs`). No spacing under a second unless the range is under a few seconds, so
 * a chart of two samples 10 s apart ticks every second or more, never every 500 ms.
 */
export function timeAxisIncrs(rangeS) {
  return Number.isFinite(rangeS) && rangeS < SUBSECOND_RANGE_S
    ? [...SUBSECOND_INCRS, ...WHOLE_INCRS]
    : WHOLE_INCRS;
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

/** The finest part of a local time that is not zero: 'ms', 's', 'min' or 'day' (midnight). */
function finestPart(d) {
  if (d.getMilliseconds() !== 0) return 'ms';
  if (d.getSeconds() !== 0) return 's';
  if (d.getHours() !== 0 || d.getMinutes() !== 0) return 'min';
  return 'day';
}

const ORDER = ['day', 'min', 's', 'ms'];
const finer = (a, b) => (ORDER.indexOf(a) > ORDER.indexOf(b) ? a : b);

/** The precision the range asks for (the ticks may need a finer one). */
function rangePrecision(rangeS) {
  if (!Number.isFinite(rangeS) || rangeS < SECONDS_RANGE_S) return 's';
  if (rangeS < DAYS_RANGE_S) return 'min';
  return 'day';
}

function clock(d, precision) {
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (precision === 'min' || precision === 'day') return hm;
  const hms = `${hm}:${pad(d.getSeconds())}`;
  return precision === 's' ? hms : `${hms}.${pad(d.getMilliseconds(), 3)}`;
}

const dateOf = (d) => `${MONTHS[d.getMonth()]} ${d.getDate()}`;
const dayKey = (d) => `${d.getFullYear()}-${d.getMonth()}-${d.getDate()}`;

/**
 * Labels of the ticks `splits` (seconds since the epoch) on an axis spanning `rangeS`
 * seconds (the axis option `values`), in local time:
 * - under SECONDS_RANGE_S: "09:52:10" (with ".500" only where a tick falls between
 *   seconds, which happens only over ranges under SUBSECOND_RANGE_S);
 * - under DAYS_RANGE_S: "09:50" (seconds only if a tick is not on a whole minute);
 * - longer: "Nov 27" at midnights, "Nov 27 12:00" elsewhere.
 * A time-of-day label also carries the date where the day changes from the previous tick.
 * Ticks that are not numbers get an empty label.
 */
export function timeAxisLabels(splits, rangeS) {
  const dates = splits.map((s) => (Number.isFinite(s) ? new Date(Math.round(s * 1000)) : null));
  let precision = rangePrecision(rangeS);
  for (const d of dates) if (d) precision = finer(precision, finestPart(d));
  let prevDay = null;
  return dates.map((d) => {
    if (!d) return '';
    const key = dayKey(d);
    const newDay = prevDay !== null && key !== prevDay;
    prevDay = key;
    if (precision === 'day') return dateOf(d);
    if (precision === 'min' && rangeS >= DAYS_RANGE_S) {
      return finestPart(d) === 'day' ? dateOf(d) : `${dateOf(d)} ${clock(d, 'min')}`;
    }
    return newDay ? `${dateOf(d)} ${clock(d, precision)}` : clock(d, precision);
  });
}
