// A small client for the agent's HTTP API (docs/api.md). Paths are relative to the page
// ("api/v1/…"), so the dashboard also works behind a reverse proxy under a sub-path.
//
// POSTs say `Content-Type: application/json`: the agent refuses POSTs without it, because a
// web page of another site can send any other POST without asking (docs/api.md, "Security").
//
// Bearer tokens: when the agent answers 401, the page asks for the token and keeps it in
// localStorage under TOKEN_KEY; every request then carries `Authorization: Bearer <token>`.
// fetch and storage are injected so Node's unit tests can drive this module.

/** localStorage key holding the API token. */
export const TOKEN_KEY = 'netdoctor.token';

/** An API failure: HTTP status (0 = no answer), the API's error code and message. */
export class ApiError extends Error {
  constructor(status, code, message, parameter = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.parameter = parameter;
  }

  /** A missing or wrong token. */
  get unauthorized() {
    return this.status === 401;
  }

  /** Another diagnosis is running (429). */
  get busy() {
    return this.status === 429;
  }
}

/** "api/v1/sockets" + {interface: "wg0", limit: 1000} -> "api/v1/sockets?interface=wg0&limit=1000". */
export function buildUrl(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}

/** Turns a non-2xx response body into an ApiError. */
export async function errorFromResponse(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  const e = body && body.error ? body.error : {};
  const code = e.code || (res.status === 401 ? 'unauthorized' : res.status === 429 ? 'busy' : `http_${res.status}`);
  const message = e.message || `${res.status} ${res.statusText || 'error'}`.trim();
  return new ApiError(res.status, code, message, e.parameter || null);
}

/**
 * Creates a client. `fetchFn` is window.fetch, `storage` localStorage (or anything with
 * getItem/setItem/removeItem; null: the token lives only in memory).
 */
export function createApi({ fetchFn, storage = null, base = '', timeoutMs = 15000 } = {}) {
  let memoryToken = null;

  function token() {
    try {
      return (storage && storage.getItem(TOKEN_KEY)) || memoryToken;
    } catch {
      return memoryToken;
    }
  }

  function setToken(t) {
    const v = String(t || '').trim();
    memoryToken = v || null;
    try {
      if (storage) {
        if (v) storage.setItem(TOKEN_KEY, v);
        else storage.removeItem(TOKEN_KEY);
      }
    } catch {
      // Storage disabled (private mode): keep it in memory for this page.
    }
  }

  async function request(method, path, { params, timeout = timeoutMs } = {}) {
    const headers = { Accept: 'application/json' };
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    const t = token();
    if (t) headers.Authorization = `Bearer ${t}`;
    const ctrl = typeof AbortController === 'function' ? new AbortController() : null;
    const timer = ctrl ? setTimeout(() => ctrl.abort(), timeout) : null;
    let res;
    try {
      res = await fetchFn(base + buildUrl(path, params), {
        method,
        headers,
        cache: 'no-store',
        signal: ctrl ? ctrl.signal : undefined,
      });
    } catch (err) {
      const aborted = err && err.name === 'AbortError';
      throw new ApiError(0, aborted ? 'timeout' : 'network',
        aborted ? `no answer from the agent within ${Math.round(timeout / 1000)} s`
          : `cannot reach the agent (${err && err.message ? err.message : err})`);
    } finally {
      if (timer) clearTimeout(timer);
    }
    if (!res.ok) throw await errorFromResponse(res);
    try {
      return await res.json();
    } catch {
      throw new ApiError(res.status, 'bad_response', `the agent's answer to ${path} is not JSON`);
    }
  }

  return {
    token,
    setToken,
    get: (path, params, opts = {}) => request('GET', path, { ...opts, params }),
    post: (path, params, opts = {}) => request('POST', path, { ...opts, params }),

    interfaces: () => request('GET', 'api/v1/interfaces'),
    sockets: (params) => request('GET', 'api/v1/sockets', { params: { limit: 1000, ...params } }),
    flows: (params) => request('GET', 'api/v1/flows', { params: { limit: 1000, ...params } }),
    findings: (params) => request('GET', 'api/v1/findings', { params: { limit: 1000, ...params } }),
    samples: (params) => request('GET', 'api/v1/samples', { params: { limit: 1000, ...params } }),
    events: (params) => request('GET', 'api/v1/events', { params: { limit: 1000, ...params } }),
    drops: (params) => request('GET', 'api/v1/drops', { params }),
    /** Runs a diagnosis (5-10 s); the timeout leaves room for the observation and the probe. */
    diagnose: (iface, { duration = '5s', probe = true } = {}) =>
      request('POST', `api/v1/diagnose/${encodeURIComponent(iface)}`, {
        params: { duration, probe: probe ? undefined : 'false' },
        timeout: 120000,
      }),
  };
}
