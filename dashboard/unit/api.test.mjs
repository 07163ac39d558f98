import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createApi, buildUrl, ApiError, TOKEN_KEY } from '../web/api.js';

/** A fetch double: records requests, answers from `routes` (path -> {status, body}). */
function fakeFetch(routes) {
  const calls = [];
  const fn = async (url, init) => {
    calls.push({ url, init });
    const path = url.split('?')[0];
    const r = typeof routes === 'function' ? routes(url, init) : routes[path];
    if (r instanceof Error) throw r;
    if (!r) return response(404, { error: { code: 'not_found', message: 'nope' } });
    return response(r.status ?? 200, r.body, r.raw);
  };
  fn.calls = calls;
  return fn;
}

function response(status, body, raw) {
  return {
    ok: status >= 200 && status < 300,
    status,
    statusText: status === 200 ? 'OK' : 'Error',
    json: async () => (raw !== undefined ? JSON.parse(raw) : body),
  };
}

function memoryStorage() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)), removeItem: (k) => m.delete(k), m };
}

test('buildUrl drops empty parameters and encodes the rest', () => {
  assert.equal(buildUrl('api/v1/sockets'), 'api/v1/sockets');
  assert.equal(buildUrl('api/v1/sockets', { interface: 'wg0', limit: 1000, x: '', y: null, z: undefined }), 'api/v1/sockets?interface=wg0&limit=1000');
  assert.equal(buildUrl('p', { q: 'a b&c' }), 'p?q=a+b%26c');
});

test('requests are relative, ask for JSON, and page with limit 1000', async () => {
  const fetchFn = fakeFetch({ 'api/v1/sockets': { body: { total: 0, limit: 1000, offset: 0, items: [] } } });
  const api = createApi({ fetchFn });
  const page = await api.sockets({ interface: 'wg0' });
  assert.deepEqual(page.items, []);
  assert.equal(fetchFn.calls[0].url, 'api/v1/sockets?limit=1000&interface=wg0');
  assert.equal(fetchFn.calls[0].init.method, 'GET');
  assert.equal(fetchFn.calls[0].init.headers.Accept, 'application/json');
  assert.equal(fetchFn.calls[0].init.headers.Authorization, undefined, 'no token, no header');
  assert.equal(fetchFn.calls[0].init.headers['Content-Type'], undefined, 'a GET has no body type');
});

test('a stored token goes out as a bearer header', async () => {
  const storage = memoryStorage();
  storage.setItem(TOKEN_KEY, 's3cret');
  const fetchFn = fakeFetch({ 'api/v1/interfaces': { body: { interfaces: [] } } });
  const api = createApi({ fetchFn, storage });
  await api.interfaces();
  assert.equal(fetchFn.calls[0].init.headers.Authorization, 'Bearer s3cret');
});

test('setToken stores, trims and forgets the token', () => {
  const storage = memoryStorage();
  const api = createApi({ fetchFn: fakeFetch({}), storage });
  api.setToken('  abc \n');
  assert.equal(storage.getItem(TOKEN_KEY), 'abc');
  assert.equal(api.token(), 'abc');
  api.setToken('');
  assert.equal(storage.getItem(TOKEN_KEY), null);
  assert.equal(api.token(), null);
});

test('the token survives storage that throws (private mode)', async () => {
  const storage = { getItem() { throw new Error('denied'); }, setItem() { throw new Error('denied'); }, removeItem() { throw new Error('denied'); } };
  const fetchFn = fakeFetch({ 'api/v1/interfaces': { body: { interfaces: [] } } });
  const api = createApi({ fetchFn, storage });
  api.setToken('t');
  await api.interfaces();
  assert.equal(fetchFn.calls[0].init.headers.Authorization, 'Bearer t');
});

test('401 becomes an unauthorized ApiError with the API code', async () => {
  const api = createApi({ fetchFn: fakeFetch({ 'api/v1/interfaces': { status: 401, body: { error: { code: 'unauthorized', message: 'missing token' } } } }) });
  await assert.rejects(api.interfaces(), (e) => e instanceof ApiError && e.unauthorized && e.code === 'unauthorized' && e.message === 'missing token');
});

test('429 on diagnose is busy; the POST carries duration and the interface is encoded', async () => {
  const fetchFn = fakeFetch({ 'api/v1/diagnose/wg%2F0': { status: 429, body: { error: { code: 'busy', message: 'a diagnosis is running' } } } });
  const api = createApi({ fetchFn });
  await assert.rejects(api.diagnose('wg/0'), (e) => e.busy && e.status === 429 && e.code === 'busy');
  assert.equal(fetchFn.calls[0].init.method, 'POST');
  // The agent refuses POSTs a page of another site could send: they lack this type.
  assert.equal(fetchFn.calls[0].init.headers['Content-Type'], 'application/json');
  assert.equal(fetchFn.calls[0].url, 'api/v1/diagnose/wg%2F0?duration=5s');
});

test('diagnose without probe says probe=false', async () => {
  const fetchFn = fakeFetch({ 'api/v1/diagnose/wg0': { body: { interface: 'wg0', findings: [], notes: [] } } });
  const api = createApi({ fetchFn });
  const r = await api.diagnose('wg0', { duration: '2s', probe: false });
  assert.equal(r.interface, 'wg0');
  assert.equal(fetchFn.calls[0].url, 'api/v1/diagnose/wg0?duration=2s&probe=false');
});

test('400 keeps the parameter; errors without a JSON body still explain', async () => {
  const api = createApi({ fetchFn: fakeFetch({
    'api/v1/samples': { status: 400, body: { error: { code: 'bad_parameter', parameter: 'limit', message: 'limit must be 1..=1000' } } },
    'api/v1/flows': { status: 502, raw: '<html>bad gateway</html>' },
  }) });
  await assert.rejects(api.samples({ interface: 'wg0' }), (e) => e.status === 400 && e.parameter === 'limit');
  await assert.rejects(api.flows(), (e) => e.status === 502 && e.code === 'http_502' && /502/.test(e.message));
});

test('network failures and timeouts are status 0', async () => {
  const api = createApi({ fetchFn: fakeFetch(() => new TypeError('Failed to fetch')) });
  await assert.rejects(api.interfaces(), (e) => e.status === 0 && e.code === 'network' && /Failed to fetch/.test(e.message));
  const slow = createApi({
    timeoutMs: 20,
    fetchFn: (url, init) => new Promise((resolve, reject) => {
      init.signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' })));
    }),
  });
  await assert.rejects(slow.interfaces(), (e) => e.status === 0 && e.code === 'timeout');
});

test('a 200 that is not JSON is reported, not thrown raw', async () => {
  const api = createApi({ fetchFn: fakeFetch({ 'api/v1/interfaces': { status: 200, raw: 'not json' } }) });
  await assert.rejects(api.interfaces(), (e) => e instanceof ApiError && e.code === 'bad_response');
});
