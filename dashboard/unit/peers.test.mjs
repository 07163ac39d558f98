import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasPaths, peerLabel, peerPath, offlineNote } from '../web/peers.js';

// A peer as the agent reports one for tailscale0 (facts.peers of a real run) and one of a
// kernel WireGuard interface, which has no path fields.
const relayed = {
  name: 'GUAQSdOqE6ffxP0sU/8J+MoaDFFVVbITgAz7qd7/2Ac=', endpoint: '', host: 'node-b', path: 'derp',
  derp_region: 'lab', derp_servers: ['10.200.3.2:443'], derp_bytes: 84299769, udp_bytes: -1, online: true,
};
const wg = { name: 'drP/h71bJzN1lE4Hx0Tq1pLx2mJgD9yq0hG2xJmY0Wk=', endpoint: '192.0.2.2:51820' };

test('a Tailscale peer is named by its host, a WireGuard peer by its key, others by endpoint', () => {
  assert.deepEqual(peerLabel(relayed, true), { text: 'node-b', title: relayed.name });
  assert.deepEqual(peerLabel(wg, true), { text: 'drP/h71b…', title: wg.name });
  assert.equal(peerLabel({ name: '192.0.2.7:4789', endpoint: '192.0.2.7:4789' }, false).text, '192.0.2.7:4789');
  assert.equal(peerLabel(null, true).text, 'n/a');
});

test('the path: DERP relay is a warning, direct is fine, no path when the daemon says none', () => {
  assert.deepEqual(peerPath(relayed), { path: 'derp', level: 'warning', text: 'DERP relay (lab)' });
  assert.deepEqual(peerPath({ ...relayed, path: 'direct', endpoint: '10.200.2.2:41641' }),
    { path: 'direct', level: 'ok', text: 'direct 10.200.2.2:41641' });
  assert.equal(peerPath({ path: 'peer_relay' }).level, 'info');
  assert.equal(peerPath({ ...relayed, derp_region: '' }).text, 'DERP relay');
  assert.equal(peerPath(wg), null);
  assert.equal(peerPath({ path: '' }), null);
  assert.ok(hasPaths([wg, relayed]));
  assert.ok(!hasPaths([wg]) && !hasPaths([{ path: '' }]) && !hasPaths(undefined));
});

test('offline only when the control plane says so', () => {
  assert.equal(offlineNote({ ...relayed, online: false }), ' (offline)');
  assert.equal(offlineNote(relayed), '');
  assert.equal(offlineNote(wg), '', 'other tunnels have no online field');
});
