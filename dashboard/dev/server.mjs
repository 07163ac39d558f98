// DEVELOPMENT AID, NOT A TEST OF THE PRODUCT. Serves dashboard/web/ the way the agent will
// (static files at /, index.html at /) and answers /api/v1/* with the invented documents of
// fixtures.mjs, so the page can be developed and looked at without root or BPF.
//
//   node dev/server.mjs [--port 8089] [--host 127.0.0.1] [--token SECRET] [--fail sockets,samples]
//                       [--diagnose-ms 6000]
//
// --token makes /api/* answer 401 without "Authorization: Bearer SECRET" (static files stay
// public, as a browser cannot attach a bearer token to page loads). --fail answers 500 on the
// named endpoints, to look at the inline errors.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { dirname, join, normalize, extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as fx from './fixtures.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', 'web');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};
const port = Number(opt('port', '8089'));
const hostname = opt('host', '127.0.0.1');
const token = opt('token', '');
const failing = new Set(opt('fail', '').split(',').filter(Boolean));
const diagnoseMs = Number(opt('diagnose-ms', '6000'));

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml', '.json': 'application/json', '.png': 'image/png', '.txt': 'text/plain; charset=utf-8',
};

let diagnosing = false;

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

function page(items, q) {
  const limit = Number(q.get('limit') || 100);
  const offset = Number(q.get('offset') || 0);
  if (!(limit >= 1 && limit <= 1000)) return { error: 'limit' };
  return { total: items.length, limit, offset, items: items.slice(offset, offset + limit) };
}

async function api(req, res, url) {
  if (token && req.headers.authorization !== `Bearer ${token}`) {
    return json(res, 401, { error: { code: 'unauthorized', message: 'missing or wrong bearer token' } });
  }
  const now = Date.now();
  const q = url.searchParams;
  const p = url.pathname.replace(/^\/api\/v1\//, '');
  const name = p.split('/')[0];
  if (failing.has(name)) return json(res, 500, { error: { code: 'internal', message: `simulated failure of ${name}` } });
  const iface = q.get('interface');
  const byIface = (rows) => (iface ? rows.filter((r) => r.interface === iface) : rows);
  const paged = (rows) => {
    const pg = page(rows, q);
    if (pg.error) return json(res, 400, { error: { code: 'bad_parameter', parameter: pg.error, message: `${pg.error} out of range` } });
    return json(res, 200, pg);
  };
  if (req.method === 'GET' && p === 'interfaces') return json(res, 200, { interfaces: fx.interfaces(now) });
  if (req.method === 'GET' && name === 'interfaces') {
    const i = fx.interfaces(now).find((x) => x.name === decodeURIComponent(p.slice('interfaces/'.length)));
    return i ? json(res, 200, i) : json(res, 404, { error: { code: 'unknown_interface', message: 'no such interface' } });
  }
  if (req.method === 'GET' && p === 'sockets') return paged(byIface(fx.sockets()));
  if (req.method === 'GET' && p === 'flows') return paged(byIface(fx.flows(now)));
  if (req.method === 'GET' && p === 'findings') {
    const state = q.get('state') || 'active';
    const since = Number(q.get('since') || 0);
    const rows = byIface(fx.findings(now)).filter((f) => (state === 'all' || f.state === state) && (!since || !f.resolved_ms || f.resolved_ms >= since));
    return paged(rows);
  }
  if (req.method === 'GET' && p === 'samples') return paged(fx.samples(iface, now, Number(q.get('since') || now - 3600e3)));
  if (req.method === 'GET' && p === 'events') {
    const since = Number(q.get('since') || 0);
    return paged(byIface(fx.events(now)).filter((e) => e.ts_ms >= since));
  }
  if (req.method === 'GET' && p === 'drops') return json(res, 200, { drops: [{ interface: 'eth0', reason: 'NETFILTER_DROP', packets_total: 12, packets_last_window: 1 }] });
  if (req.method === 'POST' && name === 'diagnose') {
    const target = decodeURIComponent(p.slice('diagnose/'.length));
    if (!fx.interfaces(now).some((x) => x.name === target)) return json(res, 404, { error: { code: 'unknown_interface', message: `unknown interface ${target}` } });
    if (diagnosing) return json(res, 429, { error: { code: 'busy', message: 'a diagnosis is already running' } });
    diagnosing = true;
    await new Promise((r) => setTimeout(r, diagnoseMs));
    diagnosing = false;
    return json(res, 200, fx.diagnoseReport(target, Date.now()));
  }
  return json(res, 404, { error: { code: 'not_found', message: 'no such endpoint' } });
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url, 'http://localhost');
  try {
    if (url.pathname.startsWith('/api/')) return await api(req, res, url);
    if (url.pathname === '/healthz') return json(res, 200, { status: 'ok' });
    if (url.pathname === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      return res.end('# development server: no metrics\n');
    }
    const rel = url.pathname === '/' ? 'index.html' : normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, '').replace(/^\/+/, '');
    const body = await readFile(join(root, rel));
    res.writeHead(200, { 'content-type': TYPES[extname(rel)] || 'application/octet-stream', 'cache-control': 'no-cache' });
    return res.end(body);
  } catch {
    res.writeHead(404, { 'content-type': 'text/plain' });
    return res.end('not found');
  }
});
server.listen(port, hostname, () => {
  console.log(`dev server (fixtures, not the agent): http://${hostname}:${port}/${token ? ` token=${token}` : ''}`);
});
