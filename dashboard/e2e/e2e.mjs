#!/usr/bin/env node
// End-to-end check of the dashboard served by a running agent, in Debian's Chromium through
// playwright-core. It assumes no fixture data: what it expects comes from --expect.
//
//   node e2e/e2e.mjs --url http://127.0.0.1:9469/ [--token SECRET | --token-file PATH]
//        [--screenshots DIR] [--expect JSON | --expect-file PATH] [--timeout 60]
//        [--diagnose-timeout 120] [--no-diagnose] [--chromium /usr/bin/chromium]
//
// --expect (all keys optional):
//   {"mtus": {"wg0": 1420},                      cards show these MTUs (data-testid="mtu-wg0")
//    "finding": "mtu.tunnel_exceeds_underlay",   the findings view lists it, with a fix
//    "fix": "mtu 1440",                           ...whose fix text contains this
//    "cc": "cubic",                               the sockets table has a connection with this cc
//    "interface": "wg0",                          the interface for finding, cc, charts, diagnose
//    "diagnose_finding": "mtu.tunnel_exceeds_underlay",  the "Diagnose now" report lists it
//    "peers": {"tailscale0": [{"host": "node-b", "path": "derp", "text": "DERP relay"}]},
//                                                 the card's peers table has such a row
//    "events": ["wg0's MTU changed 1340 → 1420"], the timeline view lists changes with these texts
//    "cause": "after wg0's MTU changed",          the finding shows a cause containing this
//    "chart_markers": 1}                          every time chart of "interface" marks at least
//                                                 this many changes, listed above the charts
//
// At 1280x800 and at 400x800 it loads the page, fails on any console error, page error,
// failed request or HTTP error response, checks the above, that the page does not overflow
// horizontally, that the charts rendered (uPlot canvases with a non-zero size), clicks
// "Diagnose now" (at 1280x800) and waits for the report, and saves screenshots.
// With a token it first checks the token prompt: a fresh browser gets the prompt, enters the
// token and sees the interfaces. Exit 0: all passed; 1: a check failed; 2: usage error.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs, usage } from './args.mjs';

const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const TOKEN_KEY = 'netdoctor.token';
const VIEWPORTS = [{ width: 1280, height: 800 }, { width: 400, height: 800 }];

