// The dashboard's entry point: hash routing between the views, auto-refresh (pausable),
// the API token prompt, relative times, and errors shown inline (never a blank page).

import { createApi } from './api.js';
import { replaceContent, refreshTimes, relTime, errorBox } from './dom.js';
import { isBrowserNotice, parseRoute, routeHash, VIEWS } from './model.js';
import { createOverview } from './views/overview.js';
import { createFindings } from './views/findings.js';
import { createTraffic } from './views/traffic.js';
import { createCharts } from './views/charts.js';
import { createTimeline } from './views/timeline.js';
import { createDiagnoser } from './views/diagnose.js';

// boot.js shows an error if this module never runs (a file missing, a browser too old).
window.netdoctorStarted = true;

/** Auto-refresh period. The agent closes a window every 10 s by default. */
const REFRESH_MS = 5000;

const $ = (sel) => document.querySelector(sel);
const globalStatus = $('#global-status');

function showFatal(message) {
  replaceContent(globalStatus, errorBox(message, 'Reload the page to try again.', 'fatal-error'));
}

// Browser notices (isBrowserNotice) are logged, never shown as a crash.
window.addEventListener('error', (e) => {
  if (isBrowserNotice(e)) {
    console.warn(`browser notice (not an error of the dashboard): ${e.message}`);
    return;
  }
  showFatal(`the dashboard hit a bug: ${e.message}`);
});
window.addEventListener('unhandledrejection', (e) => showFatal(`the dashboard hit a bug: ${e.reason && e.reason.message ? e.reason.message : e.reason}`));

let storage = null;
try {
  storage = window.localStorage;
} catch {
  storage = null;
}
const api = createApi({ fetchFn: window.fetch.bind(window), storage });

// --- state -----------------------------------------------------------------------------
let paused = false;
let needsToken = false;
let inFlight = null;
let current = null;
let lastOk = 0;

const updatedEl = $('[data-role="updated"]');
const pauseBtn = $('[data-role="pause"]');
const refreshBtn = $('[data-role="refresh-now"]');
const countEl = $('[data-testid="finding-count"]');
const tokenSection = $('#token-form-section');
const tokenForm = $('#token-form');
const tokenInput = $('#token-input');
const tokenError = $('[data-role="token-error"]');
const forgetBtn = $('[data-role="forget-token"]');
$('[data-testid="host"]').textContent = location.host;

/** Handles errors every view shares; true when the view should stop (token needed). */
function onError(err) {
  if (err && err.unauthorized) {
    askToken(api.token() ? 'The stored token was refused; enter the current one.' : '');
    return true;
  }
  return false;
}

function askToken(message) {
  needsToken = true;
  tokenSection.hidden = false;
  tokenError.hidden = !message;
  tokenError.textContent = message;
  renderStatus();
  if (document.activeElement !== tokenInput) tokenInput.focus();
}

tokenForm.addEventListener('submit', (e) => {
  e.preventDefault();
  api.setToken(tokenInput.value);
  tokenInput.value = '';
  needsToken = false;
  tokenSection.hidden = true;
  forgetBtn.hidden = !api.token();
  refreshNow();
});

forgetBtn.hidden = !api.token();
forgetBtn.addEventListener('click', () => {
  api.setToken('');
  forgetBtn.hidden = true;
  refreshNow();
});

function setFindingCount(n) {
  countEl.hidden = !n;
  countEl.textContent = n ? String(n) : '';
  countEl.setAttribute('aria-label', `${n} active`);
}

const diagnoser = createDiagnoser({ api, onError });
const ctx = { api, onError, setFindingCount, diagnoser, refreshNow: () => refreshNow() };
const views = {
  overview: createOverview(ctx),
  findings: createFindings(ctx),
  traffic: createTraffic(ctx),
  charts: createCharts(ctx),
  timeline: createTimeline(ctx),
};

// --- status line and refresh loop ---------------------------------------------------------
function renderStatus() {
  let text;
  if (needsToken) text = 'Waiting for the API token. ';
  else if (paused) text = 'Auto-refresh paused. ';
  else text = `Auto-refresh every ${REFRESH_MS / 1000} s. `;
  replaceContent(updatedEl, text, lastOk ? relTime(lastOk, 'Updated ') : (needsToken ? '' : 'Loading…'));
  pauseBtn.setAttribute('aria-pressed', paused ? 'true' : 'false');
  pauseBtn.textContent = paused ? 'Resume auto-refresh' : 'Pause auto-refresh';
}

async function refreshNow() {
  if (inFlight) return inFlight;
  const view = current;
  inFlight = (async () => {
    refreshBtn.setAttribute('aria-busy', 'true');
    try {
      const ok = await views[view].refresh();
      if (ok) lastOk = Date.now();
      if (view !== 'overview' && !needsToken) {
        // Keep the nav's active-findings count fresh on every view (total = matches).
        try {
          if (view !== 'findings') setFindingCount((await api.findings({ state: 'active', limit: 1 })).total || 0);
        } catch (err) {
          onError(err);
        }
      }
    } catch (err) {
      // Views handle API errors themselves; anything else is a bug worth showing.
      replaceContent(views[view].section.querySelector('[data-role="status"]'), errorBox(String(err && err.message ? err.message : err)));
    } finally {
      refreshBtn.removeAttribute('aria-busy');
      inFlight = null;
      renderStatus();
    }
  })();
  return inFlight;
}

pauseBtn.addEventListener('click', () => {
  paused = !paused;
  renderStatus();
  if (!paused) refreshNow();
});
refreshBtn.addEventListener('click', () => refreshNow());

setInterval(() => {
  if (!paused && !needsToken && !document.hidden) refreshNow();
}, REFRESH_MS);
setInterval(() => refreshTimes(), 1000);
document.addEventListener('visibilitychange', () => {
  if (!document.hidden && !paused && !needsToken) refreshNow();
});

// --- routing -----------------------------------------------------------------------------
function route() {
  const { view, params } = parseRoute(location.hash);
  const changed = view !== current;
  for (const name of VIEWS) {
    views[name].section.hidden = name !== view;
    const link = document.querySelector(`nav [data-view="${name}"]`);
    if (name === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  current = view;
  document.title = `netdoctor · ${document.querySelector(`nav [data-view="${view}"]`).firstChild.textContent.trim()}`;
  if (views[view].show) views[view].show(params);
  if (changed || Object.keys(params).length) {
    if (inFlight) inFlight.then(() => refreshNow());
    else refreshNow();
  }
}

window.addEventListener('hashchange', route);
if (!location.hash || parseRoute(location.hash).view !== location.hash.replace(/^#\/?/, '').split('?')[0]) {
  history.replaceState(null, '', routeHash(parseRoute(location.hash).view, parseRoute(location.hash).params));
}
renderStatus();
route();
