// The configuration timeline (GET /api/v1/events), pure: which changes concern an
// interface, which fall in a chart's range, and how to name their kinds. No DOM.

/** Kinds of events (docs/api.md, `Event`) as a person reads them. */
const KIND_LABELS = {
  link: 'link',
  'link.mtu': 'MTU',
  'link.state': 'link state',
  'link.master': 'master',
  address: 'address',
  route: 'route',
  sysctl: 'sysctl',
  firewall: 'firewall rule',
  'wireguard.peer': 'WireGuard peer',
  'wireguard.endpoint': 'peer endpoint',
  'wireguard.allowed_ips': 'allowed IPs',
  'tailscale.path': 'Tailscale path',
  'bond.hash_policy': 'bond hash policy',
};

/** "link.mtu" -> "MTU"; an unknown kind as it is. */
export function kindLabel(kind) {
  return KIND_LABELS[kind] || String(kind || '');
}

/**
 * The events that concern `iface`: those on it and the host-wide ones (no interface: a
 * sysctl, a firewall rule for any interface), oldest first. Without `iface`, all of them.
 */
export function eventsFor(events, iface) {
  return (events || [])
    .filter((e) => !iface || !e.interface || e.interface === iface)
    .slice()
    .sort((a, b) => a.ts_ms - b.ts_ms);
}

/**
 * Chart markers: the events in [minS, maxS] (seconds, the charts' x scale), each as
 * {x, label}, oldest first. Several at the same second are one marker naming them all.
 */
export function markersIn(events, minS, maxS) {
  const byX = new Map();
  for (const e of events || []) {
    const x = Math.round(e.ts_ms / 1000);
    if (!(x >= minS && x <= maxS)) continue;
    const have = byX.get(x);
    byX.set(x, have ? `${have}; ${e.text}` : e.text);
  }
  return [...byX.entries()].sort((a, b) => a[0] - b[0]).map(([x, label]) => ({ x, label }));
}