const opts = parseArgs(process.argv.slice(2));
const exp = opts.expect;
const baseUrl = opts.url.replace(/#.*$/, '');
const iface = exp.interface || Object.keys(exp.mtus || {})[0] || '';
const T = opts.timeout * 1000;

class CheckFailed extends Error {}
const fail = (msg) => { throw new CheckFailed(msg); };
const log = (msg) => console.log(`e2e: ${msg}`);
const cssStr = (s) => JSON.stringify(String(s));
const hashUrl = (hash) => `${baseUrl}${hash}`;

/** Collects console errors, page errors, failed requests and HTTP errors of a page. */
function watch(page, label) {
  const problems = [];
  const allowed = []; // [{status, urlPart}] tolerated while a phase expects them
  const isAllowed = (status, url) => allowed.some((a) => a.status === status && (!a.urlPart || url.includes(a.urlPart)));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = m.text();
    // Chromium logs every HTTP error response as a console error; those are judged by the
    // response handler below (with the URL), not twice here.
    const st = /status of (\d{3})/.exec(text);
    if (st && /Failed to load resource/.test(text)) {
      const url = (m.location() && m.location().url) || '';
      if (isAllowed(Number(st[1]), url)) return;
      if (url) return; // reported by the response handler
    }
    problems.push(`[${label}] console error: ${text}`);
  });
  page.on('pageerror', (e) => problems.push(`[${label}] page error: ${e.message}`));
  page.on('requestfailed', (r) => {
    const why = r.failure() ? r.failure().errorText : 'failed';
    // A navigation away aborts pending fetches; that is not a failure of the page.
    if (why === 'net::ERR_ABORTED' && r.resourceType() === 'fetch') return;
    problems.push(`[${label}] request failed: ${r.method()} ${r.url()} (${why})`);
  });
  page.on('response', (r) => {
    if (r.status() < 400) return;
    if (isAllowed(r.status(), r.url())) return;
    problems.push(`[${label}] HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
  });
  return { problems, allow: (status, urlPart = '') => allowed.push({ status, urlPart }), disallow: () => allowed.splice(0) };
}

async function shot(page, name) {
  if (!opts.screenshots) return;
  const file = join(opts.screenshots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  log(`screenshot ${file}`);
}

/**
 * Records every error banner the page ever shows, even one replaced a moment later, in
 * window.__ndBanners: installed in every page before its scripts run.
 */
function recordBanners() {
  window.__ndBanners = [];
  new MutationObserver((changes) => {
    for (const c of changes) {
      for (const n of c.addedNodes) {
        if (n.nodeType !== 1) continue;
        const banners = n.matches('[data-testid="fatal-error"]') ? [n] : [...n.querySelectorAll('[data-testid="fatal-error"]')];
        for (const b of banners) window.__ndBanners.push(b.textContent.trim());
      }
    }
  }).observe(document, { childList: true, subtree: true });
}

/** Fails when the page shows, or has shown since it loaded, its error banner. */
async function noErrorBanner(page, where) {
  // A notice of the browser's layout (ResizeObserver) arrives a frame or two later.
  await page.waitForTimeout(300);
  const shown = await page.evaluate(() => window.__ndBanners || []);
  const visible = await page.locator('[data-testid="fatal-error"]').allInnerTexts();
  const all = [...new Set([...shown, ...visible])];
  if (all.length) fail(`${where}: the page shows an error banner: ${all.join(' | ')}`);
}

/** The checks every view gets once it has rendered: no banner, no horizontal overflow. */
async function settled(page, where) {
  await noErrorBanner(page, where);
  await noHorizontalOverflow(page, where);
}

async function noHorizontalOverflow(page, where) {
  const o = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth }));
  if (o.sw > o.cw + 1) fail(`${where}: the page overflows horizontally (${o.sw} px wide in a ${o.cw} px viewport)`);
}

async function waitFor(page, selector, what, timeout = T) {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await page.locator(selector).count()) return;
    // A crashed page shows its error at once: no point in waiting out the timeout.
    const fatal = await page.locator('[data-testid="fatal-error"]').allInnerTexts();
    if (fatal.length) fail(`${what}: the page reports ${fatal.join(' | ')}`);
    if (Date.now() > deadline) {
      const err = await page.locator('[role="alert"]').allInnerTexts().catch(() => []);
      fail(`${what}: nothing matched ${selector} within ${timeout / 1000} s${err.length ? `; the page shows: ${err.join(' | ')}` : ''}`);
    }
    await page.waitForTimeout(250);
  }
}

async function openView(page, view, hash) {
  await page.click(`[data-testid="nav-${view}"]`);
  if (hash) await page.goto(hashUrl(hash));
  await page.locator(`[data-testid="${view}"]`).waitFor({ state: 'visible', timeout: T });
}

async function checkOverview(page, tag) {
  await waitFor(page, '[data-testid="cards"][data-state="ready"]', 'overview');
  const cards = await page.locator('[data-testid^="card-"]').count();
  if (!cards) fail('overview: no interface cards');
  for (const [name, mtu] of Object.entries(exp.mtus || {})) {
    const sel = `[data-testid="mtu-${name}"]`;
    const deadline = Date.now() + T;
    let text = '';
    for (;;) {
      text = (await page.locator(sel).first().textContent({ timeout: 1000 }).catch(() => '')) || '';
      if (text.trim() === String(mtu)) break;
      if (Date.now() > deadline) fail(`overview: card ${name} shows MTU ${JSON.stringify(text.trim() || '(no card)')}, expected ${mtu}`);
      // The interface may be unwatched (hidden by default) or not known yet.
      const box = page.locator('[data-testid="show-unwatched"]');
      if (!text && !(await box.isChecked())) await box.check();
      await page.waitForTimeout(1000);
    }
    log(`[${tag}] card ${name}: MTU ${mtu}`);
  }
  for (const [name, rows] of Object.entries(exp.peers || {})) {
    for (const want of rows) {
      let sel = `[data-testid="peers-${name}"] tr[data-testid="peer-row"]`;
      if (want.host) sel += `[data-host=${cssStr(want.host)}]`;
      if (want.path) sel += `[data-path=${cssStr(want.path)}]`;
      await waitFor(page, sel, `overview: ${name}'s peers table, a row ${JSON.stringify(want)}`);
      const text = ((await page.locator(sel).first().innerText()) || '').replace(/\s+/g, ' ').trim();
      if (want.text && !text.includes(want.text)) fail(`overview: ${name}'s peer row ${JSON.stringify(text)} does not contain ${JSON.stringify(want.text)}`);
      log(`[${tag}] card ${name}: peer ${text}`);
    }
  }
  await settled(page, `[${tag}] overview`);
  await shot(page, `${tag}-overview`);
}

