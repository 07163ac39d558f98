// Tunnel peers from the facts document (`facts.peers`): how to name one, and how its
// traffic travels when its daemon says (Tailscale: direct, DERP relay, peer relay).
// Pure functions, no DOM: Node imports this module in the unit tests (unit/peers.test.mjs).

import { shortKey, NA } from './format.js';

/** Whether a peer list comes from Tailscale: any peer has a reported path field. */
export function hasPaths(peers) {
  return (peers || []).some((p) => typeof p.path === 'string' && p.path !== '');
}

/**
 * What to call a peer: its host name when it announces one (Tailscale), else its
 * WireGuard key shortened, else its endpoint. `title` is the full identifier.
 */
export function peerLabel(p, isWg) {
  if (!p) return { text: NA, title: '' };
  if (p.host) return { text: p.host, title: p.name || '' };
  if (isWg) return { text: shortKey(p.name), title: p.name || '' };
  return { text: p.endpoint || p.name || NA, title: p.name || '' };
}

/**
 * How traffic reaches the peer: `{text, level, path}` with level ok (direct), warning
 * (DERP relay: slower, see tailscale.relayed), info (peer relay), or null when the daemon
 * reports no path.
 */
export function peerPath(p) {
  switch (p && p.path) {
    case 'direct':
      return { path: 'direct', level: 'ok', text: p.endpoint ? `direct ${p.endpoint}` : 'direct' };
    case 'derp':
      return { path: 'derp', level: 'warning', text: p.derp_region ? `DERP relay (${p.derp_region})` : 'DERP relay' };
    case 'peer_relay':
      return { path: 'peer_relay', level: 'info', text: 'peer relay' };
    default:
      return null;
  }
}

/** " (offline)" when the control plane reports the peer offline; "" otherwise or unknown. */
export function offlineNote(p) {
  return p && p.online === false ? ' (offline)' : '';
}
