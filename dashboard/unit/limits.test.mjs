import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LIMITS, limitText, limitTitle } from '../web/limits.js';

test('what limits a connection, in plain words', () => {
  const window = {
    limit: 'receiver_window', limit_share: 0.914, window_bytes: 65536, srtt_us: 40000,
    ceiling_bps: 13107200, path_rate_bps: 52428800, retransmits: 0,
  };
  assert.equal(limitText(window), "receiver's window 91 %");
  assert.equal(
    limitTitle(window),
    `${LIMITS.receiver_window.explain} 64 KiB per 40.0 ms round trip allows at most 13.1 Mbit/s; the path to this host carried 52.4 Mbit/s.`,
  );
  assert.equal(limitText({ limit: 'application', limit_share: 0.8 }), 'application 80 %');
  assert.equal(limitText({ limit: 'unknown', limit_share: 0 }), 'too little traffic');
  assert.match(limitTitle({ limit: 'congestion', limit_share: 0.9, retransmits: 12 }), /under loss/);
  assert.doesNotMatch(limitTitle({ limit: 'congestion', limit_share: 0.9, retransmits: 0 }), /under loss/);
  // Rows of an agent without the field.
  assert.equal(limitText({ cc: 'cubic' }), '');
  assert.equal(limitTitle({}), '');
  for (const l of Object.values(LIMITS)) assert.ok(l.label && l.explain.endsWith('.'));
});