async function checkFindings(page, tag) {
  await openView(page, 'findings');
  await waitFor(page, '[data-testid="findings"][data-state="ready"]', 'findings view');
  if (exp.finding) {
    let sel = `[data-testid="finding"][data-finding-id=${cssStr(exp.finding)}]`;
    if (iface) sel += `[data-interface=${cssStr(iface)}]`;
    await waitFor(page, sel, `findings: ${exp.finding}${iface ? ` on ${iface}` : ''}`);
    const f = page.locator(sel).first();
    const fix = ((await f.locator('[data-testid="finding-fix"]').textContent()) || '').trim();
    if (!fix) fail(`findings: ${exp.finding} shows no fix`);
    if (exp.fix && !fix.includes(exp.fix)) fail(`findings: ${exp.finding}'s fix ${JSON.stringify(fix)} does not contain ${JSON.stringify(exp.fix)}`);
    const sev = ((await f.locator('[data-testid="finding-severity"]').textContent()) || '').trim();
    if (!/critical|warning|info/i.test(sev)) fail(`findings: ${exp.finding} has no severity text (${JSON.stringify(sev)})`);
    log(`[${tag}] finding ${exp.finding}: ${sev}, fix: ${fix}`);
    if (exp.cause) {
      const cause = ((await f.locator('[data-testid="finding-cause"]').textContent().catch(() => '')) || '').trim();
      if (!cause.includes(exp.cause)) fail(`findings: ${exp.finding}'s cause ${JSON.stringify(cause)} does not contain ${JSON.stringify(exp.cause)}`);
      log(`[${tag}] finding ${exp.finding}: ${cause}`);
    }
  }
  await settled(page, `[${tag}] findings`);
  await shot(page, `${tag}-findings`);
}

async function checkTraffic(page, tag) {
  await openView(page, 'traffic');
  await waitFor(page, '[data-testid="traffic"][data-state="ready"]', 'connections view');
  if (exp.cc) {
    let sel = `[data-testid="sockets-table"] tr[data-testid="socket-row"][data-cc=${cssStr(exp.cc)}]`;
    if (iface) sel = `[data-testid="sockets-table"] tr[data-testid="socket-row"][data-cc=${cssStr(exp.cc)}][data-interface=${cssStr(iface)}]`;
    await waitFor(page, sel, `sockets table: a ${exp.cc} connection${iface ? ` on ${iface}` : ''}`);
    const cell = ((await page.locator(`${sel} [data-col="cc"]`).first().textContent()) || '').trim();
    if (!cell.includes(exp.cc)) fail(`sockets table: cc cell shows ${JSON.stringify(cell)}, expected ${exp.cc}`);
    log(`[${tag}] sockets table: ${exp.cc} connection${iface ? ` on ${iface}` : ''}`);
  }
  await settled(page, `[${tag}] connections`);
  await shot(page, `${tag}-connections`);
}

async function checkCharts(page, tag) {
  const hash = `#/charts${iface ? `?interface=${encodeURIComponent(iface)}` : ''}`;
  await openView(page, 'charts', hash);
  const base = '[data-testid="charts"][data-state="ready"]';
  const sel = iface ? `${base}[data-interface=${cssStr(iface)}]` : base;
  await waitFor(page, sel, `charts${iface ? ` of ${iface}` : ''}`);
  // Samples appear once the agent closed a window; auto-refresh brings them.
  const deadline = Date.now() + T;
  while (Number(await page.locator('[data-testid="charts"]').getAttribute('data-sample-count')) < 1) {
    if (Date.now() > deadline) fail(`charts: no samples${iface ? ` of ${iface}` : ''} within ${opts.timeout} s`);
    await page.waitForTimeout(1000);
  }
  for (const c of ['throughput', 'retrans', 'drops', 'sizes', 'pmtu']) {
    const canvas = page.locator(`[data-testid="chart-${c}"] canvas`).first();
    if (!(await canvas.count())) fail(`charts: chart-${c} has no canvas`);
    const box = await canvas.boundingBox();
    if (!box || box.width < 50 || box.height < 50) fail(`charts: chart-${c}'s canvas is ${box ? `${box.width}x${box.height}` : 'not laid out'}`);
  }
  const n = await page.locator('[data-testid="charts"]').getAttribute('data-sample-count');
  log(`[${tag}] charts: 5 canvases drawn from ${n} samples`);
  if (exp.chart_markers) {
    const want = Number(exp.chart_markers);
    for (const c of ['throughput', 'retrans', 'drops', 'pmtu']) {
      const fig = page.locator(`[data-testid="chart-${c}"]`);
      const until = Date.now() + T;
      while (!(Number(await fig.getAttribute('data-markers')) >= want)) {
        if (Date.now() > until) fail(`charts: chart-${c} marks ${await fig.getAttribute('data-markers')} changes, expected at least ${want}`);
        await page.waitForTimeout(1000);
      }
    }
    const listed = await page.locator('[data-testid="chart-event"]').count();
    if (listed < want) fail(`charts: ${listed} changes listed above the charts, expected at least ${want}`);
    log(`[${tag}] charts: every time chart marks at least ${want} change${want === 1 ? '' : 's'}; ${listed} listed`);
  }
  await settled(page, `[${tag}] charts`);
  await shot(page, `${tag}-charts`);
}

async function checkTimeline(page, tag) {
  await openView(page, 'timeline');
  await waitFor(page, '[data-testid="timeline"][data-state="ready"]', 'timeline view');
  for (const text of exp.events || []) {
    const until = Date.now() + T;
    for (;;) {
      const texts = await page.locator('[data-testid="event-text"]').allInnerTexts();
      if (texts.some((t) => t.includes(text))) break;
      if (Date.now() > until) fail(`timeline: no change ${JSON.stringify(text)} listed; it shows ${JSON.stringify(texts)}`);
      await page.waitForTimeout(1000);
    }
    log(`[${tag}] timeline: ${text}`);
  }
  await settled(page, `[${tag}] timeline`);
  await shot(page, `${tag}-timeline`);
}

async function checkDiagnose(page, tag, watcher, iface) {
  await openView(page, 'overview', '#/overview');
  await waitFor(page, '[data-testid="cards"][data-state="ready"]', 'overview');
  const btn = page.locator(`[data-testid="diagnose-${iface}"]`);
  await waitFor(page, `[data-testid="diagnose-${iface}"]`, `Diagnose now button of ${iface}`);
  const panel = page.locator('[data-testid="diagnose-report"]');
  // Another diagnosis may be running on the agent (429 busy): the page says so; retry.
  watcher.allow(429, '/api/v1/diagnose/');
  const deadline = Date.now() + opts.diagnoseTimeout * 1000;
  for (let attempt = 1; ; attempt++) {
    await btn.click();
    await page.waitForFunction(() => {
      const p = document.querySelector('[data-testid="diagnose-report"]');
      return p && p.dataset.state !== 'running' && p.dataset.state !== 'closed';
    }, null, { timeout: Math.max(deadline - Date.now(), 1000), polling: 250 }).catch(() => fail(`diagnose ${iface}: no report within ${opts.diagnoseTimeout} s`));
    const state = await panel.getAttribute('data-state');
    if (state === 'done') break;
    if (state === 'busy' && Date.now() + 3000 < deadline) {
      log(`[${tag}] diagnose ${iface}: agent busy (429), retrying (attempt ${attempt})`);
      await page.waitForTimeout(3000);
      continue;
    }
    const text = ((await panel.innerText()) || '').trim();
    fail(`diagnose ${iface}: report state ${state}: ${text.slice(0, 400)}`);
  }
  watcher.disallow();
  const who = await panel.getAttribute('data-interface');
  if (who !== iface) fail(`diagnose: the report is about ${who}, expected ${iface}`);
  const ids = await panel.locator('[data-testid="finding"]').evaluateAll((els) => els.map((e) => e.dataset.findingId));
  if (exp.diagnose_finding && !ids.includes(exp.diagnose_finding)) {
    fail(`diagnose ${iface}: the report lists ${ids.length ? ids.join(', ') : 'no findings'}, expected ${exp.diagnose_finding}`);
  }
  log(`[${tag}] diagnose ${iface}: report with ${ids.length ? ids.join(', ') : 'no findings'}`);
  await settled(page, `[${tag}] diagnosis report`);
  await shot(page, `${tag}-diagnose`);
}

async function checkTokenPrompt(browser) {
  const context = await browser.newContext({ viewport: VIEWPORTS[0] });
  await context.addInitScript(recordBanners);
  const page = await context.newPage();
  const w = watch(page, 'token prompt');
  w.allow(401, '/api/');
  try {
    await page.goto(baseUrl, { waitUntil: 'load', timeout: T });
    await page.locator('[data-testid="token-form"]').waitFor({ state: 'visible', timeout: T })
      .catch(() => fail('token: without a token the page shows no token prompt'));
    await page.fill('[data-testid="token-input"]', opts.token);
    await page.click('[data-testid="token-submit"]');
    await waitFor(page, '[data-testid="cards"][data-state="ready"]', 'token: interfaces after entering the token');
    if (await page.locator('[data-testid="token-form"]').isVisible()) fail('token: the prompt stays after entering the token');
    const stored = await page.evaluate((k) => localStorage.getItem(k), TOKEN_KEY);
    if (stored !== opts.token) fail('token: the token was not kept in localStorage');
    await noErrorBanner(page, 'token prompt');
    log('token prompt: shown on 401, token accepted and kept');
    await shot(page, 'token-accepted');
  } finally {
    await context.close();
  }
  if (w.problems.length) fail(w.problems.join('\n'));
}

async function main() {
  if (opts.screenshots) mkdirSync(opts.screenshots, { recursive: true });
  if (exp.finding || exp.cc || exp.diagnose_finding) {
    if (!iface) usage('"finding", "cc" and "diagnose_finding" need "interface" (or "mtus") in --expect');
  }
  const browser = await chromium.launch({ executablePath: opts.chromium, headless: true, args: CHROMIUM_ARGS });
  const problems = [];
  try {
    if (opts.token) await checkTokenPrompt(browser);
    let diagnoseIface = iface;
    for (const vp of VIEWPORTS) {
      const tag = `${vp.width}x${vp.height}`;
      const context = await browser.newContext({ viewport: vp });
      await context.addInitScript(recordBanners);
      if (opts.token) await context.addInitScript(([k, t]) => localStorage.setItem(k, t), [TOKEN_KEY, opts.token]);
      const page = await context.newPage();
      page.setDefaultTimeout(T);
      const w = watch(page, tag);
      try {
        const res = await page.goto(baseUrl, { waitUntil: 'load', timeout: T });
        if (!res || !res.ok()) fail(`loading ${baseUrl}: HTTP ${res ? res.status() : 'no response'}`);
        await checkOverview(page, tag);
        if (!diagnoseIface) {
          diagnoseIface = (await page.locator('[data-testid^="card-"][data-watched="true"]').first().getAttribute('data-interface').catch(() => '')) || '';
        }
        await checkFindings(page, tag);
        await checkTraffic(page, tag);
        await checkCharts(page, tag);
        await checkTimeline(page, tag);
        if (opts.diagnose && vp === VIEWPORTS[0]) {
          if (!diagnoseIface) fail('diagnose: no interface to diagnose (give "interface" in --expect)');
          await checkDiagnose(page, tag, w, diagnoseIface);
        }
      } catch (err) {
        // The page's own errors usually explain a failed check: show them with it.
        if (err instanceof CheckFailed && w.problems.length) {
          err.message += `\n  errors while the page ran:\n  ${w.problems.join('\n  ')}`;
        }
        throw err;
      } finally {
        await context.close();
      }
      problems.push(...w.problems);
    }
  } finally {
    await browser.close();
  }
  if (problems.length) fail(`errors while the page ran:\n  ${problems.join('\n  ')}`);
}

let exitCode = 0;
try {
  await main();
  log('PASS');
} catch (err) {
  exitCode = 1;
  console.error(`e2e: FAIL: ${err instanceof CheckFailed ? err.message : (err && err.stack) || err}`);
}
process.exit(exitCode);
